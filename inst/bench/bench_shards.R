# bench_shards.R: a default sgpr() fit on data that never pass through the
# master. N rows of D inputs (a smooth function plus noise, sd 0.3) are
# written by the workers of a local PSOCK cluster, each to its own file
# (as hosts that each hold a part of the data would), and read back by
# shards(cl, load); the master then fits sgpr(y ~ ., data = sh). Reported:
#   - master_peak_mb: the master's peak memory (VmHWM) over the whole fit,
#     from a process that never held the data;
#   - worker_peak_mb: each worker's peak memory (a fresh cluster, started
#     after the files were written, so that it counts reading and fitting
#     only);
#   - fit_elapsed_s, fit_cpu_s: the default fit (selection in rounds, the
#     schedule on a subsample of 20 000 rows on the master, the stage on all
#     rows on the workers); CPU is user + system of the master plus the
#     workers;
#   - eval_elapsed_s, eval_cpu_s: one evaluation of the bound with its
#     gradient on all N rows (objective(fit, cluster = sh)), the median of 3,
#     against one process holding N / 10 rows (`ref` rows; --ref=) at the
#     same parameters: the ratio of elapsed times is (N / ref) / workers on
#     an idle machine with one core per worker;
#   - test_rmse: the RMSE of the predictive mean against the noise-free
#     function at 10 000 new inputs.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_shards.R [--N=1e6] [--D=8] [--workers=2]
#       [--ref=1e5] [--lib=<library>] [--dir=<folder for the files>]
# With OpenBLAS on one thread (the workers inherit the environment):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_shards.R
# Results: inst/bench/results/bench_shards.txt. Not run by R CMD check.

source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))
library(sparsevgp)

N <- as.numeric(opt("N", "1e6"))
D <- as.integer(opt("D", "8"))
workers <- as.integer(opt("workers", "2"))
ref <- as.numeric(opt("ref", format(N / 10, scientific = FALSE)))
dir <- opt("dir", tempfile("bench_shards"))
dir.create(dir, showWarnings = FALSE, recursive = TRUE)

# the data: the smooth function of inst/bench/bench_large.R (D = 8: its
# 8-input form) on [0, 1]^D, noise sd 0.3
truth <- function(x) {
  f <- sin(2 * pi * x[, 1]) + cos(4 * x[, 2]) + x[, 3]^2 + 0.3 * x[, 4]
  if (ncol(x) >= 6L) f <- f + 0.5 * sin(3 * x[, 5]) + 0.4 * x[, 5] * x[, 6]
  f
}
make_rows <- function(n, D, seed, truth) {
  set.seed(seed)
  x <- matrix(runif(n * D), n, D, dimnames = list(NULL, paste0("x", seq_len(D))))
  d <- as.data.frame(x)
  d$y <- truth(x) + rnorm(n, sd = 0.3)
  d
}
environment(truth) <- environment(make_rows) <- globalenv()

# each worker writes its own part (this process never holds the rows)
parts <- diff(round(seq(0, N, length.out = workers + 1L)))
cl <- parallel::makeCluster(workers)
invisible(parallel::clusterApply(cl, seq_len(workers), function(i, n, D, dir, make_rows, truth) {
  saveRDS(make_rows(n[i], D, 1000 + i, truth), file.path(dir, sprintf("part-%03d.rds", i)),
          compress = FALSE)
  TRUE
}, n = parts, D = D, dir = dir, make_rows = make_rows, truth = truth))
parallel::stopCluster(cl)

cpu <- function(p) sum(p[c(1L, 2L, 4L, 5L)], na.rm = TRUE)
cl <- parallel::makeCluster(workers)
invisible(parallel::clusterCall(cl, function(lib) if (nzchar(lib)) .libPaths(c(lib, .libPaths())), lib))
worker_cpu <- function() sum(unlist(parallel::clusterCall(cl, function() {
  p <- proc.time()
  sum(p[c(1L, 2L, 4L, 5L)], na.rm = TRUE)
})))
worker_peak <- function() unlist(parallel::clusterCall(cl, function() {
  s <- readLines("/proc/self/status")
  as.numeric(sub("^VmHWM:\\s*([0-9]+) kB$", "\\1", grep("^VmHWM:", s, value = TRUE))) / 1024
}))

sh <- shards(cl, function(i, dir) readRDS(file.path(dir, sprintf("part-%03d.rds", i))),
             dir = dir)
print(sh)
w0 <- worker_cpu()
p0 <- proc.time()
set.seed(1)
fit <- sgpr(y ~ ., data = sh)
p1 <- proc.time()
w1 <- worker_cpu()
fit_elapsed <- (p1 - p0)[["elapsed"]]
fit_cpu <- cpu(p1 - p0) + (w1 - w0)
print(fit)
cat(sprintf("object.size(fit): %.1f KB\n", as.numeric(object.size(fit)) / 1024))

# one evaluation on all rows, on the workers
time_evals <- function(o, reps = 3L, on_workers = TRUE) {
  r <- vapply(seq_len(reps), function(k) {
    par <- o$par + 1e-6 * k
    w0 <- if (on_workers) worker_cpu() else 0
    p0 <- proc.time()
    o$fn(par)
    o$gr(par)
    p1 <- proc.time()
    w1 <- if (on_workers) worker_cpu() else 0
    c((p1 - p0)[["elapsed"]], cpu(p1 - p0) + (w1 - w0))
  }, c(0, 0))
  apply(r, 1L, stats::median)
}
o <- objective(fit, cluster = sh)
ev <- time_evals(o)
o$release()
master_peak <- vm_hwm_mb()
wpeak <- worker_peak()
parallel::stopCluster(cl)

# the test error at new inputs (a few rows, made here)
set.seed(2)
xt <- matrix(runif(1e4 * D), ncol = D, dimnames = list(NULL, paste0("x", seq_len(D))))
rmse <- sqrt(mean((predict(fit, as.data.frame(xt))$mean - truth(xt))^2))

# one process on ref rows at the same parameters
dref <- make_rows(ref, D, 7, truth)
f0 <- sgpr(y ~ ., data = dref, inducing = fit$params$Z, kernel = fit$kernel, optimize = FALSE)
f0$params <- fit$params
ev0 <- time_evals(objective(f0), on_workers = FALSE)
unlink(dir, recursive = TRUE)

res <- data.frame(
  quantity = c("N", "workers", "M", "master_peak_mb", sprintf("worker_peak_mb[%d]", seq_along(wpeak)),
               "fit_elapsed_s", "fit_cpu_s", "eval_elapsed_s (N on workers)",
               "eval_cpu_s (N on workers)", sprintf("eval_elapsed_s (%g rows, one process)", ref),
               sprintf("eval_cpu_s (%g rows, one process)", ref), "ratio elapsed", "ratio cpu",
               "test_rmse", "bound"),
  value = c(N, workers, nrow(fit$params$Z), master_peak, wpeak, fit_elapsed, fit_cpu, ev[1L],
            ev[2L], ev0[1L], ev0[2L], ev[1L] / ev0[1L], ev[2L] / ev0[2L], rmse, fit$bound))
res$value <- signif(res$value, 4L)
cat(sprintf("BLAS: %s; %s\n", blas_name(), R.version.string))
print(res, row.names = FALSE)
