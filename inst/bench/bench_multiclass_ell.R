# CPU cost of one evaluation of the multiclass expected log-likelihood with
# its gradients: robust-max by Gauss-Hermite quadrature against the softmax
# by Monte Carlo with fixed draws (odvgp(likelihood = "softmax")), at n rows
# and K classes. CPU time (user + system of this process), averaged over
# `reps` calls; run with one BLAS thread (the functions use no BLAS calls).
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_multiclass_ell.R [n] [K] [mc_samples] [reps]
args <- commandArgs(trailingOnly = TRUE)
n <- if (length(args) >= 1L) as.integer(args[[1L]]) else 2000L
K <- if (length(args) >= 2L) as.integer(args[[2L]]) else 5L
S <- if (length(args) >= 3L) as.integer(args[[3L]]) else 100L
reps <- if (length(args) >= 4L) as.integer(args[[4L]]) else 20L
suppressPackageStartupMessages(library(sparsevgp))
set.seed(1)
MU <- matrix(rnorm(n * K), n, K)
V <- matrix(exp(rnorm(n * K)), n, K)
y <- sample.int(K, n, replace = TRUE)
gh <- sparsevgp:::.gauss_hermite(20L)
draws <- matrix(rnorm(S * K), S, K)
cpu <- function(expr) {
  t0 <- proc.time()
  for (i in seq_len(reps)) eval(expr)
  t <- proc.time() - t0
  (t[[1L]] + t[[2L]]) / reps
}
rm_t <- cpu(quote(sparsevgp:::.robustmax_ell(MU, V, y, gh, 1)))
sm_t <- cpu(quote(sparsevgp:::.softmax_ell(MU, V, y, draws, 1)))
cat(sprintf("n = %d, K = %d: robust-max (20-point Gauss-Hermite) %.4f s, softmax (%d draws) %.4f s CPU per call\n",
            n, K, rm_t, S, sm_t))
