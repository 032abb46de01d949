# PGPR (Passerello 2022, ch. 4; equation numbers are the thesis's): the
# Polya-Gamma helpers, the bound against its dense forms, the c updates,
# labels, the double loop and the methods. The identities with sgpr() and
# svgp() are in test-identities.R, the gradients in test-gradients.R.

# The uncollapsed PG ELBO (Passerello 2022, eq. 2.23, after Wenzel et al. 2019; derived as
# E_q[y f / 2 - theta f^2 / 2] - N log 2 - KL_omega - KL[q(u) || p(u)]) for
# q(u - m0) = N(m, S) under the prior mean m0 (q(u) of the zero-mean part
# g = f - m0, so that KL[q || p] has no m0).
pg_uncollapsed <- function(D, y, m, S, c, m0 = 0) {
  P <- solve(D$Kuu, D$Kuf)
  mu <- m0 + drop(crossprod(P, m))
  s2 <- diag(D$Kff) - colSums(D$Kuf * P) + colSums(P * (S %*% P))
  M <- length(m)
  klu <- 0.5 * (sum(diag(solve(D$Kuu, S))) + sum(m * solve(D$Kuu, m)) - M +
                  determinant(D$Kuu)$modulus - determinant(S)$modulus)
  sum(y * mu / 2 - D$th * (mu^2 + s2) / 2) - length(y) * log(2) + D$pg - as.numeric(klu)
}

# elementwise relative accuracy (expect_equal's tolerance is relative to the mean)
expect_rel <- function(a, b, tol) {
  expect_lte(max(abs(a / b - 1)), tol)
}

test_that("theta, log cosh and the PG KL are accurate at the extremes", {
  cs <- c(0, 1e-12, 1e-6, 9.999e-5, 1.0001e-4, 1e-3, 0.1, 1, 10, 100, 1e4)
  th <- pg_theta(cs)
  expect_equal(th[1:3], rep(0.25, 3), tolerance = 1e-12)
  # direct formula where it is accurate (away from 0)
  direct <- tanh(cs / 2) / (2 * cs)
  expect_rel(th[-(1:2)], direct[-(1:2)], 1e-13)
  # series and direct branches agree across the switch at 1e-4
  expect_equal(pg_theta(1e-4 * (1 - 1e-9)), pg_theta(1e-4 * (1 + 1e-9)), tolerance = 1e-13)
  expect_true(all(diff(pg_theta(seq(0, 50, by = 0.01))) < 0))
  expect_equal(pg_theta(1e4), 1 / (2 * 1e4), tolerance = 1e-12)
  expect_equal(pg_theta(-2), pg_theta(2))
  # log cosh: no overflow, full relative accuracy near 0
  xs <- c(-1e5, -800, -1, -1e-3, 0, 1e-8, 1e-3, 0.5, 1, 20, 800, 1e5)
  lc <- pg_log_cosh(xs)
  expect_true(all(is.finite(lc)))
  mid <- abs(xs) >= 0.5 & abs(xs) <= 20
  expect_rel(lc[mid], log(cosh(xs[mid])), 1e-13)
  small <- abs(xs) == 1e-3          # log(cosh(x)) itself loses digits here: use the series
  expect_rel(lc[small], xs[small]^2 / 2 - xs[small]^4 / 12 + xs[small]^6 / 45, 1e-14)
  big <- abs(xs) >= 800
  expect_rel(lc[big], abs(xs[big]) - log(2), 1e-14)
  expect_equal(pg_log_cosh(1e-8), 5e-17, tolerance = 1e-12)
  expect_equal(pg_log_cosh(1 - 1e-12), pg_log_cosh(1 + 1e-12), tolerance = 1e-11)
  # KL[PG(1, c) || PG(1, 0)] >= 0, zero only at 0 (Passerello 2022, App. A)
  kc <- seq(0, 30, by = 0.005)
  kl <- pg_kl(kc)
  expect_equal(kl[1], 0)
  expect_true(all(kl[-1] > 0))
  ok <- kc > 0.5
  expect_rel(kl[ok], log(cosh(kc[ok] / 2)) - kc[ok] / 4 * tanh(kc[ok] / 2), 1e-11)
  expect_equal(pg_kl(0.1 * (1 - 1e-9)), pg_kl(0.1 * (1 + 1e-9)), tolerance = 1e-8)
  expect_equal(pg_kl(1e-3), (1e-3)^4 / 192, tolerance = 1e-6)   # leading term c^4 / 192
  # 50-digit values (mpmath) on both sides of the series/direct switch at c = 0.1
  ref <- c(5.2083326388889683776e-15, 3.2541235726143124044e-08, 5.1806361814002072712e-07,
           5.2222196824407670690e-07, 3.1497081969773029604e-04)
  expect_rel(pg_kl(c(0.001, 0.05, 0.0999, 0.1001, 0.5)), ref, 1e-10)
  expect_rel(pg_kl(c(5, 1e3)), pg_log_cosh(c(5, 1e3) / 2) - c(5, 1e3)^2 * pg_theta(c(5, 1e3)) / 2,
             1e-13)
  # names and dimensions are kept; non-numbers are refused
  expect_equal(names(pg_theta(c(a = 1, b = 2))), c("a", "b"))
  expect_error(pg_theta("1"), "'c' must be numeric")
})

test_that("the PG bound is the Jaakkola-Jordan bound on log sigmoid", {
  z <- seq(-12, 12, by = 0.25)
  for (c in c(0, 0.3, 1, 4, 11)) {
    b <- -log(2) + z / 2 - pg_theta(c) * z^2 / 2 - pg_kl(c)
    expect_true(all(plogis(z, log.p = TRUE) >= b - 1e-12))
    zc <- c(-c, c)
    expect_equal(-log(2) + zc / 2 - pg_theta(c) * zc^2 / 2 - pg_kl(c),
                 plogis(zc, log.p = TRUE), tolerance = 1e-9)
  }
})

