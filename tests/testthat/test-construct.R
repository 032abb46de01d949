# The formula front end (R/construct.R, R/utils.R): model frames as lm()
# builds them (subset, na.action, weights, offset), checked against lm() and
# against the same model fitted to pre-processed data; prior weights as
# per-point noise variances sigma^2 / w_n against the dense formulas.

# airquality with a few columns; Ozone and Solar.R have missing values
aq <- airquality[, c("Ozone", "Solar.R", "Wind", "Temp", "Month", "Day")]

# The same model at fixed parameters on the rows `rows` of `data` (no
# optimising: fits are compared exactly)
aq_kernel <- kernel_rbf(c(10, 3), 900)
aq_Z <- cbind(Temp = c(60, 70, 80, 90), Wind = c(5, 10, 15, 8))

test_that("na.omit and na.exclude drop the rows lm() drops, and na.exclude pads like lm()", {
  ref <- lm(Ozone ~ Temp + Wind, data = aq, na.action = na.exclude)
  fits <- list(
    gpr = gpr(Ozone ~ Temp + Wind, data = aq, kernel = aq_kernel, noise = 300,
              optimize = FALSE, na.action = na.exclude),
    sgpr = sgpr(Ozone ~ Temp + Wind, data = aq, kernel = aq_kernel, noise = 300,
                inducing = aq_Z, optimize = FALSE, na.action = na.exclude),
    osgpr = osgpr(Ozone ~ Temp + Wind, data = aq, kernel = aq_kernel, noise = 300,
                  inducing = aq_Z[1:2, ], orthogonal = aq_Z[3:4, ], optimize = FALSE,
                  na.action = na.exclude),
    svgp = svgp(Ozone ~ Temp + Wind, data = aq, kernel = aq_kernel, noise = 300,
                inducing = aq_Z, likelihood = "gaussian", optimize = FALSE,
                na.action = na.exclude))
  for (nm in names(fits)) {
    f <- fits[[nm]]
    expect_equal(nobs(f), nobs(ref), label = nm)
    expect_identical(names(residuals(f)), names(residuals(ref)), label = nm)
    expect_identical(is.na(residuals(f)), is.na(residuals(ref)), label = nm)
    expect_identical(is.na(fitted(f)), is.na(fitted(ref)), label = nm)
    expect_identical(names(predict(f)$mean), names(fitted(ref)), label = nm)
    expect_equal(unclass(f$na.action), unclass(ref$na.action), ignore_attr = TRUE, label = nm)
    expect_output(print(f), "37 observations deleted due to missingness")
    # na.omit: the same rows, no padding
    o <- update(f, na.action = na.omit)
    expect_length(residuals(o), nobs(ref))
    expect_equal(as.numeric(logLik(o)), as.numeric(logLik(f)), tolerance = 1e-12)
  }
  # the default is getOption("na.action")
  op <- options(na.action = "na.exclude")
  on.exit(options(op))
  d <- gpr(Ozone ~ Temp + Wind, data = aq, kernel = aq_kernel, noise = 300, optimize = FALSE)
  expect_length(residuals(d), nrow(aq))
  options(na.action = "na.fail")
  expect_error(gpr(Ozone ~ Temp + Wind, data = aq, optimize = FALSE), "missing values")
  # na.pass keeps incomplete rows, which a GP cannot use: a clear error
  expect_error(gpr(Ozone ~ Temp + Wind, data = aq, optimize = FALSE, na.action = na.pass),
               "na.action = na.omit")
})

