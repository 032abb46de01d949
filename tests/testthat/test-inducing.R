# Inducing point selection: greedy conditional variance (Burt et al. 2020) and
# its weighted form (Passerello 2022, sec. 3.3.2), k-means and random subsets,
# and reinit_inducing(), checked against dense formulas (no finite
# differences needed).

# diag(K - Q) and Q = K_fu K_uu^-1 K_uf by the textbook formula; the
# kernels are stationary, so diag K = variance. `kern` evaluates kernel
# matrices (the naive loop oracle, or kernel_matrix() for larger problems).
dense_residual <- function(k, x, Z, full = TRUE, kern = naive_kernel) {
  Kuf <- kern(k, Z, x)
  A <- solve(kern(k, Z, Z), Kuf)
  list(d = k$variance - colSums(Kuf * A), Q = if (full) crossprod(Kuf, A))
}

test_that("the incremental residual and factor equal the dense diag(K - Q) ", {
  d <- toy_data(40, 2)
  w <- seq(0.5, 3, length.out = 40)
  for (k in all_kernels(2)) {
    set.seed(1)
    s <- select_inducing(d$x, k, M = 10, weights = w, factor = TRUE)
    expect_equal(s$M, 10L)
    expect_equal(s$Z, d$x[s$index, , drop = FALSE], ignore_attr = TRUE)
    expect_equal(s$trace0, sum(w * k$variance), tolerance = 1e-14)
    for (m in c(1, 4, 10)) {
      ref <- dense_residual(k, d$x, d$x[s$index[1:m], , drop = FALSE])
      expect_equal(tcrossprod(s$factor[, 1:m]), ref$Q, tolerance = 1e-10)
      expect_equal(s$trace[m], sum(w * ref$d), tolerance = 1e-10)
      if (m == 10) expect_equal(s$residual, ref$d, tolerance = 1e-10)
    }
    # the chosen points are exactly explained
    expect_true(all(s$residual[s$index] == 0))
  }
})

test_that("the first pick is argmax w_n k(x_n, x_n) and each pick maximises w_n d_n", {
  d <- toy_data(50, 2)
  set.seed(2)
  w <- runif(50, 0.2, 5)
  for (k in all_kernels(2)[c("rbf", "matern12_ard", "matern52")]) {
    s <- select_inducing(d$x, k, M = 12, weights = w)
    expect_equal(s$index[1], which.max(w))
    for (m in 1:11) {
      r <- dense_residual(k, d$x, d$x[s$index[1:m], , drop = FALSE], full = FALSE)$d
      crit <- w * pmax(r, 0)
      expect_gte(crit[s$index[m + 1]], max(crit) - 1e-10 * max(w))
      expect_true(crit[s$index[m + 1]] > 1e-8)
    }
  }
  # plain: the residual criterion is unweighted
  s <- select_inducing(d$x, kernel_matern32(0.7, 1.2), M = 8)
  r <- dense_residual(kernel_matern32(0.7, 1.2), d$x, d$x[s$index[1:7], ], full = FALSE)$d
  expect_equal(r[s$index[8]], max(r), tolerance = 1e-10)
})

test_that("ties are broken by R's RNG: the first pick with equal weights is the first of sample.int(N)", {
  d <- toy_data(30, 1)
  k <- kernel_rbf(0.8, 1.3)
  for (seed in 1:3) {
    set.seed(seed)
    p <- sample.int(30)
    set.seed(seed)
    s <- select_inducing(d$x, k, M = 3)
    expect_equal(s$index[1], p[1])
  }
  # a regular grid has many exact ties; different seeds pick differently
  g <- as.matrix(expand.grid(1:6, 1:6))
  firsts <- vapply(1:6, function(seed) {
    set.seed(seed)
    select_inducing(g, kernel_rbf(1, 1), M = 2)$index[1]
  }, 1L)
  expect_gt(length(unique(firsts)), 1L)
})

test_that("selections are reproducible and nested: Z(M = 20) == Z(M = 30)[1:20]", {
  d <- toy_data(80, 2)
  k <- kernel_matern52(0.6, 1)
  w <- exp(sin(3 * d$x[, 1]))
  set.seed(9)
  a <- select_inducing(d$x, k, M = 30, weights = w)
  set.seed(9)
  b <- select_inducing(d$x, k, M = 30, weights = w)
  expect_identical(a, b)
  set.seed(9)
  s20 <- select_inducing(d$x, k, M = 20, weights = w)
  expect_identical(s20$Z, a$Z[1:20, ])
  expect_identical(s20$trace, a$trace[1:20])
  set.seed(4)
  p20 <- select_inducing(d$x, k, M = 20)
  set.seed(4)
  p30 <- select_inducing(d$x, k, M = 30)
  expect_identical(p20$Z, p30$Z[1:20, ])
  expect_false(anyDuplicated(a$index) > 0)
})

