# concrete, Matern 5/2 without neighbours (the K = 0 path alone): test NLPD
# and fit + predict CPU of sgpr() with the automatic M (the default schedule
# and the staged one), with M = 600 and of the exact GP. Usage:
#   Rscript inst/bench/bench_auto_m_refit.R --lib=<library> [--data=<dir>] [--splits=0,1,2]
args <- commandArgs(TRUE)
opt <- function(name, default) {
  a <- grep(sprintf("^--%s=", name), args, value = TRUE)
  if (length(a)) sub(sprintf("^--%s=", name), "", a[1L]) else default
}
lib <- opt("lib", NULL)
if (!is.null(lib)) .libPaths(c(lib, .libPaths()))
library(sparsevgp)
dir <- file.path(opt("data", file.path("..", "shared", "data", "regression")), "concrete")
splits <- as.integer(strsplit(opt("splits", "0,1,2"), ",")[[1L]])
d <- read.table(file.path(dir, "data.txt"))
cpu <- function() sum(proc.time()[c(1, 2)])
for (k in splits) {
  tr <- scan(file.path(dir, sprintf("index_train_%d.txt", k)), quiet = TRUE) + 1
  te <- scan(file.path(dir, sprintf("index_test_%d.txt", k)), quiet = TRUE) + 1
  X <- as.matrix(d[, 1:8]); Y <- d[, 9]
  xm <- colMeans(X[tr, ]); xs <- apply(X[tr, ], 2, sd); ym <- mean(Y[tr]); ys <- sd(Y[tr])
  x <- scale(X, xm, xs); y <- (Y - ym) / ys
  nl <- function(f) {
    p <- predict(f, x[te, ], type = "response")
    -mean(dnorm(Y[te], p$mean * ys + ym, sqrt(p$var) * ys, log = TRUE))
  }
  run <- function(lab, expr) {
    set.seed(k); t0 <- cpu(); f <- suppressWarnings(expr); n <- nl(f); ct <- cpu() - t0
    tr_n <- if (!"trace" %in% names(f$bound_terms)) NA else -2 * f$bound_terms[["trace"]] / length(tr)
    cat(sprintf("split %d %-10s nlpd %.4f cpu %.2f M %d rounds %s trace/N %.2g noise %.4f\n",
                k, lab, n, ct, if (is.null(f$params$Z)) nrow(f$x) else nrow(f$params$Z),
                format(if (is.null(f$selection$rounds)) NA else f$selection$rounds), tr_n, f$params$noise))
  }
  run("gpr", gpr(x[tr, ], y[tr], kernel = kernel_matern52()))
  run("auto M", sgpr(x[tr, ], y[tr], kernel = kernel_matern52(), neighbours = 0))
  run("staged", sgpr(x[tr, ], y[tr], kernel = kernel_matern52(), neighbours = 0,
                     control = list(schedule = "staged")))
  run("M=600", sgpr(x[tr, ], y[tr], kernel = kernel_matern52(), neighbours = 0, M = 600))
}
