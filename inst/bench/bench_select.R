# Speed of greedy conditional variance selection against the BLAS floor.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_select.R            # (N, M, D) = (1e5, 500, 8)
#   Rscript inst/bench/bench_select.R small      # (2e4, 200, 8) only
#   Rscript inst/bench/bench_select.R all        # both
#   Rscript inst/bench/bench_select.R large      # N = 1e6, M = 500, D = 8 with
#                                                # the default memory budget:
#                                                # peak memory and CPU time
#   Rscript inst/bench/bench_select.R large full # the same on all rows (4 GB)
# To measure with OpenBLAS on Debian without changing the system default
# (R's startup script puts its own library path before LD_LIBRARY_PATH, so
# set R_LD_LIBRARY_PATH instead; the script prints the BLAS actually loaded):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib:/usr/lib/x86_64-linux-gnu \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_select.R
#
# Greedy selection of M points among N is a pivoted partial Cholesky of the
# N x N kernel matrix, computed one column at a time (src/select.c): step m
# evaluates one kernel column, O(N D), and one matrix-vector product with
# the m columns so far, O(N m). In all N M^2 flops of level-2 BLAS (dgemv),
# which streams the N x m factor from memory at every step: N M^2 / 2
# doubles read in all.
#
# The floor is the SGPR floor of inst/bench/bench_sgpr.R at the same sizes,
# what any O(N M^2) sparse GP must do once per bound evaluation: one
# triangular solve of an M x M Cholesky factor into a copy of the M x N
# matrix Kuf and one rank-N update A A' (dtrsm + dsyrk, 2 N M^2 flops of
# level-3 BLAS), timed with base R: forwardsolve() (dtrsm, through
# do_backsolve in R's src/main/array.c) and tcrossprod(A) (dsyrk, through
# symtcrossprod in the same file, under the default matrix product setting
# when A has no NaN or Inf), the same BLAS the package calls.
# Also shown: the time to evaluate the M x N kernel matrix Kuf (the kernel
# work of one bound evaluation).
#
# Reported, as the median of `reps` runs and as ratios to the floor:
#   select   select_inducing(method = "greedy") from R, all included;
#   C        the C routine alone (ffi_sel_greedy, pivots planned in blocks of
#            16, the default);
#   C b=1    the same, one column at a time (block = 1: one dgemv per pivot);
#   Kuf      kernel_matrix(k, Z, x), M x N: the kernel evaluations alone.
# Greedy selection does N M^2 flops on the factor (dgemm/dgemv) and evaluates
# M kernel columns, N M in all, like Kuf.
#
# "large" runs alone (the peak memory is that of the whole process, VmHWM of
# /proc/self/status): select_inducing() at N = 1e6, M = 500, D = 8 with the
# default memory budget, where the full factor would take 4 GB and the
# selection runs on a subsample of rows; it reports the subsample, the peak
# resident memory before and after, and the CPU time (user + sys) of the call.
suppressMessages(library(sparsevgp))

args <- commandArgs(trailingOnly = TRUE)
vmhwm_mb <- function() {
  s <- grep("^VmHWM", readLines("/proc/self/status"), value = TRUE)
  as.numeric(gsub("[^0-9]", "", s)) / 1024
}
if ("large" %in% args) {
  cat("BLAS:  ", extSoftVersion()[["BLAS"]], "\n")
  N <- 1e6; M <- 500L; D <- 8L
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  k <- kernel_rbf(lengthscale = 0.5, variance = 1)
  before <- vmhwm_mb()
  memory <- if ("full" %in% args) "8GB"      # NULL: the default budget
  t <- system.time(sel <- select_inducing(x, k, M = M, memory = memory))
  cat(sprintf("select_inducing, N = %g, M = %d, D = %d, memory budget %s: %s, M = %d chosen\n",
              N, M, D, if (is.null(memory)) "256MB (default)" else memory,
              if (is.null(sel$subsample)) "all rows" else
                sprintf("subsample of %d rows", length(sel$subsample)), sel$M))
  cat(sprintf("  peak resident memory (VmHWM): %.0f MB with the data (x: %.0f MB), %.0f MB before the call\n",
              vmhwm_mb(), N * D * 8 / 2^20, before))
  cat(sprintf("  CPU time (user + sys): %.1f s, elapsed %.1f s\n",
              t[["user.self"]] + t[["sys.self"]], t[["elapsed"]]))
  quit(save = "no")
}
sizes <- list(big = c(N = 1e5, M = 500, D = 8), small = c(N = 2e4, M = 200, D = 8))
sizes <- if ("all" %in% args) sizes else if ("small" %in% args) sizes["small"] else sizes["big"]
reps <- 3L