test_that("planning pivots in blocks changes nothing but the speed", {
  set.seed(25)
  for (D in c(1, 3, 8)) {
    x <- matrix(runif(600 * D), ncol = D)
    w <- runif(600, 0.5, 2)
    k <- kernel_matern52(0.15 * sqrt(D), 1)
    ref <- NULL
    for (b in c(1, 3, 16, 64)) {
      set.seed(26)
      s <- select_inducing(x, k, M = 120, weights = w, block = b, factor = TRUE)
      if (is.null(ref)) { ref <- s; next }
      expect_identical(s$index, ref$index)
      # (blocks of pivots go through matrix products instead of vector
      # updates: equal to rounding, which OpenBLAS's kernels make about
      # 1e-12 relative here)
      expect_equal(s$factor, ref$factor, tolerance = 1e-10)
      expect_equal(s$trace, ref$trace, tolerance = 1e-10)
    }
    ref_res <- dense_residual(k, x, ref$Z, full = FALSE, kern = kernel_matrix)$d
    expect_equal(ref$residual, ref_res, tolerance = 1e-8)
  }
  expect_error(select_inducing(x, k, block = 0), "'block'")
})

test_that("equal weights give the plain method", {
  d <- toy_data(60, 2)
  k <- kernel_rbf(c(0.7, 1.1), 0.9)
  set.seed(3)
  p <- select_inducing(d$x, k, M = 15)
  set.seed(3)
  w <- select_inducing(d$x, k, M = 15, weights = rep(2.5, 60))
  expect_identical(w$index, p$index)
  expect_equal(w$trace, 2.5 * p$trace, tolerance = 1e-14)
  expect_false(p$weighted)
  expect_true(w$weighted)
})

test_that("the weighted trace never increases and a threshold stops early", {
  set.seed(5)
  x <- matrix(runif(300, 0, 10))
  k <- kernel_rbf(0.05, 1)
  w <- runif(300, 0.5, 2)
  set.seed(6)
  long <- select_inducing(x, k, M = 150, weights = w)
  tr <- c(long$trace0, long$trace)
  expect_true(all(diff(tr) <= 1e-12 * long$trace0))
  # the threshold keeps exactly the points up to the one that crossed it
  thr <- sqrt(long$trace[39] * long$trace[40])
  set.seed(6)
  s <- select_inducing(x, k, weights = w, threshold = thr)
  expect_equal(s$M, 40L)
  expect_equal(s$stop, "threshold")
  expect_lt(s$trace[40], thr)
  expect_gte(s$trace[39], thr)
  expect_identical(s$Z, long$Z[1:40, , drop = FALSE])
  expect_equal(n_inducing(long, thr), 40L)
  expect_true(is.na(n_inducing(long, 0)))
  # M caps a threshold selection
  set.seed(6)
  capped <- select_inducing(x, k, M = 10, weights = w, threshold = thr)
  expect_equal(capped$M, 10L)
  expect_equal(capped$stop, "M")
  # beyond the first capacity of 128 columns the selection continues exactly
  set.seed(6)
  deep <- select_inducing(x, k, weights = w, threshold = long$trace[140] * 0.999)
  expect_equal(deep$M, 141L)
  expect_identical(deep$index, long$index[1:141])
  # a threshold above the prior trace still returns one point
  set.seed(6)
  one <- select_inducing(x, k, threshold = 1e6)
  expect_equal(one$M, 1L)
})

test_that("repeated rows never give duplicated inducing inputs, even once every residual is zero", {
  set.seed(7)
  base <- matrix(runif(16, -2, 2), 8, 2)
  x <- base[sample(rep(1:8, 5)), ]
  for (k in all_kernels(2)) {
    for (tol in c(1e-10, 0)) {
      s <- select_inducing(x, k, M = 20, tol = tol)
      expect_equal(s$M, 8L)
      expect_equal(s$stop, "exhausted")
      expect_equal(anyDuplicated(s$Z), 0L)
      expect_lt(s$trace[8], 1e-12 * s$trace0)
    }
  }
  # the models accept such a selection
  y <- sin(x[, 1]) + x[, 2]
  s <- select_inducing(x, kernel_rbf(1, 1), M = 20)
  fit <- sgpr(x, y, kernel = kernel_rbf(1, 1), inducing = s, noise = 0.1,
              optimize = FALSE)
  expect_true(is.finite(logLik(fit)))
  # an (almost) low-rank kernel stops once the residuals are negligible
  z <- matrix(seq(0, 1, length.out = 50))
  set.seed(23)
  s <- select_inducing(z, kernel_rbf(50, 1), M = 50, tol = 1e-10)
  expect_lt(s$M, 50L)
  expect_equal(s$stop, "exhausted")
  expect_true(max(s$residual) <= 1e-10)
  expect_equal(anyDuplicated(s$index), 0L)
  # with tol = 0 it continues through rounding-level residuals, never repeating
  set.seed(23)
  s0 <- select_inducing(z, kernel_rbf(50, 1), M = 40)
  expect_gt(s0$M, s$M)
  expect_true(s0$stop %in% c("M", "exhausted"))
  expect_equal(anyDuplicated(s0$index), 0L)
  expect_true(all(s0$residual >= 0))
  expect_identical(s0$index[seq_len(s$M)], s$index)
})

