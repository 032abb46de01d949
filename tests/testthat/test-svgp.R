# SVGP (Hensman et al. 2013, 2015; Tiao 2020): the ELBO, whitened and not,
# against dense formulas and numerical integration, minibatches, natural
# gradients, quadrature and the methods. The identities with sgpr() and
# gpr() are in test-identities.R, the gradients in test-gradients.R.

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
    expect_equal(f$bound_terms[["neg_kl"]], -D$kl, tolerance = 1e-10)
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
  expect_equal(f0$bound_terms[["neg_kl"]], 0)
  expect_equal(unname(predict(f0)$mean), rep(0, 30))
  expect_equal(unname(predict(f0)$var), rep(1.3, 30), tolerance = 1e-6)
})

test_that("the Bernoulli expectations equal numerical integration", {
  d <- toy_data(20, 1)
  y01 <- as.integer(d$y > 0)
  Z <- matrix(c(-1.5, -0.3, 0.8, 1.7))
  q <- random_q(4, seed = 3)
  k <- kernel_matern32(0.7, 2)
  f <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, mean = 0, optimize = FALSE,
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

test_that("svgp fits: Bernoulli on banana and Gaussian towards the SGPR optimum", {
  bd <- classification_data("banana")
  set.seed(1)
  # one lengthscale for both inputs (ARD is the default for several inputs)
  fit <- svgp(y ~ x1 + x2, data = bd, inducing = 15, optimize_inducing = FALSE,
              kernel = kernel_rbf(ard = FALSE), control = list(maxit = 300))
  expect_gt(mean(predict(fit, bd, type = "class") == bd$y), 0.85)
  expect_output(print(fit), "Bernoulli")
  s <- summary(fit)
  expect_false(any(grepl("^q_", rownames(s$parameters))))
  expect_output(print(s), "ell")
  expect_named(coef(fit), c("variance", "lengthscale", "mean"))
  # kernel variance, lengthscale and the learned constant mean
  expect_equal(attr(logLik(fit), "df"), 3L)
  expect_equal(unname(fitted(fit)), unname(predict(fit, type = "prob")))
  pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  expect_equal(nrow(plot(fit, n = 20)), 400L)
  # the PGPR bound at the same kernel and Z is lower than this optimum
  p <- pgpr(y ~ x1 + x2, data = bd, inducing = fit$params$Z,
            kernel = kernel_rbf(fit$params$lengthscale, fit$params$variance),
            fixed = c("variance", "lengthscale"), control = list(inner_max = 5))
  expect_lt(p$bound, fit$bound)
  # Gaussian: from SGPR's optimum the ELBO cannot exceed it and stays close
  # (the collapsed bound: no neighbours)
  sg <- sgpr(y ~ x, data = snelson, inducing = 8, neighbours = 0)
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
  expect_error(svgp(d$x, y01, likelihood = "bogus"), "should be one of")
  expect_error(svgp(d$x, y01, inducing = 3, noise = 0.1), "Gaussian likelihood only")
  expect_error(svgp(d$x, d$y, likelihood = "gaussian", inducing = 3, noise = -1), "'noise'")
  expect_error(svgp(d$x, d$y, inducing = 3), "'y' as a number must be coded 0/1")
  expect_error(svgp(d$x, y01, inducing = 3, q_u = list(mean = 1:2)), "'q_u' must be")
  expect_error(svgp(d$x, y01, inducing = 3, q_u = list(mean = rep(0, 3), cov = -diag(3))),
               "positive definite")
  expect_error(svgp(d$x, y01, inducing = 30), "only N = 20")
  expect_error(svgp(d$x, y01, inducing = 3, start = lm(d$y ~ d$x)), "'start'")
})

# ---- non-whitened parameterisation (Tiao 2020) --------------------------------

test_that("the non-whitened KL and predictive variances equal the dense formulas; q = p gives KL = 0", {
  d <- toy_data(30, 2)
  Z <- d$x[c(3, 9, 16, 24), ] + 0.01
  q <- random_q(4, seed = 7)
  k <- kernel_matern52(0.8, 1.4)
  fn <- set_q_nw(svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.1,
                      mean = 0, optimize = FALSE, whiten = FALSE, control = list(jitter = 0)), q)
  D <- dense_qf(k, d$x, Z, q)
  expect_equal(fn$bound_terms[["neg_kl"]], -D$kl, tolerance = 1e-10)
  expect_equal(unname(predict(fn)$var), D$s2, tolerance = 1e-10)
  f0 <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", mean = 0,
             optimize = FALSE, whiten = FALSE)
  expect_equal(f0$bound_terms[["neg_kl"]], 0, tolerance = 1e-10)
  expect_equal(unname(predict(f0)$var), rep(1.4, 30), tolerance = 1e-6)
})

