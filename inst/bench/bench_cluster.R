# bench_cluster.R: pgpr and svgp on a 2-worker PSOCK cluster against one
# process, at N = 1e5 (D = 8) by default: CPU and elapsed time of
#   - pgpr: one evaluation of the bound with its gradient (M = 500), and one
#     round of closed-form c updates (.pgpr_update_c(), one update: two
#     evaluations of the bound and the update of every c_n);
#   - svgp (Bernoulli): one full-batch evaluation of the ELBO with its
#     gradient (M = 200), and one on a minibatch of 1000 points.
# Every configuration runs in a fresh Rscript process, which reports
#   - cpu_s: user + system CPU time of the master plus the workers
#     (proc.time() in every process),
#   - elapsed_s: wall-clock time (meaningful only on an idle machine),
#   - value: the bound (equal between one process and the cluster to
#     rounding),
# and the BLAS R uses.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_cluster.R [--N=1e5] [--D=8] [--lib=<library>]
#       [--out=results.csv]
# With OpenBLAS on one thread (so that the BLAS does not start threads of
# its own next to the workers):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_cluster.R
# Not run by R CMD check.
#
# Measured 2026-11-23 with OpenBLAS on one thread, N = 1e5, D = 8, on a
# 2-core machine running other jobs (load average about 4), so that the two
# workers could not run at the same time: compare CPU time (master plus
# workers); elapsed time shows no speedup under that load.
#   model  task                 workers  CPU s  elapsed s
#   pgpr   evaluation (M 500)   0         7.76   11.54
#   pgpr   evaluation (M 500)   2         7.13   10.75
#   pgpr   c update (M 500)     0         8.98   13.44
#   pgpr   c update (M 500)     2         8.32   12.52
#   svgp   full batch (M 200)   0         2.68    3.96
#   svgp   full batch (M 200)   2         3.19    4.90
#   svgp   minibatch 1000       0         0.05    0.05
#   svgp   minibatch 1000       2         0.12    0.18
# The bound is the same to the printed digits. The cluster adds no CPU time
# to pgpr's evaluation (its statistics are the chunked sgpr path's) and
# about 0.5 s to svgp's (the workers' share of the contraction runs apart
# from the adjoint of Kuu, and the master adds the KL divergence); a
# minibatch of 1000 points is too small to gain from a cluster, whose
# round trip then dominates.
#
# Again on the idle machine (load average 0.7 before the run), OpenBLAS on
# one thread, N = 1e5, D = 8; speedup = elapsed of one process / elapsed of
# the cluster:
#   model  task                 workers  CPU s  elapsed s  speedup
#   pgpr   evaluation (M 500)   0         6.52    6.53
#   pgpr   evaluation (M 500)   2         6.23    3.20      2.04
#   pgpr   c update (M 500)     0         7.24    7.24
#   pgpr   c update (M 500)     2         7.28    3.77      1.92
#   svgp   full batch (M 200)   0         2.39    2.39
#   svgp   full batch (M 200)   2         2.64    1.35      1.77
#   svgp   minibatch 1000       0         0.04    0.04
#   svgp   minibatch 1000       2         0.05    0.07      0.57

source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))

# ---- one configuration (a child process) ------------------------------------