test_that("the SGPR bound never decreases along the greedy sequence; the increment is Passerello (2022)'s closed form (sec. 3.3.1, App. B.4)", {
  d <- toy_data(40, 2)
  lam <- seq(0.02, 0.4, length.out = 40)
  k <- kernel_matern32(c(0.6, 0.9), 1.1)
  set.seed(8)
  s <- select_inducing(d$x, k, M = 12, weights = 1 / lam, factor = TRUE)
  bound <- function(m) {
    f <- sgpr(d$x, d$y, kernel = k, inducing = s$Z[seq_len(m), , drop = FALSE],
              noise = lam, mean = 0, optimize = FALSE, control = list(jitter = 0))
    as.numeric(logLik(f))
  }
  b <- vapply(1:12, bound, 1)
  expect_true(all(diff(b) > -1e-10))
  # 2 (L+ - L) = -log(1 + b'S^-1 b) + b'Lambda^-1 b + (y'S^-1 b)^2 / (1 + b'S^-1 b),
  # S = Lambda + Q, with b the new column of the partial Cholesky factor
  for (m in c(3, 7, 11)) {
    C <- s$factor[, 1:m]
    S <- diag(lam) + tcrossprod(C)
    bb <- s$factor[, m + 1]
    Sb <- solve(S, bb)
    a <- sum(bb * Sb)
    inc <- 0.5 * (-log1p(a) + sum(bb^2 / lam) + sum(d$y * Sb)^2 / (1 + a))
    expect_equal(b[m + 1] - b[m], inc, tolerance = 1e-8)
    expect_gte(inc, 0)
  }
})

test_that("the PGPR bound never decreases along the theta-weighted greedy sequence; the increment is Passerello (2022)'s closed form (sec. 4.3.1, App. C.4)", {
  d <- toy_data(40, 2)
  ypm <- ifelse(d$y > 0, 1, -1)
  set.seed(9)
  cc <- runif(40, 0.05, 3)
  th <- pg_theta(cc)
  k <- kernel_matern52(c(0.7, 1.0), 1.3)
  set.seed(10)
  s <- select_inducing(d$x, k, M = 12, weights = th, factor = TRUE)
  for (m0 in c(0, 0.4)) {
    bound <- function(m) {
      f <- pgpr_at(list(x = d$x, y = ypm), k, s$Z[seq_len(m), , drop = FALSE], cc, mean = m0)
      f$bound
    }
    b <- vapply(1:12, bound, 1)
    expect_true(all(diff(b) > -1e-10))
    # 2 (L+ - L) = -log(1 + b'S^-1 b) + b' Theta b
    #              + 1/4 (y' Theta^-1 S^-1 b)^2 / (1 + b'S^-1 b),  S = Theta^-1 + Q,
    # with b the new column of the partial Cholesky factor and c, theta and
    # the kernel fixed; a prior mean m replaces y by y - 2 theta m (the
    # linear coefficient of f - m, see test-pgpr.R)
    yb <- ypm - 2 * th * m0
    for (m in c(2, 5, 8, 11)) {
      C <- s$factor[, 1:m]
      S <- diag(1 / th) + tcrossprod(C)
      bb <- s$factor[, m + 1]
      Sb <- solve(S, bb)
      a <- sum(bb * Sb)
      inc <- 0.5 * (-log1p(a) + sum(th * bb^2) + 0.25 * sum((yb / th) * Sb)^2 / (1 + a))
      expect_equal(b[m + 1] - b[m], inc, tolerance = 1e-8)
      expect_gte(inc, 0)
    }
  }
})

test_that("random and k-means selections and their traces", {
  d <- toy_data(60, 2)
  x <- rbind(d$x, d$x[1:10, ])            # some repeated rows
  k <- kernel_rbf(0.8, 1)
  w <- seq(1, 2, length.out = 70)
  set.seed(10)
  r <- select_inducing(x, k, M = 25, method = "random", weights = w)
  expect_equal(nrow(r$Z), 25L)
  expect_equal(anyDuplicated(r$Z), 0L)
  expect_identical(r$Z, x[r$index, , drop = FALSE], ignore_attr = TRUE)
  expect_true(all(r$index >= 1 & r$index <= 70))
  set.seed(10)
  expect_identical(select_inducing(x, k, M = 25, method = "random", weights = w)$index, r$index)
  set.seed(11)
  km <- select_inducing(x, k, M = 12, method = "kmeans", weights = w)
  expect_equal(dim(km$Z), c(12L, 2L))
  expect_null(km$index)
  expect_equal(anyDuplicated(km$Z), 0L)
  # the trace of nested prefixes equals the dense formula
  for (sel in list(r, km)) {
    for (m in c(1, 5, sel$M)) {
      ref <- dense_residual(k, x, sel$Z[1:m, , drop = FALSE], full = FALSE)$d
      expect_equal(sel$trace[m], sum(w * ref), tolerance = 1e-9)
    }
    expect_equal(sel$trace0, sum(w * k$variance))
  }
  # k-means with M = number of distinct inputs returns them
  set.seed(1)
  all <- select_inducing(x, k, M = 60, method = "kmeans", trace = FALSE)
  expect_equal(nrow(unique(rbind(all$Z, d$x))), 60L)
  expect_null(all$trace)
  # greedy beats random on the trace it minimises
  set.seed(12)
  g <- select_inducing(x, k, M = 25, weights = w)
  expect_lt(g$trace[25], r$trace[25])
})