# ---- minibatches (Hensman et al. 2013) ----------------------------------------

test_that("the minibatch ELBO and its gradient are unbiased", {
  d <- toy_data(40, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(2, 11, 19, 33), ]
  q <- random_q(4, seed = 2)
  for (lik in c("bernoulli", "gaussian")) {
    yy <- if (lik == "gaussian") d$y else y01
    f <- set_q(svgp(d$x, yy, kernel = kernel_matern52(c(0.8, 1.2), 1.3), inducing = Z,
                    likelihood = lik, mean = "constant", optimize = FALSE), q)
    ev <- function(batch) {
      r <- sparsevgp:::.evaluate(f, f$params, grad = TRUE, batch = batch)
      c(value = r$value, unlist(lapply(r$grad, as.vector)))
    }
    full <- ev(NULL)
    expect_equal(full[["value"]], f$bound, tolerance = 1e-12)
    # exactly: the mean over the batches of a partition is the full-batch value
    part <- split(sample(40), rep(1:5, 8))
    expect_equal(Reduce(`+`, lapply(part, ev)) / 5, full, tolerance = 1e-10)
    # Monte Carlo: random batches of 8 without replacement
    set.seed(3)
    draws <- t(vapply(1:400, function(i) ev(sample.int(40, 8)), full))
    se <- apply(draws, 2, sd) / sqrt(nrow(draws))
    z <- (colMeans(draws) - full) / pmax(se, 1e-12)
    expect_lt(abs(z[["value"]]), 3)
    expect_lt(max(abs(z)), 4)   # worst of ~30 components
    # the estimates do vary (the scaling is not trivially exact)
    expect_gt(se[["value"]], 0.01)
  }
})

test_that("minibatch Adam reaches the L-BFGS-B optimum on a small Gaussian problem", {
  d <- snelson[seq(1, 200, by = 4), ]
  Z <- matrix(seq(0.5, 5.5, length.out = 5))
  full <- svgp(y ~ x, data = d, likelihood = "gaussian", inducing = Z, optimize_inducing = FALSE)
  set.seed(1)
  a <- svgp(y ~ x, data = d, likelihood = "gaussian", inducing = Z, optimize_inducing = FALSE,
            batch_size = 25, control = list(maxit = 1500, lr = 0.1))
  expect_lt(full$bound - a$bound, 1)
  expect_gt(full$bound - a$bound, -1e-3)
  # the reported bound is the full-batch ELBO; the trace holds minibatch estimates
  expect_equal(a$bound, bound_at(a))
  expect_equal(as.numeric(logLik(a)), a$bound)
  expect_equal(a$optim$value, a$bound)
  expect_length(a$optim$trace, 1500L)
  expect_equal(a$optim$method, "Adam")
  expect_gt(mean(tail(a$optim$trace, 100)), a$optim$trace[1] + 10)
  expect_output(print(summary(a)), "Adam")
  expect_output(print(summary(a)), "25 of 50 points")
  # reproducible under set.seed()
  set.seed(1)
  a2 <- svgp(y ~ x, data = d, likelihood = "gaussian", inducing = Z, optimize_inducing = FALSE,
             batch_size = 25, control = list(maxit = 50, lr = 0.1))
  set.seed(1)
  a3 <- update(a2, warm_start = FALSE)
  expect_identical(a2$params, a3$params)
  # batch_size >= N: full-batch Adam
  a4 <- svgp(y ~ x, data = d, likelihood = "gaussian", inducing = Z, optimize_inducing = FALSE,
             batch_size = 1000, control = list(maxit = 5))
  expect_equal(a4$batch_size, 50L)
  expect_error(svgp(y ~ x, data = d, likelihood = "gaussian", batch_size = 0), "'batch_size'")
  expect_error(svgp(y ~ x, data = d, likelihood = "gaussian", batch_size = 2.5), "'batch_size'")
  expect_error(svgp(y ~ x, data = d, likelihood = "gaussian", inducing = Z, batch_size = 5,
                    control = list(lr = -1)), "'control\\$lr'")
})

