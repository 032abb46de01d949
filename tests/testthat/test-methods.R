# The methods every model shares (R/methods.R, R/classification.R): predict()
# with intervals, standard errors, missing values and an error for unknown
# arguments; logLik/AIC/BIC, deviance, df.residual, residuals and confint,
# each checked against its base-R counterpart or a dense formula.

method_fits <- function() {
  d <- toy_data(30, 2)
  Z <- d$x[c(3, 8, 14, 20), ]
  O <- d$x[c(5, 11, 25), ]
  k <- kernel_rbf(c(0.8, 1.1), 1.2)
  list(
    gpr = gpr(d$x, d$y, kernel = k, noise = 0.05, optimize = FALSE),
    sgpr = sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, optimize = FALSE),
    sgpr_model = sgpr(d$x, d$y, kernel = k, inducing = Z, noise = ~ x1, optimize = FALSE),
    osgpr = osgpr(d$x, d$y, kernel = k, inducing = Z, orthogonal = O, noise = 0.05,
                  optimize = FALSE),
    svgp_gaussian = svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian",
                         noise = 0.05, optimize = FALSE))
}

class_fits <- function() {
  d <- toy_class(40, 2)
  y <- factor(ifelse(d$y == 1, "yes", "no"))
  Z <- d$x[c(2, 9, 17, 24, 33), ]
  k <- kernel_rbf(1, 2)
  list(pgpr = pgpr(d$x, y, kernel = k, inducing = Z, optimize = FALSE),
       svgp = svgp(d$x, y, kernel = k, inducing = Z, optimize = FALSE),
       probit = svgp(d$x, y, kernel = k, inducing = Z, likelihood = "probit", optimize = FALSE))
}

xs_new <- matrix(c(-1, 0, 0.5, 1.5, 0.2, -0.4), 3, 2, dimnames = list(c("a", "b", "c"), NULL))

test_that("intervals are mean +/- qnorm((1 + level) / 2) sd of f (confidence) or y (prediction)", {
  for (nm in names(fits <- method_fits())) {
    f <- fits[[nm]]
    pf <- predict(f, xs_new)
    py <- predict(f, xs_new, type = "response")
    for (level in c(0.5, 0.9, 0.95)) {
      z <- qnorm((1 + level) / 2)
      ci <- predict(f, xs_new, interval = "confidence", level = level)
      expect_equal(colnames(ci), c("fit", "lwr", "upr"))
      expect_equal(rownames(ci), c("a", "b", "c"))
      expect_equal(ci[, "fit"], pf$mean, tolerance = 1e-12, label = nm)
      expect_equal(ci[, "lwr"], pf$mean - z * sqrt(pf$var), tolerance = 1e-12, label = nm)
      expect_equal(ci[, "upr"], pf$mean + z * sqrt(pf$var), tolerance = 1e-12, label = nm)
      pi <- predict(f, xs_new, interval = "prediction", level = level)
      expect_equal(pi[, "upr"], py$mean + z * sqrt(py$var), tolerance = 1e-12, label = nm)
      expect_equal(pi[, "lwr"], py$mean - z * sqrt(py$var), tolerance = 1e-12, label = nm)
    }
    se <- predict(f, xs_new, se.fit = TRUE)
    expect_named(se, c("fit", "se.fit"))
    expect_equal(se$se.fit, sqrt(pf$var), tolerance = 1e-12)
    expect_equal(predict(f, xs_new, type = "response", se.fit = TRUE)$se.fit, sqrt(py$var),
                 tolerance = 1e-12)
    both <- predict(f, xs_new, interval = "prediction", se.fit = TRUE)
    expect_equal(both$fit, predict(f, xs_new, interval = "prediction"))
  }
  # the same convention as predict.lm() for a linear kernel's limit: a
  # Bayesian linear model is not in the package, so compare with lm() on the
  # structure of the result only
  ref <- predict(lm(y ~ x, data = snelson[1:20, ]), snelson[1:3, ], interval = "prediction")
  g <- gpr(y ~ x, data = snelson[1:20, ], optimize = FALSE)
  expect_identical(dimnames(predict(g, snelson[1:3, ], interval = "prediction")), dimnames(ref))
})

