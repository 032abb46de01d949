# bench_vif_scale.R: one evaluation of the sgpr objective and its gradient
# at large N with and without neighbours (the Vecchia residual of
# sgpr(neighbours = K), R/vif.R): the VIF likelihood at M inducing inputs
# and K neighbours against the collapsed bound at the same M, both over row
# chunks within the default control$memory (256 MB), in one thread. Also
# the time of choosing the neighbour sets (done once per fit and when the
# lengthscales move, not per evaluation).
#
# Every configuration runs in a fresh Rscript process, which reports
#   - peak_mb: VmHWM of /proc/self/status (the peak resident memory of the
#     process, the N x D inputs and N-vectors included),
#   - eval_cpu_s: user + system CPU time of one evaluation of the objective
#     with its gradient,
#   - setup_cpu_s: the CPU time of building the model (greedy selection is
#     not used: the inducing inputs are given; for neighbours, the search
#     and the choice by residual correlation),
# and the BLAS R uses.
#
# Usage (from the package root, with sparsevgp installed):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_vif_scale.R \
#     [--N=1e6] [--D=4] [--M=100] [--K=20] [--lib=<library>]
# Not run by R CMD check.

here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "bench_child.R"))
Ns <- as.numeric(strsplit(opt("N", "1e6"), ",")[[1L]])
D <- as.integer(opt("D", "4"))
M <- as.integer(opt("M", "100"))
K <- as.integer(opt("K", "20"))

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}

if ("--child" %in% args) {
  suppressMessages(library(sparsevgp))
  N <- as.numeric(opt("n", "1e5"))
  k <- as.integer(opt("k", "0"))
  set.seed(1)
  x <- matrix(runif(N * D), N, D)
  y <- sin(6 * x[, 1]) + cos(4 * x[, 2]) + 0.5 * sin(25 * rowSums(x)) + rnorm(N, sd = 0.1)
  Z <- x[sample.int(N, M), , drop = FALSE]
  t0 <- cpu()
  fit <- sgpr(x, y, kernel = kernel_matern52(rep(0.2, D), 1), inducing = Z, noise = 0.01,
              neighbours = k, optimize = FALSE)
  t1 <- cpu()
  o <- objective(fit)
  t2 <- cpu()
  v <- o$fn(o$par)
  g <- o$gr(o$par)
  t3 <- cpu()
  cat("RESULT", format(N), k, M, D, format(t3 - t2, digits = 4), format(t1 - t0, digits = 4),
      format(vm_hwm_mb(), digits = 5), blas_name(), sep = "\t")
  cat("\n")
  quit(save = "no")
}

configs <- list()
labels <- character()
for (N in Ns) for (k in c(0L, K)) {
  configs[[length(configs) + 1L]] <- c(sprintf("--n=%s", format(N, scientific = FALSE)),
                                       sprintf("--k=%d", k), sprintf("--M=%d", M),
                                       sprintf("--D=%d", D))
  labels <- c(labels, sprintf("N = %g, K = %d", N, k))
}
res <- run_children(configs, labels,
                    c("N", "K", "M", "D", "eval_cpu_s", "setup_cpu_s", "peak_mb", "blas"),
                    text = "blas")
print(res, row.names = FALSE)
for (N in Ns) {
  r <- res[res$N == N, ]
  if (nrow(r) == 2L) {
    cat(sprintf("N = %g: one evaluation with K = %d neighbours costs %.2f times the evaluation without\n",
                N, K, r$eval_cpu_s[r$K == K] / r$eval_cpu_s[r$K == 0]))
  }
}
