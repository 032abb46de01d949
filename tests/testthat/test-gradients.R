# Every analytic gradient against central finite differences. helper-grad.R's
# expect_grad() tests max |g - g_fd| / max(1, max |g|) <= 1e-6 for the
# gradient g of objective(fit) and the finite differences g_fd of its value.
#
# The checks loop over model x kernel x parameter kind: each model variant
# below (a "case") is checked with each of the eight kernels of
# all_kernels(2) (RBF and Matern 1/2, 3/2, 5/2, isotropic and ARD), and its
# objective must hold exactly the parameter kinds the case declares (kernel
# variance, lengthscales, noise, mean, inducing inputs, variational
# parameters). The last test checks that every case covered each of its
# kinds with all eight kernels. Kernel-level contractions are checked in
# test-kernels.R; the tests after the loops check gradients at edge cases.

grad_kernels <- all_kernels(2)

kernel_kinds <- c("variance", "lengthscale")
svgp_kinds <- c(kernel_kinds, "mean", "Z", "q_mu", "q_sqrt_diag", "q_sqrt_lower")
osgpr_kinds <- function(noise) c(kernel_kinds, noise, "mean", "Z", "O")
grad_cases <- list(
  "gpr" = c(kernel_kinds, "noise", "mean"),
  "sgpr, one noise variance" = c(kernel_kinds, "noise", "mean", "Z"),
  "sgpr, known noise" = c(kernel_kinds, "mean", "Z"),
  "sgpr, log-linear noise" = c(kernel_kinds, "noise_coef", "mean", "Z"),
  "osgpr solve, one noise variance" = osgpr_kinds("noise"),
  "osgpr solve, known noise" = osgpr_kinds(NULL),
  "osgpr solve, log-linear noise" = osgpr_kinds("noise_coef"),
  "osgpr odvgp, one noise variance" = osgpr_kinds("noise"),
  "osgpr odvgp, known noise" = osgpr_kinds(NULL),
  "osgpr odvgp, log-linear noise" = osgpr_kinds("noise_coef"),
  "osgpr union, one noise variance" = osgpr_kinds("noise"),
  "osgpr union, known noise" = osgpr_kinds(NULL),
  "osgpr union, log-linear noise" = osgpr_kinds("noise_coef"),
  "pgpr" = c(kernel_kinds, "mean", "Z"),
  "svgp whitened, Bernoulli logit" = svgp_kinds,
  "svgp whitened, Bernoulli probit" = svgp_kinds,
  "svgp whitened, Gaussian" = c(svgp_kinds, "noise"),
  "svgp non-whitened, Bernoulli logit" = svgp_kinds,
  "svgp non-whitened, Bernoulli probit" = svgp_kinds,
  "svgp non-whitened, Gaussian" = c(svgp_kinds, "noise"))

# The kernels with which each case covered each of its kinds ("case|kind"
# -> kernel names), filled by check_grad().
grad_covered <- new.env()

# The parameter kind of each name objective() gives ("log_lengthscale[2]" is
# a lengthscale, "Z[3,1]" an inducing input).
param_kind <- function(nm) sub("\\[.*$", "", sub("^log_", "", nm))

# expect_grad() on `fit`, whose objective must hold exactly the kinds of
# `case`; records them as covered with kernel `kname`.
check_grad <- function(case, kname, fit, tol = 1e-6) {
  kinds <- unique(param_kind(names(objective(fit)$par)))
  expect_setequal(kinds, grad_cases[[case]])
  expect_grad(fit, tol)
  for (kind in kinds) {
    key <- paste(case, kind, sep = "|")
    grad_covered[[key]] <- union(grad_covered[[key]], kname)
  }
}

# ---- the loops -------------------------------------------------------------------

test_that("gpr's gradient matches finite differences: every kernel, every parameter kind", {
  d <- toy_data(20, 2)
  for (kn in names(grad_kernels)) {
    check_grad("gpr", kn, gpr(d$x, d$y, kernel = grad_kernels[[kn]], noise = 0.1,
                              optimize = FALSE))
  }
})