test_that("the stable bound equals the dense eqs. 4.7, 4.14, C.3 and the Wenzel bound", {
  d <- toy_class(40, 2)
  set.seed(5)
  c <- runif(40, 0.05, 4)
  Z <- d$x[c(3, 8, 14, 22, 30, 35), ] + 0.01
  for (k in all_kernels(2)[c("rbf", "matern32_ard", "matern12")]) {
    f <- pgpr_at(d, k, Z, c)
    D <- pg_dense(k, d$x, Z, c)
    y <- d$ypm
    N <- 40
    Kt <- D$Kff - D$Q
    # eq. 4.7
    e47 <- -0.5 * as.numeric(determinant(solve(D$Kuu, D$Sig))$modulus) -
      0.5 * sum(D$th * diag(Kt)) +
      sum(y * (t(D$Kuf) %*% solve(D$Sig, D$Kuf %*% y))) / 8 - N * log(2) + D$pg
    expect_equal(f$bound, e47, tolerance = 1e-10)
    # eq. 4.14 (augmented form)
    Ti <- diag(1 / D$th)
    e414 <- dense_log_normal(y, 4 * diag(D$th) %*% (Ti + D$Q) %*% diag(D$th)) -
      0.5 * sum(D$th * diag(Kt)) + 0.5 * sum(log(D$th)) + sum(y^2 / D$th) / 8 +
      N / 2 * log(2 * pi) + D$pg
    expect_equal(f$bound, e414, tolerance = 1e-10)
    # App. C.3 first stage
    C <- Ti + D$Q
    e_c3 <- -0.5 * sum(log(D$th)) - 0.5 * as.numeric(determinant(C)$modulus) +
      sum(y^2 / D$th) / 8 - sum((y / D$th) * solve(C, y / D$th)) / 8 -
      0.5 * sum(D$th * diag(Kt)) - N * log(2) + D$pg
    expect_equal(f$bound, e_c3, tolerance = 1e-10)
    # the uncollapsed bound at the optimal q(u) of eq. 4.5
    m <- 0.5 * drop(D$Kuu %*% solve(D$Sig, D$Kuf %*% y))
    S <- D$Kuu %*% solve(D$Sig, D$Kuu)
    expect_equal(f$bound, pg_uncollapsed(D, y, m, S, c), tolerance = 1e-9)
    # ... and any other q(u) is worse
    expect_lt(pg_uncollapsed(D, y, m + 0.05, S, c), f$bound)
  }
})

test_that("a prior mean m != 0: dense eqs. 4.7, 4.14, C.3, Wenzel, c update and predictions", {
  # With f = m + g, g ~ GP(0, k), the PG likelihood term y f / 2 - theta f^2 / 2
  # is linear in g with coefficient b = y / 2 - theta m, so every zero-mean
  # formula holds with y / 2 replaced by b, plus sum(y m / 2 - theta m^2 / 2);
  # q*(u) is that of heteroscedastic SGPR on the pseudo-targets
  # y / (2 theta) - m = b / theta (Passerello 2022, sec. 4.2.2, App. C.3).
  d <- toy_class(40, 2)
  set.seed(15)
  c <- runif(40, 0.05, 4)
  Z <- d$x[c(3, 8, 14, 22, 30, 35), ] + 0.01
  y <- d$ypm
  N <- 40
  xs <- matrix(c(-1.2, 0.1, 1.7, 0.4, -0.6, 0.9, 1.3, -1.5), 4)
  for (m0 in c(0.3, -0.7)) for (k in all_kernels(2)[c("rbf", "matern32_ard")]) {
    f <- pgpr_at(d, k, Z, c, mean = m0)
    D <- pg_dense(k, d$x, Z, c)
    th <- D$th
    Kt <- D$Kff - D$Q
    b <- y / 2 - th * m0
    ytil <- y / (2 * th) - m0
    lin <- sum(y * m0 / 2 - th * m0^2 / 2)
    # eq. 4.7 with the linear coefficient b
    e47 <- -0.5 * as.numeric(determinant(solve(D$Kuu, D$Sig))$modulus) -
      0.5 * sum(th * diag(Kt)) + 0.5 * sum(b * (t(D$Kuf) %*% solve(D$Sig, D$Kuf %*% b))) +
      lin - N * log(2) + D$pg
    expect_equal(f$bound, e47, tolerance = 1e-10)
    # eq. 4.14 (augmented form): y becomes y - 2 theta m = 2 theta ytil
    e414 <- dense_log_normal(y - 2 * th * m0,
                             4 * diag(th) %*% (diag(1 / th) + D$Q) %*% diag(th)) -
      0.5 * sum(th * diag(Kt)) + 0.5 * sum(log(th)) + sum(y^2 / th) / 8 +
      N / 2 * log(2 * pi) + D$pg
    expect_equal(f$bound, e414, tolerance = 1e-10)
    # App. C.3 first stage, after completing the square in g
    C <- diag(1 / th) + D$Q
    e_c3 <- -0.5 * sum(log(th)) - 0.5 * as.numeric(determinant(C)$modulus) +
      sum(th * ytil^2) / 2 - 0.5 * sum(ytil * solve(C, ytil)) + lin -
      0.5 * sum(th * diag(Kt)) - N * log(2) + D$pg
    expect_equal(f$bound, e_c3, tolerance = 1e-10)
    # the Wenzel bound (eq. 2.23) at q*(u): mean m + Kuu Sig^-1 Kuf b
    mg <- drop(D$Kuu %*% solve(D$Sig, D$Kuf %*% b))
    S <- D$Kuu %*% solve(D$Sig, D$Kuu)
    expect_equal(f$bound, pg_uncollapsed(D, y, mg, S, c, m0), tolerance = 1e-10)
    expect_lt(pg_uncollapsed(D, y, mg + 0.05, S, c, m0), f$bound)
    # ... which is heteroscedastic SGPR's q*(u) on the pseudo-targets, as
    # posterior_inducing() reports it, and the latent predictive at Z
    qu <- posterior_inducing(f)
    expect_identical(qu$Z, f$params$Z)
    pz <- predict(f, Z, full_cov = TRUE)
    expect_equal(unname(pz$mean), qu$mean, tolerance = 1e-10)
    expect_equal(unname(pz$cov), qu$cov, tolerance = 1e-9)
    expect_equal(qu$mean, m0 + drop(D$Kuu %*% solve(D$Sig, D$Kuf %*% (th * ytil))),
                 tolerance = 1e-10)
    expect_equal(qu$mean, m0 + mg, tolerance = 1e-10)
    expect_equal(qu$cov, S, tolerance = 1e-10)
    # one c update (eq. 4.9-4.11): c = sqrt(mu^2 + s^2) under q*(f), mu with the mean
    mu <- m0 + drop(crossprod(D$Kuf, solve(D$Sig, D$Kuf %*% b)))
    s2 <- diag(Kt) + colSums(D$Kuf * solve(D$Sig, D$Kuf))
    g <- sparsevgp:::.pgpr_update_c(f, 1L)
    expect_equal(g$c, sqrt(mu^2 + s2), tolerance = 1e-10)
    expect_gte(g$bound, f$bound - 1e-10)
    # predictions (eq. C.2 with the mean): m + K*u Sig^-1 Kuf b,
    # K** - K*u Kuu^-1 Ku* + K*u Sig^-1 Ku*
    Ksu <- naive_kernel(k, xs, Z)
    p <- predict(f, xs, type = "link", full_cov = TRUE)
    expect_equal(unname(p$mean), m0 + drop(Ksu %*% solve(D$Sig, D$Kuf %*% b)),
                 tolerance = 1e-10)
    cov <- naive_kernel(k, xs, xs) - Ksu %*% solve(D$Kuu, t(Ksu)) +
      Ksu %*% solve(D$Sig, t(Ksu))
    expect_equal(unname(p$cov), cov, tolerance = 1e-10)
    expect_equal(unname(predict(f, xs)$var), diag(cov), tolerance = 1e-10)
  }
})