test_that("subset equals fitting the subset of the data", {
  keep <- aq$Month > 6 & stats::complete.cases(aq[, c("Ozone", "Temp", "Wind")])
  for (model in c("gpr", "sgpr")) {
    args <- list(Ozone ~ Temp + Wind, kernel = aq_kernel, noise = 300, optimize = FALSE)
    if (model == "sgpr") args$inducing <- aq_Z
    a <- do.call(model, c(args, list(data = aq, subset = quote(Month > 6))))
    b <- do.call(model, c(args, list(data = aq[keep, ])))
    expect_equal(nobs(a), sum(keep))
    expect_equal(as.numeric(logLik(a)), as.numeric(logLik(b)), tolerance = 1e-12, label = model)
    expect_equal(predict(a, aq[1:5, ]), predict(b, aq[1:5, ]), tolerance = 1e-12)
  }
  # a subset expression that uses a variable of the caller, as in lm()
  f <- function(m) gpr(Ozone ~ Temp, data = aq, subset = Month == m, optimize = FALSE)
  expect_equal(nobs(f(5)), sum(aq$Month == 5 & !is.na(aq$Ozone)))
  # update() re-evaluates subset
  s <- sgpr(Ozone ~ Temp + Wind, data = aq, kernel = aq_kernel, noise = 300, inducing = aq_Z,
            optimize = FALSE, subset = Month > 6)
  expect_equal(nobs(update(s, subset = Month > 7)), sum(aq$Month > 7 & !is.na(aq$Ozone)))
})

test_that("unit weights equal no weights; weights are noise variances sigma^2 / w", {
  d <- toy_data(25, 1)
  k <- kernel_rbf(0.7, 1.2)
  Z <- d$x[c(2, 9, 15, 21), , drop = FALSE]
  w <- rep(1:5, 5)
  for (model in c("gpr", "sgpr", "osgpr")) {
    make <- function(...) {
      switch(model,
             gpr = gpr(d$x, d$y, kernel = k, noise = 0.05, mean = 0.1, optimize = FALSE, ...),
             sgpr = sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, mean = 0.1,
                         optimize = FALSE, control = list(jitter = 0), ...),
             osgpr = osgpr(d$x, d$y, kernel = k, inducing = Z[1:2, , drop = FALSE],
                           orthogonal = Z[3:4, , drop = FALSE], bound = "union", noise = 0.05,
                           mean = 0.1, optimize = FALSE, control = list(jitter = 0), ...))
    }
    plain <- make()
    unit <- make(weights = rep(1, 25))
    expect_equal(as.numeric(logLik(unit)), as.numeric(logLik(plain)), tolerance = 1e-12,
                 label = model)
    expect_equal(predict(unit, d$x), predict(plain, d$x), tolerance = 1e-12)
    wt <- make(weights = w)
    dense <- if (model == "gpr") {
      dense_log_normal(d$y - 0.1, naive_kernel(k, d$x, d$x) + diag(0.05 / w))
    } else {
      dense_sgpr_bound(k, d$x, d$y, Z, 0.05 / w, mean = 0.1)
    }
    expect_equal(as.numeric(logLik(wt)), dense, tolerance = 1e-8, label = model)
    expect_equal(training_noise(wt), 0.05 / w, tolerance = 1e-12, label = model)
    # the gradient with respect to the noise stays exact under weights
    expect_grad(wt)
  }
})