test_that("SGPR gradients match finite differences: every kernel, noise kind and parameter kind", {
  d <- toy_data(30, 2)
  Z <- d$x[1:6, ] + 0.03
  lam <- seq(0.02, 0.25, length.out = 30)
  for (kn in names(grad_kernels)) {
    k <- grad_kernels[[kn]]
    check_grad("sgpr, one noise variance", kn, sgpr_at(d, k, Z, noise = 0.05, mean = "constant"))
    check_grad("sgpr, known noise", kn, sgpr_at(d, k, Z, noise = lam, mean = "constant"))
    check_grad("sgpr, log-linear noise", kn,
               sgpr_at(d, k, Z, noise = ~ x1 + I(x2^2), mean = "constant"))
  }
  # each parameter kind is present in the checked objectives
  o <- objective(sgpr_at(d, kernel_rbf(ard = FALSE), Z, noise = ~ x1, mean = "constant"))
  expect_true(all(c("log_variance", "log_lengthscale", "noise_coef[(Intercept)]",
                    "noise_coef[x1]", "mean", "Z[1,1]", "Z[6,2]") %in% names(o$par)))
})

test_that("orthogonal SGPR gradients match finite differences: every kernel, family, bound, noise kind and parameter kind", {
  d <- toy_data(25, 2)
  Z <- d$x[1:3, ] + 0.03
  O <- d$x[4:6, ] - 0.03
  noises <- list("one noise variance" = 0.05,
                 "known noise" = seq(0.02, 0.25, length.out = 25),
                 "log-linear noise" = ~ x1 + I(x2^2))
  for (kn in names(grad_kernels)) for (nz in names(noises)) {
    k <- grad_kernels[[kn]]
    for (type in c("solve", "odvgp")) {
      check_grad(sprintf("osgpr %s, %s", type, nz), kn,
                 osgpr_at(d, k, Z, O, type = type, noise = noises[[nz]], mean = "constant"))
    }
    check_grad(sprintf("osgpr union, %s", nz), kn,
               osgpr_at(d, k, Z, O, bound = "union", noise = noises[[nz]], mean = "constant"))
  }
  o <- objective(osgpr_at(d, kernel_rbf(ard = FALSE), Z, O, noise = ~ x1, mean = "constant"))
  expect_true(all(c("log_variance", "log_lengthscale", "noise_coef[(Intercept)]",
                    "noise_coef[x1]", "mean", "Z[1,1]", "Z[3,2]", "O[1,1]", "O[3,2]")
                  %in% names(o$par)))
})

test_that("PGPR gradients match finite differences: every kernel, every parameter kind", {
  d <- toy_class(30, 2)
  set.seed(9)
  c <- runif(30, 0.1, 3)
  Z <- d$x[c(2, 8, 15, 21, 27), ] + 0.02
  for (kn in names(grad_kernels)) {
    check_grad("pgpr", kn, pgpr_at(d, grad_kernels[[kn]], Z, c, mean = "constant",
                                   optimize_inducing = TRUE, jitter = 1e-8))
  }
  o <- objective(pgpr_at(d, kernel_rbf(c(1, 2), 1), Z, c, mean = "constant",
                         optimize_inducing = TRUE))
  expect_setequal(names(o$par), c("log_variance", "log_lengthscale[1]", "log_lengthscale[2]",
                                  "mean", sprintf("Z[%d,%d]", rep(1:5, 2), rep(1:2, each = 5))))
  # by default Z and the mean are fixed
  o <- objective(pgpr_at(d, kernel_rbf(1, 1), Z, c))
  expect_identical(names(o$par), c("log_variance", "log_lengthscale"))
})

test_that("whitened SVGP gradients match finite differences: every kernel, likelihood and parameter kind", {
  d <- toy_data(25, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(1, 7, 13, 20), ] + 0.02
  q <- random_q(4, seed = 5)
  q3 <- random_q(4, seed = 3)
  for (kn in names(grad_kernels)) {
    k <- grad_kernels[[kn]]
    fb <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, mean = "constant", optimize = FALSE), q)
    check_grad("svgp whitened, Bernoulli logit", kn, fb)
    fg <- set_q(svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.1,
                     optimize = FALSE), q)
    check_grad("svgp whitened, Gaussian", kn, fg)
    fp <- set_q(svgp(d$x, y01, kernel = k, inducing = Z, likelihood = "probit",
                     mean = "constant", optimize = FALSE), q3)
    check_grad("svgp whitened, Bernoulli probit", kn, fp)
  }
  o <- objective(fg)
  expect_true(all(c("log_variance", "log_lengthscale[1]", "log_noise", "mean", "Z[4,2]",
                    "q_mu[1]", "log_q_sqrt_diag[4]", "q_sqrt_lower[6]") %in% names(o$par)))
})

