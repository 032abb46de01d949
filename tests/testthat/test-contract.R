# Every regression model honours the same contract: shapes and names of
# predictions, non-negative variances, a symmetric full covariance whose
# diagonal is the variance, a logLik with df and nobs, named coefficients,
# an objective whose gradient has one entry per free parameter, and
# print/summary/plot methods that work.

regression_fits <- function() {
  d <- toy_data(30, 2)
  Z <- d$x[c(3, 8, 14, 20), ]
  O <- d$x[c(5, 11, 25), ]
  lam <- seq(0.02, 0.2, length.out = 30)
  list(
    gpr = gpr(d$x, d$y, optimize = FALSE),
    sgpr = sgpr(d$x, d$y, inducing = Z, optimize = FALSE),
    sgpr_known = sgpr(d$x, d$y, inducing = Z, noise = lam, optimize = FALSE),
    sgpr_model = sgpr(d$x, d$y, inducing = Z, noise = ~ x1, optimize = FALSE),
    osgpr_solve = osgpr(d$x, d$y, inducing = Z, orthogonal = O, optimize = FALSE),
    osgpr_odvgp_union = osgpr(d$x, d$y, inducing = Z, orthogonal = O, type = "odvgp",
                              bound = "union", optimize = FALSE),
    svgp_gaussian = svgp(d$x, d$y, inducing = Z, likelihood = "gaussian", optimize = FALSE))
}

test_that("every regression model honours the prediction contract", {
  xs <- matrix(c(-1, 0, 0.5, 1.5, 0.2, -0.4), 3, 2, dimnames = list(c("a", "b", "c"), NULL))
  for (nm in names(fits <- regression_fits())) {
    fit <- fits[[nm]]
    p <- predict(fit, xs)
    expect_named(p, c("mean", "var"), label = nm)
    expect_length(p$mean, 3L)
    expect_named(p$mean, c("a", "b", "c"))
    expect_true(all(p$var >= 0), label = nm)
    pc <- predict(fit, xs, full_cov = TRUE)
    expect_equal(dim(pc$cov), c(3L, 3L))
    expect_equal(pc$cov, t(pc$cov), label = nm)
    expect_equal(unname(diag(pc$cov)), unname(p$var), tolerance = 1e-8, label = nm)
    expect_equal(pc$mean, p$mean, tolerance = 1e-10)
    if (!identical(fit$noise_model$kind, "known")) {
      pr <- predict(fit, xs, type = "response")
      expect_true(all(pr$var > p$var), label = nm)
    }
    expect_length(predict(fit)$mean, 30L)
    expect_length(fitted(fit), 30L)
    expect_length(residuals(fit), 30L)
    ll <- logLik(fit)
    expect_s3_class(ll, "logLik")
    expect_equal(attr(ll, "nobs"), 30L)
    # df counts the free hyperparameters; the variational parameters
    # (inducing inputs, svgp's q(u)) are not among them (issue 12: the
    # inducing inputs were counted, so that AICs were not comparable)
    var_par <- grepl("^(q_mu|log_q_sqrt_diag|q_sqrt_lower|[ZO]\\[)", names(fit$fixed))
    expect_equal(attr(ll, "df"), sum(!fit$fixed & !var_par), label = nm)
    expect_equal(any(grepl("^q_mu", names(fit$fixed))), inherits(fit, "svgp"), label = nm)
    expect_true(is.finite(as.numeric(ll)))
    cf <- coef(fit)
    expect_true(is.numeric(cf) && !is.null(names(cf)) && all(is.finite(cf)), label = nm)
    o <- objective(fit)
    expect_equal(length(o$gr(o$par)), length(o$par))
    expect_equal(names(o$gr(o$par)), names(o$par))
    expect_equal(-o$fn(o$par), as.numeric(ll), tolerance = 1e-10, label = nm)
    expect_output(print(fit))
    expect_output(print(summary(fit)))
    pdf(NULL)
    pd <- plot(fit, n = 10)
    dev.off()
    expect_true(is.data.frame(pd), label = nm)
  }
})

test_that("every classifier honours the prediction contract", {
  set.seed(3)
  x <- matrix(runif(60, -2, 2), 30, 2)
  y <- factor(ifelse(x[, 1] + x[, 2] + rnorm(30, sd = 0.5) > 0, "yes", "no"))
  Z <- x[c(2, 9, 17, 24), ]
  fits <- list(pgpr = pgpr(x, y, inducing = Z, optimize = FALSE),
               svgp = svgp(x, y, inducing = Z, optimize = FALSE))
  xs <- matrix(c(-1, 0, 1.5, 0.3, -0.2, 1), 3, 2, dimnames = list(c("a", "b", "c"), NULL))
  for (nm in names(fits)) {
    fit <- fits[[nm]]
    pl <- predict(fit, xs, type = "link")
    expect_named(pl, c("mean", "var"))
    expect_named(pl$mean, c("a", "b", "c"))
    expect_true(all(pl$var >= 0), label = nm)
    for (method in c("quadrature", "probit", "plugin")) {
      pp <- predict(fit, xs, type = "prob", method = method)
      # a vector of probabilities (issue 12: it was list(mean, var))
      expect_true(is.numeric(pp) && is.null(dim(pp)), label = paste(nm, method))
      expect_named(pp, c("a", "b", "c"))
      expect_true(all(pp > 0 & pp < 1), label = paste(nm, method))
      cls <- predict(fit, xs, type = "class", method = method)
      expect_true(is.factor(cls) && all(levels(cls) == c("no", "yes")))
      expect_named(cls, c("a", "b", "c"))
      expect_equal(unname(as.character(cls)), unname(ifelse(pp > 0.5, "yes", "no")))
    }
    pc <- predict(fit, xs, type = "link", full_cov = TRUE)
    expect_equal(pc$cov, t(pc$cov))
    expect_equal(unname(diag(pc$cov)), unname(pl$var), tolerance = 1e-8)
    expect_error(predict(fit, xs, type = "prob", full_cov = TRUE), "full_cov")
    expect_error(predict(fit, xs, type = "odds"), "should be one of")
    expect_length(fitted(fit), 30L)
    ll <- logLik(fit)
    expect_s3_class(ll, "logLik")
    expect_equal(attr(ll, "nobs"), 30L)
    expect_true(is.finite(as.numeric(ll)))
    o <- objective(fit)
    expect_equal(names(o$gr(o$par)), names(o$par))
    expect_output(print(fit))
    expect_output(print(summary(fit)))
    pdf(NULL)
    pd <- plot(fit, n = 10)
    dev.off()
    expect_true(is.data.frame(pd), label = nm)
  }
})
