# bench_scale.R: peak memory and time of one evaluation of the sgpr bound
# and its gradient at large N (M = 500 inducing inputs, D = 8 inputs by
# default): in one piece (the N x M matrices held) and over row chunks, in
# one and two OpenMP threads, and sharded over a 2-worker PSOCK cluster.
#
# Every configuration runs in a fresh Rscript process, which reports
#   - peak_mb: VmHWM of /proc/self/status (the peak resident memory of the
#     process, data included; for a cluster the master's, and the largest
#     worker's in worker_mb),
#   - cpu_s: user + system CPU time of the evaluation (proc.time(), which
#     counts every thread of the process; for a cluster, the master's plus
#     the workers'),
#   - elapsed_s: its wall-clock time (meaningful only on an idle machine),
# and the BLAS R uses.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_scale.R [part] [--N=1e5,1e6] [--M=500] [--D=8]
#       [--lib=<library>] [--max-gb=6] [--out=results.csv]
# part:
#   memory   one piece vs chunks, one thread (peak memory and CPU time);
#            the one-piece run is skipped when its four N x M matrices
#            would exceed --max-gb
#   timing   chunks in 1 and 2 threads, and a 2-worker cluster vs one
#            process: run this on an idle machine for elapsed-time
#            speedups (elapsed_s, and speedup = elapsed of one thread /
#            elapsed)
#   all      both (the default)
# The BLAS is R's default unless R_LD_LIBRARY_PATH points elsewhere, e.g.
# OpenBLAS on one thread (recommended with threads or workers, so that the
# BLAS does not start threads of its own):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_scale.R memory --N=1e5,1e6
#   R_LD_LIBRARY_PATH=... OPENBLAS_NUM_THREADS=1 \
#     Rscript inst/bench/bench_scale.R timing --N=1e5
# Not run by R CMD check.
#
# Measured 2026-11-23 on a 2-core machine shared with other jobs (so CPU
# time, not elapsed time), M = 500, D = 8, one evaluation:
#   BLAS              N     configuration         peak MB   CPU s
#   OpenBLAS (1 thr)  1e5   one piece              1384       7.0
#   OpenBLAS (1 thr)  1e5   chunks                  423       6.6
#   OpenBLAS (1 thr)  1e5   chunks, 2 threads       429       6.7
#   OpenBLAS (1 thr)  1e5   2-worker cluster        136 (+393 per worker)  6.9
#   OpenBLAS (1 thr)  1e6   chunks                  715      63.7
#   OpenBLAS (1 thr)  1e6   chunks, 2 threads       708      74.2
#   OpenBLAS (1 thr)  1e6   2-worker cluster        237 (+577 per worker) 70.3
#   OpenBLAS (1 thr)  1e7   chunks                 2312     661
#   reference BLAS    1e5   one piece              1254      45.1
#   reference BLAS    1e5   chunks                  372      54.0
# (one piece at 1e6 would need about 15 GB and was not run).
# Elapsed time on the idle machine (`timing`, OpenBLAS on one thread):
#   N     configuration        elapsed s   speedup
#   1e5   chunks, 1 thread        6.21       1.00
#   1e5   chunks, 2 threads       3.76       1.65
#   1e5   2-worker PSOCK          3.42       1.82
#   1e6   chunks, 1 thread       58.63       1.00
#   1e6   chunks, 2 threads      37.70       1.56
#   1e6   2-worker PSOCK         30.82       1.90
# Threads once the contraction of each chunk's adjoints into the kernel
# gradient runs in them too (before: the same commands on the previous
# version, interleaved), one child per row (`--child --mode=chunked
# --threads=1|2`), OpenBLAS on one thread, 2026-11-23, load average 0.6-1.3
# before each run (another job intermittently busy on one of the 2 cores):
#   N     threads   elapsed s   CPU s   speedup   before: elapsed s  speedup
#   1e5   1            7.18      7.17    1.00              7.80       1.00
#   1e5   2            4.22      7.29    1.70              4.86       1.60
#   1e6   1           58.83     58.82    1.00             61.02       1.00
#   1e6   2           35.23     63.13    1.67             40.73       1.50
# (two more runs at N = 1e6 gave 61.8 / 41.3 s and 63.1 / 37.1 s, 1.50x and
# 1.70x: on this shared machine the speedup varies by about 0.2.) The
# contraction itself was a small share: at N = 1e5 in one thread 0.34 s of
# 7.2 s CPU, three quarters of it the scan of its inputs for NA/NaN/Inf, now
# 0.19 s in one thread and 0.13 s elapsed in two. What remains on two
# threads is the kernel matrices (1.6x) and the triangular solves and
# products of the two passes (1.5-1.6x each on this machine).
# Rerun on the merged version with no other job (load average 0.9 from the
# runs themselves), same commands, 2026-11-23:
#   N     threads   elapsed s   CPU s   speedup
#   1e5   1            6.36      6.36    1.00
#   1e5   2            3.85      6.70    1.65
#   1e6   1           57.06     57.06    1.00
#   1e6   2           34.89     62.52    1.64

source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))

# ---- one configuration (a child process) ------------------------------------