test_that("unknown or misspelt arguments of predict(), fitted() and residuals() are errors", {
  fits <- c(method_fits(), class_fits())
  for (nm in names(fits)) {
    f <- fits[[nm]]
    expect_error(predict(f, xs_new, tpye = "response"), "unknown argument 'tpye' \\(did you mean 'type'\\?\\)",
                 label = nm)
    expect_error(predict(f, xs_new, bogus = 1, other = 2), "unknown arguments 'bogus', 'other'")
    expect_error(predict(f, xs_new, interval = "tolerance"), "should be one of")
    expect_error(predict(f, xs_new, level = 95), "'level' must be")
    expect_error(residuals(f, kind = "pearson"), "unknown argument 'kind'")
    expect_error(predict(f, xs_new, full_cov = TRUE, se.fit = TRUE), "cannot be combined")
  }
})

test_that("rows of newdata with missing inputs give NA, or are dropped by na.omit", {
  df <- data.frame(x = snelson$x[1:60], y = snelson$y[1:60])
  fits <- list(gpr = gpr(y ~ x, data = df, optimize = FALSE),
               sgpr = sgpr(y ~ x, data = df, inducing = 5, optimize = FALSE))
  nd <- data.frame(x = c(1, NA, 3, NA, 5), row.names = letters[1:5])
  for (nm in names(fits)) {
    f <- fits[[nm]]
    full <- predict(f, nd[c(1, 3, 5), , drop = FALSE], type = "response")
    p <- predict(f, nd, type = "response")
    expect_named(p$mean, letters[1:5])
    expect_equal(is.na(p$mean), c(a = FALSE, b = TRUE, c = FALSE, d = TRUE, e = FALSE))
    expect_equal(p$mean[c(1, 3, 5)], full$mean, tolerance = 1e-12)
    expect_equal(p$var[c(1, 3, 5)], full$var, tolerance = 1e-12)
    expect_true(all(is.na(predict(f, nd, interval = "prediction")[c("b", "d"), ])))
    o <- predict(f, nd, na.action = na.omit)
    expect_named(o$mean, c("a", "c", "e"))
    cv <- predict(f, nd, full_cov = TRUE)
    expect_true(all(is.na(cv$cov["b", ])) && all(is.na(cv$cov[, "d"])))
    expect_equal(unname(diag(cv$cov)[c(1, 3, 5)]), unname(predict(f, nd)$var[c(1, 3, 5)]),
                 tolerance = 1e-10)
  }
  # matrix inputs too
  m <- gpr(snelson$x[1:40], snelson$y[1:40], optimize = FALSE)
  expect_equal(is.na(predict(m, c(1, NA, 2))$mean), c(FALSE, TRUE, FALSE))
})