# The floor: dtrsm into a copy of Kuf, then dsyrk (see above); the trace
# keeps the result in use.
blas_floor <- function(L, Kuf) sum(diag(tcrossprod(forwardsolve(L, Kuf))))

med_time <- function(f, reps) {
  ts <- vapply(seq_len(reps), function(i) {
    gc()
    system.time(f(i))[["elapsed"]]
  }, 1)
  stats::median(ts)
}

cat("sparsevgp", format(utils::packageVersion("sparsevgp")), "\n")
cat("BLAS:  ", extSoftVersion()[["BLAS"]], "\n")
cat("LAPACK:", La_library(), "\n")
maps <- if (file.exists("/proc/self/maps")) readLines("/proc/self/maps") else character()
loaded <- unique(sub(".* ", "", maps[grepl("blas", maps)]))
if (length(loaded)) cat("BLAS loaded:", paste(loaded, collapse = ", "), "\n")
cat(sprintf("%-20s %8s %8s %8s %8s %8s %9s %9s %9s %9s\n", "(N, M, D)", "floor s",
            "select s", "C s", "C b=1 s", "Kuf s", "select/f", "C/f", "C b=1/f", "Kuf/f"))
results <- list()
for (sz in sizes) {
  N <- as.integer(sz[["N"]]); M <- as.integer(sz[["M"]]); D <- as.integer(sz[["D"]])
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  k <- kernel_rbf(lengthscale = 0.5, variance = 1)
  kc <- sparsevgp:::.ffi_kernel(k)
  w <- rep(1, N)
  perm <- sample.int(N)

  run_C <- function(block) {
    r <- .Call(sparsevgp:::ffi_sel_greedy, kc, x, w, as.double(M), 0, perm, 0, block, FALSE)
    stopifnot(length(r$index) == M)
    r$index
  }
  stopifnot(identical(run_C(16), run_C(1)))    # blocks change the speed only
  t_C <- med_time(function(i) run_C(16), reps)
  t_C1 <- med_time(function(i) run_C(1), reps)
  # all N rows (beyond the default budget of 256 MB the selection would run
  # on a subsample, which "large" measures)
  t_sel <- med_time(function(i) select_inducing(x, k, M = M, memory = "4GB"), reps)

  Z <- select_inducing(x, k, M = M, memory = "4GB")$Z
  t_kuf <- med_time(function(i) kernel_matrix(k, Z, x), reps)
  Kuf <- kernel_matrix(k, Z, x)
  L <- t(chol(kernel_matrix(k, Z) + diag(1e-8, M)))
  t_floor <- med_time(function(i) blas_floor(L, Kuf), reps)
  rm(Kuf)

  r <- c(N = N, M = M, D = D, floor = t_floor, select = t_sel, C = t_C, C_block1 = t_C1,
         Kuf = t_kuf)
  results[[length(results) + 1L]] <- r
  cat(sprintf("%-20s %8.3f %8.3f %8.3f %8.3f %8.3f %9.2f %9.2f %9.2f %9.2f\n",
              sprintf("(%d, %d, %d)", N, M, D), t_floor, t_sel, t_C, t_C1, t_kuf,
              t_sel / t_floor, t_C / t_floor, t_C1 / t_floor, t_kuf / t_floor))
  cat(sprintf("  factor work: greedy %.1f Gflop, floor %.1f Gflop (%.2f Gflop/s)\n",
              N * M^2 / 1e9, 2 * N * M^2 / 1e9, 2 * N * M^2 / 1e9 / t_floor))
}
invisible(do.call(rbind, results))