test_that("integer weights give the posterior of replicated rows", {
  # k observations y at the same input have the likelihood of one
  # observation y of variance sigma^2 / k, up to a constant: the posterior
  # (so every prediction) is the same
  d <- toy_data(15, 1)
  k <- kernel_rbf(0.7, 1.2)
  w <- rep(c(1, 2, 3), 5)
  rep_rows <- rep(seq_len(15), w)
  Z <- d$x[c(2, 7, 12), , drop = FALSE]
  xs <- matrix(seq(-2, 2, length.out = 7))
  pairs <- list(
    gpr = list(gpr(d$x, d$y, kernel = k, noise = 0.05, mean = 0, optimize = FALSE, weights = w),
               gpr(d$x[rep_rows, , drop = FALSE], d$y[rep_rows], kernel = k, noise = 0.05,
                   mean = 0, optimize = FALSE)),
    sgpr = list(sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, mean = 0,
                     optimize = FALSE, weights = w),
                sgpr(d$x[rep_rows, , drop = FALSE], d$y[rep_rows], kernel = k, inducing = Z,
                     noise = 0.05, mean = 0, optimize = FALSE)))
  for (nm in names(pairs)) {
    a <- predict(pairs[[nm]][[1]], xs)
    b <- predict(pairs[[nm]][[2]], xs)
    expect_equal(a, b, tolerance = 1e-8, label = nm)
  }
  # the formula interface takes weights from the data
  df <- data.frame(x = d$x[, 1], y = d$y, w = w)
  f <- gpr(y ~ x, data = df, weights = w, kernel = k, noise = 0.05, mean = 0, optimize = FALSE)
  expect_equal(unname(predict(f, data.frame(x = xs[, 1]))$mean),
               unname(predict(pairs$gpr[[1]], xs)$mean), tolerance = 1e-8)
  expect_equal(unname(weights(f)), w)
  # weights with known and modelled noise multiply their variances by 1 / w
  kn <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = seq(0.02, 0.1, length.out = 15),
             weights = w, optimize = FALSE)
  expect_equal(training_noise(kn), seq(0.02, 0.1, length.out = 15) / w, tolerance = 1e-12)
  md <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = ~ x1, weights = w, optimize = FALSE)
  md0 <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = ~ x1, optimize = FALSE)
  expect_equal(training_noise(md), training_noise(md0) / w, tolerance = 1e-12)
  expect_grad(with_params(md, noise_coef = c(`(Intercept)` = -2, x1 = 0.3)))
  # weighted fits train; prediction at new inputs is for weight 1 unless given
  set.seed(1)
  fit <- suppressWarnings(sgpr(y ~ x, data = df, weights = w, inducing = 5))
  p1 <- predict(fit, data.frame(x = 0), type = "response")
  p2 <- predict(fit, data.frame(x = 0), type = "response", weights = 4)
  expect_equal(p1$var - predict(fit, data.frame(x = 0))$var, fit$params$noise, ignore_attr = TRUE)
  expect_equal(p2$var - predict(fit, data.frame(x = 0))$var, fit$params$noise / 4,
               ignore_attr = TRUE)
  expect_output(print(fit), "divided by the prior weights")
})

test_that("weights and offsets are refused where they have no meaning", {
  d <- toy_class(30, 1)
  df <- data.frame(x = d$x[, 1], y = d$y, w = 1:30)
  expect_error(pgpr(y ~ x, data = df, weights = w), "pgpr\\(\\) does not take 'weights'")
  expect_error(svgp(y ~ x, data = df, weights = w), "svgp\\(\\) does not take 'weights'")
  expect_error(pgpr(y ~ x + offset(w), data = df), "does not take 'offset'")
  expect_error(svgp(y ~ x, data = df, offset = w), "Gaussian likelihood only")
  r <- toy_data(10, 1)
  expect_error(gpr(r$x, r$y, weights = c(0, rep(1, 9))), "positive finite")
  expect_error(gpr(r$x, r$y, weights = 1:3), "10 positive finite")
  expect_error(gpr(r$x, r$y, offset = rep(NA, 10)), "'offset' must be 10 finite")
})

