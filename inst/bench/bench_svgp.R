# SVGP on a larger classification problem: minibatch Adam against
# full-batch L-BFGS-B, and the cost of one SVGP evaluation against one SGPR
# evaluation of the same size.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_svgp.R            # N = 20000, M = 30, D = 2
#   Rscript inst/bench/bench_svgp.R small      # N = 4000
#
# The data are a smooth 2-D boundary with label noise; the inducing inputs
# are k-means centres, held fixed (the SVGP baseline of Passerello 2022), so both fits
# optimise the same objective: the kernel and q(u) (M + M(M+1)/2
# variational parameters). Reported: the full-batch ELBO each fit reaches,
# its elapsed time, and test accuracy on fresh data from the same
# distribution. Adam's ELBO is the full-batch value at its last iterate.
suppressMessages(library(sparsevgp))

args <- commandArgs(trailingOnly = TRUE)
N <- if ("small" %in% args) 4000L else 20000L
M <- 30L
cat("sparsevgp", format(utils::packageVersion("sparsevgp")), "\n")
cat("BLAS:  ", extSoftVersion()[["BLAS"]], "\n")
cat("LAPACK:", La_library(), "\n")

make_data <- function(n) {
  d <- data.frame(x1 = runif(n, -3, 3), x2 = runif(n, -3, 3))
  d$y <- as.integer(sin(1.5 * d$x1) + 0.5 * d$x2 + rnorm(n, sd = 0.4) > 0)
  d
}
set.seed(7)
train <- make_data(N)
test <- make_data(10000L)
Z <- select_inducing(as.matrix(train[c("x1", "x2")]), kernel_rbf(1, 1), M = M,
                     method = "kmeans")$Z

fit_timed <- function(...) {
  t <- system.time(f <- svgp(y ~ x1 + x2, data = train, kernel = kernel_rbf(1, 1),
                             inducing = Z, optimize_inducing = FALSE, ...))[["elapsed"]]
  acc <- mean(predict(f, test, type = "class") == test$y)
  c(elbo = f$bound, seconds = t, evaluations = f$optim$counts[[1L]], test_acc = acc)
}
set.seed(1)
res <- rbind(
  "L-BFGS-B, full batch" = fit_timed(),
  "Adam, batch 500, 1000 its" = fit_timed(batch_size = 500L,
                                          control = list(maxit = 1000L, lr = 0.02)),
  "Adam, batch 500, 3000 its" = fit_timed(batch_size = 500L,
                                          control = list(maxit = 3000L, lr = 0.02)))
cat(sprintf("\nN = %d, M = %d, D = 2 (fixed k-means inducing inputs)\n", N, M))
print(round(res, 3))

# cost of one evaluation (value and gradient) against SGPR of the same size
x <- as.matrix(train[c("x1", "x2")])
sv <- svgp(x, train$y, kernel = kernel_rbf(1, 1), inducing = Z, optimize = FALSE)
sg <- sgpr(x, as.numeric(train$y), kernel = kernel_rbf(1, 1), inducing = Z, optimize = FALSE)
per_eval <- function(fit, reps = 20L) {
  o <- objective(fit)
  t <- system.time(for (i in seq_len(reps)) {
    p <- o$par + i * 1e-10
    o$fn(p)
    o$gr(p)
  })
  (t[["user.self"]] + t[["sys.self"]]) / reps
}
e <- c(svgp = per_eval(sv), sgpr = per_eval(sg))
cat(sprintf("\nOne evaluation with gradient: svgp %.1f ms, sgpr %.1f ms (ratio %.2f)\n",
            1000 * e[["svgp"]], 1000 * e[["sgpr"]], e[["svgp"]] / e[["sgpr"]]))
