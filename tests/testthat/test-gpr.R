test_that("gpr's log marginal likelihood equals the dense formula", {
  d <- toy_data(25, 2)
  for (k in all_kernels(2)) {
    fit <- gpr(d$x, d$y, kernel = k, noise = 0.07, mean = 0.3, optimize = FALSE)
    expect_equal(as.numeric(logLik(fit)), dense_gpr_lml(k, d$x, d$y, 0.07, 0.3),
                 tolerance = 1e-10)
  }
})

test_that("gpr's predictions equal the textbook formulas", {
  d <- toy_data(20, 1)
  k <- kernel_matern52(0.7, 1.5)
  fit <- gpr(d$x, d$y, kernel = k, noise = 0.05, mean = 0.2, optimize = FALSE)
  xs <- matrix(c(-2.5, -0.3, 0.1, 1.7), ncol = 1)
  Ky <- naive_kernel(k, d$x, d$x) + diag(0.05, 20)
  Ksf <- naive_kernel(k, xs, d$x)
  mu <- 0.2 + drop(Ksf %*% solve(Ky, d$y - 0.2))
  S <- naive_kernel(k, xs, xs) - Ksf %*% solve(Ky, t(Ksf))
  p <- predict(fit, xs)
  expect_equal(unname(p$mean), mu, tolerance = 1e-10)
  expect_equal(unname(p$var), diag(S), tolerance = 1e-10)
  pc <- predict(fit, xs, full_cov = TRUE)
  expect_equal(unname(pc$cov), S, tolerance = 1e-10)
  pr <- predict(fit, xs, type = "response")
  expect_equal(unname(pr$var), diag(S) + 0.05, tolerance = 1e-10)
  pcr <- predict(fit, xs, type = "response", full_cov = TRUE)
  expect_equal(unname(pcr$cov), S + diag(0.05, 4), tolerance = 1e-10)
})

test_that("fitting increases the log marginal likelihood to a stationary point", {
  fit0 <- gpr(y ~ x, data = snelson, optimize = FALSE)
  fit <- gpr(y ~ x, data = snelson)
  expect_gt(as.numeric(logLik(fit)), as.numeric(logLik(fit0)))
  expect_equal(fit$optim$convergence, 0L)
  o <- objective(fit)
  expect_lt(max(abs(o$gr(o$par))), 1e-2)
  # regression value: the optimum of the RBF log marginal likelihood on Snelson
  expect_equal(as.numeric(logLik(fit)), -55.56, tolerance = 1e-3)
})

test_that("formula and matrix interfaces agree", {
  f1 <- gpr(y ~ x, data = snelson[1:40, ], optimize = FALSE)
  f2 <- gpr(snelson$x[1:40], snelson$y[1:40], optimize = FALSE)
  expect_equal(as.numeric(logLik(f1)), as.numeric(logLik(f2)))
  expect_equal(unname(fitted(f1)), unname(fitted(f2)))
  expect_error(predict(f1, "a"), "data frame")
  expect_equal(lapply(predict(f1, matrix(c(1, 2), dimnames = list(NULL, "x"))), unname),
               lapply(predict(f1, data.frame(x = c(1, 2))), unname))
  expect_error(predict(f2, matrix(1:4, 2)), "1 columns")
  expect_length(predict(f1, data.frame(x = c(1, 2)))$mean, 2L)
})

test_that("fixed parameters stay at their values", {
  d <- toy_data(30, 1)
  fit <- gpr(d$x, d$y, kernel = kernel_rbf(0.5), noise = 0.04, mean = 0,
             fixed = c("lengthscale", "noise"))
  expect_equal(fit$params$lengthscale, 0.5)
  expect_equal(fit$params$noise, 0.04)
  expect_equal(fit$params$mean, 0)
  expect_false(fit$params$variance == stats::var(d$y))
  expect_named(objective(fit)$par, "log_variance")
  expect_error(gpr(d$x, d$y, fixed = "bogus"), "unknown parameters: bogus")
})

test_that("methods return what they promise", {
  d <- toy_data(30, 1)
  fit <- gpr(d$x, d$y)
  expect_s3_class(logLik(fit), "logLik")
  expect_equal(attr(logLik(fit), "df"), 4)
  expect_equal(nobs(fit), 30L)
  expect_named(coef(fit), c("variance", "lengthscale", "noise", "mean"))
  expect_equal(unname(residuals(fit) + fitted(fit)), d$y)
  expect_output(print(fit), "Exact GP regression")
  expect_output(print(summary(fit)), "log marginal likelihood")
  pdf(NULL)
  on.exit(dev.off())
  pd <- plot(fit)
  expect_true(all(c("mean", "sd_f", "sd_y") %in% names(pd)))
  d2 <- toy_data(30, 3)
  fit3 <- gpr(d2$x, d2$y, optimize = FALSE)
  expect_named(plot(fit3), c("observed", "predicted", "sd"))
  fit2d <- gpr(d2$x[, 1:2], d2$y, optimize = FALSE)
  expect_true("mean" %in% names(plot(fit2d, n = 10)))
  up <- update(fit, kernel = kernel_matern32())
  expect_equal(up$kernel$family, "matern32")
  expect_true(is.call(update(fit, evaluate = FALSE)))
})

test_that("bad input gives clear errors", {
  d <- toy_data(10, 1)
  expect_error(gpr(d$x, c(d$y[-1], NA)), "'y' contains NA")
  expect_error(gpr(d$x, c(d$y[-1], Inf)), "'y' contains NA")
  expect_error(gpr(d$x, d$y[-1]), "length 9")
  expect_error(gpr(rbind(d$x[-1, , drop = FALSE], NA), d$y), "'x' contains NA")
  expect_error(gpr(letters[1:10], d$y), "'x' must be")
  expect_error(gpr(d$x, as.character(d$y)), "'y' must be a numeric")
  expect_error(gpr(d$x[1, , drop = FALSE], d$y[1]), "at least 2 rows")
  expect_error(gpr(d$x, d$y, noise = -1), "'noise'")
  expect_error(gpr(d$x, d$y, noise = 0), "'noise'")
  expect_error(gpr(d$x, d$y, kernel = kernel_rbf(c(1, 2))), "2 lengthscales")
  expect_error(gpr(d$x, d$y, kernel = "rbf"), "'kernel'")
  expect_error(gpr(d$x, d$y, mean = "linear"), "'mean'")
  expect_error(gpr(d$x, d$y, optimize = NA), "'optimize'")
  expect_error(gpr(d$x, d$y, control = list(maxiter = 3)), "unknown 'control'")
  expect_error(gpr(d$x, d$y, bogus = 1), "unused arguments: bogus")
  # the formula interface drops incomplete rows by na.action, as lm() does
  # (issue 12: it stopped); the matrix interface and na.fail still refuse them
  expect_error(gpr(c(1, NA, 3, 4), 1:4), "NA")
  expect_error(gpr(y ~ x, data = data.frame(x = c(1, NA, 3, 4), y = 1:4), na.action = na.fail),
               "missing values")
  # three points with a factor input fit (flatly: too few points for a signal)
  expect_error(suppressWarnings(gpr(y ~ x, data = data.frame(x = letters[1:3], y = 1:3))), NA)
})