test_that("the trace along a given sequence skips inputs that add nothing", {
  d <- toy_data(30, 2)
  k <- kernel_matern32(0.8, 1)
  kc <- sparsevgp:::.ffi_kernel(k)
  Z <- rbind(d$x[1:3, ], d$x[2, ], c(0.3, -0.2))
  r <- .Call(sparsevgp:::ffi_sel_trace, kc, d$x, rep(1, 30), Z, 1e-10, TRUE)
  expect_equal(r$rank, 4L)
  expect_equal(r$trace[4], r$trace[3])
  ref <- dense_residual(k, d$x, Z[c(1:3, 5), ], full = FALSE)$d
  expect_equal(r$d, ref, tolerance = 1e-10)
  expect_equal(r$trace[5], sum(ref), tolerance = 1e-10)
  expect_equal(dim(r$factor), c(30L, 4L))
})

test_that("the weighted trace brackets the expected KL: t/2 <= E[KL] <= t (Passerello 2022, eq. 3.7)", {
  d <- toy_data(40, 1)
  lam <- seq(0.01, 0.2, length.out = 40)
  k <- kernel_rbf(0.5, 1)
  K <- naive_kernel(k, d$x, d$x)
  set.seed(13)
  s <- select_inducing(d$x, k, M = 8, weights = 1 / lam, factor = TRUE)
  for (m in c(3, 5, 8)) {
    Q <- tcrossprod(s$factor[, 1:m])
    t <- s$trace[m]
    S1 <- K + diag(lam)
    S2 <- Q + diag(lam)
    # E_y[log p(y) - L(y)] for y ~ N(0, K + Lambda): KL(N(0,S1) || N(0,S2)) + t/2
    kl <- 0.5 * (sum(diag(solve(S2, S1))) - 40 +
                   determinant(S2)$modulus - determinant(S1)$modulus)
    ekl <- as.numeric(kl) + t / 2
    expect_gte(ekl, t / 2)
    expect_lte(ekl, t)
    # kl_threshold(kl) with weights 1/lambda is kl itself
    expect_equal(kl_threshold(ekl), ekl)
  }
  expect_equal(kl_threshold(2, noise = 0.1), 0.2)
  expect_equal(kl_threshold(1e-3, noise = 0.5, N = 200), 0.1)
  expect_error(kl_threshold(-1), "'kl'")
  expect_error(kl_threshold(1, noise = 0), "'noise'")
})

test_that("sgpr() selects greedily, weighted by 1/lambda for known noise, and accepts every form of 'inducing'", {
  d <- toy_data(50, 2)
  k <- kernel_rbf(0.8, 1)
  set.seed(14)
  f <- sgpr(d$x, d$y, kernel = k, inducing = 9, noise = 0.1, optimize = FALSE)
  set.seed(14)
  expect_equal(f$params$Z, select_inducing(d$x, k, M = 9)$Z, ignore_attr = TRUE)
  lam <- exp(seq(-4, 0, length.out = 50))
  set.seed(15)
  f <- sgpr(d$x, d$y, kernel = k, inducing = 9, noise = lam, optimize = FALSE)
  set.seed(15)
  hw <- select_inducing(d$x, k, M = 9, weights = 1 / lam)
  expect_equal(f$params$Z, hw$Z, ignore_attr = TRUE)
  set.seed(15)
  expect_false(identical(select_inducing(d$x, k, M = 9)$index, hw$index))
  for (meth in c("kmeans", "random")) {
    set.seed(16)
    f <- sgpr(d$x[1:30, ], d$y[1:30], kernel = k, inducing = meth, noise = 0.1,
              optimize = FALSE)
    expect_equal(dim(f$params$Z), c(30L, 2L))
  }
  set.seed(16)
  f <- sgpr(d$x[1:30, ], d$y[1:30], kernel = k, inducing = "greedy", M = 30, noise = 0.1,
            optimize = FALSE)
  expect_equal(dim(f$params$Z), c(30L, 2L))
  sel <- select_inducing(d$x, k, M = 6)
  f <- sgpr(d$x, d$y, kernel = k, inducing = sel, noise = 0.1, optimize = FALSE)
  expect_equal(f$params$Z, sel$Z, ignore_attr = TRUE)
  expect_error(sgpr(d$x, d$y, inducing = "greedier"), "'inducing' must be")
  # the default is greedy with M chosen for an expected KL divergence below
  # 0.001 nats per observation (weights 1 / noise: the trace on the KL scale)
  set.seed(17)
  f <- sgpr(d$x, d$y, kernel = k, noise = 0.1, optimize = FALSE)
  set.seed(17)
  auto <- select_inducing(d$x, k, M = 50, threshold = 0.001 * 50, weights = rep(10, 50))
  expect_equal(f$params$Z, auto$Z, ignore_attr = TRUE)
  expect_lt(nrow(f$params$Z), 50L)
  expect_output(print(summary(f)), "expected KL divergence below 0.001")
})