test_that("c updates are eq. 4.9 and never decrease the bound", {
  d <- toy_class(40, 2)
  Z <- d$x[c(1, 7, 13, 19, 25, 31, 37), ]
  k <- kernel_rbf(0.9, 2)
  f <- pgpr_at(d, k, Z, rep(0.1, 40))
  D <- pg_dense(k, d$x, Z, f$c)
  # eq. 4.9: q*(f) = N(1/2 Kfu Sig^-1 Kuf y, Kt + Kfu Sig^-1 Kuf)
  mu <- 0.5 * drop(crossprod(D$Kuf, solve(D$Sig, D$Kuf %*% d$ypm)))
  Sq <- D$Kff - D$Q + crossprod(D$Kuf, solve(D$Sig, D$Kuf))
  g <- sparsevgp:::.pgpr_update_c(f, 1L)
  expect_equal(g$c, sqrt(mu^2 + diag(Sq)), tolerance = 1e-9)
  # at c = sqrt(mu^2 + s^2) under q(u), the compact form
  m <- 0.5 * drop(D$Kuu %*% solve(D$Sig, D$Kuf %*% d$ypm))
  S <- D$Kuu %*% solve(D$Sig, D$Kuu)
  D2 <- pg_dense(k, d$x, Z, g$c)
  klu <- 0.5 * (sum(diag(solve(D$Kuu, S))) + sum(m * solve(D$Kuu, m)) - 7 +
                  determinant(D$Kuu)$modulus - determinant(S)$modulus)
  expect_equal(pg_uncollapsed(D2, d$ypm, m, S, g$c),
               sum(d$ypm * mu / 2 - log(2) - log(cosh(g$c / 2))) - as.numeric(klu),
               tolerance = 1e-10)
  # the bound climbs monotonically and settles
  b <- numeric(15)
  h <- f
  for (i in 1:15) {
    h <- sparsevgp:::.pgpr_update_c(h, 1L)
    b[i] <- h$bound
  }
  expect_true(all(diff(c(f$bound, b)) > -1e-10))
  expect_lt(abs(b[15] - b[14]), 1e-6)
  expect_gt(b[15], f$bound + 0.5)
})

test_that("the bound grows along nested inducing sets and Z = X gives the non-sparse PG bound", {
  d <- toy_class(30, 1)
  set.seed(8)
  c <- runif(30, 0.1, 3)
  k <- kernel_matern32(0.6, 1.2)
  Zall <- matrix(seq(-1.9, 1.9, length.out = 12))[sample(12), , drop = FALSE]
  b <- vapply(1:12, function(m) pgpr_at(d, k, Zall[1:m, , drop = FALSE], c)$bound, 1)
  expect_true(all(diff(b) > -1e-9))
  # M = N with Z = X: no trace term, the non-sparse PG bound (eq. 4.14 with Q = K)
  f <- pgpr_at(d, k, d$x, c)
  expect_equal(f$bound_terms[["trace"]], 0, tolerance = 1e-8)
  D <- pg_dense(k, d$x, d$x, c)
  full <- dense_log_normal(d$ypm, 4 * diag(D$th) %*% (diag(1 / D$th) + D$Kff) %*% diag(D$th)) +
    0.5 * sum(log(D$th)) + sum(1 / D$th) / 8 + 15 * log(2 * pi) + D$pg
  expect_equal(f$bound, full, tolerance = 1e-8)
  expect_gte(f$bound, max(b) - 1e-9)
})

