# sgpr()'s default on small data (300 to 669 rows): from the exact GP's
# hyperparameters (R/kernel_choice.R) against the fit of a library before
# that change (the bound route: inducing inputs selected at the grid's
# starting values and optimised with the hyperparameters).
#
# Usage (from the package root; one BLAS for all runs, e.g. OpenBLAS on one
# thread via R_LD_LIBRARY_PATH and OPENBLAS_NUM_THREADS=1):
#   Rscript inst/bench/bench_small_exact.R --lib=<library> [--label=new]
#     [--data=<dir with the UCI splits>] [--sets=bostonHousing,yacht,series,co2]
#     [--splits=0:19] [--draws=1:20]
# Each line: data, split or draw, label, test RMSE and NLPD (in the
# response's units), CPU s (user + sys) of fit and predict, M, the fit's
# bound. The UCI sets read the standard splits (index_train_k.txt,
# index_test_k.txt and data.txt as in bench_peers.R); "series" is 600
# points at random times over 600 units with cycles of 12 and 5.3 units and
# a trend, noise sd 0.1, 500 test points (draw k: seed 10 + k); co2 is R's
# monthly series (random 80/20 splits, seed 100 + k). Inputs and response
# are standardised on the training rows for every method.
# (args, opt(), lib and blas_name() from the shared helper)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))
suppressMessages(library(sparsevgp))
label <- opt("label", basename(lib))
data_dir <- opt("data", "")
sets <- strsplit(opt("sets", "bostonHousing,yacht,series,co2"), ",")[[1]]
splits <- eval(parse(text = opt("splits", "0:19")))
draws <- eval(parse(text = opt("draws", "1:20")))

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}

uci <- function(set, k) {
  d <- file.path(data_dir, set)
  rd <- function(f) scan(file.path(d, f), quiet = TRUE) + 1L
  xy <- as.matrix(utils::read.table(file.path(d, "data.txt")))
  ix <- rd("index_features.txt")
  iy <- rd("index_target.txt")
  tr <- rd(sprintf("index_train_%d.txt", k))
  te <- rd(sprintf("index_test_%d.txt", k))
  list(x = xy[tr, ix, drop = FALSE], y = xy[tr, iy], xt = xy[te, ix, drop = FALSE], yt = xy[te, iy])
}

series <- function(k) {
  set.seed(10 + k)
  t <- stats::runif(1100, 0, 600)
  f <- sin(2 * pi * t / 12) + 0.6 * sin(2 * pi * t / 5.3 + 1) + t / 600
  y <- f + stats::rnorm(1100, sd = 0.1)
  list(x = cbind(t[1:600]), y = y[1:600], xt = cbind(t[601:1100]), yt = y[601:1100])
}

co2_split <- function(k) {
  x <- as.numeric(stats::time(datasets::co2))
  y <- as.numeric(datasets::co2)
  set.seed(100 + k)
  te <- sample.int(length(y), round(0.2 * length(y)))
  list(x = cbind(x[-te]), y = y[-te], xt = cbind(x[te]), yt = y[te])
}

run <- function(s) {
  xm <- colMeans(s$x)
  xs <- apply(s$x, 2, stats::sd)
  ym <- mean(s$y)
  ys <- stats::sd(s$y)
  X <- scale(s$x, xm, xs)
  Xt <- scale(s$xt, xm, xs)
  set.seed(1)
  t0 <- cpu()
  fit <- suppressWarnings(sgpr(X, (s$y - ym) / ys))
  p <- predict(fit, Xt, type = "response")
  t1 <- cpu()
  mu <- ym + ys * p$mean
  sd <- ys * sqrt(p$var)
  c(rmse = sqrt(mean((s$yt - mu)^2)), nlpd = -mean(stats::dnorm(s$yt, mu, sd, log = TRUE)),
    cpu = t1 - t0, M = nrow(fit$params$Z), bound = fit$bound)
}

for (set in sets) {
  ks <- if (set %in% c("series", "co2")) draws else splits
  for (k in ks) {
    s <- switch(set, series = series(k), co2 = co2_split(k), uci(set, k))
    r <- run(s)
    cat(sprintf("%-14s %2d %-10s rmse %.4f nlpd %.4f cpu %.2f M %d bound %.2f  %s\n", set, k,
                label, r[["rmse"]], r[["nlpd"]], r[["cpu"]], as.integer(r[["M"]]), r[["bound"]],
                blas_name()))
  }
}