if ("--child" %in% args) {
  suppressPackageStartupMessages(library(sparsevgp))
  N <- as.numeric(opt("N", "1e5"))
  M <- as.integer(opt("M", "500"))
  D <- as.integer(opt("D", "8"))
  mode <- opt("mode", "chunked")
  threads <- as.integer(opt("threads", "1"))
  workers <- as.integer(opt("workers", "0"))
  options(sparsevgp.threads = threads)
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  y <- sin(3 * rowSums(x)) + rnorm(N, sd = 0.1)
  Z <- x[sample.int(N, M), , drop = FALSE]
  # a fit built on a few rows at given parameters (nothing is selected or
  # optimised), then given all the data
  fit <- sgpr(x[1:2000, ], y[1:2000], inducing = Z, noise = 0.01, optimize = FALSE,
              kernel = kernel_rbf(lengthscale = rep(0.5, D), variance = 1))
  fit$x <- x
  fit$y <- y
  fit$control$memory <- if (mode == "whole") 1e15 else 256 * 2^20
  cl <- NULL
  wcpu <- function() 0
  if (workers > 0L) {
    cl <- parallel::makePSOCKcluster(workers)
    parallel::clusterCall(cl, function(lib) .libPaths(c(lib, .libPaths())), .libPaths()[1L])
    parallel::clusterCall(cl, function() options(sparsevgp.threads = 1L))
    fit$cluster <- sparsevgp:::.cluster_setup(cl, fit)
    wcpu <- function() sum(unlist(parallel::clusterCall(cl, function() {
      p <- proc.time()
      p[["user.self"]] + p[["sys.self"]]
    })))
  }
  rm(x, y)
  o <- objective(fit)
  w0 <- wcpu()
  t0 <- proc.time()
  value <- -o$fn(o$par)
  grad <- o$gr(o$par)
  t1 <- proc.time()
  w1 <- wcpu()
  cpu <- (t1[["user.self"]] + t1[["sys.self"]]) - (t0[["user.self"]] + t0[["sys.self"]]) + w1 - w0
  worker_mb <- NA
  if (!is.null(cl)) {
    worker_mb <- max(unlist(parallel::clusterCall(cl, function() {
      s <- readLines("/proc/self/status")
      as.numeric(sub("^VmHWM:\\s*([0-9]+) kB$", "\\1", grep("^VmHWM:", s, value = TRUE))) / 1024
    })))
    parallel::stopCluster(cl)
  }
  # the BLAS actually mapped into the process (R_LD_LIBRARY_PATH may swap it)
  cat(sprintf("RESULT\t%g\t%d\t%d\t%s\t%d\t%d\t%.0f\t%.0f\t%.2f\t%.2f\t%.10g\t%s\n", N, M, D, mode,
              threads, workers, vm_hwm_mb(), worker_mb, cpu, (t1 - t0)[["elapsed"]], value,
              blas_name()))
  quit(save = "no")
}

# ---- the parent: one child per configuration ---------------------------------

part <- if (length(args) && !startsWith(args[1L], "--")) args[1L] else "all"
if (!part %in% c("memory", "timing", "all")) stop("part must be memory, timing or all")
Ns <- as.numeric(strsplit(opt("N", "1e5,1e6"), ",")[[1L]])
M <- as.integer(opt("M", "500"))
D <- as.integer(opt("D", "8"))
max_gb <- as.numeric(opt("max-gb", "6"))

configs <- list()
for (N in Ns) {
  if (part %in% c("memory", "all")) {
    if (4 * N * M * 8 / 2^30 <= max_gb) {
      configs[[length(configs) + 1L]] <- list(N = N, mode = "whole", threads = 1L, workers = 0L)
    } else {
      message(sprintf("N = %g: one piece skipped (four N x M matrices are %.1f GB > --max-gb=%g)",
                      N, 4 * N * M * 8 / 2^30, max_gb))
    }
    configs[[length(configs) + 1L]] <- list(N = N, mode = "chunked", threads = 1L, workers = 0L)
  }
  if (part %in% c("timing", "all")) {
    if (part == "timing") {
      configs[[length(configs) + 1L]] <- list(N = N, mode = "chunked", threads = 1L, workers = 0L)
    }
    configs[[length(configs) + 1L]] <- list(N = N, mode = "chunked", threads = 2L, workers = 0L)
    configs[[length(configs) + 1L]] <- list(N = N, mode = "chunked", threads = 1L, workers = 2L)
  }
}

cols <- c("N", "M", "D", "mode", "threads", "workers", "peak_mb", "worker_mb", "cpu_s",
          "elapsed_s", "bound", "blas")
res <- run_children(
  lapply(configs, function(cf) c(sprintf("--N=%g", cf$N), sprintf("--M=%d", M),
                                 sprintf("--D=%d", D), sprintf("--mode=%s", cf$mode),
                                 sprintf("--threads=%d", cf$threads),
                                 sprintf("--workers=%d", cf$workers))),
  lapply(configs, function(cf) sprintf("N = %g, %s, %d thread(s), %d worker(s)", cf$N, cf$mode,
                                       cf$threads, cf$workers)),
  cols, text = c("mode", "blas"))
# elapsed speedup over the one-thread chunked run of the same N
base <- with(res[res$mode == "chunked" & res$threads == 1 & res$workers == 0, ],
             setNames(elapsed_s, N))
res$speedup <- round(base[as.character(res$N)] / res$elapsed_s, 2)
cat("\n")
print(res, row.names = FALSE)
out <- opt("out", "")
if (nzchar(out)) utils::write.csv(res, out, row.names = FALSE)
