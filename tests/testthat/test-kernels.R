test_that("kernel matrices match the textbook formulas", {
  set.seed(3)
  a <- matrix(rnorm(10), 5, 2)
  b <- matrix(rnorm(8), 4, 2)
  for (k in all_kernels(2)) {
    expect_equal(kernel_matrix(k, a, b), naive_kernel(k, a, b), tolerance = 1e-12)
    expect_equal(kernel_matrix(k, a), naive_kernel(k, a, a), tolerance = 1e-12)
    expect_equal(kernel_matrix(k, a, diag = TRUE), diag(naive_kernel(k, a, a)),
                 tolerance = 1e-12)
  }
  # a known value: RBF at distance one lengthscale
  expect_equal(kernel_matrix(kernel_rbf(2, 3), matrix(0), matrix(2))[1, 1], 3 * exp(-0.5))
  expect_equal(kernel_matrix(kernel_matern12(1, 1), matrix(0), matrix(1))[1, 1], exp(-1))
})

test_that("kernel matrices are symmetric and positive semi-definite", {
  set.seed(4)
  a <- matrix(rnorm(40), 20, 2)
  for (k in all_kernels(2)) {
    K <- kernel_matrix(k, a)
    expect_equal(K, t(K))
    expect_gt(min(eigen(K, symmetric = TRUE, only.values = TRUE)$values), -1e-10)
  }
})

# The contraction of an adjoint G equals the gradient of sum(G * K).
check_contraction <- function(kernel, a, b, G) {
  th <- sparsevgp:::.kern_theta(kernel)
  f <- function(theta, aa) {
    k2 <- sparsevgp:::.kern_set_theta(kernel, theta)
    K <- if (is.null(b)) kernel_matrix(k2, aa) else kernel_matrix(k2, aa, b)
    sum(G * K)
  }
  g <- sparsevgp:::.ffi_kern_grad(kernel, a, b, G, TRUE)
  fd_th <- fd_grad(function(t) f(t, a), th, 1e-6)
  fd_a <- matrix(fd_grad(function(v) f(th, matrix(v, nrow(a))), as.vector(a), 1e-6), nrow(a))
  expect_equal(g$theta, unname(fd_th), tolerance = 1e-7)
  expect_equal(g$x, fd_a, tolerance = 1e-7)
}

test_that("kernel contractions match finite differences (cross and symmetric, iso and ARD)", {
  set.seed(5)
  a <- matrix(rnorm(12), 6, 2)
  b <- matrix(rnorm(10), 5, 2)
  for (k in all_kernels(2)) {
    check_contraction(k, a, b, matrix(rnorm(30), 6, 5))
    check_contraction(k, a, NULL, matrix(rnorm(36), 6, 6))
  }
})

test_that("contractions are right with coincident points", {
  set.seed(6)
  a <- matrix(rnorm(8), 4, 2)
  b <- rbind(a[1:2, ], matrix(rnorm(4), 2, 2))   # a[1:2] coincide with b[1:2]
  for (nm in c("rbf", "rbf_ard", "matern32", "matern52_ard")) {
    k <- all_kernels(2)[[nm]]
    check_contraction(k, a, b, matrix(rnorm(16), 4, 4))
  }
  # Matern 1/2 has a kink at r = 0: its parameter gradient there is still exact
  k <- kernel_matern12(c(0.7, 1.3), 1.1)
  G <- matrix(rnorm(16), 4, 4)
  g <- sparsevgp:::.ffi_kern_grad(k, a, b, G, FALSE)$theta
  th <- sparsevgp:::.kern_theta(k)
  fd <- fd_grad(function(t) sum(G * kernel_matrix(sparsevgp:::.kern_set_theta(k, t), a, b)), th, 1e-6)
  expect_equal(g, unname(fd), tolerance = 1e-7)
})

test_that("the diagonal contraction is the variance gradient", {
  x <- matrix(as.double(1:6), 3)
  k <- kernel_rbf(c(1, 2), 2.5)
  expect_equal(sparsevgp:::.ffi_kern_grad_diag(k, x, c(1, 2, 3)), c(2.5 * 6, 0, 0))
})