test_that("non-whitened SVGP gradients match finite differences: every kernel, likelihood and parameter kind", {
  d <- toy_data(25, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(1, 7, 13, 20), ] + 0.02
  q <- random_q(4, seed = 11)
  for (kn in names(grad_kernels)) {
    k <- grad_kernels[[kn]]
    fb <- set_q_nw(svgp(d$x, y01, kernel = k, inducing = Z, mean = "constant", optimize = FALSE,
                        whiten = FALSE), q)
    check_grad("svgp non-whitened, Bernoulli logit", kn, fb)
    fg <- set_q_nw(svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian",
                        noise = 0.1, optimize = FALSE, whiten = FALSE), q)
    check_grad("svgp non-whitened, Gaussian", kn, fg)
    # the probit far in the tail (large |mu|), from q(u)'s prior covariance
    fp <- svgp(d$x, y01, kernel = k, inducing = Z, likelihood = "probit", whiten = FALSE,
               mean = "constant", optimize = FALSE)
    check_grad("svgp non-whitened, Bernoulli probit", kn,
               with_params(fp, q_mu = c(8, -6, 5, -7)))
  }
  expect_true(all(c("log_variance", "log_lengthscale[2]", "log_noise", "mean", "Z[1,1]",
                    "q_mu[2]", "log_q_sqrt_diag[3]", "q_sqrt_lower[1]") %in%
                    names(objective(fg)$par)))
})

test_that("the loops covered every parameter kind of every case with all eight kernels", {
  kinds <- unique(unlist(grad_cases))
  got <- t(vapply(names(grad_cases), function(case) {
    vapply(kinds, function(kind) length(grad_covered[[paste(case, kind, sep = "|")]]), 1L)
  }, integer(length(kinds))))
  want <- t(vapply(names(grad_cases), function(case) {
    ifelse(kinds %in% grad_cases[[case]], length(grad_kernels), 0L)
  }, integer(length(kinds))))
  dimnames(want) <- dimnames(got)
  expect_identical(got, want)
  # every model, every kind
  expect_setequal(sub("[ ,].*$", "", names(grad_cases)), c("gpr", "sgpr", "osgpr", "pgpr", "svgp"))
  expect_setequal(kinds, c("variance", "lengthscale", "noise", "noise_coef", "mean", "Z", "O",
                           "q_mu", "q_sqrt_diag", "q_sqrt_lower"))
})

# ---- edge cases ------------------------------------------------------------------

test_that("orthogonal SGPR gradients with heteroscedastic noise, a large jitter and empty sets", {
  d <- toy_data(25, 2)
  Z <- d$x[1:3, ] + 0.03
  O <- d$x[4:6, ] - 0.03
  lam <- seq(0.02, 0.25, length.out = 25)
  k <- kernel_rbf(c(0.8, 1.1), 1.2)
  for (type in c("solve", "odvgp")) {
    expect_grad(osgpr_at(d, k, Z, O, type = type, noise = lam, mean = "constant"))
    expect_grad(osgpr_at(d, k, Z, O, type = type, noise = ~ x1 + I(x2^2), mean = "constant"))
    # with a jitter large enough to matter (it scales with the kernel variance)
    expect_grad(osgpr_at(d, k, Z, O, type = type, mean = "constant",
                         control = list(jitter = 1e-3)))
    # empty sets
    expect_grad(osgpr_at(d, k, Z[0, , drop = FALSE], O, type = type, mean = "constant"))
    expect_grad(osgpr_at(d, k, Z, O[0, , drop = FALSE], type = type, mean = "constant"))
  }
})

