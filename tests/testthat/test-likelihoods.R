# The likelihood layer (R/likelihoods.R): every family's expected
# log-likelihood and its derivatives against numerical integration, closed
# forms and finite differences; the whole objective of svgp (whitened and
# not) and odvgp for every likelihood with a kernel sum; Poisson against
# glm() and a known rate; Student-t against the Gaussian with outliers;
# predictive quantiles, draws, fitted values, residuals and plots; the label
# grammar shared by the classifiers.

lik_of <- function(family, ...) {
  if (family %in% c("robustmax", "softmax")) {
    l <- sparsevgp:::.new_lik(family, ...)
    l$latent <- 3L
    if (family == "softmax") l$mc <- list(draws = matrix(rnorm(60), 20, 3))
    return(l)
  }
  sparsevgp:::.new_lik(family, ...)
}

# E_N(f; mu, s)[log p(y | f)] by integrate() for one point.
ell_integrate <- function(logp, y, mu, s) {
  w <- 40 * sqrt(s)
  integrate(function(f) logp(y, f) * dnorm(f, mu, sqrt(s)), mu - w, mu + w, rel.tol = 1e-12,
            subdivisions = 500L)$value
}

# The derivatives of .lik_ell() in MU, S and the likelihood's own blocks
# against central differences of its value.
lik_fd_check <- function(lik, MU, S, y, params, scale = 1.7, tol = 1e-6) {
  e <- sparsevgp:::.lik_ell(lik, MU, S, y, params, scale)
  val <- function(M, V, p = params) sparsevgp:::.lik_ell(lik, M, V, y, p, scale)$ell
  h <- 1e-6
  close <- function(a, b, what) {
    expect_lte(abs(a - b), tol * max(1, abs(b)), label = sprintf("%s: %g vs %g", what, a, b))
  }
  for (i in seq_along(MU)) {
    d <- replace(MU * 0, i, h)
    close(e$g[i], (val(MU + d, S) - val(MU - d, S)) / (2 * h), "g")
    close(e$h[i], (val(MU, S + d) - val(MU, S - d)) / (2 * h), "h")
  }
  for (b in names(e$grad)) {
    # on the log scale
    p1 <- params
    p2 <- params
    p1[[b]] <- params[[b]] * exp(h)
    p2[[b]] <- params[[b]] * exp(-h)
    close(e$grad[[b]], (val(MU, S, p1) - val(MU, S, p2)) / (2 * h), b)
  }
  invisible(e)
}

test_that("each likelihood's expectation equals numerical integration and its closed form", {
  mu <- c(-1.3, 0.2, 0.9, 2.1)
  s <- c(0.4, 1.7, 0.05, 0.9)
  # Gaussian: log N(y; mu, sigma^2) - s / (2 sigma^2)
  y <- c(-0.5, 0.7, 1.4, 1.2)
  e <- sparsevgp:::.lik_ell(lik_of("gaussian"), cbind(mu), cbind(s), y, list(noise = 0.3), 1)
  expect_equal(e$ell, sum(dnorm(y, mu, sqrt(0.3), log = TRUE) - s / 0.6), tolerance = 1e-12)
  # Poisson: y mu - exp(mu + s/2) - log y!, exactly
  yc <- c(0, 2, 3, 11)
  e <- sparsevgp:::.lik_ell(lik_of("poisson"), cbind(mu), cbind(s), yc, list(), 1)
  expect_equal(e$ell, sum(yc * mu - exp(mu + s / 2) - lgamma(yc + 1)), tolerance = 1e-12)
  num <- sum(vapply(1:4, function(i) {
    ell_integrate(function(y, f) dpois(y, exp(f), log = TRUE), yc[i], mu[i], s[i])
  }, 1))
  expect_equal(e$ell, num, tolerance = 1e-9)
  # Student-t: 100-point Gauss-Hermite against integrate()
  for (nu in c(1.5, 4, 30)) {
    par <- list(scale = 0.6)
    e <- sparsevgp:::.lik_ell(lik_of("student_t", quadrature = 100L, df = nu), cbind(mu),
                              cbind(s), y, par, 1)
    num <- sum(vapply(1:4, function(i) {
      ell_integrate(function(y, f) dt((y - f) / 0.6, nu, log = TRUE) - log(0.6), y[i], mu[i],
                    s[i])
    }, 1))
    # (slower convergence for the heaviest tails: 2e-7 relative at nu = 1.5)
    expect_equal(e$ell, num, tolerance = 1e-6, label = sprintf("nu = %g", nu))
  }
  # Bernoulli, both links: 60-point quadrature against integrate()
  ypm <- c(-1, 1, 1, -1)
  for (fam in c("bernoulli", "probit")) {
    lp <- if (fam == "probit") function(y, f) pnorm(y * f, log.p = TRUE) else
      function(y, f) plogis(y * f, log.p = TRUE)
    e <- sparsevgp:::.lik_ell(lik_of(fam, quadrature = 60L), cbind(mu), cbind(s), ypm, list(), 1)
    num <- sum(vapply(1:4, function(i) ell_integrate(lp, ypm[i], mu[i], s[i]), 1))
    expect_equal(e$ell, num, tolerance = 1e-9, label = fam)
  }
})

