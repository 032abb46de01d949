# SVGP: the whitened ELBO against dense formulas, the identity with SGPR at
# its optimal q(u) (seed001 target 5; anchors E1), gradients, methods.

# A random whitened q(v) = N(b, W W') for M inducing points.
random_q <- function(M, seed = 1) {
  set.seed(seed)
  W <- diag(exp(rnorm(M, sd = 0.3)), M)
  W[lower.tri(W)] <- rnorm(M * (M - 1) / 2, sd = 0.3)
  list(b = rnorm(M), W = W)
}

set_q <- function(fit, q) {
  fit$params$q_mu <- q$b
  fit$params$q_sqrt_diag <- diag(q$W)
  fit$params$q_sqrt_lower <- q$W[lower.tri(q$W)]
  sparsevgp:::.finish(fit)
}

# Marginals of q(f) at x for the whitened q, densely: u = L v.
dense_qf <- function(k, x, Z, q, mean = 0) {
  Kuu <- naive_kernel(k, Z, Z)
  Kuf <- naive_kernel(k, Z, x)
  L <- t(chol(Kuu))
  m <- drop(L %*% q$b)
  S <- L %*% q$W %*% t(q$W) %*% t(L)
  P <- solve(Kuu, Kuf)
  list(mu = mean + drop(crossprod(P, m)),
       s2 = k$variance - colSums(Kuf * P) + colSums(P * (S %*% P)),
       kl = 0.5 * (sum(diag(solve(Kuu, S))) + sum(m * solve(Kuu, m)) - nrow(Z) +
                     as.numeric(determinant(Kuu)$modulus - determinant(S)$modulus)))
}

test_that("the Gaussian ELBO and the KL equal the dense formulas", {
  d <- toy_data(30, 2)
  Z <- d$x[c(3, 9, 16, 24), ] + 0.01
  q <- random_q(4)
  for (k in all_kernels(2)[c("rbf", "matern52_ard", "matern12")]) {
    f <- set_q(svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.07,
                    mean = 0.2, optimize = FALSE, control = list(jitter = 0)), q)
    D <- dense_qf(k, d$x, Z, q, 0.2)
    ell <- sum(dnorm(d$y, D$mu, sqrt(0.07), log = TRUE) - D$s2 / (2 * 0.07))
    expect_equal(f$bound_terms[["kl"]], -D$kl, tolerance = 1e-10)
    expect_equal(f$bound, ell - D$kl, tolerance = 1e-10)
    p <- predict(f)
    expect_equal(unname(p$mean), D$mu, tolerance = 1e-10)
    expect_equal(unname(p$var), D$s2, tolerance = 1e-10)
    expect_equal(unname(predict(f, type = "response")$var), D$s2 + 0.07, tolerance = 1e-10)
    pf <- predict(f, d$x[1:5, ], full_cov = TRUE)
    expect_equal(unname(diag(pf$cov)), D$s2[1:5], tolerance = 1e-10)
  }
  # q = prior: KL = 0 and the predictive is the prior
  f0 <- svgp(d$x, d$y, kernel = kernel_rbf(0.7, 1.3), inducing = Z, likelihood = "gaussian",
             mean = 0, optimize = FALSE)
  expect_equal(f0$bound_terms[["kl"]], 0)
  expect_equal(unname(predict(f0)$mean), rep(0, 30))
  expect_equal(unname(predict(f0)$var), rep(1.3, 30), tolerance = 1e-6)
})

test_that("the Bernoulli expectations equal numerical integration", {
  d <- toy_data(20, 1)
  y01 <- as.integer(d$y > 0)
  Z <- matrix(c(-1.5, -0.3, 0.8, 1.7))
  q <- random_q(4, seed = 3)
  k <- kernel_matern32(0.7, 2)
  f <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, optimize = FALSE,
                  control = list(jitter = 0)), q)
  D <- dense_qf(k, d$x, Z, q)
  ypm <- 2 * y01 - 1
  ell <- sum(vapply(seq_along(ypm), function(n) {
    integrate(function(t) plogis(ypm[n] * t, log.p = TRUE) * dnorm(t, D$mu[n], sqrt(D$s2[n])),
              -Inf, Inf, rel.tol = 1e-12)$value
  }, 1))
  expect_equal(f$bound_terms[["ell"]], ell, tolerance = 1e-7)
  expect_equal(f$bound, ell - D$kl, tolerance = 1e-7)
  # Gauss-Hermite rule: exact for polynomials of degree 39
  gh <- sparsevgp:::.gauss_hermite(20L)
  expect_equal(sum(gh$w), sqrt(pi), tolerance = 1e-14)
  expect_equal(sum(gh$w * gh$x^2), sqrt(pi) / 2, tolerance = 1e-13)
  expect_equal(sum(gh$w * gh$x^10), sqrt(pi) * 945 / 32, tolerance = 1e-12)
})

