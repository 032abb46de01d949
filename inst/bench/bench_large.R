# A default sgpr() fit at large N: time, evaluations, and accuracy against a
# long fit and against the truth, on a smooth function of 4 inputs with
# Gaussian noise of sd 0.3 (so the best possible test RMSE is 0.3).
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_large.R [N] [long|short] [D] [threads]
# N: number of training points (default 200000); long: "long" also runs a
# longer reference fit (M = 300 inducing inputs, every run to L-BFGS-B's own
# convergence: min_gain = 0), which takes much longer. D: 4 (default) or 8
# inputs (the last two of 8 are irrelevant). threads: OpenMP threads of the
# chunked bound (options(sparsevgp.threads)), default 1.
# For OpenBLAS on Debian without changing the system default:
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     Rscript inst/bench/bench_large.R
suppressMessages(library(sparsevgp))
args <- commandArgs(trailingOnly = TRUE)
N <- if (length(args) >= 1L) as.integer(args[1L]) else 200000L
long <- length(args) >= 2L && args[2L] == "long"
D <- if (length(args) >= 3L) as.integer(args[3L]) else 4L
if (length(args) >= 4L) options(sparsevgp.threads = as.integer(args[4L]))
stopifnot(D %in% c(4L, 8L))

truth <- function(x) {
  f <- sin(2 * pi * x[, 1]) + cos(4 * x[, 2]) + x[, 3]^2 + 0.3 * x[, 4]
  if (ncol(x) == 8L) f <- f + 0.5 * sin(3 * x[, 5]) + 0.4 * x[, 5] * x[, 6]
  f
}
set.seed(1)
x <- matrix(stats::runif(N * D), N, D)
y <- truth(x) + stats::rnorm(N, sd = 0.3)
xt <- matrix(stats::runif(20000 * D), 20000, D)
ft <- truth(xt)
yt <- ft + stats::rnorm(20000, sd = 0.3)

report <- function(name, fit, t) {
  p <- predict(fit, xt, type = "response")
  cat(sprintf("%-8s N = %d, M = %d: %.1f s elapsed, %.1f s CPU, %d evaluations (%s), test RMSE %.4f (to the truth %.4f), NLPD %.4f\n",
              name, N, nrow(fit$params$Z), t[["elapsed"]], t[["user.self"]] + t[["sys.self"]],
              as.integer(fit$optim$counts[[1L]]),
              if (is.null(fit$optim$subsample)) "all data" else
                sprintf("mostly on a subsample of %d", fit$optim$subsample),
              sqrt(mean((yt - p$mean)^2)), sqrt(mean((ft - p$mean)^2)),
              -mean(stats::dnorm(yt, p$mean, sqrt(p$var), log = TRUE))))
  invisible(p)
}

cat("BLAS:", extSoftVersion()[["BLAS"]], "\n")
t0 <- proc.time()
fit <- sgpr(x, y, control = list(trace = 1))
report("default", fit, proc.time() - t0)
print(fit$optim$stages)
if (long) {
  t0 <- proc.time()
  ref <- sgpr(x, y, inducing = 300, control = list(min_gain = 0, maxit = 3000, trace = 1))
  report("long", ref, proc.time() - t0)
}