test_that("an offset equals fitting y - offset and is added back in predictions", {
  d <- toy_data(30, 1)
  df <- data.frame(x = d$x[, 1], y = d$y, o = seq(-1, 1, length.out = 30))
  k <- kernel_rbf(0.7, 1.2)
  Z <- d$x[c(3, 10, 20), , drop = FALSE]
  for (model in c("gpr", "sgpr", "svgp")) {
    args <- list(kernel = k, noise = 0.05, mean = 0.2, optimize = FALSE)
    if (model != "gpr") args$inducing <- Z
    if (model == "svgp") args$likelihood <- "gaussian"
    a <- do.call(model, c(list(y ~ x + offset(o), data = df), args))
    b <- do.call(model, c(list(y ~ x, data = df, offset = quote(o)), args))
    ref <- do.call(model, c(list(I(y - o) ~ x, data = df), args))
    expect_equal(as.numeric(logLik(a)), as.numeric(logLik(ref)), tolerance = 1e-12, label = model)
    expect_equal(as.numeric(logLik(b)), as.numeric(logLik(ref)), tolerance = 1e-12, label = model)
    nd <- data.frame(x = c(-1, 0, 1), o = c(5, 6, 7))
    pr <- predict(ref, nd)$mean
    expect_equal(unname(predict(a, nd)$mean), unname(pr + nd$o), tolerance = 1e-12)
    expect_equal(unname(predict(b, nd)$mean), unname(pr + nd$o), tolerance = 1e-12)
    expect_equal(unname(fitted(a)), unname(fitted(ref) + df$o), tolerance = 1e-12)
    expect_equal(unname(residuals(a)), unname(residuals(ref)), tolerance = 1e-12)
  }
  # the matrix interface takes an offset too, but cannot predict at new inputs
  m <- gpr(d$x, d$y, offset = df$o, kernel = k, noise = 0.05, optimize = FALSE)
  expect_equal(unname(fitted(m) - df$o), unname(fitted(ref <- gpr(d$x, d$y - df$o, kernel = k,
                                                                     noise = 0.05, optimize = FALSE))),
               tolerance = 1e-12)
  expect_error(predict(m, d$x[1:2, , drop = FALSE]), "offset, which is unknown")
})

test_that("a noise formula follows subset and na.action, and keeps poly() bases for prediction", {
  d <- data.frame(times = seq(2, 58, length.out = 80))
  set.seed(2)
  d$accel <- 50 * sin(d$times / 8) + rnorm(80, sd = 2 + d$times / 10)
  d$z <- d$times
  d$z[c(5, 40)] <- NA
  k <- kernel_rbf(5, 1000)
  Z <- matrix(seq(5, 55, by = 10))
  f <- sgpr(accel ~ times, data = d, noise = ~ z, kernel = k, inducing = Z, optimize = FALSE)
  expect_equal(nobs(f), 78L)
  g <- sgpr(accel ~ times, data = d[-c(5, 40), ], noise = ~ z, kernel = k, inducing = Z,
            optimize = FALSE)
  expect_equal(as.numeric(logLik(f)), as.numeric(logLik(g)), tolerance = 1e-12)
  s <- sgpr(accel ~ times, data = d, noise = ~ z, kernel = k, inducing = Z, optimize = FALSE,
            subset = times > 20)
  expect_equal(nobs(s), sum(d$times > 20 & !is.na(d$z)))
  # poly() in the noise formula: predictions use the basis of the fit
  p <- sgpr(accel ~ times, data = d[-c(5, 40), ], noise = ~ poly(times, 2), kernel = k,
            inducing = Z, optimize = FALSE)
  p$params$noise_coef[] <- c(1, 2, -1)
  nd <- d[c(10, 20, 30), ]
  expect_equal(unname(predict(p, nd, type = "response")$var - predict(p, nd)$var),
               unname(training_noise(p)[c(9, 19, 29)]), tolerance = 1e-10)
})

test_that("model.frame(), formula(), terms() and nobs() behave as for lm()", {
  f <- sgpr(Ozone ~ Temp + log(Wind), data = aq, kernel = aq_kernel, noise = 300,
            inducing = cbind(Temp = c(60, 80), `log(Wind)` = c(2, 2.5)), optimize = FALSE,
            subset = Month > 5)
  ref <- lm(Ozone ~ Temp + log(Wind), data = aq, subset = Month > 5)
  expect_equal(model.frame(f), model.frame(ref), ignore_attr = TRUE)
  expect_identical(rownames(model.frame(f)), rownames(model.frame(ref)))
  expect_equal(formula(f), formula(ref), ignore_attr = TRUE)
  expect_s3_class(terms(f), "terms")
  expect_equal(nobs(f), nobs(ref))
  m <- gpr(toy_data(10)$x, toy_data(10)$y, optimize = FALSE)
  expect_error(formula(m), "matrix interface")
  expect_error(model.frame(m), "matrix interface")
})