test_that("reinit_inducing() alternates selection and fitting and keeps the best pass", {
  d <- toy_data(60, 1)
  set.seed(18)
  fit <- sgpr(d$x, d$y, inducing = 12, fixed = c("Z", "mean"), mean = 0.1)
  re <- reinit_inducing(fit, max_passes = 5)
  expect_equal(re$reinit$stop, "converged")
  h <- re$reinit$history
  expect_s3_class(h, "data.frame")
  expect_equal(names(h), c("pass", "M", "bound", "trace"))
  expect_equal(h$bound[1], fit$bound)
  expect_equal(as.numeric(logLik(re)), max(h$bound))
  expect_true(all(h$M == 12L))
  expect_equal(re$reinit$best_pass, h$pass[which.max(h$bound)])
  if (re$reinit$best_pass > 0) {
    expect_true(all(re$fixed[grepl("^Z\\[", names(re$fixed))]))
    expect_true(re$fixed[["mean"]])
    expect_equal(re$params$mean, 0.1)
    # the selection of the best pass is the greedy one for its kernel and weights
  }
  # the bound of the returned fit is its own (not stale)
  expect_equal(re$bound, bound_at(re), tolerance = 1e-10)
  expect_match(paste(capture.output(summary(re)), collapse = "\n"), "re-selected")
  # a threshold chooses M at every pass
  set.seed(19)
  re2 <- suppressWarnings(reinit_inducing(fit, threshold = kl_threshold(1), max_passes = 3))
  expect_true(all(re2$reinit$history$trace[-1] < 1))
  expect_true(nrow(re2$reinit$history) >= 2L)
  # a pass cap without convergence warns
  expect_warning(reinit_inducing(fit, max_passes = 1, conv_tol = 1e-12), "did not converge")
  # patience ends a wandering loop: stop once `patience` passes fail to beat the best
  set.seed(24)
  fit6 <- sgpr(d$x, d$y, inducing = 6, fixed = "Z")
  set.seed(24)
  rp <- reinit_inducing(fit6, patience = 1, max_passes = 20, conv_tol = 1e-12)
  hp <- rp$reinit$history
  expect_equal(rp$reinit$stop, "patience")
  last <- nrow(hp)
  expect_lte(hp$bound[last], max(hp$bound[-last]))
  expect_equal(as.numeric(logLik(rp)), max(hp$bound))
  expect_error(reinit_inducing(fit, patience = 0), "'patience'")
  # a failing refit ends the loop with the best fit so far
  bad <- fit
  class(bad) <- c("failing_refit", class(fit))
  registerS3method(".refit_inducing", "failing_refit",
                   function(fit, Z) stop("no Cholesky today"), envir = asNamespace("sparsevgp"))
  expect_warning(rb <- reinit_inducing(bad), "pass 1 failed \\(no Cholesky today\\)")
  expect_equal(rb$reinit$stop, "error")
  expect_equal(rb$bound, fit$bound)
  # the model's weights come from its .select_weights() method (as for a classifier)
  hook <- fit
  class(hook) <- c("hooked_weights", class(fit))
  registerS3method(".select_weights", "hooked_weights",
                   function(fit) seq(1, 3, length.out = nrow(fit$x)),
                   envir = asNamespace("sparsevgp"))
  set.seed(27)
  rh <- reinit_inducing(hook, max_passes = 1, conv_tol = 1e6)
  set.seed(27)
  sh <- select_inducing(fit$x, fitted_kernel(fit), M = 12,
                        weights = seq(1, 3, length.out = 60))
  expect_equal(rh$reinit$history$trace[2], sh$trace[12])
  expect_error(reinit_inducing(list()), "'fit' must be")
  expect_error(reinit_inducing(fit, max_passes = 0), "'max_passes'")
})

test_that("heteroscedastic reinit uses the fitted noise as weights", {
  set.seed(20)
  x <- sort(runif(80, -3, 3))
  y <- sin(2 * x) + rnorm(80, sd = ifelse(x > 0, 0.6, 0.05))
  fit <- sgpr(x, y, inducing = 8, noise = ~ I(x > 0), fixed = "Z")
  lam <- training_noise(fit)
  expect_gt(max(lam) / min(lam), 10)
  re <- suppressWarnings(reinit_inducing(fit, max_passes = 3))
  expect_gte(re$bound, fit$bound)
  # the weighted selection favours the low-noise half
  set.seed(21)
  s <- select_inducing(x, fitted_kernel(re), M = 8, weights = 1 / training_noise(re))
  expect_gt(sum(s$Z < 0), sum(s$Z > 0))
})