# ---- natural gradients ---------------------------------------------------------

test_that("one natural-gradient step of size 1 gives SGPR's q(u) (Gaussian)", {
  d <- toy_data(35, 2)
  Z <- d$x[c(4, 12, 20, 29), ]
  k <- kernel_matern32(c(0.9, 1.1), 1.2)
  s <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.08, mean = 0.1, optimize = FALSE)
  qs <- posterior_inducing(s)
  for (wh in c(TRUE, FALSE)) {
    g <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.08,
              mean = 0.1, optimize = FALSE, whiten = wh)
    g <- if (wh) set_q(g, random_q(4, 9)) else set_q_nw(g, random_q(4, 9))
    expect_lt(g$bound, s$bound - 1)
    g1 <- natgrad_step(g)
    expect_equal(g1$bound, s$bound, tolerance = 1e-9)
    xs <- rbind(Z, c(0, 3))
    expect_equal(predict(g1, xs, full_cov = TRUE), predict(s, xs, full_cov = TRUE),
                 tolerance = 1e-8)
    # a second step stays there; a half step is in between
    expect_equal(natgrad_step(g1)$bound, s$bound, tolerance = 1e-9)
    gh <- natgrad_step(g, 0.5)$bound
    expect_gt(gh, g$bound)
    expect_lt(gh, s$bound)
  }
  expect_error(natgrad_step(g, 0), "'step'")
  expect_error(natgrad_step(g, 1.5), "'step'")
  expect_error(natgrad_step(s), "svgp fit")
})

test_that("natural-gradient steps increase the Bernoulli ELBO", {
  d <- toy_data(30, 1)
  y01 <- as.integer(d$y > 0)
  Z <- matrix(c(-1.5, -0.5, 0.5, 1.5))
  for (wh in c(TRUE, FALSE)) {
    f <- svgp(d$x, y01, kernel = kernel_rbf(0.8, 2), inducing = Z, optimize = FALSE,
              whiten = wh)
    f <- if (wh) set_q(f, random_q(4, 4)) else set_q_nw(f, random_q(4, 4))
    b <- f$bound
    for (i in 1:5) {
      f <- natgrad_step(f, 0.3)
      expect_gt(f$bound, b)
      b <- f$bound
    }
    # converges to the optimum of q(u): the variational gradient vanishes
    for (i in 1:30) f <- natgrad_step(f, 0.8)
    gr <- objective(f)$gr(objective(f)$par)
    expect_lt(max(abs(gr[grepl("q_", names(gr))])), 1e-6)
  }
})

# ---- Gauss-Hermite order -------------------------------------------------------

test_that("the Bernoulli ELL converges to integrate() as the quadrature order grows", {
  d <- toy_data(6, 1)
  y01 <- c(0, 1, 1, 0, 1, 1)
  ypm <- 2 * y01 - 1
  Z <- matrix(c(-1, 1))
  exact <- function(s2, mu) {
    sum(vapply(ypm, function(y) {
      integrate(function(t) plogis(y * t, log.p = TRUE) * dnorm(t, mu, sqrt(s2)), -Inf, Inf,
                rel.tol = 1e-12)$value
    }, 1))
  }
  err <- function(s2, n) {
    # q = prior: q(f_n) = N(mean, variance), with the mean held at 0.5
    f <- svgp(d$x, y01, kernel = kernel_rbf(1, s2), inducing = Z, mean = 0.5, optimize = FALSE,
              quadrature = n)
    abs(f$bound_terms[["ell"]] - exact(s2, 0.5))
  }
  e100 <- vapply(c(5, 10, 20, 50, 100, 200), function(n) err(100, n), 1)
  # at s2 = 100, 20 points are biased by about 0.035 nats per point
  expect_gt(e100[3] / 6, 0.02)
  expect_lt(e100[3] / 6, 0.05)
  expect_true(all(diff(e100) < 0))
  expect_lt(e100[6], 1e-4)
  expect_lt(err(1, 20), 1e-9)
  f <- svgp(d$x, y01, inducing = Z, quadrature = 7, optimize = FALSE)
  expect_match(f$model, "7-point")
  expect_error(svgp(d$x, y01, inducing = Z, quadrature = 0), "'quadrature'")
  expect_error(svgp(d$x, y01, inducing = Z, quadrature = 2.5), "'quadrature'")
})