test_that("kernel constructors validate their arguments", {
  expect_error(kernel_rbf(lengthscale = -1), "'lengthscale'")
  expect_error(kernel_rbf(lengthscale = NA), "'lengthscale'")
  expect_error(kernel_rbf(variance = c(1, 2)), "'variance'")
  expect_error(kernel_matern32(variance = 0), "'variance'")
  expect_error(kernel_rbf(ard = NA), "'ard'")
  expect_true(kernel_rbf(c(1, 2))$ard)
  expect_error(kernel_matrix(kernel_rbf(), matrix(1:3)), "must be set")
  expect_error(kernel_matrix(kernel_rbf(c(1, 2), 1), matrix(1:3)), "2 lengthscales")
  expect_error(kernel_matrix(kernel_rbf(1, 1), matrix(c(1, NA))), "NA")
  expect_error(kernel_matrix(kernel_rbf(1, 1), matrix(1:4, 2), matrix(1:3)), "2 columns")
  expect_error(kernel_matrix(kernel_rbf(1, 1), "a"), "'x' must be")
  expect_error(kernel_matrix("rbf", matrix(1)), "'kernel'")
  expect_output(print(kernel_rbf(c(1, 2), 3)), "ARD")
  expect_output(print(kernel_matern52()), "from data")
})

test_that("the C entry points reject malformed input instead of crashing", {
  kc <- list(1L, 1, 1)
  expect_error(.Call(sparsevgp:::ffi_kern_matrix, kc, 1:3, NULL), "double matrix")
  expect_error(.Call(sparsevgp:::ffi_kern_matrix, list(9L, 1, 1), matrix(1), NULL), "family")
  expect_error(.Call(sparsevgp:::ffi_kern_matrix, list(1L, -1, 1), matrix(1), NULL), "variance")
  expect_error(.Call(sparsevgp:::ffi_kern_grad, kc, matrix(1), NULL, matrix(1, 2, 2), FALSE), "'G'")
  expect_error(.Call(sparsevgp:::ffi_la_chol, matrix(c(1, 2, 2, 1), 2), 0, 1e-2),
               "not positive definite")
  ch <- .Call(sparsevgp:::ffi_la_chol, matrix(1, 2, 2), 0, 1e-2)
  expect_gt(ch$jitter, 0)
  expect_equal(tcrossprod(ch$L), matrix(1, 2, 2) + diag(ch$jitter, 2))
  expect_error(.Call(sparsevgp:::ffi_la_chol, diag(2), -0.5, 1e-2), "'jitter' must be non-negative")
  expect_error(.Call(sparsevgp:::ffi_la_chol, diag(2), 1e-2, 1e-3), "'jitter_cap'")
  # cached factors are checked before any triangular solve
  pg <- sparsevgp:::ffi_pred_gaussian
  expect_error(.Call(pg, matrix(0, 2, 2), diag(2), c(1, 1), matrix(1, 2, 3), rep(1, 3), FALSE),
               "'L' must be a Cholesky factor")
  expect_error(.Call(pg, diag(2), diag(2), c(1, NA), matrix(1, 2, 3), rep(1, 3), FALSE), "'v'")
  # no inducing points: the prior
  p0 <- .Call(pg, matrix(0, 0, 0), matrix(0, 0, 0), numeric(0), matrix(0, 0, 3), rep(2, 3), FALSE)
  expect_equal(p0$mean, numeric(3))
  expect_equal(p0$var, rep(2, 3))
  p0 <- .Call(pg, matrix(0, 0, 0), matrix(0, 0, 0), numeric(0), matrix(0, 0, 2), diag(2), TRUE)
  expect_equal(p0$cov, diag(2))
  expect_error(.Call(sparsevgp:::ffi_kern_grad_given, kc, matrix(1, 2, 1), matrix(2, 3, 1),
                     matrix(1, 2, 3), matrix(NaN, 2, 3), TRUE), "'K'")
  # empty sets contract to zero
  g0 <- .Call(sparsevgp:::ffi_kern_grad, kc, matrix(0, 0, 1), matrix(1, 3, 1), matrix(0, 0, 3), TRUE)
  expect_equal(g0$theta, c(0, 0))
  expect_equal(dim(g0$x), c(0L, 1L))
  # the variance multiplies last, so that no kernel overflows below the largest double
  for (k in list(kernel_rbf(1, 1e308), kernel_matern12(1, 1e308), kernel_matern32(1, 1e308),
                 kernel_matern52(1, 1e308))) {
    expect_true(all(is.finite(kernel_matrix(k, matrix(c(0, 0.1, 3, 1e-9))))))
  }
})