test_that("each likelihood's derivatives in the marginals and its own parameters match finite differences", {
  mu <- c(-1.3, 0.2, 0.9, 2.1)
  s <- c(0.4, 1.7, 0.05, 0.9)
  y <- c(-0.5, 0.7, 1.4, 6)
  lik_fd_check(lik_of("gaussian"), cbind(mu), cbind(s), y, list(noise = 0.3))
  lik_fd_check(lik_of("poisson"), cbind(mu), cbind(s), c(0, 2, 3, 11), list())
  lik_fd_check(lik_of("student_t"), cbind(mu), cbind(s), y, list(scale = 0.6))
  lik_fd_check(lik_of("student_t", df = 3, learn_df = TRUE), cbind(mu), cbind(s), y,
               list(scale = 0.6, df = 3))
  for (fam in c("bernoulli", "probit")) {
    lik_fd_check(lik_of(fam), cbind(mu), cbind(s), c(-1, 1, 1, -1), list())
  }
  set.seed(1)
  MU <- matrix(rnorm(12), 4, 3)
  S <- matrix(exp(rnorm(12, sd = 0.4)), 4, 3)
  for (fam in c("robustmax", "softmax")) lik_fd_check(lik_of(fam), MU, S, c(1, 3, 2, 2), list())
  # a vanishing variance: h is half the expected second derivative
  e <- sparsevgp:::.lik_ell(lik_of("student_t"), cbind(0.3), cbind(0), 1.1, list(scale = 0.5), 1)
  r <- 0.8
  expect_equal(e$h[1], 0.5 * 5 * (r^2 - 4 * 0.25) / (4 * 0.25 + r^2)^2, tolerance = 1e-12)
})

# A small problem for every likelihood: data that it reads, and the blocks
# its objective has.
lik_data <- function(family, n = 24) {
  set.seed(11)
  x <- matrix(runif(2 * n, -2, 2), n, 2)
  f <- sin(1.5 * x[, 1]) + 0.4 * x[, 2]
  y <- switch(family,
    gaussian = f + rnorm(n, sd = 0.2),
    student_t = f + 0.2 * rt(n, 3),
    poisson = rpois(n, exp(f)),
    bernoulli = , probit = factor(f + rnorm(n, sd = 0.3) > 0),
    robustmax = , softmax = factor(c("a", "b", "c")[1 + (f > -0.3) + (f > 0.6)]))
  list(x = x, y = y)
}

# Variational parameters away from the prior, so that every term moves.
perturb_q <- function(fit) {
  set.seed(5)
  for (b in intersect(names(fit$params), c("q_mu", "a_gamma", "q_sqrt_lower"))) {
    fit$params[[b]][] <- rnorm(length(fit$params[[b]]), sd = 0.4)
  }
  fit$params$q_sqrt_diag[] <- fit$params$q_sqrt_diag * exp(rnorm(length(fit$params$q_sqrt_diag),
                                                                 sd = 0.2))
  sparsevgp:::.finish(fit)
}