test_that("labels: factors, logicals and 0/1 give the same fit; bad labels are refused", {
  d <- toy_class(30, 1)
  Z <- matrix(c(-1.5, 0, 1.5))
  k <- kernel_rbf(0.8, 1)
  f01 <- pgpr(d$x, d$y, kernel = k, inducing = Z, optimize = FALSE)
  fl <- pgpr(d$x, d$y == 1, kernel = k, inducing = Z, optimize = FALSE)
  ff <- pgpr(d$x, factor(c("no", "yes")[d$y + 1]), kernel = k, inducing = Z, optimize = FALSE)
  fpm <- pgpr(d$x, d$ypm, kernel = k, inducing = Z, optimize = FALSE)
  expect_equal(fl$bound, f01$bound)
  expect_equal(ff$bound, f01$bound)
  expect_equal(fpm$bound, f01$bound)
  expect_s3_class(predict(ff, type = "class"), "factor")
  expect_identical(levels(predict(ff, type = "class")), c("no", "yes"))
  expect_type(predict(fl, type = "class"), "logical")
  expect_true(all(predict(f01, type = "class") %in% c(0, 1)))
  expect_true(all(predict(fpm, type = "class") %in% c(-1, 1)))
  # unused factor levels are dropped; the positive class is the second used level
  f3 <- pgpr(d$x, factor(c("no", "yes")[d$y + 1], levels = c("maybe", "no", "yes")),
             kernel = k, inducing = Z, optimize = FALSE)
  expect_equal(f3$bound, f01$bound)
  x <- d$x
  expect_error(pgpr(x, rep(1, 30), inducing = Z), "'y' must have exactly two classes, but it has 1")
  expect_error(pgpr(x, factor(rep("a", 30)), inducing = Z), "'y' must have exactly two classes")
  expect_error(pgpr(x, rep(1:3, 10), inducing = Z), "'y' as a number must be coded 0/1")
  expect_error(pgpr(x, factor(rep(c("a", "b", "c"), 10)), inducing = Z),
               "'y' must have exactly two classes, but it has 3")
  expect_error(pgpr(x, c(NA, d$y[-1]), inducing = Z), "'y' contains NA")
  expect_error(pgpr(x, c("a", "b")[d$y + 1], inducing = Z), "'y' must be a two-level factor")
  expect_error(pgpr(x, d$y[-1], inducing = Z), "'y' has length 29")
  expect_error(svgp(x, rep(0, 30), inducing = Z), "'y' must have exactly two classes")
  expect_error(svgp(x, c(NA, d$y[-1]), inducing = Z), "'y' contains NA")
})

test_that("bad arguments give clear errors", {
  d <- toy_class(30, 2)
  expect_error(pgpr(d$x, d$y, inducing = "pca"), "'inducing' must be one of")
  expect_error(pgpr(d$x, d$y, inducing = "kmeans", M = 40), "only N = 30")
  expect_error(pgpr(d$x, d$y, inducing = "kmeans", M = 2.5), "whole number")
  expect_error(pgpr(d$x, d$y, inducing = 5, M = 5), "once")
  expect_error(pgpr(d$x, d$y, inducing = "kmeans", M = 5, threshold = 1e-3), "greedy")
  expect_error(pgpr(d$x, d$y, inducing = "hgv", M = 5, threshold = -1), "'threshold'")
  expect_error(pgpr(d$x, d$y, inducing = d$x[1:4, 1, drop = FALSE]), "2 columns")
  expect_error(pgpr(d$x, d$y, inducing = d$x[1:4, ], M = 4), "fix M")
  expect_error(pgpr(d$x, d$y, M = 5, control = list(inner_max = 0)), "inner_max")
  expect_error(pgpr(d$x, d$y, M = 5, control = list(tol = -1)), "tol")
  expect_error(pgpr(d$x, d$y, M = 5, control = list(foo = 1)), "unknown 'control'")
  expect_error(pgpr(d$x, d$y, M = 5, mean = "linear"), "'mean'")
  f <- pgpr(d$x, d$y, inducing = d$x[1:4, ], optimize = FALSE)
  expect_error(predict(f, d$x[, 1]), "2 columns")
  expect_error(predict(f, type = "prob", full_cov = TRUE), "full_cov")
  expect_error(predict(f, type = "odds"), "should be one of")
  expect_error(posterior_inducing(svgp(d$x, d$y, inducing = d$x[1:4, ], optimize = FALSE)),
               "'fit' must be an sgpr or pgpr fit")
})