test_that("classifiers: type = \"prob\" is a vector; intervals and standard errors of p", {
  for (nm in names(fits <- class_fits())) {
    f <- fits[[nm]]
    link <- if (nm == "probit") pnorm else plogis
    lat <- predict(f, xs_new, type = "link")
    p <- predict(f, xs_new, type = "prob")
    expect_true(is.numeric(p) && is.null(dim(p)))
    expect_named(p, c("a", "b", "c"))
    ci <- predict(f, xs_new, type = "prob", interval = "confidence", level = 0.9)
    z <- qnorm(0.95)
    expect_equal(ci[, "fit"], p)
    expect_equal(unname(ci[, "lwr"]), unname(link(lat$mean - z * sqrt(lat$var))), tolerance = 1e-12)
    expect_equal(unname(ci[, "upr"]), unname(link(lat$mean + z * sqrt(lat$var))), tolerance = 1e-12)
    cl <- predict(f, xs_new, type = "link", interval = "confidence", level = 0.9)
    expect_equal(unname(cl[, "upr"]), unname(lat$mean + z * sqrt(lat$var)), tolerance = 1e-12)
    # se.fit of p: the sd of g(f) under q(f), against Monte Carlo
    se <- predict(f, xs_new, type = "prob", se.fit = TRUE)$se.fit
    set.seed(4)
    mc <- vapply(1:3, function(i) sd(link(rnorm(2e5, lat$mean[i], sqrt(lat$var[i])))), 0)
    expect_equal(unname(se), mc, tolerance = 0.01)
    expect_error(predict(f, xs_new, type = "prob", interval = "prediction"), "binary label")
    expect_error(predict(f, xs_new, type = "class", se.fit = TRUE), "not \"class\"")
    # fitted() is the training probabilities; residuals as for glm()
    pr <- predict(f, type = "prob")
    expect_equal(fitted(f), pr)
    expect_equal(unname(residuals(f)), unname(f$y - pr))
    expect_equal(unname(residuals(f, type = "pearson")), unname((f$y - pr) / sqrt(pr * (1 - pr))))
  }
})

test_that("logLik's df counts the optimised hyperparameters, the same way in every model", {
  d <- toy_data(30, 1)
  dc <- toy_class(30, 1)
  Z <- d$x[c(3, 9, 20), , drop = FALSE]
  # kernel variance, lengthscale, noise, mean: 4 for every Gaussian model,
  # whatever the number of inducing inputs and whether they are optimised
  gauss <- list(gpr(d$x, d$y, optimize = FALSE),
                sgpr(d$x, d$y, inducing = Z, optimize = FALSE),
                sgpr(d$x, d$y, inducing = d$x[1:10, , drop = FALSE], optimize = FALSE),
                osgpr(d$x, d$y, inducing = Z, orthogonal = d$x[c(5, 25), , drop = FALSE],
                      optimize = FALSE),
                svgp(d$x, d$y, inducing = Z, likelihood = "gaussian", optimize = FALSE))
  for (f in gauss) expect_equal(attr(logLik(f), "df"), 4L, label = class(f)[1L])
  # classifiers with a fixed mean: the kernel variance and lengthscale
  for (f in list(pgpr(dc$x, dc$y, inducing = Z, mean = 0, optimize = FALSE),
                 pgpr(dc$x, dc$y, inducing = Z, mean = 0, optimize = FALSE,
                      optimize_inducing = TRUE),
                 svgp(dc$x, dc$y, inducing = Z, optimize = FALSE))) {
    expect_equal(attr(logLik(f), "df"), 2L, label = class(f)[1L])
  }
  # pgpr learns a constant mean by default: one more
  expect_equal(attr(logLik(pgpr(dc$x, dc$y, inducing = Z, optimize = FALSE)), "df"), 3L)
  # the uncollapsed models on the same data count the same four: the
  # orthogonal inputs, q(u) and the decoupled bases' coefficients are
  # variational (issue 20: odvgp's df was 14-15 here)
  O <- d$x[c(5, 25), , drop = FALSE]
  unc <- list(svgp_nw = svgp(d$x, d$y, inducing = Z, likelihood = "gaussian", whiten = FALSE,
                             optimize = FALSE),
              odvgp = odvgp(d$x, d$y, inducing = Z, orthogonal = O, optimize = FALSE),
              odvgp_free = odvgp(d$x, d$y, inducing = Z, orthogonal = O, optimize = FALSE,
                                 optimize_inducing = FALSE),
              hybrid = odvgp(d$x, d$y, inducing = Z, orthogonal = O, basis = "hybrid",
                             optimize = FALSE),
              decoupled = odvgp(d$x, d$y, inducing = Z, orthogonal = O, basis = "decoupled",
                                optimize = FALSE))
  dfs <- vapply(c(gauss, unc), function(f) attr(logLik(f), "df"), 1L)
  expect_true(all(dfs == 4L), label = paste(names(dfs), dfs, collapse = ", "))
  # ... and the same coef() names: the hyperparameters only
  for (f in unc) expect_named(coef(f), names(coef(gauss[[2]])))
  # held parameters are not counted
  expect_equal(attr(logLik(sgpr(d$x, d$y, inducing = Z, fixed = "noise", optimize = FALSE)),
                    "df"), 3L)
  f <- gauss[[2]]
  expect_equal(AIC(f), -2 * as.numeric(logLik(f)) + 2 * 4)
  expect_equal(BIC(f), -2 * as.numeric(logLik(f)) + log(30) * 4)
  expect_equal(deviance(f), -2 * as.numeric(logLik(f)))
})

