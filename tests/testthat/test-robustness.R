# Fits on awkward but legitimate data, the optimiser's safeguards, and the
# interface corners found in review.

test_that("constant responses fit and predict the constant", {
  x <- matrix(seq(-2, 2, length.out = 40))
  y <- rep(3, 40)
  # a constant is a flat fit, and the fit says so
  expect_warning(f1 <- gpr(x, y), "no signal")
  expect_warning(f2 <- sgpr(x, y, inducing = x[seq(1, 40, 4), , drop = FALSE]), "no signal")
  for (fit in list(f1, f2)) {
    expect_true(is.finite(as.numeric(logLik(fit))))
    p <- predict(fit, matrix(c(-1, 0.5)))
    expect_equal(p$mean, c(3, 3), tolerance = 1e-4)
  }
})

test_that("noise-free responses fit with the noise held above its floor", {
  x <- matrix(seq(-3, 3, length.out = 50))
  y <- sin(x[, 1])
  fit <- gpr(x, y)
  expect_equal(fit$optim$convergence, 0L)
  expect_gte(fit$params$noise, 1e-6 * var(y) * (1 - 1e-8))
  p <- predict(fit, matrix(c(-1.23, 0.77)))
  expect_equal(p$mean, sin(c(-1.23, 0.77)), tolerance = 1e-3)
  s <- sgpr(x, y, inducing = x[seq(1, 50, 5), , drop = FALSE])
  expect_true(is.finite(as.numeric(logLik(s))))
})

test_that("fits do not depend on the units of y or x", {
  d <- toy_data(40, 1)
  f1 <- gpr(d$x, d$y)
  f2 <- gpr(d$x, d$y * 1e-5)
  # log p(c y) = log p(y) - N log c when all parameters rescale with y
  expect_equal(as.numeric(logLik(f2)), as.numeric(logLik(f1)) - 40 * log(1e-5),
               tolerance = 1e-5)
  expect_equal(f2$params$noise, f1$params$noise * 1e-10, tolerance = 1e-3)
  Z <- d$x[seq(1, 40, 5), , drop = FALSE]
  # converged to the optimum (min_gain = 0: no early stop, whose point
  # depends on the path's rounding)
  s1 <- sgpr(d$x, d$y, inducing = Z, control = list(min_gain = 0))
  s2 <- sgpr(d$x / 1000, d$y, inducing = Z / 1000, control = list(min_gain = 0))
  expect_equal(as.numeric(logLik(s2)), as.numeric(logLik(s1)), tolerance = 1e-5)
  expect_equal(s2$params$lengthscale, s1$params$lengthscale / 1000, tolerance = 1e-3)
})

test_that("objective() errors where the fitting loop would back off", {
  d <- toy_data(20, 1)
  fit <- gpr(d$x, d$y, optimize = FALSE)
  o <- objective(fit)
  expect_true(is.finite(o$fn(o$par)))
  bad <- o$par
  bad[] <- NaN
  expect_error(o$fn(bad))
})

test_that("the fitting report counts no failed evaluations on easy data", {
  d <- toy_data(30, 1)
  fit <- sgpr(d$x, d$y, inducing = d$x[1:6, , drop = FALSE])
  expect_identical(fit$optim$failed_evaluations, 0L)
})

test_that("update() takes a new formula as its unnamed first argument", {
  set.seed(2)
  df <- data.frame(a = runif(40, 0.5, 3), b = runif(40))
  df$y <- sin(2 * log(df$a)) + 0.1 * rnorm(40)
  f1 <- gpr(y ~ a, data = df)
  f2 <- update(f1, . ~ log(a))
  expect_identical(colnames(f2$x), "log(a)")
  f3 <- gpr(y ~ log(a), data = df)
  expect_equal(as.numeric(logLik(f2)), as.numeric(logLik(f3)), tolerance = 1e-4)
  expect_error(update(f1, . ~ log(a), 3), "must be named")
})

test_that("plots work for transformed inputs and input-dependent noise", {
  set.seed(3)
  df <- data.frame(a = runif(60, 0.5, 4), w = runif(60, 0.5, 2))
  df$y <- sin(2 * sqrt(df$a)) + 0.1 * df$w * rnorm(60)
  png_file <- tempfile(fileext = ".png")
  grDevices::png(png_file)
  on.exit({ grDevices::dev.off(); unlink(png_file) }, add = TRUE)
  expect_silent(plot(gpr(y ~ sqrt(a), data = df)))
  s <- sgpr(y ~ a, data = df, inducing = matrix(seq(0.6, 3.9, length.out = 8)),
            noise = ~ w)
  expect_silent(plot(s))
  p <- pgpr(I(y > 0) ~ log(a), data = df, M = 8)
  expect_silent(plot(p))
})