test_that("the mix-ups of a first hour name the model or argument to use", {
  msg <- function(expr) tryCatch({
    expr
    ""
  }, error = conditionMessage)
  # classes given to a regression model: the classifiers are named
  m <- msg(sgpr(Species ~ Sepal.Length, data = iris))
  expect_match(m, "'y' must be a numeric vector, not a factor with 3 levels: sgpr() is regression",
               fixed = TRUE)
  expect_match(m, "svgp() or odvgp()", fixed = TRUE)
  two <- droplevels(iris[iris$Species != "setosa", ])
  expect_match(msg(sgpr(Species ~ Sepal.Length, data = two)), "pgpr() or svgp()", fixed = TRUE)
  expect_match(msg(gpr(Species ~ Sepal.Length, data = two)), "gpr() is regression", fixed = TRUE)
  expect_match(msg(osgpr(Species ~ Sepal.Length, data = two, inducing = 2, orthogonal = 2)),
               "osgpr() is regression", fixed = TRUE)
  expect_match(msg(sgpr(I(y > 0) ~ x, data = snelson)), "logical vector.*pgpr\\(\\) or svgp\\(\\)")
  expect_match(msg(sgpr(snelson$x, as.character(snelson$y > 0))), "character vector")
  # a formula without inputs, and infinite inputs: no "formula inputs"
  for (f in list(sgpr, gpr, pgpr, svgp)) {
    m <- msg(f(y ~ 1, data = snelson))
    expect_match(m, "the formula y ~ 1 has no inputs", fixed = TRUE)
    expect_false(grepl("formula inputs", m))
  }
  d <- snelson
  d$x[c(7, 3)] <- Inf
  m <- msg(sgpr(y ~ x, data = d))
  expect_match(m, "the input x has infinite values (in 2 rows, the first 3)", fixed = TRUE)
  expect_match(m, "subset = is.finite(x)", fixed = TRUE)
  expect_false(grepl("formula inputs", m))
  # and the row check after subset
  expect_match(msg(sgpr(y ~ x, data = snelson, subset = 1)), "the model frame has 1 row")
})

test_that("the call is the call as run, start included", {
  f0 <- sgpr(y ~ x, data = snelson, inducing = 8, optimize = FALSE)
  f1 <- sgpr(y ~ x, data = snelson, inducing = 8, start = f0, optimize = FALSE)
  expect_identical(f1$call, quote(sgpr(y ~ x, data = snelson, inducing = 8, start = f0,
                                       optimize = FALSE)))
  m1 <- sgpr(snelson$x, snelson$y, inducing = 8, start = f0, optimize = FALSE)
  expect_identical(m1$call$start, quote(f0))
  g0 <- gpr(y ~ x, data = snelson[1:40, ], optimize = FALSE)
  expect_identical(gpr(y ~ x, data = snelson[1:40, ], start = g0, optimize = FALSE)$call$start,
                   quote(g0))
  # a fit passed as a value (do.call) is recorded by a placeholder, never copied
  v <- do.call(sgpr, list(y ~ x, data = snelson, inducing = 8, start = f0, optimize = FALSE))
  expect_identical(v$call$start, as.name("<sgpr fit>"))
  expect_lt(nchar(paste(deparse(v$call$start), collapse = "")), 20)
  # update(): a start given there is used and recorded; its own warm start
  # from the old fit is not written into the call
  f2 <- sgpr(y ~ x, data = snelson, inducing = 8,
             kernel = kernel_rbf(lengthscale = 3, variance = 2), optimize = FALSE)
  u <- update(f0, start = f2)
  expect_identical(u$call$start, quote(f2))
  expect_equal(u$params$lengthscale, f2$params$lengthscale)
  w <- update(f1, noise = 0.2)
  expect_null(w$call$start)
  expect_equal(w$params$lengthscale, f1$params$lengthscale)
})