test_that("bad input gives clear errors", {
  d <- toy_data(20, 2)
  k <- kernel_rbf(1, 1)
  expect_error(select_inducing(rbind(d$x, NA), k), "'x' contains NA")
  expect_error(select_inducing(d$x, "rbf"), "'kernel' must be")
  expect_error(select_inducing(d$x, k, M = 21), "only N = 20")
  expect_error(select_inducing(d$x, k, M = 0), "'M' must be")
  expect_error(select_inducing(d$x, k, M = 2.5), "'M' must be")
  expect_error(select_inducing(d$x, k, weights = 1:3), "'weights' has length 3")
  expect_error(select_inducing(d$x, k, weights = c(-1, rep(1, 19))), "'weights' must be positive")
  expect_error(select_inducing(d$x, k, weights = c(NA, rep(1, 19))), "'weights' must be positive")
  expect_error(select_inducing(d$x, k, weights = letters[1:20]), "'weights' must be a numeric")
  expect_error(select_inducing(d$x, k, threshold = -1), "'threshold'")
  expect_error(select_inducing(d$x, k, method = "kmeans", threshold = 1), "only used by")
  expect_error(select_inducing(d$x, k, method = "bogus"), "'arg' should be one of")
  expect_error(select_inducing(d$x, k, toll = 1), "unknown options .* toll")
  expect_error(select_inducing(d$x, k, 5, "greedy", NULL, NULL, 1e-3), "must be named")
  expect_error(select_inducing(d$x, k, tol = 2), "'tol'")
  expect_error(select_inducing(d$x, k, method = "kmeans", nstart = 0), "'nstart'")
  expect_error(select_inducing(d$x, kernel_rbf(c(1, 2, 3), 1)), "3 lengthscales")
  x <- d$x[c(1:3, 1:3), ]
  expect_error(select_inducing(x, k, M = 4, method = "random"), "only 3 distinct")
  # k-means returns all distinct inputs (padding would repeat one; see the k-means test)
  expect_warning(km <- select_inducing(x, k, M = 4, method = "kmeans"), "only 3 distinct")
  expect_equal(km$M, 3L)
  expect_error(n_inducing(list(), 1), "'selection'")
  # the C entry points check what they receive
  kc <- sparsevgp:::.ffi_kernel(k)
  expect_error(.Call(sparsevgp:::ffi_sel_greedy, kc, d$x, rep(1, 20), 3, 0, 1:19, 1e-10, 32, FALSE),
               "'perm'")
  expect_error(.Call(sparsevgp:::ffi_sel_greedy, kc, d$x, rep(1, 20), 3, 0, rep(1L, 20), 1e-10, 32, FALSE),
               "permutation")
  expect_error(.Call(sparsevgp:::ffi_sel_greedy, kc, d$x, rep(1, 20), 30, 0, 1:20, 1e-10, 32, FALSE),
               "'M'")
  expect_error(.Call(sparsevgp:::ffi_sel_trace, kc, d$x, rep(1, 20), d$x[, 1, drop = FALSE], 0, FALSE),
               "'Z' must have 2 columns")
})

test_that("print and plot", {
  d <- toy_data(40, 1)
  set.seed(22)
  s <- select_inducing(d$x, kernel_rbf(0.5, 1), threshold = 1e-2)
  out <- capture.output(print(s))
  expect_match(out[1], "greedy conditional variance, M = [0-9]+ of N = 40")
  expect_true(any(grepl("below the threshold", out)))
  expect_lte(length(out), 12L)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  p <- plot(s)
  expect_equal(p$trace, c(s$trace0, s$trace))
  expect_equal(p$M, 0:s$M)
  km <- select_inducing(d$x, kernel_rbf(0.5, 1), M = 5, method = "kmeans", trace = FALSE)
  expect_error(plot(km), "no trace")
  expect_match(capture.output(print(km))[1], "k-means")
})

test_that("the greedy tie-break order can be given (perm) and reinit_inducing() reuses one", {
  x <- matrix(seq(0, 3, length.out = 30))
  k <- kernel_rbf(0.5, 1)
  p <- c(17L, setdiff(30:1, 17L))
  # all prior variances tie: the first pick is the first of perm
  for (seed in 1:3) {
    set.seed(seed)
    s <- select_inducing(x, k, M = 6, perm = p)
    expect_identical(s$index[1], 17L)
  }
  set.seed(1)
  a <- select_inducing(x, k, M = 6)
  set.seed(1)
  b <- select_inducing(x, k, M = 6, perm = sample.int(30))
  expect_identical(a$index, b$index)
  expect_error(select_inducing(x, k, M = 6, perm = 1:29), "'perm' must be a permutation of 1:30")
  expect_error(select_inducing(x, k, M = 6, perm = c(1:29, 29L)), "'perm'")
  expect_error(select_inducing(x, k, M = 6, method = "random", perm = 1:30), "unknown options")
  # reinit_inducing() passes a given order to every pass: with it, the
  # unweighted loop no longer depends on the random seed
  y <- sin(2 * x[, 1])
  fit <- sgpr(x, y, kernel = k, inducing = 5, fixed = "Z", noise = 0.1)
  run <- function(seed) {
    set.seed(seed)
    suppressWarnings(reinit_inducing(fit, weights = "none", max_passes = 3, perm = p))
  }
  r1 <- run(1)
  r2 <- run(2)
  expect_identical(r1$reinit$history, r2$reinit$history)
  expect_identical(r1$params, r2$params)
})