test_that("the whole objective's gradient matches finite differences for every likelihood, svgp whitened and not and odvgp, with a kernel sum", {
  k <- kernel_matern52(0.9, 1.1) + kernel_rbf(c(1.5, 0.8), 0.7)
  liks <- list(gaussian = "gaussian", bernoulli = "bernoulli", probit = "probit",
               poisson = "poisson", student_t = "student_t",
               student_t_df = gp_likelihood("student_t", df = 3, learn_df = TRUE),
               robustmax = "robustmax", softmax = "softmax")
  for (nm in names(liks)) {
    fam <- if (is.character(liks[[nm]])) liks[[nm]] else "student_t"
    d <- lik_data(fam)
    multi <- fam %in% c("robustmax", "softmax")
    ctl <- c(list(jitter = 1e-8), if (fam == "softmax") list(mc_samples = 20))
    mean <- if (multi) 0 else "constant"
    fits <- list(
      odvgp = odvgp(d$x, d$y, kernel = k, inducing = d$x[1:4, ], orthogonal = d$x[5:7, ],
                    likelihood = liks[[nm]], mean = mean, control = ctl, optimize = FALSE),
      svgp_nw = svgp(d$x, d$y, kernel = k, inducing = d$x[1:4, ], likelihood = liks[[nm]],
                     whiten = FALSE, mean = mean, control = ctl, optimize = FALSE))
    if (!multi) {
      fits$svgp_w <- svgp(d$x, d$y, kernel = k, inducing = d$x[1:4, ], likelihood = liks[[nm]],
                          mean = mean, control = ctl, optimize = FALSE)
    }
    for (m in names(fits)) {
      err <- expect_grad(perturb_q(fits[[m]]), tol = 1e-6)
      expect_lt(err, 1e-6, label = paste(nm, m))
    }
  }
})

test_that("every likelihood: minibatch estimates are unbiased and natural-gradient steps raise the bound", {
  for (fam in c("poisson", "student_t", "gaussian", "bernoulli")) {
    d <- lik_data(fam, n = 30)
    f <- perturb_q(svgp(d$x, d$y, kernel = kernel_rbf(0.9, 1), inducing = d$x[1:5, ],
                        likelihood = fam, optimize = FALSE))
    parts <- split(seq_len(30), rep(1:5, 6))
    est <- vapply(parts, function(b) sparsevgp:::.evaluate(f, f$params, FALSE, batch = b)$value,
                  1)
    expect_equal(mean(est), f$bound, tolerance = 1e-10, label = fam)
    b0 <- f$bound
    for (i in 1:3) f <- natgrad_step(f, 0.3)
    expect_gt(f$bound, b0)
  }
  # fits: Adam on minibatches and natural gradients, odvgp and svgp
  d <- lik_data("poisson", n = 60)
  set.seed(1)
  a <- odvgp(d$x, d$y, likelihood = "poisson", inducing = 5, orthogonal = 8, batch_size = 20,
             control = list(maxit = 60, lr = 0.05))
  set.seed(1)
  n <- svgp(d$x, d$y, likelihood = "poisson", inducing = 5,
            control = list(optimizer = "natgrad", maxit = 60, natgrad_step = 0.1,
                           natgrad_warmup = 5))
  set.seed(1)
  a0 <- odvgp(d$x, d$y, likelihood = "poisson", inducing = 5, orthogonal = 8, optimize = FALSE)
  expect_gt(a$bound, a0$bound)
  expect_true(is.finite(n$bound))
})