# ---- small fixes --------------------------------------------------------------

test_that("svgp edge cases: jitter checks, empty newdata, type, method, labels", {
  d <- toy_data(20, 1)
  y01 <- as.integer(d$y > 0)
  f <- svgp(d$x, y01, inducing = 3, optimize = FALSE)
  g <- svgp(d$x, d$y, likelihood = "gaussian", inducing = 3, optimize = FALSE)
  # the ELBO's factorisation of Kuu (its one C entry point since the ELBO
  # itself moved to R/uncollapsed.R) checks the jitter settings
  args <- function(jit, cap) {
    list(kernel_matrix(kernel_rbf(1, 1), f$params$Z), jit, cap)
  }
  ffi <- function(...) do.call(base::.Call, c(list(sparsevgp:::ffi_la_chol), args(...)))
  expect_error(ffi(-1e-8, 1e-2), "'jitter' must be non-negative")
  expect_error(ffi(1e-4, 1e-6), "'jitter_cap' must be at least 'jitter'")
  expect_true(all(is.finite(ffi(1e-8, 1e-2)$L)))
  expect_true(is.finite(f$bound))
  # zero rows of new data
  e <- predict(f, d$x[0, , drop = FALSE])
  expect_equal(lengths(e), c(mean = 0L, var = 0L))
  expect_length(predict(f, d$x[0, , drop = FALSE], type = "class"), 0L)
  expect_length(predict(f, d$x[0, , drop = FALSE], type = "prob"), 0L)
  expect_equal(dim(predict(g, d$x[0, , drop = FALSE], full_cov = TRUE)$cov), c(0L, 0L))
  expect_length(predict(g, d$x[0, , drop = FALSE], type = "response")$var, 0L)
  # type by match.arg (partial matching), method only for Bernoulli
  expect_equal(predict(f, type = "pr"), predict(f, type = "prob"))
  expect_error(predict(f, type = "bogus"), "should be one of")
  expect_error(predict(g, type = "prob"), "should be one of")
  expect_error(predict(g, method = "plugin"), "'method' applies to the Bernoulli")
  expect_error(predict(f, method = "bogus"), "should be one of")
  # summary: the KL enters with its sign, under the label neg_kl
  expect_equal(sum(g$bound_terms), g$bound)
  expect_output(print(summary(g)), "neg_kl")
  expect_error(svgp(d$x, y01, inducing = 3, whiten = NA), "'whiten'")
})

test_that("free inducing inputs are fitted in two stages, which avoids collapsed Z", {
  set.seed(1)
  x <- matrix(runif(2000, -3, 3))
  y <- factor(ifelse(sin(2 * x[, 1]) + rnorm(2000, sd = 0.3) > 0, "a", "b"))
  set.seed(2)
  f <- svgp(x, y, inducing = 15, control = list(min_gain = 0))
  # a classifier fitted from scratch: the kernel with Z held, then all
  # (R/uncollapsed_training.R)
  expect_named(f$optim$stages, c("inducing_held", "all"))
  expect_gte(f$optim$stages[["all"]], f$optim$stages[["inducing_held"]] - 1e-8)
  # q(u) is at its conditional optimum for the final parameters, within the
  # inner tolerance of 1e-5 nats per observation
  expect_equal(as.numeric(logLik(f)), f$optim$stages[["all"]], tolerance = 1e-5)
  expect_gte(as.numeric(logLik(f)), f$optim$stages[["all"]] - 1e-8)
  # from this start, joint optimisation alone stalled at -399.2 with four
  # inducing inputs merged at x = -1.49; the staged fit reaches the optimum
  # that every other start finds
  expect_gt(as.numeric(logLik(f)), -355.5)
  expect_gt(min(diff(sort(f$params$Z[, 1]))), 0.05)
  # fixed Z: one stage
  set.seed(2)
  g <- svgp(x, y, inducing = 15, optimize_inducing = FALSE)
  expect_named(g$optim$stages, "inducing_held")
})