test_that("PGPR fits banana: accuracy, the PG variance map and the methods", {
  bd <- classification_data("banana")
  set.seed(1)
  # one lengthscale for both inputs (ARD is the default for several inputs)
  fit <- pgpr(y ~ x1 + x2, data = bd, inducing = "kmeans", M = 20,
              kernel = kernel_rbf(ard = FALSE), control = list(inner_max = 4))
  acc <- mean(predict(fit, bd, type = "class") == bd$y)
  expect_gt(acc, 0.85)
  expect_equal(unname(fitted(fit)), unname(predict(fit, type = "prob")))
  expect_equal(nrow(fit$history), 1L)
  # the pass's bound, before the latent amplitude was chosen by the
  # Bernoulli bound (which moves the PG bound below it)
  expect_equal(fit$amplitude$pg_bound_before, fit$history$bound)
  expect_lte(fit$bound, fit$history$bound + 1e-8)
  expect_equal(fit$theta, pg_theta(fit$c))
  # the three probability rules share the decision boundary and order
  nd <- data.frame(x1 = seq(-3, 3, length.out = 25), x2 = seq(-2, 3, length.out = 25))
  pq <- predict(fit, nd, type = "prob")
  pp <- predict(fit, nd, type = "prob", method = "probit")
  pl <- predict(fit, nd, type = "prob", method = "plugin")
  expect_equal(pq > 0.5, pl > 0.5)
  expect_equal(pp, pq, tolerance = 0.02)
  lat <- predict(fit, nd)
  expect_equal(unname(pl), unname(plogis(lat$mean)), tolerance = 1e-14)
  # quadrature against numerical integration
  i <- 7
  ref <- integrate(function(f) plogis(f) * dnorm(f, lat$mean[i], sqrt(lat$var[i])), -Inf, Inf,
                   rel.tol = 1e-12)$value
  expect_equal(unname(pq[i]), ref, tolerance = 1e-9)
  # plug-in is more confident than the predictive probability
  expect_true(all(abs(pl - 0.5) >= abs(pq - 0.5) - 1e-12))
  # PG variance map: at least 4 (theta <= 1/4) and lowest at the boundary (Passerello 2022, Fig. 5.1)
  g <- as.data.frame(expand.grid(x1 = seq(-3, 3, length.out = 40), x2 = seq(-3, 3, length.out = 40)))
  v <- predict(fit, g, type = "pg_variance")
  p <- predict(fit, g, type = "prob")
  expect_true(all(v >= 4 - 1e-12))
  low <- v <= quantile(v, 0.05)
  expect_lt(mean(abs(p[low] - 0.5)), 0.15)
  expect_gt(mean(abs(p[!low] - 0.5)), mean(abs(p[low] - 0.5)) + 0.1)
  # methods
  expect_output(print(fit), "PGPR")
  expect_output(print(summary(fit)), "Local PG parameters")
  expect_s3_class(logLik(fit), "logLik")
  # variance, lengthscale and the learned constant mean (the default)
  expect_equal(attr(logLik(fit), "df"), 3L)
  expect_named(coef(fit), c("variance", "lengthscale", "mean"))
  pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  pd <- plot(fit, n = 30)
  expect_equal(nrow(pd), 900L)
  expect_true(all(c("prob", "mean", "sd") %in% names(pd)))
  pv <- plot(fit, what = "pg_variance", n = 20)
  expect_true("pg_variance" %in% names(pv))
})

test_that("the double loop re-selects, records its history and keeps the best pass", {
  d <- toy_class(60, 2)
  set.seed(2)
  fit <- pgpr(d$x, d$y, inducing = "hgv", M = 8, kernel = kernel_rbf(1, 1),
              control = list(outer_max = 3, inner_max = 2, maxit = 30))
  h <- fit$history
  expect_lte(nrow(h), 3L)
  expect_equal(fit$bound, max(h$bound), tolerance = 1e-8)
  expect_true(all(h$M == 8L))
  expect_equal(sum(h$evaluations), fit$optim$counts[[1L]])
  # the c of the fit are at (or near) their update's fixed point for its Z
  g <- sparsevgp:::.pgpr_update_c(fit, 1L)
  expect_gte(g$bound, fit$bound - 1e-9)
  # optimising the inducing inputs moves them and does not lower the bound
  go <- pgpr(d$x, d$y, inducing = fit$params$Z, kernel = kernel_rbf(1, 1),
             optimize_inducing = TRUE, control = list(inner_max = 3, maxit = 50))
  expect_false(isTRUE(all.equal(go$params$Z, fit$params$Z)))
  expect_output(print(go), "gradient optimisation")
  # 1-D plots and a formula with a factor response
  d1 <- toy_class(30, 1)
  df <- data.frame(u = d1$x[, 1], cls = factor(c("a", "b")[d1$y + 1]))
  f1 <- pgpr(cls ~ u, data = df, inducing = "random", M = 5, control = list(inner_max = 2))
  expect_s3_class(predict(f1, data.frame(u = c(-1, 1)), type = "class"), "factor")
  pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  expect_equal(nrow(plot(f1, n = 50)), 50L)
  expect_equal(nrow(plot(f1, what = "pg_variance", n = 40)), 40L)
  expect_equal(nrow(plot(f1, n = 20, inducing = FALSE)), 20L)
  expect_error(plot(f1, inducing = NA), "'inducing' must be TRUE or FALSE")
  # warm start from a previous fit keeps its c
  f2 <- update(f1, control = list(inner_max = 1))
  expect_s3_class(f2, "pgpr")
})

test_that("HGV weights the greedy selection by theta: boundary points", {
  bd <- classification_data("banana")
  x <- as.matrix(bd[c("x1", "x2")])
  k <- kernel_rbf(1, 1)
  # with all c equal (the start, c = 0.1) the weights are equal: HGV = GV
  set.seed(3)
  h1 <- pgpr(x, bd$y, kernel = k, inducing = "hgv", M = 12, optimize = FALSE)
  set.seed(3)
  g1 <- pgpr(x, bd$y, kernel = k, inducing = "gv", M = 12, optimize = FALSE)
  expect_equal(h1$params$Z, g1$params$Z)
  # the selection is select_inducing()'s, with weights theta
  set.seed(3)
  s <- select_inducing(x, k, M = 12, method = "greedy", weights = pg_theta(rep(0.1, 400)))
  expect_equal(unname(h1$params$Z), unname(s$Z))
  # at a fitted model HGV puts the inducing inputs nearer the boundary than GV
  set.seed(1)
  fit <- pgpr(x, bd$y, kernel = k, inducing = "hgv", M = 30,
              control = list(outer_max = 3, inner_max = 3))
  expect_lte(nrow(fit$history), 3L)
  kf <- kernel_rbf(fit$params$lengthscale, fit$params$variance)
  for (M in c(20L, 40L)) {
    set.seed(2)
    Zh <- select_inducing(x, kf, M = M, weights = fit$theta)$Z
    set.seed(2)
    Zg <- select_inducing(x, kf, M = M)$Z
    # mean |mu| at the inducing inputs: about 2/3 (M = 20) and 7/8 (M = 40) of GV's
    expect_lt(mean(abs(predict(fit, Zh)$mean)),
              if (M == 20L) 0.8 * mean(abs(predict(fit, Zg)$mean)) else
                0.95 * mean(abs(predict(fit, Zg)$mean)))
  }
  # a threshold on the weighted trace chooses M
  set.seed(4)
  ft <- pgpr(x, bd$y, kernel = kf, inducing = "hgv", threshold = 1, optimize = FALSE)
  set.seed(4)
  st <- select_inducing(x, kf, method = "greedy", weights = pg_theta(rep(0.1, 400)),
                        threshold = 1)
  expect_equal(nrow(ft$params$Z), st$M)
  expect_lt(st$M, 400L)
  expect_lt(st$trace[st$M], 1)
  expect_error(pgpr(x, bd$y, inducing = "hgv", threshold = 1, M = 500), "only N = 400")
  # reinit_inducing() works on a PGPR fit through its hooks and keeps the best bound
  set.seed(5)
  f0 <- pgpr(x, bd$y, kernel = k, inducing = "kmeans", M = 20, control = list(inner_max = 2))
  re <- suppressWarnings(reinit_inducing(f0, max_passes = 2))
  expect_s3_class(re, "pgpr")
  expect_gte(re$bound, f0$bound)
})