test_that("Poisson: a constant rate gives glm()'s rate; a smooth rate is recovered", {
  set.seed(3)
  x <- seq(0, 10, length.out = 300)
  y <- rpois(300, 4)
  f <- svgp(x, y, likelihood = "poisson", inducing = 10)
  rate <- exp(unname(coef(glm(y ~ 1, family = poisson))))
  p <- predict(f, type = "response")$mean
  expect_lt(max(abs(p / rate - 1)), 0.03)
  # the expected count is E[exp(f)] = exp(mu + s/2)
  lat <- predict(f, data.frame(x = c(1, 7)))
  expect_equal(unname(predict(f, data.frame(x = c(1, 7)), type = "response")$mean),
               unname(exp(lat$mean + lat$var / 2)), tolerance = 1e-12)
  # a smooth rate
  truth <- exp(1 + sin(x))
  y2 <- rpois(300, truth)
  f2 <- svgp(x, y2, likelihood = "poisson", inducing = 15)
  p2 <- predict(f2, type = "response", interval = "prediction")
  # (mgcv::gam(y2 ~ s(x), family = poisson) is 0.48 from the truth here)
  expect_lt(sqrt(mean((p2[, "fit"] - truth)^2)), 0.6)
  expect_gt(cor(p2[, "fit"], truth), 0.97)
  cover <- mean(y2 >= p2[, "lwr"] & y2 <= p2[, "upr"])
  expect_gt(cover, 0.9)
  expect_true(all(p2[, "lwr"] == round(p2[, "lwr"])))
  # the rate is a hyperparameter-free model: variance, lengthscale and mean
  expect_equal(attr(logLik(f2), "df"), 3L)
  expect_named(coef(f2), c("variance", "lengthscale", "mean"))
  expect_output(print(f2), "Poisson \\(log link\\)")
})

test_that("Poisson predictive quantiles and moments agree with the predictive distribution", {
  lik <- lik_of("poisson")
  mu <- c(-0.5, 1, 2.3)
  s <- c(0.2, 0.8, 0.05)
  set.seed(4)
  for (i in 1:3) {
    yy <- rpois(2e5, exp(rnorm(2e5, mu[i], sqrt(s[i]))))
    m <- sparsevgp:::.lik_moments(lik, mu[i], s[i], list())
    expect_lt(abs(mean(yy) - m$mean), 4 * sd(yy) / sqrt(2e5))
    expect_equal(var(yy), m$var, tolerance = 0.03)
    for (p in c(0.025, 0.5, 0.975)) {
      q <- sparsevgp:::.lik_quantile(lik, mu[i], s[i], list(), p)
      # P(y <= q) >= p > P(y <= q - 1), by integrate()
      cdf <- function(k) integrate(function(f) ppois(k, exp(f)) * dnorm(f, mu[i], sqrt(s[i])),
                                   -Inf, Inf, rel.tol = 1e-10)$value
      expect_gte(cdf(q), p - 1e-6)
      expect_lt(cdf(q - 1), p)
    }
  }
})

test_that("Student-t: robust to gross outliers, the Gaussian fit for large degrees of freedom", {
  set.seed(2)
  x <- seq(0, 10, length.out = 250)
  y <- sin(x) + rnorm(250, sd = 0.1)
  out <- sample(250, 12)
  y[out] <- y[out] + sample(c(-1, 1), 12, TRUE) * runif(12, 3, 8)
  g <- svgp(x, y, likelihood = "gaussian", inducing = 15)
  t4 <- svgp(x, y, likelihood = "student_t", inducing = 15)
  xs <- matrix(seq(0, 10, length.out = 100))
  rmse <- function(fit) sqrt(mean((predict(fit, xs)$mean - sin(xs[, 1]))^2))
  expect_lt(rmse(t4), 0.05)
  expect_lt(rmse(t4), rmse(g) / 3)
  expect_equal(attr(logLik(t4), "df"), attr(logLik(g), "df"))
  expect_output(print(t4), "Student-t, scale")
  # large degrees of freedom: the Gaussian model (scale^2 is its noise variance)
  k <- kernel_rbf(0.8, 1)
  Z <- matrix(seq(0, 10, length.out = 12))
  y0 <- sin(x) + rnorm(250, sd = 0.2)
  ga <- svgp(x, y0, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.04, mean = 0,
             optimize = FALSE)
  tb <- svgp(x, y0, kernel = k, inducing = Z, likelihood = gp_likelihood("student_t", df = 1e6),
             noise = 0.04, mean = 0, optimize = FALSE)
  expect_equal(tb$bound, ga$bound, tolerance = 1e-4)
  gf <- svgp(x, y0, kernel = k, inducing = Z, likelihood = "gaussian", optimize_inducing = FALSE)
  tf <- svgp(x, y0, kernel = k, inducing = Z, optimize_inducing = FALSE,
             likelihood = gp_likelihood("student_t", df = 1e4))
  # (two optimisers' ends on a function of amplitude 1: 0.007 apart with R's
  # reference BLAS, 0.017 with OpenBLAS)
  expect_lt(max(abs(predict(tf, xs)$mean - predict(gf, xs)$mean)), 0.03)
  expect_equal(tf$params$scale^2, gf$params$noise, tolerance = 0.02)
  # learned degrees of freedom grow on Gaussian data
  tl <- svgp(x, y0, kernel = k, inducing = Z, optimize_inducing = FALSE,
             likelihood = gp_likelihood("student_t", df = 4, learn_df = TRUE))
  expect_gt(tl$params$df, 4)
  expect_equal(attr(logLik(tl), "df"), attr(logLik(tf), "df") + 1L)
})