test_that("Gaussian SVGP with Z = X optimised jointly reaches the exact GP's optimum (GPflow's equivalence test)", {
  set.seed(4)
  d <- list(x = matrix(seq(-2, 2, length.out = 20)))
  d$y <- sin(2 * d$x[, 1]) + rnorm(20, sd = 0.2)
  # optimised jointly (q(u), kernel, noise, mean) with Z = X held, SVGP reaches the
  # optimum of the exact log marginal likelihood. With the default jitter: at
  # jitter 0 the factorisation escalates its jitter as the lengthscale grows,
  # the objective jumps, and L-BFGS-B stops early (-6.2 against -3.67)
  go <- gpr(d$x, d$y)
  vo <- svgp(d$x, d$y, likelihood = "gaussian", inducing = d$x, optimize_inducing = FALSE,
             control = list(maxit = 5000, min_gain = 0))
  expect_equal(as.numeric(logLik(vo)), as.numeric(logLik(go)), tolerance = 1e-4)
  expect_equal(vo$params$noise, go$params$noise, tolerance = 1e-2)
})

test_that("the probit likelihood: expectations by integration, exact predictive probabilities, a fit on banana", {
  d <- toy_data(20, 1)
  y01 <- as.integer(d$y > 0)
  ypm <- 2 * y01 - 1
  Z <- matrix(c(-1.5, -0.3, 0.8, 1.7))
  q <- random_q(4, seed = 3)
  k <- kernel_matern32(0.7, 2)
  f <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, likelihood = "probit", mean = 0,
                  optimize = FALSE, quadrature = 60, control = list(jitter = 0)), q)
  D <- dense_qf(k, d$x, Z, q)
  ell <- sum(vapply(seq_along(ypm), function(n) {
    integrate(function(t) pnorm(ypm[n] * t, log.p = TRUE) * dnorm(t, D$mu[n], sqrt(D$s2[n])),
              -Inf, Inf, rel.tol = 1e-12)$value
  }, 1))
  expect_equal(f$bound_terms[["ell"]], ell, tolerance = 1e-7)
  expect_equal(f$bound, ell - D$kl, tolerance = 1e-7)
  # differs from the logit likelihood at the same q(u)
  fl <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, optimize = FALSE, quadrature = 60,
                   control = list(jitter = 0)), q)
  expect_gt(abs(fl$bound - f$bound), 0.1)
  # predictive probability: int Phi(f) N(f; mu, s2) df = Phi(mu / sqrt(1 + s2))
  xs <- matrix(c(-1.8, 0.1, 2.5))
  lat <- predict(f, xs, type = "link")
  num <- vapply(1:3, function(i) integrate(function(t) pnorm(t) * dnorm(t, lat$mean[i],
                                                                        sqrt(lat$var[i])),
                                           -Inf, Inf, rel.tol = 1e-12)$value, 1)
  for (m in c("quadrature", "probit")) {
    expect_equal(unname(predict(f, xs, type = "prob", method = m)), num, tolerance = 1e-9)
  }
  expect_equal(unname(predict(f, xs, type = "prob", method = "plugin")), pnorm(lat$mean))
  expect_output(print(f), "Bernoulli-probit")
  # a probit fit on banana classifies like the logit fit
  b <- classification_data("banana")[1:200, ]
  set.seed(1)
  fp <- svgp(y ~ x1 + x2, data = b, inducing = 15, likelihood = "probit",
             optimize_inducing = FALSE, control = list(maxit = 300))
  set.seed(1)
  fo <- svgp(y ~ x1 + x2, data = b, inducing = 15, optimize_inducing = FALSE,
             control = list(maxit = 300))
  acc <- function(fit) mean(predict(fit, b, type = "class") == b$y)
  expect_gt(acc(fp), 0.8)
  expect_lt(abs(acc(fp) - acc(fo)), 0.05)
  pdf(NULL)
  expect_silent(plot(fp))
  dev.off()
})

