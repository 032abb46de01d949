# simulate() (R/simulate.R): draws from the posterior predictive whose
# moments converge to those of predict(), within Monte Carlo error (seeded;
# tolerances of four standard errors), and the conventions of
# stats::simulate() for seeds.

# |sample mean - mu| and |sample variance - s2| within four standard
# errors of n draws (the sample variance of Gaussian draws has standard
# error s2 sqrt(2 / (n - 1)))
expect_moments <- function(draws, mu, s2, label) {
  n <- ncol(draws)
  m <- rowMeans(draws)
  v <- apply(draws, 1L, var)
  expect_true(all(abs(m - mu) <= 4 * sqrt(s2 / n)), label = paste(label, "mean"))
  expect_true(all(abs(v - s2) <= 4 * s2 * sqrt(2 / (n - 1))), label = paste(label, "variance"))
}

sim_fits <- function() {
  d <- toy_data(30, 1)
  Z <- d$x[c(3, 9, 14, 20, 27), , drop = FALSE]
  k <- kernel_rbf(0.7, 1.1)
  list(gpr = gpr(d$x, d$y, kernel = k, noise = 0.05, optimize = FALSE),
       sgpr = sgpr(d$x, d$y, kernel = k, inducing = Z, noise = ~ x1, optimize = FALSE),
       osgpr = osgpr(d$x, d$y, kernel = k, inducing = Z[1:3, , drop = FALSE],
                     orthogonal = Z[4:5, , drop = FALSE], noise = 0.05, optimize = FALSE),
       svgp = svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.05,
                   optimize = FALSE))
}

test_that("simulated latent values and observations have the predictive moments", {
  xs <- matrix(c(-1.5, 0, 0.4, 2.5))
  n <- 4000
  for (nm in names(fits <- sim_fits())) {
    f <- fits[[nm]]
    pf <- predict(f, xs, full_cov = TRUE)
    py <- predict(f, xs, type = "response")
    for (joint in c(TRUE, FALSE)) {
      lat <- as.matrix(simulate(f, nsim = n, seed = 11, newdata = xs, type = "latent",
                                joint = joint))
      expect_moments(lat, pf$mean, diag(pf$cov), paste(nm, "latent", joint))
      obs <- as.matrix(simulate(f, nsim = n, seed = 12, newdata = xs, joint = joint))
      expect_moments(obs, py$mean, py$var, paste(nm, "response", joint))
    }
    # joint draws carry the covariance between inputs (standard error of a
    # sample covariance: sqrt((s_ii s_jj + s_ij^2) / n))
    lat <- as.matrix(simulate(f, nsim = n, seed = 13, newdata = xs, type = "latent"))
    S <- pf$cov
    se <- sqrt((outer(diag(S), diag(S)) + S^2) / n)
    expect_true(all(abs(cov(t(lat)) - S) <= 4 * se), label = paste(nm, "covariance"))
    ind <- as.matrix(simulate(f, nsim = n, seed = 13, newdata = xs[2:3, , drop = FALSE],
                              type = "latent", joint = FALSE))
    expect_lt(abs(cor(ind[1, ], ind[2, ])), 4 / sqrt(n))
  }
})

test_that("simulated labels of a classifier have the predictive probabilities", {
  d <- toy_class(40, 1)
  y <- factor(ifelse(d$y == 1, "up", "down"), levels = c("down", "up"))
  Z <- d$x[c(3, 12, 25, 33), , drop = FALSE]
  xs <- matrix(c(-1, 0, 1.5))
  n <- 4000
  for (f in list(pgpr(d$x, y, kernel = kernel_rbf(0.8, 3), inducing = Z, optimize = FALSE),
                 svgp(d$x, y, kernel = kernel_rbf(0.8, 3), inducing = Z, likelihood = "probit",
                      optimize = FALSE))) {
    f$c <- rep(1, 40)
    f <- sparsevgp:::.finish(f)
    p <- predict(f, xs, type = "prob")
    s <- simulate(f, nsim = n, seed = 3, newdata = xs)
    expect_true(all(vapply(s, is.factor, TRUE)))
    expect_equal(levels(s[[1]]), c("down", "up"))
    share <- rowMeans(as.matrix(as.data.frame(lapply(s, function(col) col == "up"))))
    expect_true(all(abs(share - p) <= 4 * sqrt(p * (1 - p) / n)), label = class(f)[1L])
    lat <- predict(f, xs, type = "link")
    expect_moments(as.matrix(simulate(f, nsim = n, seed = 4, newdata = xs, type = "latent")),
                   lat$mean, lat$var, class(f)[1L])
  }
})

test_that("seeds work as in stats::simulate(), and rows follow na.action", {
  f <- sim_fits()$sgpr
  a <- simulate(f, nsim = 3, seed = 5)
  b <- simulate(f, nsim = 3, seed = 5)
  expect_identical(a, b)
  expect_named(a, c("sim_1", "sim_2", "sim_3"))
  expect_equal(nrow(a), 30L)
  expect_equal(attr(a, "seed")[1], 5)
  # the random number state is restored after a seeded call
  set.seed(9)
  u1 <- runif(1)
  set.seed(9)
  simulate(f, seed = 1)
  expect_identical(runif(1), u1)
  # without a seed: the state before the call is recorded
  set.seed(10)
  s1 <- simulate(f)
  expect_true(is.integer(attr(s1, "seed")))
  # na.exclude fits give NA rows where the data were dropped
  aq <- airquality[1:60, ]
  g <- gpr(Ozone ~ Temp, data = aq, na.action = na.exclude, optimize = FALSE)
  s <- simulate(g, nsim = 2, seed = 1)
  expect_equal(nrow(s), 60L)
  expect_identical(is.na(s$sim_1), is.na(aq$Ozone))
  # new data with missing inputs give NA rows
  s <- simulate(g, nsim = 2, seed = 1, newdata = data.frame(Temp = c(70, NA, 80)))
  expect_identical(is.na(s$sim_2), c(FALSE, TRUE, FALSE))
  expect_error(simulate(g, nsim = 0), "'nsim'")
  expect_error(simulate(g, typo = 1), "unknown argument 'typo'")
})