test_that("SVGP with a Gaussian likelihood at SGPR's optimal q(u) equals SGPR", {
  d <- toy_data(40, 2)
  Z <- d$x[c(2, 8, 15, 23, 31, 38), ]
  for (k in all_kernels(2)[c("rbf", "matern32_ard")]) {
    for (jit in c(0, 1e-6)) {
      s <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, mean = 0.15,
                optimize = FALSE, control = list(jitter = jit))
      qu <- posterior_inducing(s)
      g <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.05,
                mean = 0.15, q_u = qu, optimize = FALSE, control = list(jitter = jit))
      expect_equal(g$bound, s$bound, tolerance = 1e-9)
      xs <- rbind(d$x[1:3, ], c(3, 3))
      expect_equal(predict(g, xs, full_cov = TRUE), predict(s, xs, full_cov = TRUE),
                   tolerance = 1e-8)
      # at SGPR's q(u) the ELBO is stationary in the variational parameters
      gr <- objective(g)$gr(objective(g)$par)
      expect_lt(max(abs(gr[grepl("^(q_mu|log_q_sqrt|q_sqrt)", names(gr))])), 1e-6)
      # any other q(u) is worse
      q2 <- qu
      q2$mean <- q2$mean + 0.05
      g2 <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.05,
                 mean = 0.15, q_u = q2, optimize = FALSE, control = list(jitter = jit))
      expect_lt(g2$bound, s$bound)
    }
  }
})

test_that("SVGP gradients match finite differences (every kernel, both likelihoods)", {
  d <- toy_data(25, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(1, 7, 13, 20), ] + 0.02
  q <- random_q(4, seed = 5)
  for (k in all_kernels(2)) {
    fb <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, mean = "constant", optimize = FALSE), q)
    expect_grad(fb)
    fg <- set_q(svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.1,
                     optimize = FALSE), q)
    expect_grad(fg)
  }
  o <- objective(fg)
  expect_true(all(c("log_variance", "log_lengthscale[1]", "log_noise", "mean", "Z[4,2]",
                    "q_mu[1]", "log_q_sqrt_diag[4]", "q_sqrt_lower[6]") %in% names(o$par)))
  # inducing inputs at training inputs: q(f) variances near zero
  fz <- set_q(svgp(d$x, y01, kernel = kernel_rbf(1, 1), inducing = d$x[1:4, ], optimize = FALSE),
              list(b = q$b, W = diag(1e-4, 4)))
  expect_grad(fz, tol = 1e-5)
  # q(f) variances below 1e-16 use the limit of the variance derivative
  ft <- set_q(svgp(d$x, y01, kernel = kernel_rbf(1, 1), inducing = d$x[1:4, ], optimize = FALSE,
                   control = list(jitter = 0)), list(b = q$b, W = diag(1e-9, 4)))
  expect_lt(max(predict(ft, d$x[1:4, ])$var), 1e-15)
  expect_grad(ft, tol = 1e-5)
})

test_that("svgp fits: Bernoulli on banana and Gaussian towards the SGPR optimum", {
  bd <- classification_data("banana")
  set.seed(1)
  fit <- svgp(y ~ x1 + x2, data = bd, inducing = 15, optimize_inducing = FALSE,
              control = list(maxit = 300))
  expect_gt(mean(predict(fit, bd, type = "class") == bd$y), 0.85)
  expect_output(print(fit), "Bernoulli")
  s <- summary(fit)
  expect_false(any(grepl("^q_", rownames(s$parameters))))
  expect_output(print(s), "ell")
  expect_named(coef(fit), c("variance", "lengthscale", "mean"))
  expect_equal(attr(logLik(fit), "df"), 2L)
  expect_equal(unname(fitted(fit)), unname(predict(fit, type = "prob")$mean))
  pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  expect_equal(nrow(plot(fit, n = 20)), 400L)
  # the PGPR bound at the same kernel and Z is lower than this optimum
  p <- pgpr(y ~ x1 + x2, data = bd, inducing = fit$params$Z,
            kernel = kernel_rbf(fit$params$lengthscale, fit$params$variance),
            fixed = c("variance", "lengthscale"), control = list(inner_max = 5))
  expect_lt(p$bound, fit$bound)
  # Gaussian: from SGPR's optimum the ELBO cannot exceed it and stays close
  sg <- sgpr(y ~ x, data = snelson, inducing = 8)
  g <- svgp(y ~ x, data = snelson, inducing = sg$params$Z, likelihood = "gaussian",
            kernel = kernel_rbf(sg$params$lengthscale, sg$params$variance),
            noise = sg$params$noise, mean = sg$params$mean, optimize_inducing = FALSE,
            control = list(maxit = 200))
  expect_lt(g$bound, sg$bound + 1e-4)
  expect_gt(g$bound, sg$bound - 0.5)
  expect_equal(nrow(plot(g, n = 30)), 30L)
  expect_length(residuals(g), 200L)
})

test_that("bad svgp arguments give clear errors", {
  d <- toy_data(20, 1)
  y01 <- as.integer(d$y > 0)
  expect_error(svgp(d$x, y01, likelihood = "poisson"), "should be one of")
  expect_error(svgp(d$x, y01, inducing = 3, noise = 0.1), "Gaussian likelihood only")
  expect_error(svgp(d$x, d$y, likelihood = "gaussian", inducing = 3, noise = -1), "'noise'")
  expect_error(svgp(d$x, d$y, inducing = 3), "'y' as a number must be coded 0/1")
  expect_error(svgp(d$x, y01, inducing = 3, q_u = list(mean = 1:2)), "'q_u' must be")
  expect_error(svgp(d$x, y01, inducing = 3, q_u = list(mean = rep(0, 3), cov = -diag(3))),
               "positive definite")
  expect_error(svgp(d$x, y01, inducing = 30), "only N = 20")
  expect_error(svgp(d$x, y01, inducing = 3, start = lm(d$y ~ d$x)), "'start'")
})
