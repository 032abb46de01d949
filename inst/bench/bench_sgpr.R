# Speed of the SGPR bound and its gradient against the BLAS floor.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_sgpr.R            # all three sizes
#   Rscript inst/bench/bench_sgpr.R small      # only (5000, 100, 8)
# To measure with OpenBLAS on Debian (package libopenblas0-pthread) without
# changing the system default (R's ldpaths put the default BLAS first, so
# R_LD_LIBRARY_PATH, not LD_LIBRARY_PATH, must name OpenBLAS's directory):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_sgpr.R
#
# Times are CPU seconds (user + system) of this single-threaded process, so
# that other processes on the machine disturb them less than elapsed time.
#
# The floor is what any O(N M^2) implementation of the collapsed bound must
# do at the same sizes: one triangular solve of the M x M Cholesky factor
# into (a copy of) the M x N matrix Kuf, and one rank-N update A A'. It is
# timed with base R, which calls the same BLAS: forwardsolve(L, Kuf) is
# backsolve(), whose C code (do_backsolve in R's src/main/array.c) copies
# Kuf and calls dtrsm, and tcrossprod(A) with one argument calls dsyrk
# (symtcrossprod in the same file, under the default matrix product
# setting when A has no NaN or Inf).
#
# Reported, each as the median of `reps` runs and as a ratio to the floor:
#   C bound         the C bound routine alone, given the kernel matrices;
#   bound           the bound at new parameters: kernel matrices + bound,
#                   without gradient (what summary() and predict() need);
#   bound + grad    objective()$fn then $gr at the same parameters, as optim()
#                   calls them: kernel matrices, the bound, its adjoints and
#                   their contraction with the kernel derivatives. fn computes
#                   the gradient in the same pass and gr returns it from the
#                   cache, so nothing is computed twice.
# Targets (issue 3): bound at most 1.5x the floor, bound + gradient at most 3x.
suppressMessages(library(sparsevgp))

args <- commandArgs(trailingOnly = TRUE)
sizes <- list(c(N = 5000, M = 100, D = 8), c(N = 20000, M = 200, D = 8),
              c(N = 50000, M = 500, D = 8))
if ("small" %in% args) sizes <- sizes[1]
reps_for <- function(N, M) if (N * M^2 > 5e9) 3L else 7L

# The floor: dtrsm into a copy of Kuf, then dsyrk (see above); the trace
# keeps the result in use.
blas_floor <- function(L, Kuf) sum(diag(tcrossprod(forwardsolve(L, Kuf))))

med_time <- function(expr_fun, reps) {
  ts <- vapply(seq_len(reps), function(i) {
    st <- system.time(expr_fun(i))
    st[["user.self"]] + st[["sys.self"]]
  }, 1)
  stats::median(ts)
}

cat("sparsevgp", format(utils::packageVersion("sparsevgp")), "\n")
cat("BLAS:  ", extSoftVersion()[["BLAS"]], "\n")
maps <- tryCatch(readLines("/proc/self/maps"), error = function(e) character())
cat("BLAS libraries mapped:", unique(sub(".* ", "", grep("blas", maps, value = TRUE))), "\n")
cat("LAPACK:", La_library(), "\n")
cat(sprintf("%-18s %8s %8s %8s %8s %8s %8s %8s\n", "(N, M, D)", "floor s", "C bnd s",
            "bound s", "b+grad s", "C bnd/f", "bound/f", "b+grad/f"))

ffi <- getNativeSymbolInfo
results <- list()
for (sz in sizes) {
  N <- sz[["N"]]; M <- sz[["M"]]; D <- sz[["D"]]
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  y <- sin(4 * x[, 1]) + x[, 2] + rnorm(N, sd = 0.1)
  Z <- x[sample.int(N, M), , drop = FALSE]
  k <- kernel_rbf(lengthscale = rep(0.5, D), variance = 1)
  fit <- sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, optimize = FALSE)
  o <- objective(fit)
  Kuu <- kernel_matrix(k, Z)
  Kuf <- kernel_matrix(k, Z, x)
  kdiag <- rep(1, N)
  lambda <- rep(0.01, N)
  L <- t(chol(Kuu + diag(1e-8, M)))
  reps <- reps_for(N, M)

  t_floor <- med_time(function(i) blas_floor(L, Kuf), reps)
  t_cbound <- med_time(function(i) .Call(sparsevgp:::ffi_bg_bound, Kuu, Kuf, kdiag, lambda, y,
                                         1e-8, 1e-2, FALSE), reps)
  t_bound <- med_time(function(i) {
    p <- fit$params
    p$variance <- p$variance * (1 + i * 1e-9)
    sparsevgp:::.evaluate(fit, p, grad = FALSE)
  }, reps)
  # new parameters each time, so that the cache of objective() cannot help fn
  t_fngr <- med_time(function(i) { p <- o$par - i * 1e-9; o$fn(p); o$gr(p) }, reps)
  r <- c(N = N, M = M, D = D, floor = t_floor, c_bound = t_cbound, bound = t_bound,
         bound_grad = t_fngr)
  results[[length(results) + 1L]] <- r
  cat(sprintf("%-18s %8.3f %8.3f %8.3f %8.3f %8.2f %8.2f %8.2f\n",
              sprintf("(%d, %d, %d)", N, M, D), t_floor, t_cbound, t_bound, t_fngr,
              t_cbound / t_floor, t_bound / t_floor, t_fngr / t_floor))
}
invisible(do.call(rbind, results))
