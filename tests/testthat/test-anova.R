# anova() and vcov() (R/anova.R): the table against logLik(), AIC(), BIC()
# and the differences computed by hand; the upper bound column against
# summary(); errors for fits that cannot be compared, and for vcov().

het_data <- function(n = 120, seed = 4) {
  set.seed(seed)
  x <- sort(runif(n, -5, 5))
  data.frame(x = x, y = 2 * sin(x) + rnorm(n, sd = sqrt(0.02 + 0.08 * x^2)))
}

test_that("anova() of nested sgpr fits: bound, df, AIC, BIC and differences", {
  d <- het_data()
  Z <- matrix(seq(-4.5, 4.5, length.out = 10), dimnames = list(NULL, "x"))
  homo <- sgpr(y ~ x, data = d, inducing = Z, fixed = "Z")
  het <- sgpr(y ~ x, data = d, inducing = Z, fixed = "Z", noise = ~ x + I(x^2))
  a <- anova(homo, het)
  expect_s3_class(a, "anova")
  expect_identical(names(a), c("Df", "ELBO", "Upper", "AIC", "BIC", "Df diff", "ELBO diff"))
  ll <- list(logLik(homo), logLik(het))
  expect_equal(a$ELBO, vapply(ll, as.numeric, 0), tolerance = 1e-12)
  expect_equal(a$Df, vapply(ll, function(l) attr(l, "df"), 0))
  # the noise model has two more coefficients than the one variance
  expect_equal(a$Df, c(4, 6))
  expect_equal(a$AIC, c(AIC(homo), AIC(het)), tolerance = 1e-12)
  expect_equal(a$BIC, c(BIC(homo), BIC(het)), tolerance = 1e-12)
  expect_equal(a[["Df diff"]], c(NA, 2))
  expect_equal(a[["ELBO diff"]], c(NA, het$bound - homo$bound), tolerance = 1e-12)
  # the data are heteroscedastic: the noise model reaches a higher bound
  expect_gt(a[["ELBO diff"]][2L], 10)
  # the upper bound of summary(), above the ELBO
  expect_equal(a$Upper, c(homo$upper_bound, het$upper_bound))
  expect_true(all(a$Upper >= a$ELBO))
  # three fits: differences from the row before
  M8 <- update(homo, inducing = Z[c(1, 3, 5, 7, 9), , drop = FALSE])
  a3 <- anova(M8, homo, het)
  expect_equal(a3[["ELBO diff"]], c(NA, diff(c(M8$bound, homo$bound, het$bound))),
               tolerance = 1e-12)
  # the heading says what a difference of bounds means, and gives no p-value
  out <- paste(capture.output(print(a)), collapse = "\n")
  expect_match(out, "not a log likelihood ratio")
  expect_match(out, "Model 2: sgpr(y ~ x, data = d, inducing = Z, fixed = \"Z\", noise = ~x + I(x^2))",
               fixed = TRUE)
  expect_false(grepl("Pr\\(", out))
})

test_that("anova() of gpr fits compares exact log likelihoods", {
  d <- het_data(60)
  f0 <- gpr(y ~ x, data = d, noise = 0.5, fixed = "noise")
  f1 <- gpr(y ~ x, data = d)
  expect_identical(attr(logLik(f1), "kind"), "likelihood")
  a <- anova(f0, f1)
  expect_identical(names(a), c("Df", "logLik", "AIC", "BIC", "Df diff", "logLik diff"))
  expect_equal(a[["logLik diff"]][2L], as.numeric(logLik(f1)) - as.numeric(logLik(f0)),
               tolerance = 1e-12)
  expect_equal(a[["Df diff"]][2L], 1)
  expect_match(paste(capture.output(print(a)), collapse = " "), "log likelihood ratio")
})

test_that("anova() reads what logLik() says the value is", {
  d <- het_data(60)
  Z <- matrix(seq(-4, 4, length.out = 6))
  f <- sgpr(d$x, d$y, inducing = Z, optimize = FALSE)
  expect_identical(attr(logLik(f), "kind"), "bound")
  # a model whose objective is an approximate likelihood declares it
  g <- f
  g$loglik_kind <- "likelihood"
  expect_identical(attr(logLik(g), "kind"), "likelihood")
  expect_identical(names(anova(g, g))[2L], "logLik")
  expect_identical(names(anova(f, g))[2L], "ELBO or logLik")
  expect_match(paste(capture.output(print(anova(f, g))), collapse = " "), "mixes")
})

test_that("anova() refuses fits it cannot compare, naming why", {
  d <- het_data(60)
  Z <- matrix(seq(-4, 4, length.out = 6))
  s <- sgpr(d$x, d$y, inducing = Z, optimize = FALSE)
  g <- gpr(d$x, d$y, optimize = FALSE)
  expect_error(anova(s, g), "one model function, not sgpr\\(\\) and gpr\\(\\)")
  expect_error(anova(s, sgpr(d$x[-1], d$y[-1], inducing = Z, optimize = FALSE)),
               "60, 59 observations")
  expect_error(anova(s, sgpr(d$x, rev(d$y), inducing = Z, optimize = FALSE)),
               "responses .* differ")
  expect_error(anova(s, 3), "argument 2 is not a sparsevgp fit")
  # one fit: its own row
  expect_equal(nrow(anova(s)), 1L)
})

test_that("vcov() is an informative error, like confint()", {
  d <- het_data(40)
  for (f in list(gpr(d$x, d$y, optimize = FALSE),
                 sgpr(d$x, d$y, inducing = matrix(c(-3, 0, 3)), optimize = FALSE))) {
    expect_error(vcov(f), "type-II maximum likelihood")
    expect_error(vcov(f), "predict\\(fit, se.fit = TRUE\\)")
  }
})