test_that("near-separable data: the kernel parameters stay below the bound and the fit succeeds", {
  # crabs, split 5 of inst/bench/reproduce_pgpr.R: unbounded, L-BFGS-B stepped to
  # log variance 51.7, log lengthscale 18.6, where I + A A' cannot be factorised
  d <- classification_data("crabs")
  x <- as.matrix(d[setdiff(names(d), "y")])
  set.seed(2005)
  tr <- sort(sample.int(200, 180))
  xtr <- scale(x[tr, ], colMeans(x[tr, ]), apply(x[tr, ], 2, sd))
  Z <- select_inducing(xtr, kernel_rbf(1, 1), M = 10, method = "kmeans")$Z
  # (prior mean 0, as in the thesis and the script)
  o <- objective(pgpr(xtr, d$y[tr], kernel = kernel_rbf(1, 1), inducing = Z, mean = 0,
                      optimize = FALSE))
  # there the bound either cannot be computed (I + A A' cannot be
  # factorised) or is hopelessly low (with K_uu factorised at the least
  # jitter that works, about -6e12)
  v <- tryCatch(o$fn(c(51.7, 18.557)), error = function(e) {
    expect_match(conditionMessage(e), "Cholesky")
    Inf
  })
  expect_gt(v, 1e10)
  fit <- pgpr(xtr, d$y[tr], kernel = kernel_rbf(1, 1), inducing = Z, mean = 0,
              control = list(inner_max = 3))
  expect_true(is.finite(fit$bound))
  expect_lte(log(fit$params$variance), 30)
  expect_gt(fit$params$variance, 1e3)     # the variance does grow: the classes separate
  # and an ordinary fit is not pushed to a bound (see .optim_upper.pgpr)
  h <- classification_data("heart")
  hx <- scale(as.matrix(h[setdiff(names(h), "y")]))
  fh <- pgpr(hx, h$y, kernel = kernel_rbf(1, 1), inducing = "kmeans", M = 20,
             control = list(inner_max = 2))
  expect_gt(fh$bound, -150)
  expect_gt(fh$params$variance, 1)
})

test_that("the double loop stops when the bound changes by less than tol; GV breaks ties the same way in every pass", {
  # converged: the last two passes differ by at most control$tol, and the
  # best pass is reported. GV on banana: the first GV pick is a tie among all
  # inputs (equal prior variances); with one tie-break order per fit the
  # selection moves only with the kernel and the loop settles (with a fresh
  # order per pass it ran to the cap on these subsets).
  bd <- classification_data("banana")
  x <- scale(as.matrix(bd[c("x1", "x2")]))
  for (seed in 1:2) {
    set.seed(seed)
    sub <- sample.int(400, 200)
    set.seed(seed)
    fit <- pgpr(x[sub, ], bd$y[sub], kernel = kernel_rbf(1, 1), inducing = "gv", M = 15)
    h <- fit$history
    expect_true(fit$converged)
    expect_lt(nrow(h), fit$control$outer_max)
    expect_gte(nrow(h), 2L)
    expect_lte(abs(diff(utils::tail(h$bound, 2L))), fit$control$tol)
    expect_equal(fit$bound, max(h$bound))
    # set.seed() reproduces the fit
    set.seed(seed)
    again <- pgpr(x[sub, ], bd$y[sub], kernel = kernel_rbf(1, 1), inducing = "gv", M = 15)
    expect_identical(again$params, fit$params)
    expect_identical(again$history, fit$history)
  }
  # with the kernel held fixed the GV selection depends on nothing that
  # changes, so pass 2 selects the same Z and the loop stops there (the bound
  # moves only by the further c updates)
  set.seed(3)
  fk <- pgpr(x[1:150, ], bd$y[1:150], kernel = kernel_rbf(0.7, 1.5), inducing = "gv", M = 10,
             fixed = c("variance", "lengthscale"), control = list(ci_iters = 3, inner_max = 3))
  expect_true(fk$converged)
  expect_equal(nrow(fk$history), 2L)
  expect_lt(abs(fk$history$bound[2] - fk$history$bound[1]), 1e-6)
  set.seed(3)
  s <- select_inducing(x[1:150, ], kernel_rbf(0.7, 1.5), M = 10)
  expect_equal(unname(fk$params$Z), unname(s$Z))
  # tol = 0: the loop runs all outer_max passes and does not report convergence
  d <- toy_class(60, 2)
  set.seed(2)
  f0 <- pgpr(d$x, d$y, inducing = "hgv", M = 8, kernel = kernel_rbf(1, 1),
             control = list(outer_max = 3, inner_max = 2, maxit = 20, tol = 0))
  expect_equal(nrow(f0$history), 3L)
  expect_false(f0$converged)
  expect_equal(f0$bound, max(f0$history$bound))
})