test_that("k-means pads with data points when clusters empty, as the code of Passerello (2022) does", {
  # Hartigan-Wong stops at an empty cluster: from these starting centres the
  # third cluster (at 1000) gets no point
  ux <- matrix(c(1:10, rep(0, 10)), 10)
  start <- matrix(c(1, 2, 1000, 0, 0, 0), 3)
  expect_error(stats::kmeans(ux, start), "empty cluster")
  opts <- list(iter.max = 50L, nstart = 1L)
  set.seed(1)
  Z <- sparsevgp:::.kmeans_centres(ux, start, opts)
  expect_equal(dim(Z), c(3L, 2L))
  expect_true(all(is.finite(Z)))
  expect_equal(anyDuplicated(Z), 0L)
  # Lloyd's two non-empty centres from that start, then one training input
  ll <- suppressWarnings(stats::kmeans(ux, start, algorithm = "Lloyd")$centers)
  expect_equal(unname(Z[1:2, ]), unname(ll[is.finite(ll[, 1]), ]))
  expect_true(any(apply(ux, 1, function(r) all(r == Z[3, ]))))
  # padding: non-finite and repeated centres are dropped, and the padded
  # inputs are distinct from each other and from the centres kept
  cen <- rbind(ux[2, ], c(NaN, NaN), ux[2, ], c(4.5, 0))
  for (seed in 1:20) {
    set.seed(seed)
    P <- sparsevgp:::.kmeans_pad(ux, cen, 6)
    expect_equal(nrow(P), 6L)
    expect_equal(anyDuplicated(P), 0L)
    expect_equal(unname(P[1:2, ]), unname(cen[c(1, 4), ]))
    expect_true(all(apply(P[3:6, ], 1, function(r) any(colSums(t(ux) == r) == 2))))
  }
  # nothing back at all: M distinct data points (a uniform subset)
  set.seed(2)
  P <- sparsevgp:::.kmeans_pad(ux, NULL, 4)
  expect_equal(nrow(unique(rbind(P, ux))), 10L)
  expect_equal(anyDuplicated(P), 0L)
  # the selection itself never errors and gives M distinct centres, also
  # when k-means is asked for nearly as many centres as distinct inputs
  x <- rbind(ux, ux + 0.001, c(1000, 0))
  for (seed in 1:10) {
    set.seed(seed)
    km <- select_inducing(x, kernel_rbf(1, 1), M = 20, method = "kmeans", trace = FALSE)
    expect_equal(km$M, 20L)
    expect_equal(anyDuplicated(km$Z), 0L)
    expect_true(all(is.finite(km$Z)))
  }
  # max_points below M: the subset still has more points than centres
  set.seed(3)
  km <- select_inducing(x, kernel_rbf(1, 1), M = 8, method = "kmeans", max_points = 5,
                        trace = FALSE)
  expect_equal(km$M, 8L)
})

# ---- a memory budget: greedy selection on a subsample ------------------------

# The bytes per row that greedy selection holds with the default block of
# 16, for D = 2 input columns: the factor (M columns), the block workspace
# (2 x 16 columns), the scaled and subsampled point (2 D) and its weight,
# order, residual and flags (4).
sel_bytes <- function(M, D = 2) 8 * (M + 32 + 2 * D + 4)

test_that("within the memory budget the selection is the one without a budget", {
  d <- toy_data(120, 2)
  w <- seq(0.5, 2, length.out = 120)
  k <- kernel_matern32(c(0.6, 0.9), 1.1)
  cases <- list(list(M = 12), list(M = 12, weights = w, factor = TRUE),
                list(M = 40, threshold = 0.5), list(M = 5, block = 1))
  for (a in cases) {
    block <- if (is.null(a$block)) 16 else a$block
    exact <- 120 * (8 * (a$M + 2 * block + 8) + 12)      # all rows just fit
    set.seed(7)
    ref <- do.call(select_inducing, c(list(d$x, k), a))
    for (mem in list(exact, "1GB")) {
      set.seed(7)
      got <- do.call(select_inducing, c(list(d$x, k, memory = mem), a))
      expect_identical(got, ref)
      expect_null(got$subsample)
    }
  }
  for (method in c("kmeans", "random")) {
    set.seed(8)
    ref <- select_inducing(d$x, k, M = 12, method = method)
    set.seed(8)
    expect_identical(select_inducing(d$x, k, M = 12, method = method,
                                     memory = 120 * (8 * 20 + 12)),
                     ref)
  }
  # a model within its budget selects as before
  set.seed(9)
  a <- sgpr(d$x, d$y, inducing = 12, optimize = FALSE)
  set.seed(9)
  b <- sgpr(d$x, d$y, inducing = 12, optimize = FALSE,
            control = list(memory = 120 * (sel_bytes(12) + 12)))
  expect_identical(b$params$Z, a$params$Z)
})

