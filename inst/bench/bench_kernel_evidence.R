# Does the fitted objective pick the kernel family (and the model with or
# without neighbours) that predicts better? On the small sets of
# bench_peers.R (same splits, same standardisation: its load_split()), for
# each split: the exact GP (gpr()) and sgpr() without neighbours with an RBF
# and with a Matern 5/2 kernel (ARD, the same number of hyperparameters), and
# sgpr() with 20 neighbours and no trial (Matern 5/2 and RBF). Each line
# gives the fitted objective per observation (log marginal likelihood of the
# exact GP, Titsias's bound of sgpr() without neighbours, the Vecchia
# likelihood with them), the test NLPD in the target's units, the fit's CPU
# seconds (user + system), M and K; with --loo, the leave-one-out log
# predictive density per observation of the exact GP at the fitted
# hyperparameters of gpr() and of sgpr() without neighbours (closed form:
# Sundararajan & Keerthi 2001), for the RBF and Matern 5/2 kernels.
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_kernel_evidence.R \
#     --lib=<sparsevgp library> --peers=<library with fields> \
#     --data=../shared/data/regression --sets=yacht,bostonHousing,energy,concrete,rainfall \
#     [--configs=gprR,gprM,sR,sM,s20,s20R] [--loo]
# Not run by R CMD check.

here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
args <- commandArgs(trailingOnly = TRUE)
opt <- function(name, default) {
  hit <- grep(sprintf("^--%s=", name), args, value = TRUE)
  if (length(hit)) sub(sprintf("^--%s=", name), "", hit[length(hit)]) else default
}
lib <- opt("lib", "")
peers <- opt("peers", "")
.libPaths(c(if (nzchar(lib)) lib, .libPaths(), if (nzchar(peers)) peers))
suppressMessages(library(sparsevgp))
data_dir <- opt("data", file.path("..", "shared", "data", "regression"))
# load_split() and what it needs, from bench_peers.R (its parent code not run)
for (e in parse(file.path(here, "bench_peers.R"))) {
  if (is.call(e) && identical(e[[1L]], as.name("<-")) &&
      as.character(e[[2L]]) %in% c("pkg_data", "load_split", "metrics", "uci_small", "cpu")) {
    eval(e)
  }
}
sets <- strsplit(opt("sets", "yacht,bostonHousing,energy,concrete,rainfall"), ",")[[1L]]
configs <- strsplit(opt("configs", "gprR,gprM,sR,sM,s20,s20R"), ",")[[1L]]
splits <- as.integer(strsplit(opt("splits", "0,1,2"), ",")[[1L]])

run <- function(s, k, f) {
  set.seed(k)
  t0 <- cpu()
  fit <- suppressWarnings(f())
  t1 <- cpu()
  p <- predict(fit, s$xt, type = "response")
  Z <- fit$params$Z
  c(obj = as.numeric(logLik(fit)) / nrow(s$x), nlpd = metrics(s, p$mean, p$var)[["nlpd"]],
    cpu = t1 - t0, M = if (is.null(Z)) nrow(s$x) else nrow(Z),
    K = if (is.null(fit$neighbours)) 0 else fit$neighbours$K)
}
# leave-one-out log predictive density of the exact GP at a fit's parameters
loo <- function(fit, x, y) {
  p <- fit$params
  C <- kernel_matrix(sparsevgp:::.kernel_at(fit$kernel, p), x)
  diag(C) <- diag(C) + p[["noise"]]
  Ci <- chol2inv(chol(C))
  d <- diag(Ci)
  mean(stats::dnorm(drop(Ci %*% (y - p$mean)) / d, 0, sqrt(1 / d), log = TRUE))
}
for (set in sets) for (k in splits) {
  s <- load_split(set, k)
  fs <- list(gprR = function() gpr(s$x, s$y, kernel = kernel_rbf()),
             gprM = function() gpr(s$x, s$y, kernel = kernel_matern52()),
             sR = function() sgpr(s$x, s$y, neighbours = 0),
             sM = function() sgpr(s$x, s$y, kernel = kernel_matern52(), neighbours = 0),
             s20 = function() sgpr(s$x, s$y, neighbours = 20),
             s20R = function() sgpr(s$x, s$y, kernel = kernel_rbf(), neighbours = 20),
             default = function() sgpr(s$x, s$y))
  for (cf in configs) {
    r <- run(s, k, fs[[cf]])
    cat(sprintf("%s %d %s obj %.4f nlpd %.4f cpu %.2f M %d K %d\n", set, k, cf, r[["obj"]],
                r[["nlpd"]], r[["cpu"]], as.integer(r[["M"]]), as.integer(r[["K"]])))
  }
  if ("--loo" %in% args) {
    for (cf in c("gprR", "gprM", "sR", "sM")) {
      set.seed(k)
      f <- suppressWarnings(fs[[cf]]())
      cat(sprintf("%s %d %s loo %.4f\n", set, k, cf, loo(f, s$x, s$y)))
    }
  }
}