test_that("a numeric response or more than two classes name the models to use", {
  msg <- function(expr) tryCatch({
    expr
    ""
  }, error = conditionMessage)
  skip_if_not_installed("MASS")
  m <- msg(pgpr(accel ~ times, data = MASS::mcycle))
  expect_match(m, "pgpr() is a classifier", fixed = TRUE)
  expect_match(m, "sgpr()", fixed = TRUE)
  m <- msg(pgpr(Species ~ Sepal.Length, data = iris))
  expect_match(m, "it has 3 (setosa, versicolor, virginica)", fixed = TRUE)
  expect_match(m, "svgp() or odvgp()", fixed = TRUE)
})

test_that("HGV's passes are weighted by the theta of the model fitted at the GV selection, and differ from GV", {
  # one input, the classes change at x = 0.5: theta is largest near the
  # boundary and small far from it, so the weights differ
  set.seed(11)
  x <- matrix(sort(runif(150, -3, 3)))
  y <- as.integer(x[, 1] + rnorm(150, sd = 0.3) > 0.5)
  k <- kernel_rbf(0.8, 4)
  fx <- c("variance", "lengthscale")
  # HGV's first pass is GV's: from c = 0.1 every theta is equal, and
  # weights of an unfitted model favour points the kernel cannot yet explain
  set.seed(2)
  g <- pgpr(x, y, kernel = k, inducing = "gv", M = 6, fixed = fx,
            control = list(outer_max = 1, inner_max = 1, tol = 0))
  set.seed(2)
  h1 <- pgpr(x, y, kernel = k, inducing = "hgv", M = 6, fixed = fx,
             control = list(outer_max = 1, inner_max = 1, tol = 0))
  expect_equal(unname(h1$params$Z), unname(g$params$Z))
  expect_equal(h1$bound, g$bound, tolerance = 1e-12)
  # the second pass: greedy variance weighted by the theta of the c fitted
  # in the first, with the fit's tie-breaking order
  set.seed(2)
  h <- pgpr(x, y, kernel = k, inducing = "hgv", M = 6, fixed = fx,
            control = list(outer_max = 2, inner_max = 1, tol = 0))
  th <- pg_theta(g$c)
  expect_gt(max(th) / min(th), 2)
  ref <- select_inducing(x, k, M = 6, weights = th, perm = g$selection$perm)
  expect_false(isTRUE(all.equal(unname(ref$Z), unname(g$params$Z))))
  r <- sparsevgp:::.pgpr_reselect(h1, weighted = TRUE, auto = FALSE)
  expect_equal(unname(r$params$Z), unname(ref$Z))
  # with equal prior variances the first HGV pick is the most precise point,
  # next to the fitted boundary; GV's first pick is a tie broken at random
  expect_equal(ref$Z[1, 1], x[which.max(th), 1])
  expect_lt(abs(ref$Z[1, 1] - 0.5), 0.3)
  # the second pass is at that selection, and the pass with the higher
  # bound is kept (here GV's: points near the boundary leave the tails,
  # where the labels are certain but the latent function still varies,
  # less well represented)
  expect_equal(nrow(h$history), 2L)
  expect_equal(h$history$bound[1], g$bound, tolerance = 1e-12)
  # (the inner loop's further updates of c only raise it)
  expect_gte(h$history$bound[2], r$bound - 1e-8)
  expect_lt(h$history$bound[2] - r$bound, 0.05)
  expect_gt(abs(h$history$bound[2] - h$history$bound[1]), 0.1)
  expect_equal(h$bound, max(h$history$bound))
})

test_that("default starts: the grid refuses a flat start, one lengthscale comes first, M is chosen at the fitted kernel", {
  # three inputs that all matter, on different scales
  set.seed(4)
  n <- 300
  x <- cbind(a = rnorm(n), b = rnorm(n, sd = 100), c = runif(n, -1, 1))
  f <- sin(2 * x[, "a"]) + x[, "b"] / 80 - 1.5 * x[, "c"]
  y <- as.integer(f + rnorm(n, sd = 0.3) > 0)
  set.seed(1)
  fit <- pgpr(x, y)
  expect_gt(mean(predict(fit, type = "class") == y), 0.85)
  # the grid's start: a higher bound (c at their optimum) than the plain
  # start at variance 1 and the median distance, on the grid's subsample
  ypm <- 2 * y - 1
  k_grid <- sparsevgp:::.start_classifier(kernel_rbf(), x, ypm, M = 50)
  k_plain <- sparsevgp:::.kern_init(kernel_rbf(), x, NULL)
  score <- function(k) {
    Z <- select_inducing(x, k, M = 50, perm = seq_len(n))$Z
    sparsevgp:::.pg_optimal_c(sparsevgp:::.collapsed_matrices(k, Z, x), ypm, rep(0.1, n))$value
  }
  expect_gt(score(k_grid), score(k_plain) + 1)
  # the grid's lengthscales are one multiplier times the inputs' sd
  r <- k_grid$lengthscale / apply(x, 2, sd)
  expect_equal(max(r) / min(r), 1, tolerance = 1e-12)
  # one lengthscale (in units of sd) first, then one per input; no input
  # is switched off at the end
  h <- fit$history
  expect_true("one lengthscale" %in% h$stage)
  expect_equal(h$stage[1], "one lengthscale")
  expect_lt(max(fit$params$lengthscale / apply(x, 2, sd)) /
              min(fit$params$lengthscale / apply(x, 2, sd)), 30)
  # M chosen by the threshold at the fitted kernel: the selection there with
  # 1e-3 nats per observation gives the same M up to one re-selection
  sel <- select_inducing(x, sparsevgp:::.kernel_at(fit$kernel, fit$params),
                         weights = pg_theta(fit$c), threshold = 1e-3 * n,
                         M = fit$selection$M_max)
  expect_lte(abs(nrow(fit$params$Z) - sel$M), max(3, 0.3 * sel$M))
  expect_output(print(summary(fit)), "chosen at the fitted kernel")
  # a lengthscale given by the user: no grid for it and no first stage
  set.seed(1)
  g <- pgpr(x, y, kernel = kernel_rbf(lengthscale = c(1, 100, 1)), M = 20,
            control = list(outer_max = 2))
  expect_false("one lengthscale" %in% g$history$stage)
})

