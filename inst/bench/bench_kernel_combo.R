# Cost of kernel sums and products, and of a single kernel before and after
# combinations were added.
#
# Usage (from the package root):
#   Rscript inst/bench/bench_kernel_combo.R [library path]
# With a library path, sparsevgp is loaded from there (to compare two
# installed versions, run the script once per library); combinations are
# timed only when the loaded version has them.
#
# Times are CPU seconds of this process (proc.time() user + system), the
# median of `reps` runs, so that other processes on a shared machine do not
# count. Sizes: N = 20 000 training inputs in D = 4 dimensions, M = 200
# inducing inputs.
#   Kuf      kernel_matrix(k, Z, x), M x N;
#   select   select_inducing(x, k, M, method = "greedy");
#   fn+gr    one SGPR bound with its gradient (objective(fit)$fn and $gr at
#            the same point: one C bound and the kernel contractions).
# Expected: a single kernel costs the same in both versions; a sum or
# product of two kernels costs about twice a single kernel's kernel work
# (each part is evaluated and contracted), plus, for a product, one N x M
# elementwise product per factor.
args <- commandArgs(trailingOnly = TRUE)
if (length(args)) .libPaths(c(args[1], .libPaths()))
suppressMessages(library(sparsevgp))
cat("sparsevgp from", dirname(find.package("sparsevgp")), "\n")
cat("BLAS:", extSoftVersion()[["BLAS"]], "\n")

cpu <- function(expr, reps = 5L) {
  t <- vapply(seq_len(reps), function(i) {
    t0 <- proc.time()
    force(expr())
    t1 <- proc.time() - t0
    t1[["user.self"]] + t1[["sys.self"]]
  }, 1)
  stats::median(t)
}

set.seed(1)
N <- 20000L; D <- 4L; M <- 200L
x <- matrix(runif(N * D), N, D)
y <- sin(6 * x[, 1]) + x[, 2]^2 + rnorm(N, sd = 0.1)
Z <- x[sample.int(N, M), ]

kernels <- list(single = kernel_rbf(rep(0.5, D), 1))
has_combo <- exists("Ops.sparsevgp_kernel", asNamespace("sparsevgp"))
if (has_combo) {
  kernels$sum <- kernel_matern52(rep(0.2, D), 0.5) + kernel_rbf(rep(1, D), 0.5)
  kernels$product <- kernel_matern52(rep(0.5, D), 1) * kernel_rbf(rep(1, D))
}

res <- do.call(rbind, lapply(names(kernels), function(kn) {
  k <- kernels[[kn]]
  fit <- sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, optimize = FALSE)
  o <- objective(fit)
  data.frame(kernel = kn,
             Kuf = cpu(function() kernel_matrix(k, Z, x)),
             select = cpu(function() select_inducing(x, k, M = M, method = "greedy"), reps = 3L),
             # a new point each run: fn and gr share a one-entry cache
             fn_gr = cpu(function() {
               p <- o$par + 1e-9 * stats::runif(length(o$par))
               o$fn(p)
               o$gr(p)
             }))
}))
print(res, digits = 3, row.names = FALSE)