test_that("df.residual() is N minus the trace of the dense hat matrix", {
  d <- toy_data(25, 1)
  k <- kernel_rbf(0.6, 1.3)
  Z <- d$x[c(2, 8, 13, 19, 24), , drop = FALSE]
  w <- rep(c(1, 3), length.out = 25)
  lam <- 0.05 / w
  hat_trace <- function(Q, lambda, mean_learned) {
    C <- Q + diag(lambda)
    S <- Q %*% solve(C)
    if (!mean_learned) return(sum(diag(S)))
    one <- rep(1, nrow(Q))
    cw <- solve(C, one) / sum(solve(C, one))
    H <- S + (diag(nrow(Q)) - S) %*% one %*% t(cw)
    sum(diag(H))
  }
  Kff <- naive_kernel(k, d$x, d$x)
  Qw <- function(W) {
    Kuf <- naive_kernel(k, W, d$x)
    crossprod(Kuf, solve(naive_kernel(k, W, W), Kuf))
  }
  for (mean in list("constant", 0)) {
    learned <- identical(mean, "constant")
    g <- gpr(d$x, d$y, kernel = k, noise = 0.05, mean = mean, weights = w, optimize = FALSE)
    expect_equal(df.residual(g), 25 - hat_trace(Kff, lam, learned), tolerance = 1e-8)
    s <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, mean = mean, weights = w,
              optimize = FALSE, control = list(jitter = 0))
    expect_equal(df.residual(s), 25 - hat_trace(Qw(Z), lam, learned), tolerance = 1e-7)
    o <- osgpr(d$x, d$y, kernel = k, inducing = Z[1:3, , drop = FALSE],
               orthogonal = Z[4:5, , drop = FALSE], noise = 0.05, mean = mean, weights = w,
               optimize = FALSE, control = list(jitter = 0))
    expect_equal(df.residual(o), 25 - hat_trace(Qw(Z), lam, learned), tolerance = 1e-7)
  }
  # the hat matrix maps y to the fitted values: check with the learned mean
  # at its optimum (a fitted gpr)
  set.seed(1)
  f <- gpr(d$x, d$y, kernel = k, fixed = c("variance", "lengthscale"), noise = 0.05)
  expect_gt(df.residual(f), 0)
  expect_lt(df.residual(f), 25)
  dc <- toy_class(30, 1)
  expect_error(df.residual(pgpr(dc$x, dc$y, inducing = dc$x[1:4, , drop = FALSE],
                                optimize = FALSE)), "not a linear smoother of the labels")
  expect_error(df.residual(svgp(d$x, d$y, likelihood = "gaussian", inducing = Z,
                                optimize = FALSE)), "optimised numerically")
})

test_that("residuals(type = \"pearson\") divide by the predictive sd of y", {
  for (nm in names(fits <- method_fits())) {
    f <- fits[[nm]]
    py <- predict(f, type = "response")
    expect_equal(residuals(f, type = "pearson"), residuals(f) / sqrt(py$var), tolerance = 1e-12,
                 label = nm)
    expect_equal(unname(residuals(f)), unname(f$y - fitted(f)), tolerance = 1e-12)
  }
})

test_that("confint() is an informative error", {
  f <- method_fits()$gpr
  expect_error(confint(f), "type-II maximum likelihood")
})