test_that("beyond control$subsample rows the schedule runs on a subsample, then c on all the data", {
  d <- toy_class(400, 2)
  set.seed(3)
  fit <- pgpr(d$x, d$y, M = 15, control = list(subsample = 150, outer_max = 2))
  expect_equal(fit$subsample$rows, 150L)
  expect_equal(nrow(fit$history), 1L)
  expect_match(fit$history$stage, "all data")
  expect_length(fit$c, 400L)
  # the c and the bound are those of all the data at the subsample's kernel and Z
  g <- sparsevgp:::.pgpr_update_c(fit, 1L)
  expect_gte(g$bound, fit$bound - 1e-8)
  expect_lt(g$bound - fit$bound, 400 * 1e-4 / 10)
  expect_equal(fit$bound, as.numeric(logLik(pgpr(d$x, d$y, kernel = fit$kernel, optimize = FALSE,
                                                 inducing = fit$params$Z, start = fit))),
               tolerance = 1e-10)
  expect_equal(fit$optim$counts[[1L]], sum(fit$subsample$history$evaluations))
  expect_output(print(summary(fit)), "subsample of 150 rows")
  expect_error(pgpr(d$x, d$y, M = 5, control = list(subsample = 10)), "control\\$subsample")
})

test_that("the latent amplitude is chosen by the Bernoulli bound, computed as a dense reference does", {
  d <- toy_class(120, 2, seed = 5)
  set.seed(1)
  fit <- pgpr(d$x, d$y, M = 15, control = list(outer_max = 2))
  a <- fit$amplitude
  expect_true(is.list(a))
  # the Bernoulli bound of the chosen factor is the highest of those tried
  # and at least that of the double loop's end; the PG bound is below it
  expect_gte(a$bernoulli_bound, a$bernoulli_bound_before)
  expect_gt(a$bernoulli_bound, fit$bound)
  expect_gte(a$pg_bound_before, fit$bound - 1e-8)
  b <- sparsevgp:::.pgpr_bernoulli_bound(fit)
  expect_equal(b, a$bernoulli_bound, tolerance = 1e-10)
  # each factor tried reuses the last evaluation of its updates of c, which
  # is the evaluation at its parameters and c
  f <- sparsevgp:::.pgpr_scaled(fit, 1.25, sparsevgp:::.pgpr_free(fit, "mean"), 1e-4)
  expect_equal(f$last_evaluation$value,
               sparsevgp:::.evaluate(f, f$params, grad = FALSE)$value, tolerance = 1e-12)
  expect_equal(sparsevgp:::.pgpr_bernoulli_bound(f, f$last_evaluation),
               sparsevgp:::.pgpr_bernoulli_bound(f), tolerance = 1e-12)
  # the dense reference: q(u) = N(m, S) from the predictive at Z, p(u) =
  # N(mean, Kzz); E[log sigma(y f)] by integrate() under each q(f_n)
  Z <- fit$params$Z
  k <- sparsevgp:::.kernel_at(fit$kernel, fit$params)
  Kzz <- kernel_matrix(k, Z)
  pu <- predict(fit, Z, type = "link", full_cov = TRUE)
  m <- pu$mean - fit$params$mean
  S <- pu$cov
  M <- nrow(Z)
  kl <- 0.5 * (sum(diag(solve(Kzz, S))) + sum(m * solve(Kzz, m)) - M +
                 as.numeric(determinant(Kzz)$modulus) - as.numeric(determinant(S)$modulus))
  qf <- predict(fit, d$x, type = "link", se.fit = TRUE)
  ell <- sum(vapply(seq_along(d$y), function(n) {
    mu <- d$ypm[n] * qf$fit[n]
    s <- qf$se.fit[n]
    stats::integrate(function(z) stats::plogis(z, log.p = TRUE) * stats::dnorm(z, mu, s),
                     mu - 12 * s, mu + 12 * s, rel.tol = 1e-10)$value
  }, 0))
  expect_equal(b, ell - kl, tolerance = 1e-6)
  # a kernel variance given by the user is kept
  set.seed(1)
  g <- pgpr(d$x, d$y, M = 15, kernel = kernel_rbf(variance = 2),
            control = list(outer_max = 2))
  expect_null(g$amplitude)
})

test_that("the ridge step scales the variance, a free mean and c together and only raises the bound", {
  d <- toy_class(150, 2, seed = 8)
  set.seed(1)
  # a kernel variance far too small for the labels: the bound rises along
  # the amplitude
  fit <- pgpr(d$x, d$y, M = 12, kernel = kernel_rbf(1, 0.02), optimize = FALSE)
  fit <- sparsevgp:::.pgpr_update_c(fit, 50L, 0)
  tol <- 1e-3
  r <- sparsevgp:::.pgpr_ridge(fit, fit$params$variance / 4, tol)
  k <- log(r$params$variance / fit$params$variance, 4)
  expect_gte(k, 1 - 1e-12)
  expect_equal(k, round(k), tolerance = 1e-12)
  expect_equal(r$params$mean / fit$params$mean, 2^k, tolerance = 1e-12)
  expect_gt(r$bound, fit$bound + tol)
  expect_equal(sparsevgp:::.evaluate(r, r$params, grad = FALSE)$value, r$bound,
               tolerance = 1e-10)
  # a round that did not raise the variance, or a variance held: no step
  expect_identical(sparsevgp:::.pgpr_ridge(fit, fit$params$variance, tol), fit)
  h <- pgpr(d$x, d$y, M = 12, kernel = kernel_rbf(1, 0.02), optimize = FALSE,
            fixed = "variance")
  expect_identical(sparsevgp:::.pgpr_ridge(h, h$params$variance / 4, tol), h)
})