test_that("Student-t predictive quantiles are those of f + sigma t", {
  lik <- lik_of("student_t", df = 3)
  par <- list(scale = 0.4)
  mu <- c(0.3, -1)
  s <- c(0.5, 0.01)
  for (i in 1:2) for (p in c(0.05, 0.5, 0.9)) {
    q <- sparsevgp:::.lik_quantile(lik, mu[i], s[i], par, p)
    cdf <- integrate(function(f) pt((q - f) / 0.4, 3) * dnorm(f, mu[i], sqrt(s[i])), -Inf, Inf,
                     rel.tol = 1e-10)$value
    expect_equal(cdf, p, tolerance = 1e-6)
  }
  m <- sparsevgp:::.lik_moments(lik, mu, s, par)
  expect_equal(m$var, s + 0.16 * 3)
  expect_equal(sparsevgp:::.lik_moments(lik_of("student_t", df = 2), mu, s, par)$var, c(Inf, Inf))
})

test_that("counts and heavy tails in predict(), simulate(), fitted(), residuals() and plot()", {
  for (fam in c("poisson", "student_t")) {
    d <- lik_data(fam, n = 60)
    df <- data.frame(x1 = d$x[, 1], x2 = d$x[, 2], y = d$y)
    # short fits: the maxit warning is not what these tests are about
    f <- suppressWarnings(svgp(y ~ x1 + x2, data = df, likelihood = fam, inducing = 8,
                               control = list(maxit = 100)))
    nd <- df[1:5, ]
    r <- predict(f, nd, type = "response")
    expect_named(r, c("mean", "var"))
    expect_true(all(r$var > 0))
    pi <- predict(f, nd, type = "response", interval = "prediction", level = 0.9)
    expect_equal(colnames(pi), c("fit", "lwr", "upr"))
    expect_true(all(pi[, "lwr"] <= pi[, "fit"] & pi[, "fit"] <= pi[, "upr"]))
    ci <- predict(f, nd, type = "response", interval = "confidence")
    expect_true(all(ci[, "upr"] - ci[, "lwr"] < pi[, "upr"] - pi[, "lwr"]))
    se <- predict(f, nd, type = "response", se.fit = TRUE)
    expect_equal(unname(se$se.fit), unname(sqrt(r$var)))
    expect_error(predict(f, nd, interval = "prediction"), "type = \"response\"")
    expect_error(predict(f, nd, method = "plugin"), "'method'")
    # draws: their mean and variance approach the predictive ones
    sims <- simulate(f, nsim = 4000, seed = 1, newdata = nd[1:2, ])
    expect_equal(dim(sims), c(2L, 4000L))
    ok <- is.finite(r$var[1:2])
    expect_lt(max(abs(rowMeans(sims) - r$mean[1:2]) / sqrt(r$var[1:2] / 4000)), 4)
    if (fam == "poisson") expect_true(all(unlist(sims) == round(unlist(sims))))
    # fitted values are the mean of y; residuals against them
    expect_equal(unname(fitted(f)), unname(predict(f, type = "response")$mean))
    expect_equal(unname(residuals(f)), unname(df$y - fitted(f)))
    pr <- residuals(f, type = "pearson")
    expect_equal(unname(pr), unname((df$y - fitted(f)) / sqrt(predict(f, type = "response")$var)))
    pdf(NULL)
    expect_equal(nrow(plot(f, n = 10)), 100L)
    expect_equal(nrow(plot(f, which = "residuals")), 60L)
    f1 <- suppressWarnings(svgp(d$x[, 1], d$y, likelihood = fam, inducing = 6,
                                control = list(maxit = 50)))
    p1 <- plot(f1, n = 30)
    expect_equal(nrow(p1), 30L)
    expect_true(all(is.finite(p1$sd_y)))
    f3 <- suppressWarnings(svgp(cbind(d$x, d$x[, 1]^2), d$y, likelihood = fam, inducing = 6,
                                control = list(maxit = 30)))
    expect_equal(nrow(plot(f3)), 60L)
    dev.off()
  }
})