if ("--child" %in% args) {
  suppressPackageStartupMessages(library(sparsevgp))
  N <- as.numeric(opt("N", "1e5"))
  D <- as.integer(opt("D", "8"))
  model <- opt("model", "pgpr")
  workers <- as.integer(opt("workers", "0"))
  options(sparsevgp.threads = 1L)
  M <- if (model == "pgpr") 500L else 200L
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  f <- sin(3 * rowSums(x))
  lab <- factor(f + rnorm(N, sd = 0.5) > 0)
  Z <- x[sample.int(N, M), , drop = FALSE]
  k <- kernel_rbf(lengthscale = rep(0.5, D), variance = 1)
  # a fit built on a few rows at given parameters (nothing is selected or
  # optimised), then given all the data
  if (model == "pgpr") {
    fit <- pgpr(x[1:2000, ], lab[1:2000], inducing = Z, kernel = k, optimize = FALSE)
    fit$ypm <- ifelse(lab == levels(lab)[2L], 1, -1)
    fit$y <- (fit$ypm + 1) / 2
    fit$c <- runif(N, 0.1, 2)
    share <- sparsevgp:::.shard_pg
  } else {
    fit <- svgp(x[1:2000, ], lab[1:2000], inducing = Z, kernel = k, optimize = FALSE)
    fit$target <- ifelse(lab == levels(lab)[2L], 1, -1)
    fit$y <- (fit$target + 1) / 2
    fit$params$q_mu <- rnorm(M, sd = 0.3)
    share <- sparsevgp:::.shard_svgp_data
  }
  fit$x <- x
  cl <- NULL
  wcpu <- function() 0
  if (workers > 0L) {
    cl <- parallel::makePSOCKcluster(workers)
    parallel::clusterCall(cl, function(lib) .libPaths(c(lib, .libPaths())), .libPaths()[1L])
    parallel::clusterCall(cl, function() options(sparsevgp.threads = 1L))
    fit$cluster <- sparsevgp:::.cluster_setup(cl, fit, share(fit))
    wcpu <- function() sum(unlist(parallel::clusterCall(cl, function() {
      p <- proc.time()
      p[["user.self"]] + p[["sys.self"]]
    })))
  }
  rm(x, f, lab)
  # CPU (master + workers) and elapsed time of expr
  timed <- function(expr) {
    w0 <- wcpu()
    t0 <- proc.time()
    v <- force(expr)
    t1 <- proc.time()
    w1 <- wcpu()
    list(value = v, cpu = (t1[["user.self"]] + t1[["sys.self"]]) -
           (t0[["user.self"]] + t0[["sys.self"]]) + w1 - w0,
         elapsed = (t1 - t0)[["elapsed"]])
  }
  o <- objective(fit)
  res <- list()
  res$evaluation <- timed({
    v <- -o$fn(o$par)
    o$gr(o$par)
    v
  })
  if (model == "pgpr") {
    res$c_update <- timed(sparsevgp:::.pgpr_update_c(fit, 1L)$bound)
  } else {
    set.seed(2)
    batch <- sort(sample.int(N, 1000L))
    res$minibatch <- timed(o$value_grad(o$par, batch = batch)$value)
  }
  if (!is.null(cl)) parallel::stopCluster(cl)
  blas <- blas_name()
  for (nm in names(res)) {
    cat(sprintf("RESULT\t%s\t%s\t%g\t%d\t%d\t%d\t%.2f\t%.2f\t%.10g\t%s\n", model, nm, N, M, D,
                workers, res[[nm]]$cpu, res[[nm]]$elapsed, res[[nm]]$value, blas))
  }
  quit(save = "no")
}

# ---- the parent: one child per configuration ---------------------------------

N <- as.numeric(opt("N", "1e5"))
D <- as.integer(opt("D", "8"))
cols <- c("model", "task", "N", "M", "D", "workers", "cpu_s", "elapsed_s", "value", "blas")
configs <- expand.grid(workers = c(0L, 2L), model = c("pgpr", "svgp"),
                       stringsAsFactors = FALSE)
res <- run_children(
  lapply(seq_len(nrow(configs)), function(i) {
    c(sprintf("--N=%g", N), sprintf("--D=%d", D), sprintf("--model=%s", configs$model[i]),
      sprintf("--workers=%d", configs$workers[i]))
  }),
  sprintf("%s, %d worker(s)", configs$model, configs$workers),
  cols, text = c("model", "task", "blas"))
cat("\n")
print(res, row.names = FALSE)
out <- opt("out", "")
if (nzchar(out)) utils::write.csv(res, out, row.names = FALSE)