test_that("reinit_inducing() refuses models whose inducing inputs it cannot re-select", {
  d <- toy_data(40, 1)
  lab <- factor(ifelse(d$y > 0, "a", "b"))
  sv <- svgp(d$x, lab, inducing = d$x[1:5, , drop = FALSE], optimize = FALSE)
  expect_error(reinit_inducing(sv), "sgpr\\(\\) and pgpr\\(\\)")
  os <- osgpr(d$x, d$y, inducing = d$x[1:4, , drop = FALSE],
              orthogonal = d$x[5:8, , drop = FALSE], optimize = FALSE)
  expect_error(reinit_inducing(os), "not on osgpr\\(\\) fits")
})

test_that("bad control entries are refused by name", {
  d <- toy_data(20, 1)
  expect_error(gpr(d$x, d$y, control = list(maxit = -1)), "control\\$maxit")
  expect_error(gpr(d$x, d$y, control = list(maxit = 2.5)), "control\\$maxit")
  expect_error(gpr(d$x, d$y, control = list(trace = NA)), "control\\$trace")
  expect_error(sgpr(d$x, d$y, inducing = d$x[1:4, , drop = FALSE],
                    control = list(factr = "a")), "control\\$factr")
  expect_error(svgp(d$x, d$y > 0, inducing = d$x[1:4, , drop = FALSE],
                    control = list(pgtol = -1)), "control\\$pgtol")
  expect_error(pgpr(d$x, d$y > 0, M = 4, control = list(maxit = 0)), "control\\$maxit")
  expect_error(gpr(d$x, d$y, control = list(bogus = 1)), "unknown 'control' entries: bogus")
})

test_that("update() keeps the fitted inducing inputs (and svgp's q(u)) unless they change", {
  s <- sgpr(y ~ x, data = snelson, inducing = 8)
  s0 <- update(s, optimize = FALSE)
  expect_equal(s0$params$Z, s$params$Z)
  expect_equal(as.numeric(logLik(s0)), as.numeric(logLik(s)), tolerance = 1e-10)
  expect_identical(s0$call$inducing, 8)          # the record is the user's call
  # naming `inducing` re-selects; a new formula re-selects too
  s1 <- update(s, inducing = 8, optimize = FALSE)
  expect_false(isTRUE(all.equal(s1$params$Z, s$params$Z)))
  o <- suppressWarnings(osgpr(y ~ x, data = snelson, inducing = 3, orthogonal = 3,
                              control = list(maxit = 50)))
  o0 <- update(o, optimize = FALSE)
  expect_equal(o0$params[c("Z", "O")], o$params[c("Z", "O")])
  expect_equal(as.numeric(logLik(o0)), as.numeric(logLik(o)), tolerance = 1e-10)
  d <- snelson[1:80, ]
  d$lab <- d$y > 0
  for (w in c(TRUE, FALSE)) {
    v <- suppressWarnings(svgp(lab ~ x, data = d, whiten = w, control = list(maxit = 60),
                               inducing = as.matrix(d[c(5, 25, 45, 65), "x", drop = FALSE])))
    v0 <- update(v, optimize = FALSE)
    expect_equal(v0$params$Z, v$params$Z)
    expect_equal(as.numeric(logLik(v0)), as.numeric(logLik(v)), tolerance = 1e-10)
    # continuing from the fit does not lose ground
    expect_gte(as.numeric(logLik(suppressWarnings(update(v, control = list(maxit = 5))))),
               as.numeric(logLik(v)) - 1e-6)
  }
  expect_warning(svgp(d$x, d$lab, inducing = 4, optimize = FALSE, control = list(lr = 0.1)),
                 "ignored without 'batch_size'")
})

test_that("Adam fits report the iterations they ran, not a failure to converge", {
  set.seed(1)
  x <- matrix(runif(300, -3, 3))
  y <- sin(x[, 1]) > 0
  f <- svgp(x, y, inducing = 5, batch_size = 50, control = list(maxit = 20))
  expect_output(print(f), "optimiser: Adam ran 20 iterations on minibatches of 50 points")
  expect_output(print(summary(f)), "Optimiser: Adam ran 20 iterations")
  expect_warning(g <- svgp(x, y, inducing = 5, optimize_inducing = FALSE,
                            control = list(maxit = 2)), "stopped at its limit of 2 iterations")
  expect_output(print(g), "did not converge")
})