test_that("several classes: simulate() draws classes, coded as the training labels", {
  d <- lik_data("robustmax", n = 40)
  set.seed(1)
  f <- suppressWarnings(svgp(d$x, d$y, inducing = 5, control = list(maxit = 30)))
  s <- simulate(f, nsim = 3, seed = 2)
  expect_equal(dim(s), c(40L, 3L))
  expect_true(all(vapply(s, is.factor, TRUE)))
  expect_equal(levels(s$sim_1), levels(d$y))
  # the draws' class frequencies follow the predicted probabilities
  p <- predict(f, d$x[1:2, ], type = "prob")
  many <- simulate(f, nsim = 3000, seed = 3, newdata = d$x[1:2, ])
  freq <- t(apply(many, 1, function(r) table(factor(r, levels = levels(d$y))) / 3000))
  expect_lt(max(abs(freq - p)), 0.04)
  lat <- simulate(f, nsim = 2, seed = 4, type = "latent")
  expect_equal(dim(lat), c(40L, 6L))
  expect_error(simulate(f, joint = TRUE), "multiclass")
})

test_that("the label grammar: 0/1 numbers are labels in svgp and odvgp; other numbers say which likelihood", {
  d <- toy_data(30, 1)
  y01 <- as.numeric(d$y > 0)
  expect_equal(odvgp(d$x, y01, inducing = 4, orthogonal = 0, optimize = FALSE)$likelihood,
               "bernoulli")
  expect_equal(svgp(d$x, y01, inducing = 4, optimize = FALSE)$likelihood, "bernoulli")
  expect_equal(odvgp(d$x, d$y, inducing = 4, orthogonal = 0, optimize = FALSE)$likelihood,
               "gaussian")
  # a regression response given to the classifier default names the likelihood
  mc <- data.frame(times = seq(2.4, 57.6, length.out = 40), accel = sin(1:40) * 50)
  expect_error(svgp(accel ~ times, data = mc), "likelihood = \"gaussian\"")
  expect_error(pgpr(accel ~ times, data = mc), "sgpr\\(\\)")
  # counts
  expect_error(svgp(d$x, d$y, likelihood = "poisson"), "counts")
  expect_error(svgp(d$x, c(-1, rep(1, 29)), likelihood = "poisson"), "counts")
  expect_error(svgp(d$x, rpois(30, 2), likelihood = "poisson", noise = 1),
               "Gaussian likelihood only")
  expect_error(svgp(d$x, d$y, likelihood = "bogus"), "should be one of")
  expect_error(gp_likelihood("student_t", df = -1), "'df'")
  expect_error(gp_likelihood("student_t", learn_df = NA), "'learn_df'")
  expect_s3_class(gp_likelihood("poisson"), "sparsevgp_likelihood")
})
