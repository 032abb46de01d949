# bench_stream_orthogonal.R: peak memory and CPU time of one evaluation of
# an osgpr bound and its gradient at large N (M1 = M2 = 200 regular and
# orthogonal inducing inputs, D = 8 inputs by default): in one piece (the
# N x M matrices held, M = M1 + M2) and over row chunks (control$memory,
# default 256 MB), for both families (type = "solve", "odvgp"; the
# "family" bound), in one and optionally two OpenMP threads.
#
# Every configuration runs in a fresh Rscript process, which reports
#   - peak_mb: VmHWM of /proc/self/status (the peak resident memory of the
#     process, data included),
#   - cpu_s: user + system CPU time of the evaluation (proc.time(), which
#     counts every thread of the process),
#   - elapsed_s: its wall-clock time (meaningful only on an idle machine),
#   - bound: the value, so that one piece and chunks can be compared,
# and the BLAS R uses.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_stream_orthogonal.R [--N=1e5] [--M1=200]
#       [--M2=200] [--D=8] [--threads=1,2] [--lib=<library>]
# With OpenBLAS on one thread:
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_stream_orthogonal.R
# Not run by R CMD check.
#
# Measured 2026-11-23 on a 2-core machine shared with other jobs (so CPU
# time, not elapsed time), N = 1e5, M1 = M2 = 200, D = 8, one evaluation of
# the "family" bound and its gradient (the bounds agree to all printed
# digits: -2041037.38587 for solve, -2587679.03021 for odvgp):
#   BLAS              type   configuration        peak MB   CPU s
#   OpenBLAS (1 thr)  solve  one piece              1101     3.70
#   OpenBLAS (1 thr)  solve  chunks                  431     4.98
#   OpenBLAS (1 thr)  solve  chunks, 2 threads       433     5.10
#   OpenBLAS (1 thr)  odvgp  one piece              1101     3.29
#   OpenBLAS (1 thr)  odvgp  chunks                  432     4.77
#   OpenBLAS (1 thr)  odvgp  chunks, 2 threads       434     5.01
#   reference BLAS    solve  one piece              1029    24.9
#   reference BLAS    solve  chunks                  367    29.3
#   reference BLAS    odvgp  one piece              1030    26.1
#   reference BLAS    odvgp  chunks                  367    31.5
# Chunks cost about a third more CPU (each chunk's kernel matrix and
# whitening are computed twice, once per pass), as for sgpr(); the peak
# memory of the chunks is set by control$memory (256 MB here), not by N.

source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))

# ---- one configuration (a child process) ------------------------------------

if ("--child" %in% args) {
  suppressPackageStartupMessages(library(sparsevgp))
  N <- as.numeric(opt("N", "1e5"))
  M1 <- as.integer(opt("M1", "200"))
  M2 <- as.integer(opt("M2", "200"))
  D <- as.integer(opt("D", "8"))
  mode <- opt("mode", "chunked")
  type <- opt("type", "solve")
  threads <- as.integer(opt("threads", "1"))
  options(sparsevgp.threads = threads)
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  y <- sin(3 * rowSums(x)) + rnorm(N, sd = 0.1)
  idx <- sample.int(N, M1 + M2)
  # a fit built on a few rows at given parameters (nothing is selected or
  # optimised), then given all the data
  fit <- osgpr(x[1:2000, ], y[1:2000], inducing = x[idx[seq_len(M1)], , drop = FALSE],
               orthogonal = x[idx[M1 + seq_len(M2)], , drop = FALSE], type = type,
               noise = 0.01, optimize = FALSE,
               kernel = kernel_rbf(lengthscale = rep(0.5, D), variance = 1))
  fit$x <- x
  fit$y <- y
  fit$control$memory <- if (mode == "whole") 1e15 else 256 * 2^20
  rm(x, y)
  o <- objective(fit)
  t0 <- proc.time()
  value <- -o$fn(o$par)
  grad <- o$gr(o$par)
  t1 <- proc.time()
  cpu <- (t1[["user.self"]] + t1[["sys.self"]]) - (t0[["user.self"]] + t0[["sys.self"]])
  blas <- blas_name()
  cat(sprintf("RESULT\t%g\t%d\t%d\t%d\t%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.12g\t%s\n", N, M1, M2, D,
              type, mode, threads, vm_hwm_mb(), cpu, (t1 - t0)[["elapsed"]], value, blas))
  quit(save = "no")
}

# ---- the parent: one child per configuration ---------------------------------

N <- as.numeric(opt("N", "1e5"))
M1 <- as.integer(opt("M1", "200"))
M2 <- as.integer(opt("M2", "200"))
D <- as.integer(opt("D", "8"))
thr <- as.integer(strsplit(opt("threads", "1"), ",")[[1L]])

configs <- list()
for (type in c("solve", "odvgp")) {
  configs[[length(configs) + 1L]] <- list(type = type, mode = "whole", threads = 1L)
  for (t in thr) configs[[length(configs) + 1L]] <- list(type = type, mode = "chunked", threads = t)
}
cols <- c("N", "M1", "M2", "D", "type", "mode", "threads", "peak_mb", "cpu_s", "elapsed_s",
          "bound", "blas")
res <- run_children(
  lapply(configs, function(cf) c(sprintf("--N=%g", N), sprintf("--M1=%d", M1),
                                 sprintf("--M2=%d", M2), sprintf("--D=%d", D),
                                 sprintf("--type=%s", cf$type), sprintf("--mode=%s", cf$mode),
                                 sprintf("--threads=%d", cf$threads))),
  lapply(configs, function(cf) sprintf("%s, %s, %d thread(s)", cf$type, cf$mode, cf$threads)),
  cols, text = c("type", "mode", "blas"))
cat("\n")
print(res, row.names = FALSE)
