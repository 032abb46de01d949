# Speed of the orthogonal collapsed bound (Fernlund 2022, Algorithm 3, block
# Cholesky, M1 = M2 = M/2) against SGPR with M inducing points.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_osgpr.R            # (N, M) = (20000, 200) and (50000, 500)
#   Rscript inst/bench/bench_osgpr.R small      # only (20000, 200)
#
# Times are CPU seconds (user + system) of this single-threaded process, so
# that other processes on the machine disturb them less than elapsed time
# would (as in bench_sgpr.R); a gc() before each timing keeps collections
# of the previous call's results out of it.
#
# Fernlund (2022, section 6.1, Table 6.1) claims the orthogonal bound is
# 25-50 % cheaper than SGPR with the same total M. Counting flops
# consistently (a triangular solve or a syrk of an M x M factor into N
# columns costs M^2 N, a general product 2abc, a Cholesky M^3/3), both cost
# 2 M^2 N + 2/3 M^3 for the bound (the thesis's table mixes unit costs): the
# orthogonal one evaluates the same number as SGPR on rbind(Z, O) (its eq.
# 5.33 is the SGPR bound on the union) through a block Cholesky. This
# script measures it, with the same BLAS for both.
#
# Each row is timed for SGPR(M) and for osgpr(M/2, M/2) in alternation, and
# the median of `reps` runs is reported with the ratio osgpr / sgpr:
#   C bound        the C bound routine alone, given the kernel matrices
#                  (ffi_bg_bound vs ffi_bo_bound; the latter returns the
#                  union, SOLVE and ODVGP values from one pass);
#   C bound+adj    the same with the adjoints (SOLVE family for osgpr);
#   bound          the bound at new parameters: kernel matrices + bound;
#   bound+grad     objective()$fn then $gr at new parameters, as optim()
#                  calls them: kernel matrices, bound, adjoints and their
#                  contraction with the kernel derivatives.
suppressMessages(library(sparsevgp))

args <- commandArgs(trailingOnly = TRUE)
sizes <- list(c(N = 20000, M = 200, D = 8), c(N = 50000, M = 500, D = 8))
if ("small" %in% args) sizes <- sizes[1]
reps <- 3L

cat("sparsevgp", format(utils::packageVersion("sparsevgp")), "\n")
cat("R:     ", R.version.string, "\n")
cat("BLAS:  ", extSoftVersion()[["BLAS"]], "\n")
maps <- tryCatch(readLines("/proc/self/maps"), error = function(e) character())
cat("BLAS libraries mapped:", unique(sub(".* ", "", grep("blas", maps, value = TRUE))), "\n")
cat("LAPACK:", La_library(), "\n")
loadavg <- function() {
  if (file.exists("/proc/loadavg")) strsplit(readLines("/proc/loadavg"), " ")[[1L]][1:3] else NA
}
cat("Load average at start (1, 5, 15 min):", loadavg(), "\n")
cat("Orthogonal bound with M1 = M2 = M/2 against SGPR with M; CPU seconds (median of",
    reps, "runs) and ratio osgpr / sgpr\n")

ffi_bg <- sparsevgp:::ffi_bg_bound
ffi_bo <- sparsevgp:::ffi_bo_bound
el <- function(f) {
  gc(verbose = FALSE)
  st <- system.time(f())
  st[["user.self"]] + st[["sys.self"]]
}

results <- list()
for (sz in sizes) {
  N <- sz[["N"]]; M <- sz[["M"]]; D <- sz[["D"]]
  M1 <- as.integer(M %/% 2)
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  y <- sin(4 * x[, 1]) + x[, 2] + rnorm(N, sd = 0.1)
  W <- x[sample.int(N, M), , drop = FALSE]
  k <- kernel_rbf(lengthscale = rep(0.5, D), variance = 1)
  sg <- sgpr(x, y, kernel = k, inducing = W, noise = 0.01, mean = 0, optimize = FALSE)
  os <- osgpr(x, y, kernel = k, inducing = W[seq_len(M1), , drop = FALSE],
              orthogonal = W[-seq_len(M1), , drop = FALSE], type = "solve",
              bound = "family", noise = 0.01, mean = 0, optimize = FALSE)
  # same stacked inducing set: the union bound (eq. 5.33) is SGPR's
  stopifnot(abs(os$bounds[["union"]] - sg$bound) < 1e-6 * abs(sg$bound))
  osg <- objective(sg)
  oos <- objective(os)
  Kww <- kernel_matrix(k, W)
  Kwf <- kernel_matrix(k, W, x)
  kdiag <- rep(1, N)
  lambda <- rep(0.01, N)

  cases <- list(
    "C bound" = list(
      function(i) .Call(ffi_bg, Kww, Kwf, kdiag, lambda, y, 1e-8, 1e-2, FALSE),
      function(i) .Call(ffi_bo, Kww, Kwf, M1, kdiag, lambda, y, 1L, 1e-8, 1e-2, FALSE)),
    "C bound+adj" = list(
      function(i) .Call(ffi_bg, Kww, Kwf, kdiag, lambda, y, 1e-8, 1e-2, TRUE),
      function(i) .Call(ffi_bo, Kww, Kwf, M1, kdiag, lambda, y, 1L, 1e-8, 1e-2, TRUE)),
    "bound" = list(
      function(i) {
        p <- sg$params; p$variance <- p$variance * (1 + i * 1e-9)
        sparsevgp:::.evaluate(sg, p, grad = FALSE)
      },
      function(i) {
        p <- os$params; p$variance <- p$variance * (1 + i * 1e-9)
        sparsevgp:::.evaluate(os, p, grad = FALSE)
      }),
    # new parameters each time, so that the cache of objective() cannot help
    "bound+grad" = list(
      function(i) { p <- osg$par - i * 1e-9; osg$fn(p); osg$gr(p) },
      function(i) { p <- oos$par - i * 1e-9; oos$fn(p); oos$gr(p) }))

  cat(sprintf("\n(N, M, D) = (%d, %d, %d): SGPR with M = %d, osgpr with M1 = M2 = %d\n",
              N, M, D, M, M1))
  cat(sprintf("  %-12s %9s %9s %7s\n", "", "sgpr cpu", "osgpr cpu", "ratio"))
  for (nm in names(cases)) {
    ts <- matrix(NA_real_, reps, 2L)
    for (i in seq_len(reps)) {            # alternate, so that load hits both
      ts[i, 1L] <- el(function() cases[[nm]][[1L]](i))
      ts[i, 2L] <- el(function() cases[[nm]][[2L]](i))
    }
    med <- apply(ts, 2L, stats::median)
    cat(sprintf("  %-12s %9.3f %9.3f %7.3f\n", nm, med[1L], med[2L], med[2L] / med[1L]))
    results[[length(results) + 1L]] <- data.frame(N = N, M = M, D = D, what = nm,
                                                  sgpr = med[1L], osgpr = med[2L],
                                                  ratio = med[2L] / med[1L])
  }
}
cat("\nLoad average at end (1, 5, 15 min):", loadavg(), "\n")
cat("\nFlop model (every operation at its true cost): both bounds 2 M^2 N + 2/3 M^3, ratio 1.",
    "\nFernlund (2022), Table 6.1, claims 0.75 for M << N.\n")
invisible(do.call(rbind, results))