# The cross contraction (a BLAS product over column blocks) against the
# direct per-pair loop of the symmetric contraction on rbind(a, b) with the
# adjoint in the off-diagonal block.
cross_by_symmetric <- function(kernel, a, b, G) {
  nA <- nrow(a)
  Gs <- matrix(0, nA + nrow(b), nA + nrow(b))
  Gs[seq_len(nA), nA + seq_len(nrow(b))] <- G
  g <- sparsevgp:::.ffi_kern_grad(kernel, rbind(a, b), NULL, Gs, TRUE)
  list(theta = g$theta, x = g$x[seq_len(nA), , drop = FALSE])
}

test_that("the blocked cross contraction equals the direct loop, also far from the origin", {
  set.seed(9)
  a <- matrix(rnorm(14), 7, 2)
  b <- matrix(rnorm(600), 300, 2)     # more than one column block
  G <- matrix(rnorm(2100), 7, 300)
  for (shift in c(0, 1000)) {
    for (k in all_kernels(2)) {
      a1 <- a + shift
      b1 <- b + shift
      ref <- cross_by_symmetric(k, a1, b1, G)
      got <- sparsevgp:::.ffi_kern_grad(k, a1, b1, G, TRUE)
      scale <- max(1, abs(ref$theta), abs(ref$x))
      expect_lt(max(abs(got$theta - ref$theta), abs(got$x - ref$x)) / scale, 1e-9)
      K <- kernel_matrix(k, a1, b1)
      giv <- .Call(sparsevgp:::ffi_kern_grad_given, sparsevgp:::.ffi_kernel(k), a1, b1, G, K, TRUE)
      expect_lt(max(abs(giv$theta - ref$theta), abs(giv$x - ref$x)) / scale, 1e-9)
    }
  }
})

test_that("Matern 1/2 pairs very close together are contracted exactly", {
  set.seed(10)
  a <- matrix(rnorm(6), 3, 2)
  b <- rbind(a[1, ] + c(3e-7, -2e-7), a[2, ], matrix(rnorm(4), 2, 2))
  G <- matrix(rnorm(12), 3, 4)
  for (k in list(kernel_matern12(0.8, 1.2), kernel_matern12(c(0.5, 1.5), 0.7))) {
    ref <- cross_by_symmetric(k, a, b, G)
    got <- sparsevgp:::.ffi_kern_grad(k, a, b, G, TRUE)
    expect_equal(got$theta, ref$theta, tolerance = 1e-10)
    expect_equal(got$x, ref$x, tolerance = 1e-10)
  }
})

test_that("the contraction with a given kernel matrix checks its arguments", {
  kc <- sparsevgp:::.ffi_kernel(kernel_rbf(1, 1))
  x <- matrix(c(0, 1)); y <- matrix(c(0, 2, 3))
  expect_error(.Call(sparsevgp:::ffi_kern_grad_given, kc, x, NULL, matrix(0, 2, 2), matrix(0, 2, 2), TRUE),
               "'y' must be given")
  expect_error(.Call(sparsevgp:::ffi_kern_grad_given, kc, x, y, matrix(0, 2, 3), matrix(0, 3, 2), TRUE),
               "'K'")
})

test_that("large RBF cross-covariances equal the naive loop, also far from the origin", {
  set.seed(21)
  for (D in c(3L, 5L)) {
    a <- matrix(rnorm(40 * D), 40, D)
    b <- rbind(matrix(rnorm(150 * D), 150, D), a[1:5, ])   # includes points of a exactly
    for (shift in c(0, 1000)) {
      for (k in list(kernel_rbf(0.7, 1.3), kernel_rbf(seq(0.5, 1.5, length.out = D), 0.8))) {
        K <- kernel_matrix(k, a + shift, b + shift)
        expect_equal(K, naive_kernel(k, a, b), tolerance = 1e-12)
        # coincident points: the kernel variance to rounding
        expect_equal(diag(K[1:5, 151:155]), rep(k$variance, 5), tolerance = 1e-14)
        expect_true(all(K <= k$variance * (1 + 1e-15)))
      }
    }
  }
  # the symmetric K(x, x) keeps an exact diagonal
  x <- matrix(rnorm(300), 100, 3)
  expect_identical(diag(kernel_matrix(kernel_rbf(0.9, 1.7), x)), rep(1.7, 100))
})
