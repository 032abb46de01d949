# Random, k-means and greedy selection of inducing inputs on kin8nm and
# power: the results that vignettes/inducing-points.Rmd shows (it reads the
# CSV files this script writes, because the fits take many minutes).
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/vignette_inducing.R kin8nm [out.csv]
#   Rscript inst/bench/vignette_inducing.R power [out.csv]
# Default output: inst/extdata/regression/inducing_comparison_<data>.csv
#
# Data: the 3000-row subsets of kin8nm (D = 8) and of the power plant data
# (D = 4) in inst/extdata/regression (see the README there). Protocol:
#   - one random split, 2000 training and 1000 test rows (set.seed(1));
#     inputs and response standardised with the training means and SDs;
#   - isotropic RBF kernel, homoscedastic noise, constant mean, all starting
#     where sgpr() starts them;
#   - for each M and seed: the inducing inputs are chosen by "random",
#     "kmeans" or "greedy" (select_inducing(), with the starting kernel), then
#     held fixed while sgpr() fits the other parameters ("fixed Z");
#     "greedy+reinit" continues the greedy fit with reinit_inducing()
#     (defaults: at most 10 passes, patience 3);
#   - the exact GP (gpr()) on the same training set is the reference;
#   - metrics: the bound (ELBO), the test RMSE and the mean test negative log
#     predictive density (NLPD) of y, both in the original units of y, the
#     a-posteriori KL bound U - ELBO (summary(); Passerello 2022, eq. 3.6) and the
#     seconds taken.
suppressMessages(library(sparsevgp))
args <- commandArgs(trailingOnly = TRUE)
data_name <- if (length(args)) match.arg(args[1L], c("kin8nm", "power")) else "kin8nm"
out <- if (length(args) >= 2L) args[2L] else
  file.path("inst", "extdata", "regression",
            sprintf("inducing_comparison_%s.csv", data_name))

f <- system.file("extdata", "regression", sprintf("%s_3000.csv.gz", data_name),
                 package = "sparsevgp")
dat <- utils::read.csv(f)
x <- as.matrix(dat[, setdiff(names(dat), c("row", "y", "PE"))])
y <- if (data_name == "power") dat$PE else dat$y
set.seed(1)
tr <- sample.int(nrow(x), 2000L)
te <- setdiff(seq_len(nrow(x)), tr)
mx <- colMeans(x[tr, ]); sx <- apply(x[tr, ], 2, stats::sd)
my <- mean(y[tr]); sy <- stats::sd(y[tr])
xs <- scale(x, mx, sx)
ys <- (y - my) / sy
xtr <- xs[tr, ]; ytr <- ys[tr]

metrics <- function(fit) {
  p <- predict(fit, xs[te, ], type = "response")
  mu <- p$mean * sy + my
  v <- p$var * sy^2
  c(rmse = sqrt(mean((y[te] - mu)^2)),
    nlpd = -mean(stats::dnorm(y[te], mu, sqrt(v), log = TRUE)))
}

Ms <- c(10L, 20L, 50L, 100L, 200L)
seeds <- 1:3
k0 <- sparsevgp:::.kern_init(kernel_rbf(), xtr, ytr)   # where sgpr() starts
rows <- list()
add <- function(...) rows[[length(rows) + 1L]] <<- data.frame(...)

t0 <- proc.time()[["elapsed"]]
g <- gpr(xtr, ytr)
m <- metrics(g)
add(method = "exact", M = NA_integer_, seed = NA_integer_, bound = g$bound,
    rmse = m[["rmse"]], nlpd = m[["nlpd"]], kl_bound = NA_real_, passes = NA_integer_,
    seconds = proc.time()[["elapsed"]] - t0)
cat(sprintf("exact GP: log p(y) %.2f, RMSE %.4f, NLPD %.4f\n", g$bound, m[["rmse"]], m[["nlpd"]]))

for (seed in seeds) for (M in Ms) for (method in c("random", "kmeans", "greedy")) {
  set.seed(seed)
  t0 <- proc.time()[["elapsed"]]
  sel <- select_inducing(xtr, k0, M = M, method = method, trace = if (method != "greedy") FALSE)
  fit <- sgpr(xtr, ytr, inducing = sel, fixed = "Z")
  el <- proc.time()[["elapsed"]] - t0
  m <- metrics(fit)
  add(method = method, M = M, seed = seed, bound = fit$bound, rmse = m[["rmse"]],
      nlpd = m[["nlpd"]], kl_bound = fit$upper_bound - fit$bound, passes = NA_integer_,
      seconds = el)
  cat(sprintf("seed %d M %3d %-13s bound %9.2f RMSE %.4f NLPD %.4f (%.1f s)\n", seed, M,
              method, fit$bound, m[["rmse"]], m[["nlpd"]], el))
  if (method == "greedy") {
    t1 <- proc.time()[["elapsed"]]
    re <- suppressWarnings(reinit_inducing(fit))
    el2 <- el + proc.time()[["elapsed"]] - t1
    m <- metrics(re)
    add(method = "greedy+reinit", M = M, seed = seed, bound = re$bound, rmse = m[["rmse"]],
        nlpd = m[["nlpd"]], kl_bound = re$upper_bound - re$bound,
        passes = nrow(re$reinit$history) - 1L, seconds = el2)
    cat(sprintf("seed %d M %3d %-13s bound %9.2f RMSE %.4f NLPD %.4f (%.1f s, %d passes)\n",
                seed, M, "greedy+reinit", re$bound, m[["rmse"]], m[["nlpd"]], el2,
                nrow(re$reinit$history) - 1L))
  }
}
res <- do.call(rbind, rows)
res$bound <- round(res$bound, 3)
res$rmse <- signif(res$rmse, 5)
res$nlpd <- signif(res$nlpd, 5)
res$kl_bound <- signif(res$kl_bound, 4)
res$seconds <- round(res$seconds, 2)
utils::write.csv(res, out, row.names = FALSE)
cat("BLAS:", extSoftVersion()[["BLAS"]], "\n")
cat("written", out, "\n")