test_that("beyond the budget greedy selection is that of a subsample with the threshold scaled", {
  d <- toy_data(400, 2)
  N <- 400
  w <- seq(0.5, 3, length.out = N)
  k <- kernel_rbf(c(0.5, 0.8), 1.2)
  for (a in list(list(M = 10), list(M = 30, threshold = 60, weights = w))) {
    mem <- sel_bytes(a$M) * 333 + 12 * N + 7        # 333 rows fit, not 334
    perm <- sample.int(N)
    s <- do.call(select_inducing, c(list(d$x, k, memory = mem, perm = perm, factor = TRUE), a))
    n <- length(s$subsample)
    expect_equal(n, 333L)
    expect_lte(n * sel_bytes(a$M) + 12 * N, mem)
    expect_gt((n + 1) * sel_bytes(a$M) + 12 * N, mem)
    # the subsample is the first n rows of the tie-breaking order
    rows <- sort(perm[seq_len(n)])
    expect_identical(s$subsample, rows)
    # the greedy selection of those rows, with the threshold times n / N
    b <- a
    if (!is.null(b$weights)) b$weights <- w[rows]
    if (!is.null(b$threshold)) b$threshold <- a$threshold * n / N
    direct <- do.call(select_inducing, c(list(d$x[rows, ], k, perm = match(perm[seq_len(n)], rows),
                                              factor = TRUE), b))
    expect_identical(s$index, rows[direct$index])
    expect_identical(s$Z, d$x[s$index, , drop = FALSE], ignore_attr = TRUE)
    expect_identical(s$stop, direct$stop)
    expect_identical(s$residual, direct$residual)
    expect_identical(s$factor, direct$factor)
    expect_equal(s$trace, direct$trace * N / n, tolerance = 1e-15)
    expect_equal(s$threshold, a$threshold)
    # the traces against the dense formula over the subsample's rows
    ww <- if (is.null(a$weights)) rep(1, n) else w[rows]
    for (m in unique(c(1L, s$M))) {
      ref <- dense_residual(k, d$x[rows, ], s$Z[seq_len(m), , drop = FALSE], full = FALSE,
                            kern = kernel_matrix)
      expect_equal(s$trace[m], sum(ww * ref$d) * N / n, tolerance = 1e-10)
    }
    expect_equal(s$trace0, sum(ww * k$variance) * N / n, tolerance = 1e-14)
  }
  # the threshold case stopped on the scaled threshold
  expect_identical(s$stop, "threshold")
  expect_lt(s$trace[s$M], 60)
  expect_gte(s$trace[s$M - 1L], 60)
  # a threshold not reached: the warning states the caller's threshold
  # (with no M, the budget counts max_threshold_points columns)
  d2 <- toy_data(1500, 2)
  expect_warning(s2 <- select_inducing(d2$x, k, threshold = 1e-12, max_threshold_points = 129,
                                       memory = 1),
                 "above 'threshold' = 1e-12: stopped at max_threshold_points = 129")
  expect_length(s2$subsample, 1290L)
  # at least 10 M rows, whatever the budget
  s <- select_inducing(d$x, k, M = 10, memory = 1)
  expect_length(s$subsample, 100L)
  expect_true(all(s$index %in% s$subsample))
  expect_output(print(s), "random subsample of 100 rows")
  # k-means and random choose from all rows, their trace comes from the subsample
  for (method in c("kmeans", "random")) {
    s <- select_inducing(d$x, k, M = 10, method = method, memory = 8 * 18 * 150 + 12 * 400)
    expect_length(s$subsample, 150L)
    ref <- dense_residual(k, d$x[s$subsample, ], s$Z, full = FALSE, kern = kernel_matrix)
    expect_equal(s$trace[10], sum(ref$d) * N / 150, tolerance = 1e-10)
  }
})

test_that("models with a small memory budget select on a subsample and fit", {
  d <- toy_data(400, 2)
  mem <- sel_bytes(10) * 200 + 12 * 400
  set.seed(5)
  f <- sgpr(d$x, d$y, inducing = 10, optimize = FALSE, control = list(memory = mem))
  # the selection select_inducing() makes with the same budget and weights
  set.seed(5)
  s <- select_inducing(d$x, sparsevgp:::.kernel_at(f$kernel, f$params), M = 10,
                       weights = rep(1 / f$params$noise, 400), memory = mem)
  expect_length(s$subsample, 200L)
  expect_identical(unname(f$params$Z), unname(s$Z))
  fit <- sgpr(d$x, d$y, inducing = 10, control = list(memory = mem))
  expect_true(is.finite(fit$bound))
  expect_identical(fit$control$memory, mem)
  # (two passes may end before the loop converges: that warning is not the point here)
  expect_true(is.finite(logLik(suppressWarnings(reinit_inducing(fit, max_passes = 2L)))))
  cl <- toy_class(400, 2)
  p <- pgpr(cl$x, cl$y, inducing = 10, control = list(memory = mem, outer_max = 2))
  expect_true(is.finite(p$bound))
  expect_true(all(is.finite(p$params$Z)))
})

test_that("a bad memory budget is a clear error", {
  d <- toy_data(30, 1)
  for (bad in list(-1, 0, NA, Inf, c(1, 2), "lots", TRUE, list(1))) {
    expect_error(select_inducing(d$x, M = 3, memory = bad), "'memory' must be a positive number")
  }
  expect_error(sgpr(d$x, d$y, inducing = 3, control = list(memory = "lots")), "control\\$memory")
  expect_identical(select_inducing(d$x, kernel_rbf(0.5, 1), M = 3, memory = "2 KB")$M, 3L)
})