test_that("multiclass svgp is the coupled multiclass model: the softmax by default, robust-max on request", {
  set.seed(3)
  n <- 60
  x <- matrix(runif(2 * n, -2, 2), n, 2)
  y <- factor(c("a", "b", "c")[1 + (x[, 1] > 0) + (x[, 2] > 0.5)])
  df <- data.frame(x1 = x[, 1], x2 = x[, 2], y = y)
  k <- kernel_rbf(0.9, 1.5)
  # a factor of three classes selects the softmax
  expect_equal(svgp(y ~ x1 + x2, data = df, kernel = k, inducing = 6, optimize = FALSE)$likelihood,
               "softmax")
  expect_equal(odvgp(y ~ x1 + x2, data = df, kernel = k, inducing = 6,
                     optimize = FALSE)$likelihood, "softmax")
  # robust-max on request: the same model as the orthogonally decoupled
  # one without mean-only inputs, value and fit
  set.seed(1)
  a <- suppressWarnings(svgp(y ~ x1 + x2, data = df, kernel = k, inducing = 6,
                             likelihood = "robustmax", control = list(maxit = 60)))
  set.seed(1)
  b <- suppressWarnings(odvgp(y ~ x1 + x2, data = df, kernel = k, inducing = 6, orthogonal = 0,
                              likelihood = "robustmax", control = list(maxit = 60)))
  expect_equal(a$likelihood, "robustmax")
  expect_equal(logLik(a), logLik(b), tolerance = 1e-12, ignore_attr = TRUE)
  expect_equal(a$params$q_mu, b$params$q_mu, tolerance = 1e-12)
  expect_equal(dim(a$params$q_mu), c(6L, 3L))
  expect_output(print(a), "Uncollapsed non-whitened SVGP \\(M = 6\\), robust-max \\(3 classes")
  expect_identical(as.character(a$call[[1L]]), "svgp")
  pr <- predict(a, df[1:5, ], type = "prob")
  expect_equal(colnames(pr), c("a", "b", "c"))
  expect_equal(unname(rowSums(pr)), rep(1, 5), tolerance = 1e-12)
  expect_gt(mean(predict(a, type = "class") == y), 0.8)
  # update() refits through svgp() and keeps the class
  u <- suppressWarnings(update(a, control = list(maxit = 5)))
  # an svgp fit (issue 20: no longer an odvgp fit relabelled)
  expect_s3_class(a, "svgp")
  expect_false(inherits(a, "odvgp"))
  expect_s3_class(u, "svgp")
  expect_identical(as.character(u$call[[1L]]), "svgp")
  expect_gte(u$bound, a$bound - 1e-8)
  # softmax: the same Monte Carlo draws as odvgp under the same seed
  set.seed(2)
  s <- svgp(x, y, kernel = k, inducing = x[1:5, ], likelihood = "softmax",
            control = list(mc_samples = 30), optimize = FALSE)
  set.seed(2)
  s2 <- odvgp(x, y, kernel = k, inducing = x[1:5, ], orthogonal = 0, likelihood = "softmax",
              control = list(mc_samples = 30), optimize = FALSE)
  expect_equal(s$bound, s2$bound, tolerance = 1e-12)
  expect_identical(s$mc, s2$mc)
  # two classes keep the binary model; arguments that do not apply are refused
  expect_equal(svgp(x, droplevels(factor(ifelse(y == "a", "a", "b"))), inducing = 4,
                    optimize = FALSE)$likelihood, "bernoulli")
  expect_error(svgp(x, y, inducing = 4, whiten = TRUE, optimize = FALSE), "'whiten = TRUE'")
  expect_error(svgp(x, y, inducing = 4, threshold = 0.1, optimize = FALSE), "'threshold'")
  expect_error(svgp(x, y, inducing = 4, q_u = list(mean = 0, cov = diag(4)), optimize = FALSE),
               "'q_u'")
  expect_error(svgp(x, as.numeric(y), likelihood = "robustmax", optimize = FALSE), "'y'")
  expect_error(svgp(x, y, inducing = 4, cluster = list(), optimize = FALSE), "'cluster'")
})