test_that("SVGP gradients where q(f) variances vanish and where the jitter escalates", {
  d <- toy_data(25, 2)
  y01 <- as.integer(d$y > 0)
  q <- random_q(4, seed = 5)
  # inducing inputs at training inputs: q(f) variances near zero
  fz <- set_q(svgp(d$x, y01, kernel = kernel_rbf(1, 1), inducing = d$x[1:4, ], optimize = FALSE),
              list(b = q$b, W = diag(1e-4, 4)))
  expect_grad(fz, tol = 1e-5)
  # q(f) variances below 1e-16 use the limit of the variance derivative
  ft <- set_q(svgp(d$x, y01, kernel = kernel_rbf(1, 1), inducing = d$x[1:4, ], optimize = FALSE,
                   control = list(jitter = 0)), list(b = q$b, W = diag(1e-9, 4)))
  expect_lt(max(predict(ft, d$x[1:4, ])$var), 1e-15)
  expect_grad(ft, tol = 1e-5)
  # non-whitened, with jitter escalation in play (inducing inputs at training inputs)
  q <- random_q(4, seed = 11)
  fz <- set_q_nw(svgp(d$x, y01, kernel = kernel_rbf(1, 1), inducing = d$x[1:4, ],
                      optimize = FALSE, whiten = FALSE), list(b = q$b, W = diag(0.1, 4)))
  expect_grad(fz, tol = 1e-5)
})

test_that("the orthogonal bound's adjoints of Kww, Kwf, diag Kff, the noise and the targets match finite differences", {
  # directly on the matrices, independently of the kernel contractions:
  # Gww = [[Guu, Guv/2], [Guv'/2, Gvv]] is the adjoint of the symmetric Kww
  d1 <- toy_data(30, 1)
  W <- rbind(matrix(c(-1.6, -0.4, 0.7, 1.5)), matrix(c(-1.1, 0.1, 1.1)))
  k <- kernel_matern52(0.6, 1.1)
  Kww <- naive_kernel(k, W, W)
  Kwf <- naive_kernel(k, W, d1$x)
  kd <- rep(1.1, 30)
  lam <- seq(0.03, 0.1, length.out = 30)
  yt <- d1$y - 0.1
  bo <- function(Kww, Kwf, kd, lam, yt, v, grad = FALSE) {
    .Call(sparsevgp:::ffi_bo_bound, Kww, Kwf, 4L, kd, lam, yt, v, 0, 1e-2, grad)
  }
  h <- 1e-6
  for (v in 0:2) {
    a <- bo(Kww, Kwf, kd, lam, yt, v, TRUE)
    f <- function(...) bo(...)$bound
    for (i in 1:7) for (j in 1:i) {
      E <- matrix(0, 7, 7)
      E[i, j] <- E[j, i] <- h
      fd <- (f(Kww + E, Kwf, kd, lam, yt, v) - f(Kww - E, Kwf, kd, lam, yt, v)) / (2 * h)
      an <- if (i == j) a$Gww[i, i] else a$Gww[i, j] + a$Gww[j, i]
      expect_lte(abs(an - fd) / max(1, abs(fd)), 1e-6)
    }
    for (i in 1:7) for (n in c(1, 12, 30)) {
      E <- matrix(0, 7, 30)
      E[i, n] <- h
      fd <- (f(Kww, Kwf + E, kd, lam, yt, v) - f(Kww, Kwf - E, kd, lam, yt, v)) / (2 * h)
      expect_lte(abs(a$Gwf[i, n] - fd) / max(1, abs(fd)), 1e-6)
    }
    for (n in c(2, 17, 29)) {
      e <- replace(numeric(30), n, h)
      expect_equal(a$gdiag[n], (f(Kww, Kwf, kd + e, lam, yt, v) - f(Kww, Kwf, kd - e, lam, yt, v)) / (2 * h),
                   tolerance = 1e-6)
      expect_equal(a$glambda[n], (f(Kww, Kwf, kd, lam + e, yt, v) - f(Kww, Kwf, kd, lam - e, yt, v)) / (2 * h),
                   tolerance = 1e-6)
      expect_equal(a$gytil[n], (f(Kww, Kwf, kd, lam, yt + e, v) - f(Kww, Kwf, kd, lam, yt - e, v)) / (2 * h),
                   tolerance = 1e-6)
    }
    expect_equal(a$bound, a$bounds[[v + 1L]])
  }
  # the union adjoints are those of the SGPR routine on the stacked set
  g <- .Call(sparsevgp:::ffi_bg_bound, Kww, Kwf, kd, lam, yt, 0, 1e-2, TRUE)
  a <- bo(Kww, Kwf, kd, lam, yt, 0L, TRUE)
  expect_equal(a$Gww, g$Guu, tolerance = 1e-9)
  expect_equal(a$Gwf, g$Guf, tolerance = 1e-9)
  expect_equal(a$glambda, g$glambda, tolerance = 1e-9)
  expect_equal(a$mu, g$mu, tolerance = 1e-9)
})
