# Equivalences between models at fixed parameters (nothing is optimised):
# where one model is a special case of another, its bound, gradient and
# predictions must be the other's. Each identity is checked on the cases
# that were first written for it and then looped over the models, kernels
# and noise kinds for which it holds.
#
# References: Titsias (2009) for SGPR; Passerello (2022) for heteroscedastic
# SGPR and PGPR; Fernlund (2022) for the orthogonal model; Hensman et al.
# (2013, 2015) and Tiao (2020) for SVGP.

# The noise kinds of the collapsed Gaussian models, for N observations of 2
# inputs: one variance, known per-point variances, a log-linear model.
noise_kinds <- function(N) {
  list(homoscedastic = 0.05, known = seq(0.02, 0.3, length.out = N),
       log_linear = ~ x1 + I(x2^2))
}

# ---- inducing inputs at the training inputs: the exact GP ----------------------

test_that("SGPR with Z = X equals gpr(): the bound is the log marginal likelihood and the predictions agree", {
  d <- toy_data(25, 2)
  xs <- matrix(c(-1, 0.5, 1.5, 0, -0.3, 0.7), 3)
  for (k in all_kernels(2)[c("rbf", "matern32_ard", "matern12")]) {
    g <- gpr(d$x, d$y, kernel = k, noise = 0.08, mean = 0.2, optimize = FALSE)
    s <- sgpr_at(d, k, d$x, noise = 0.08, mean = 0.2, control = list(jitter = 0))
    expect_equal(as.numeric(logLik(s)), as.numeric(logLik(g)), tolerance = 1e-8)
    pg <- predict(g, xs, full_cov = TRUE)
    ps <- predict(s, xs, full_cov = TRUE)
    expect_equal(ps$mean, pg$mean, tolerance = 1e-8)
    expect_equal(ps$cov, pg$cov, tolerance = 1e-8)
    expect_equal(predict(s, xs)$var, diag(pg$cov), tolerance = 1e-8)
  }
  # with the default jitter the agreement is to the jitter's order
  s <- sgpr_at(d, kernel_rbf(0.8, 1.3), d$x, noise = 0.08)
  g <- gpr(d$x, d$y, kernel = kernel_rbf(0.8, 1.3), noise = 0.08, mean = 0, optimize = FALSE)
  expect_equal(as.numeric(logLik(s)), as.numeric(logLik(g)), tolerance = 1e-6)
})

test_that("Gaussian SVGP with Z = X at SGPR's optimal q(u) is the exact GP (GPflow's equivalence test, at fixed parameters)", {
  # evenly spaced inputs: Kuu = K(X, X) must be well conditioned for the
  # comparison (random clustered inputs gave cond(Kuu) = 1e17)
  set.seed(4)
  d <- list(x = matrix(seq(-2, 2, length.out = 20)))
  d$y <- sin(2 * d$x[, 1]) + rnorm(20, sd = 0.2)
  k <- kernel_rbf(0.4, 1.1)
  expect_lt(kappa(kernel_matrix(k, d$x)), 1e8)
  g <- gpr(d$x, d$y, kernel = k, noise = 0.05, mean = 0.1, optimize = FALSE)
  s <- sgpr(d$x, d$y, kernel = k, inducing = d$x, noise = 0.05, mean = 0.1, optimize = FALSE,
            control = list(jitter = 0))
  for (w in c(TRUE, FALSE)) {
    v <- svgp(d$x, d$y, likelihood = "gaussian", kernel = k, inducing = d$x, noise = 0.05,
              mean = 0.1, q_u = posterior_inducing(s), whiten = w, optimize = FALSE,
              control = list(jitter = 0))
    expect_equal(as.numeric(logLik(v)), as.numeric(logLik(g)), tolerance = 1e-8)
    pv <- predict(v, matrix(c(-1.5, 0.3)), full_cov = TRUE)
    pg <- predict(g, matrix(c(-1.5, 0.3)), full_cov = TRUE)
    expect_equal(pv$mean, pg$mean, tolerance = 1e-7)
    expect_equal(pv$cov, pg$cov, tolerance = 1e-6)
  }
})

test_that("with the inducing inputs at the training inputs every Gaussian model is gpr(): sgpr, osgpr and svgp, every kernel", {
  # 12 evenly spaced inputs keep K(X, X) well conditioned for every kernel
  # (condition numbers up to 1.5e7, for the RBF)
  set.seed(4)
  d <- list(x = matrix(seq(-2, 2, length.out = 12)))
  d$y <- sin(2 * d$x[, 1]) + rnorm(12, sd = 0.2)
  odd <- seq(1, 12, by = 2)
  none <- d$x[0, , drop = FALSE]
  xs <- matrix(c(-1.5, 0.3, 2.2))
  ctl <- list(jitter = 0)
  for (k in all_kernels(1)) {
    g <- gpr(d$x, d$y, kernel = k, noise = 0.05, mean = 0.1, optimize = FALSE)
    pg <- predict(g, xs, full_cov = TRUE)
    s <- sgpr_at(d, k, d$x, noise = 0.05, mean = 0.1, control = ctl)
    # models that predict with the exact GP's covariance too
    same <- list(sgpr = s,
                 osgpr_solve = osgpr_at(d, k, d$x, none, "solve", noise = 0.05, mean = 0.1,
                                        control = ctl),
                 osgpr_odvgp = osgpr_at(d, k, d$x, none, "odvgp", noise = 0.05, mean = 0.1,
                                        control = ctl))
    for (w in c(TRUE, FALSE)) {
      same[[paste0("svgp_whiten_", w)]] <-
        svgp(d$x, d$y, likelihood = "gaussian", kernel = k, inducing = d$x, noise = 0.05,
             mean = 0.1, q_u = posterior_inducing(s), whiten = w, optimize = FALSE,
             control = ctl)
    }
    for (nm in names(same)) {
      f <- same[[nm]]
      expect_equal(as.numeric(logLik(f)), as.numeric(logLik(g)), tolerance = 1e-8, label = nm)
      p <- predict(f, xs, full_cov = TRUE)
      expect_equal(p$mean, pg$mean, tolerance = 1e-8, label = nm)
      expect_equal(p$cov, pg$cov, tolerance = 1e-8, label = nm)
    }
    # X split into regular and orthogonal inputs: the union bound is log p(y)
    # and both families predict with its mean (their covariances differ)
    for (type in c("solve", "odvgp")) {
      u <- osgpr_at(d, k, d$x[odd, , drop = FALSE], d$x[-odd, , drop = FALSE], type,
                    bound = "union", noise = 0.05, mean = 0.1, control = ctl)
      expect_equal(as.numeric(logLik(u)), as.numeric(logLik(g)), tolerance = 1e-8)
      expect_equal(predict(u, xs)$mean, pg$mean, tolerance = 1e-8)
    }
  }
})

# ---- equal noise variances: the homoscedastic model ----------------------------

test_that("heteroscedastic SGPR with equal known variances equals homoscedastic SGPR (Passerello 2022, ch. 3)", {
  d <- toy_data(30, 2)
  Z <- d$x[1:6, ]
  k <- kernel_matern52(c(0.5, 0.9), 1.2)
  f1 <- sgpr_at(d, k, Z, noise = 0.07, mean = 0.1)
  f2 <- sgpr_at(d, k, Z, noise = rep(0.07, 30), mean = 0.1)
  expect_equal(as.numeric(logLik(f2)), as.numeric(logLik(f1)), tolerance = 1e-12)
  g1 <- objective(f1)
  g2 <- objective(f2)
  shared <- intersect(names(g1$par), names(g2$par))
  expect_equal(g2$gr(g2$par)[shared], g1$gr(g1$par)[shared], tolerance = 1e-10)
  p1 <- predict(f1, Z + 0.1, full_cov = TRUE)
  p2 <- predict(f2, Z + 0.1, full_cov = TRUE)
  expect_equal(p2, p1, tolerance = 1e-12)
})

test_that("equal noise variances give the homoscedastic model: known and log-linear noise, sgpr and every osgpr bound, every kernel", {
  d <- toy_data(30, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  xs <- Z + 0.1
  # a log-linear noise model starts at the constant var(y) / 10
  v <- var(d$y) / 10
  build <- list(
    sgpr = function(k, noise) sgpr_at(d, k, rbind(Z, O), noise = noise, mean = 0.1),
    osgpr_solve = function(k, noise) osgpr_at(d, k, Z, O, "solve", noise = noise, mean = 0.1),
    osgpr_odvgp = function(k, noise) osgpr_at(d, k, Z, O, "odvgp", noise = noise, mean = 0.1),
    osgpr_union = function(k, noise) osgpr_at(d, k, Z, O, bound = "union", noise = noise,
                                              mean = 0.1))
  for (model in names(build)) for (k in all_kernels(2)) {
    homo <- build[[model]](k, v)
    gh <- objective(homo)
    grh <- gh$gr(gh$par)
    ph <- predict(homo, xs, full_cov = TRUE)
    for (noise in list(rep(v, 30), ~ x1 + I(x2^2))) {
      het <- build[[model]](k, noise)
      expect_equal(as.numeric(logLik(het)), as.numeric(logLik(homo)), tolerance = 1e-12,
                   label = model)
      expect_equal(predict(het, xs, full_cov = TRUE), ph, tolerance = 1e-12, label = model)
      o <- objective(het)
      gr <- o$gr(o$par)
      shared <- intersect(names(gr), names(grh))
      expect_equal(gr[shared], grh[shared], tolerance = 1e-10, label = model)
      # at zero slopes the intercept acts as the log noise variance
      if (inherits(noise, "formula")) {
        expect_equal(gr[["noise_coef[(Intercept)]"]], grh[["log_noise"]], tolerance = 1e-10,
                     label = model)
      }
    }
  }
})

# ---- the orthogonal model and SGPR ---------------------------------------------

test_that("the orthogonal union bound is the SGPR bound on rbind(Z, O), also with the jitter on Kuu and Cvv (Fernlund 2022, eq. 5.33)", {
  d <- toy_data(40, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  lam <- seq(0.02, 0.3, length.out = 40)
  for (k in all_kernels(2)) {
    for (noise in list(0.05, lam)) {
      f <- osgpr_at(d, k, Z, O, bound = "union", noise = noise, mean = 0.1,
                    control = list(jitter = 0))
      s <- sgpr(d$x, d$y, kernel = k, inducing = rbind(Z, O), noise = noise, mean = 0.1,
                optimize = FALSE, control = list(jitter = 0))
      expect_equal(f$bounds[["union"]], as.numeric(logLik(s)), tolerance = 1e-10)
    }
  }
  # with the jitter on Kuu and Cvv: SGPR with that jitter on K(W, W), since
  # the Schur complement of the jittered block matrix is Cvv + jitter I
  k <- kernel_rbf(0.8, 1.3)
  f <- osgpr_at(d, k, Z, O, bound = "union", control = list(jitter = 1e-4))
  s <- sgpr(d$x, d$y, kernel = k, inducing = rbind(Z, O), noise = 0.05, mean = 0,
            optimize = FALSE, control = list(jitter = 1e-4))
  expect_equal(f$bound, s$bound, tolerance = 1e-10)
  expect_equal(unname(f$posterior$jitter), c(1.3e-4, 1.3e-4))
})

test_that("every osgpr fit reports the SGPR bound on rbind(Z, O) as its union bound: both families, both objectives, every noise kind and kernel", {
  d <- toy_data(30, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  for (noise in noise_kinds(30)) for (k in all_kernels(2)) {
    s <- sgpr_at(d, k, rbind(Z, O), noise = noise, mean = 0.1)
    for (type in c("solve", "odvgp")) for (bound in c("family", "union")) {
      f <- osgpr_at(d, k, Z, O, type, bound, noise = noise, mean = 0.1)
      expect_equal(f$bounds[["union"]], as.numeric(logLik(s)), tolerance = 1e-10)
    }
  }
})

test_that("the union bound's gradient is SGPR's on rbind(Z, O), every noise kind and kernel", {
  d <- toy_data(25, 2)
  Z <- d$x[1:3, ] + 0.03
  O <- d$x[4:6, ] - 0.03
  k <- kernel_rbf(c(0.8, 1.1), 1.2)
  f <- osgpr_at(d, k, Z, O, bound = "union", mean = "constant")
  s <- sgpr(d$x, d$y, kernel = k, inducing = rbind(Z, O), noise = 0.05, mean = "constant",
            optimize = FALSE)
  gf <- grad_blocks(f)
  gs <- grad_blocks(s)
  expect_equal(gf[c("variance", "lengthscale", "noise", "mean")],
               gs[c("variance", "lengthscale", "noise", "mean")], tolerance = 1e-9)
  expect_equal(unname(rbind(gf$Z, gf$O)), unname(gs$Z), tolerance = 1e-9)
  for (noise in noise_kinds(25)) for (k in all_kernels(2)) {
    gf <- grad_blocks(osgpr_at(d, k, Z, O, bound = "union", noise = noise, mean = "constant"))
    gs <- grad_blocks(sgpr_at(d, k, rbind(Z, O), noise = noise, mean = "constant"))
    expect_named(gf, c(setdiff(names(gs), "Z"), "Z", "O"), ignore.order = TRUE)
    other <- setdiff(names(gs), "Z")
    expect_equal(gf[other], gs[other], tolerance = 1e-9)
    expect_equal(unname(rbind(gf$Z, gf$O)), unname(gs$Z), tolerance = 1e-9)
  }
})

test_that("both families predict with SGPR's mean on rbind(Z, O); ODGPR with SGPR(Z)'s covariance; SOLVE-GPR's covariance is neither", {
  d <- toy_data(30, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:8, ] - 0.05
  xs <- matrix(seq(-2, 2, length.out = 10), 5)
  for (k in all_kernels(2)) {
    sw <- predict(sgpr(d$x, d$y, kernel = k, inducing = rbind(Z, O), noise = 0.05, mean = 0.2,
                       optimize = FALSE, control = list(jitter = 0)), xs, full_cov = TRUE)
    sz <- predict(sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, mean = 0.2,
                       optimize = FALSE, control = list(jitter = 0)), xs, full_cov = TRUE)
    ps <- predict(osgpr_at(d, k, Z, O, "solve", mean = 0.2, control = list(jitter = 0)), xs,
                  full_cov = TRUE)
    po <- predict(osgpr_at(d, k, Z, O, "odvgp", mean = 0.2, control = list(jitter = 0)), xs,
                  full_cov = TRUE)
    expect_equal(ps$mean, sw$mean, tolerance = 1e-9)
    expect_equal(po$mean, sw$mean, tolerance = 1e-9)
    expect_equal(po$cov, sz$cov, tolerance = 1e-9)
    # overlapping sets, so SOLVE-GPR's covariance is clearly not SGPR's
    expect_gt(max(abs(ps$cov - sw$cov)), 1e-3)
    expect_gt(max(abs(ps$cov - sz$cov)), 1e-3)
  }
})

test_that("M1 = 0 or M2 = 0 reduce the orthogonal model to SGPR on the other set", {
  d1 <- toy_data(30, 1)
  Z1 <- matrix(c(-1.6, -0.4, 0.7, 1.5))
  O1 <- matrix(c(-1.1, 0.1, 1.1))
  xs1 <- matrix(seq(-2.5, 2.5, length.out = 9))
  k <- kernel_rbf(0.7, 1.2)
  sz <- sgpr(d1$x, d1$y, kernel = k, inducing = Z1, noise = 0.05, mean = 0, optimize = FALSE)
  so <- sgpr(d1$x, d1$y, kernel = k, inducing = O1, noise = 0.05, mean = 0, optimize = FALSE)
  psz <- predict(sz, xs1, full_cov = TRUE)
  pso <- predict(so, xs1, full_cov = TRUE)
  for (type in c("solve", "odvgp")) {
    f2 <- osgpr_at(d1, k, Z1, 0, type = type)
    expect_equal(nrow(f2$params$O), 0L)
    expect_equal(unname(f2$bounds), rep(sz$bound, 3), tolerance = 1e-10)
    expect_equal(predict(f2, xs1, full_cov = TRUE), psz, tolerance = 1e-10)
    f1 <- osgpr_at(d1, k, 0, O1, type = type)
    expect_equal(nrow(f1$params$Z), 0L)
    expect_equal(f1$bounds[["union"]], so$bound, tolerance = 1e-10)
    p1 <- predict(f1, xs1, full_cov = TRUE)
    expect_equal(p1$mean, pso$mean, tolerance = 1e-10)
    if (type == "solve") {
      expect_equal(f1$bounds[["solve"]], so$bound, tolerance = 1e-10)
      expect_equal(p1$cov, pso$cov, tolerance = 1e-10)
    } else {
      # ODGPR without regular points predicts with the prior covariance
      expect_equal(unname(p1$cov), kernel_matrix(k, xs1), tolerance = 1e-10)
    }
  }
  # a matrix with no rows works like 0
  f0 <- osgpr_at(d1, k, Z1, O1[0, , drop = FALSE])
  expect_equal(f0$bound, sz$bound, tolerance = 1e-10)
  expect_error(osgpr_at(d1, k, 0, 0), "cannot both be empty")
  expect_output(print(f0), "M = 4")
})

test_that("an empty set reduces the orthogonal model to SGPR on the other: every kernel, noise kind and family", {
  d <- toy_data(30, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  xs <- matrix(c(-1, 0.5, 1.5, 0, -0.3, 0.7), 3)
  for (noise in noise_kinds(30)) for (k in all_kernels(2)) {
    pz <- predict(sz <- sgpr_at(d, k, Z, noise = noise, mean = 0.1), xs, full_cov = TRUE)
    po <- predict(so <- sgpr_at(d, k, O, noise = noise, mean = 0.1), xs, full_cov = TRUE)
    for (type in c("solve", "odvgp")) {
      f2 <- osgpr_at(d, k, Z, O[0, , drop = FALSE], type, noise = noise, mean = 0.1)
      expect_equal(unname(f2$bounds), rep(sz$bound, 3), tolerance = 1e-10)
      expect_equal(predict(f2, xs, full_cov = TRUE), pz, tolerance = 1e-10)
      f1 <- osgpr_at(d, k, Z[0, , drop = FALSE], O, type, noise = noise, mean = 0.1)
      expect_equal(f1$bounds[["union"]], so$bound, tolerance = 1e-10)
      p1 <- predict(f1, xs, full_cov = TRUE)
      expect_equal(p1$mean, po$mean, tolerance = 1e-10)
      if (type == "solve") {
        expect_equal(f1$bounds[["solve"]], so$bound, tolerance = 1e-10)
        expect_equal(p1$cov, po$cov, tolerance = 1e-10)
      } else {
        expect_equal(unname(p1$cov), kernel_matrix(k, xs), tolerance = 1e-10)
      }
    }
  }
})

# ---- every bound is below the exact log marginal likelihood ---------------------

test_that("the SGPR bound is below the exact log marginal likelihood", {
  d <- toy_data(30, 1)
  set.seed(11)
  for (k in all_kernels(1)[c("rbf", "matern52", "matern12")]) {
    exact <- dense_gpr_lml(k, d$x, d$y, 0.05)
    for (M in c(2, 5, 10)) {
      Z <- matrix(runif(M, -2, 2))
      expect_lt(as.numeric(logLik(sgpr_at(d, k, Z))), exact)
    }
  }
})

test_that("the orthogonal bounds are ordered: odvgp <= solve <= union <= log p(y), and solve, odvgp >= SGPR(Z) (Fernlund 2022, eq. 5.33)", {
  d1 <- toy_data(30, 1)
  set.seed(3)
  k <- kernel_rbf(0.6, 1)
  exact <- dense_gpr_lml(k, d1$x, d1$y, 0.05)
  for (i in 1:6) {
    Z <- matrix(runif(3, -2, 2))
    O <- matrix(runif(3, -2, 2))
    f <- osgpr_at(d1, k, Z, O)
    b <- f$bounds
    sz <- as.numeric(logLik(sgpr(d1$x, d1$y, kernel = k, inducing = Z, noise = 0.05,
                                 mean = 0, optimize = FALSE)))
    expect_lte(b[["odvgp"]], b[["solve"]] + 1e-10)
    expect_lte(b[["solve"]], b[["union"]] + 1e-10)
    expect_lt(b[["union"]], exact)
    expect_gte(b[["solve"]], sz - 1e-10)
    expect_gte(b[["odvgp"]], sz - 1e-10)
  }
})

test_that("every Gaussian bound is below the exact log marginal likelihood: sgpr, each osgpr bound and svgp at any q(u), every kernel", {
  d <- toy_data(30, 2)
  lam <- seq(0.02, 0.3, length.out = 30)
  set.seed(12)
  for (k in all_kernels(2)) {
    Z <- matrix(runif(8, -2, 2), 4)
    O <- matrix(runif(6, -2, 2), 3)
    for (noise in list(0.05, lam)) {
      exact <- dense_gpr_lml(k, d$x, d$y, noise, 0.1)
      s <- sgpr_at(d, k, Z, noise = noise, mean = 0.1)
      expect_lt(as.numeric(logLik(s)), exact)
      for (type in c("solve", "odvgp")) for (bound in c("family", "union")) {
        f <- osgpr_at(d, k, Z, O, type, bound, noise = noise, mean = 0.1)
        expect_lt(as.numeric(logLik(f)), exact)
        expect_true(all(f$bounds < exact))
      }
    }
    exact <- dense_gpr_lml(k, d$x, d$y, 0.05, 0.1)
    for (w in c(TRUE, FALSE)) {
      g <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.05,
                mean = 0.1, optimize = FALSE, whiten = w)
      g <- if (w) set_q(g, random_q(4, 3)) else set_q_nw(g, random_q(4, 3))
      expect_lt(as.numeric(logLik(g)), exact)
    }
  }
})

# ---- PGPR and the Gaussian bound ----------------------------------------------

test_that("PGPR at fixed c is the Gaussian bound on pseudo-targets (Passerello 2022, eq. 4.14)", {
  d <- toy_class(40, 2)
  set.seed(6)
  c <- runif(40, 0.05, 3)
  th <- tanh(c / 2) / (2 * c)
  Z <- d$x[c(2, 9, 17, 26, 33), ]
  k <- kernel_matern52(c(0.7, 1.1), 1.4)
  p <- pgpr_at(d, k, Z, c, optimize_inducing = TRUE)
  h <- sgpr(d$x, d$ypm / (2 * th), kernel = k, inducing = Z, noise = 1 / th, mean = 0,
            optimize = FALSE, control = list(jitter = 0))
  const <- 20 * log(2 * pi) - 0.5 * sum(log(th)) + sum(1 / th) / 8 - 40 * log(2) -
    sum(log(cosh(c / 2)) - c / 4 * tanh(c / 2))
  expect_equal(p$bound, h$bound + const, tolerance = 1e-10)
  # the same q*(u) and the same gradient
  qp <- posterior_inducing(p)
  expect_identical(qp, sparsevgp:::.collapsed_qu(p))
  qh <- posterior_inducing(h)
  expect_equal(qp$mean, qh$mean, tolerance = 1e-10)
  expect_equal(qp$cov, qh$cov, tolerance = 1e-10)
  D <- pg_dense(k, d$x, Z, c)
  expect_equal(qp$mean, 0.5 * drop(D$Kuu %*% solve(D$Sig, D$Kuf %*% d$ypm)), tolerance = 1e-8)
  expect_equal(qp$cov, D$Kuu %*% solve(D$Sig, D$Kuu), tolerance = 1e-8)
  op <- objective(p)
  oh <- objective(h)
  expect_identical(names(op$par), names(oh$par))
  expect_equal(op$gr(op$par), oh$gr(oh$par), tolerance = 1e-10)
})

test_that("at fixed c the PGPR objective is the Gaussian objective on pseudo-targets plus a constant, at any parameters: every kernel", {
  d <- toy_class(40, 2)
  set.seed(16)
  c <- runif(40, 0.05, 3)
  th <- pg_theta(c)
  Z <- d$x[c(2, 9, 17, 26, 33), ] + 0.01
  const <- 20 * log(2 * pi) - 0.5 * sum(log(th)) + sum(1 / th) / 8 - 40 * log(2) - sum(pg_kl(c))
  xs <- matrix(c(-1, 0, 1.5, 0.3, -0.8, 1), 3)
  for (k in all_kernels(2)) {
    p <- pgpr_at(d, k, Z, c, mean = "constant", optimize_inducing = TRUE, jitter = 1e-8)
    h <- sgpr(d$x, d$ypm / (2 * th), kernel = k, inducing = Z, noise = 1 / th,
              mean = "constant", optimize = FALSE, control = list(jitter = 1e-8))
    op <- objective(p)
    oh <- objective(h)
    expect_identical(names(op$par), names(oh$par))
    # the same function of (log variance, log lengthscales, mean, Z)
    for (shift in c(0, 0.2)) {
      par <- op$par + shift * seq_along(op$par) / length(op$par)
      expect_equal(-op$fn(par), -oh$fn(par) + const, tolerance = 1e-10)
      expect_equal(op$gr(par), oh$gr(par), tolerance = 1e-10)
    }
    # the same q*(u) and latent predictive at the fits' parameters
    h <- sgpr(d$x, d$ypm / (2 * th), kernel = k, inducing = Z, noise = 1 / th,
              mean = p$params$mean, optimize = FALSE, control = list(jitter = 1e-8))
    expect_equal(posterior_inducing(p), posterior_inducing(h), tolerance = 1e-10)
    expect_equal(predict(p, xs, full_cov = TRUE), predict(h, xs, full_cov = TRUE),
                 tolerance = 1e-10)
  }
})

test_that("the PG bound is below the Bernoulli ELBO at the same q(u), with the same latent predictive (Passerello 2022, sec. 5.3)", {
  d <- toy_class(40, 2)
  Z <- d$x[c(4, 11, 18, 27, 36), ]
  k <- kernel_rbf(c(0.8, 1.3), 1.5)
  set.seed(7)
  for (c in list(runif(40, 0.1, 3), NULL)) {
    f <- pgpr_at(d, k, Z, c, jitter = 1e-8)
    if (is.null(c)) f <- sparsevgp:::.finish(sparsevgp:::.pgpr_update_c(f, 20L))
    qu <- posterior_inducing(f)
    s <- svgp(d$x, d$y, kernel = k, inducing = Z, q_u = qu, optimize = FALSE,
              control = list(jitter = 1e-8))
    expect_lt(f$bound, s$bound)
    # with the same q(u) both models predict the same latent distribution
    xs <- matrix(c(-1, 0, 1.5, 0.3, -0.8, 1), 3)
    expect_equal(predict(s, xs)$mean, predict(f, xs)$mean, tolerance = 1e-8)
    expect_equal(predict(s, xs)$var, predict(f, xs)$var, tolerance = 1e-8)
  }
})

test_that("PGPR and Bernoulli SVGP at the same q(u): the PG bound is lower and the latent predictive the same, every kernel, whitened or not", {
  d <- toy_class(40, 2)
  Z <- d$x[c(4, 11, 18, 27, 36), ]
  set.seed(17)
  c <- runif(40, 0.1, 3)
  xs <- matrix(c(-1, 0, 1.5, 0.3, -0.8, 1), 3)
  for (k in all_kernels(2)) {
    f <- pgpr_at(d, k, Z, c, jitter = 1e-8)
    pf <- predict(f, xs, full_cov = TRUE)
    for (w in c(TRUE, FALSE)) {
      s <- svgp(d$x, d$y, kernel = k, inducing = Z, q_u = posterior_inducing(f), whiten = w,
                optimize = FALSE, control = list(jitter = 1e-8))
      expect_lt(f$bound, s$bound)
      ps <- predict(s, xs, full_cov = TRUE)
      expect_equal(ps$mean, pf$mean, tolerance = 1e-8)
      expect_equal(ps$cov, pf$cov, tolerance = 1e-8)
    }
  }
})

# ---- SVGP and SGPR -------------------------------------------------------------

test_that("Gaussian SVGP at SGPR's optimal q(u) equals SGPR, and any other q(u) is worse: every kernel, whitened or not", {
  d <- toy_data(40, 2)
  Z <- d$x[c(2, 8, 15, 23, 31, 38), ]
  for (k in all_kernels(2)) for (wh in c(TRUE, FALSE)) {
    for (jit in c(0, 1e-6)) {
      s <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.05, mean = 0.15,
                optimize = FALSE, control = list(jitter = jit))
      qu <- posterior_inducing(s)
      g <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.05,
                mean = 0.15, q_u = qu, optimize = FALSE, control = list(jitter = jit),
                whiten = wh)
      expect_equal(g$bound, s$bound, tolerance = 1e-9)
      xs <- rbind(d$x[1:3, ], c(3, 3))
      expect_equal(predict(g, xs, full_cov = TRUE), predict(s, xs, full_cov = TRUE),
                   tolerance = 1e-8)
      # at SGPR's q(u) the ELBO is stationary in the variational parameters
      gr <- objective(g)$gr(objective(g)$par)
      expect_lt(max(abs(gr[grepl("^(q_mu|log_q_sqrt|q_sqrt)", names(gr))])), 1e-6)
      # any other q(u) is worse
      q2 <- qu
      q2$mean <- q2$mean + 0.05
      g2 <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.05,
                 mean = 0.15, q_u = q2, optimize = FALSE, control = list(jitter = jit),
                 whiten = wh)
      expect_lt(g2$bound, s$bound)
    }
  }
})

test_that("the SGPR gradient equals the SVGP partial gradient at SGPR's q(u) (the envelope theorem), every kernel", {
  d <- toy_data(30, 2)
  Z <- d$x[c(3, 10, 18, 26), ] + 0.05
  for (k in all_kernels(2)) {
    s <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.06, mean = 0.2, optimize = FALSE)
    gs <- objective(s)$gr(objective(s)$par)
    for (wh in c(TRUE, FALSE)) {
      g <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.06,
                mean = 0.2, q_u = posterior_inducing(s), optimize = FALSE, whiten = wh)
      gg <- objective(g)$gr(objective(g)$par)
      hyp <- names(gs)
      expect_true(all(hyp %in% names(gg)))
      expect_true(any(grepl("^Z", hyp)) && "log_noise" %in% hyp)
      expect_equal(gg[hyp], gs, tolerance = 1e-6)
      # away from q* the identity fails
      g2 <- natgrad_step(set_q(g, random_q(4, 1)), 0.5)
      gg2 <- objective(g2)$gr(objective(g2)$par)
      expect_gt(max(abs(gg2[hyp] - gs)), 1e-3)
    }
  }
})

test_that("whitened and non-whitened SVGP agree at m = L b, S = L W W' L': every kernel and likelihood", {
  d <- toy_data(30, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(3, 9, 16, 24), ] + 0.01
  q <- random_q(4, seed = 7)
  for (k in all_kernels(2)) {
    for (lik in c("gaussian", "bernoulli", "probit")) {
      yy <- if (lik == "gaussian") d$y else y01
      args <- list(d$x, yy, kernel = k, inducing = Z, likelihood = lik, mean = 0.2,
                   optimize = FALSE)
      if (lik == "gaussian") args$noise <- 0.07
      fw <- set_q(do.call(svgp, args), q)
      fn <- set_q_nw(do.call(svgp, c(args, whiten = FALSE)), q)
      expect_false(fn$whiten)
      expect_equal(fn$bound, fw$bound, tolerance = 1e-9)
      expect_equal(fn$bound_terms, fw$bound_terms, tolerance = 1e-9)
      xs <- rbind(d$x[1:4, ], c(2, -2))
      expect_equal(predict(fn, xs, full_cov = TRUE), predict(fw, xs, full_cov = TRUE),
                   tolerance = 1e-9)
      expect_equal(predict(fn), predict(fw), tolerance = 1e-9)
    }
  }
  # q_u given: the same q(u) in both parameterisations gives the same ELBO
  k <- kernel_matern52(0.8, 1.4)
  s <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = 0.1, mean = 0.1, optimize = FALSE)
  gw <- svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian", noise = 0.1,
             mean = 0.1, q_u = posterior_inducing(s), optimize = FALSE)
  gn <- update(gw, whiten = FALSE, warm_start = FALSE)
  expect_equal(gn$bound, s$bound, tolerance = 1e-9)
  expect_equal(gw$bound, s$bound, tolerance = 1e-9)
})

# ---- jitter only where a factorisation needs it ---------------------------------

test_that("where K_uu factorises as it is, the default bound and predictions are jitter-free", {
  # 12 random inducing inputs on a line: cond(K_uu) of about 1e9, which the
  # Cholesky factorisation handles without jitter
  set.seed(11)
  x <- matrix(sort(runif(80, -3, 3)))
  y <- sin(2 * x[, 1]) + rnorm(80, sd = 0.1)
  k <- kernel_rbf(1, 1)
  Z <- matrix(runif(12, -3, 3))
  expect_gt(kappa(kernel_matrix(k, Z), exact = TRUE), 1e7)
  def <- sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, mean = 0, optimize = FALSE)
  off <- sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, mean = 0, optimize = FALSE,
              control = list(jitter = 0))
  expect_equal(def$jitter, 0)
  expect_identical(def$bound, off$bound)
  # against the dense textbook bound (no jitter anywhere) to 1e-10
  ref <- dense_sgpr_bound(k, x, y, Z, rep(0.01, 80))
  expect_lt(abs(def$bound - ref) / abs(ref), 1e-10)
  xs <- matrix(seq(-3, 3, length.out = 7))
  Kuu <- kernel_matrix(k, Z)
  Kuf <- kernel_matrix(k, Z, x)
  Ksu <- kernel_matrix(k, xs, Z)
  Sig <- Kuu + Kuf %*% t(Kuf) / 0.01
  m_ref <- drop(Ksu %*% solve(Sig, Kuf %*% y)) / 0.01
  p <- predict(def, xs)
  expect_identical(p, predict(off, xs))
  # (the dense reference is itself solved with cond(K_uu) ~ 1e9)
  expect_lt(max(abs(p$mean - m_ref)) / max(abs(m_ref)), 1e-6)
  # the former default (1e-8 of the mean diagonal, always added) moved the
  # bound far more than that
  old <- sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, mean = 0, optimize = FALSE,
              control = list(jitter = 1e-8))
  expect_gt(abs(old$bound - ref) / abs(ref), 1e-6)
  # with Z = X the default bound is the exact log marginal likelihood
  d <- toy_data(25, 2)
  s <- sgpr_at(d, kernel_rbf(0.8, 1.3), d$x, noise = 0.08)
  expect_equal(as.numeric(logLik(s)), dense_gpr_lml(kernel_rbf(0.8, 1.3), d$x, d$y, 0.08),
               tolerance = 1e-10)
  expect_output(print(summary(s)), "none \\(the matrices were factorised as they are\\)")
})

test_that("a K_uu that needs jitter gets the least that works, recorded and reported", {
  set.seed(12)
  x <- matrix(runif(60, -3, 3))
  y <- sin(2 * x[, 1]) + rnorm(60, sd = 0.1)
  k <- kernel_rbf(1, 1)
  # two inducing inputs 1e-9 apart: K_uu is singular to working precision
  Z <- rbind(matrix(c(-2, 0, 2)), 0 + 1e-9)
  f <- sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, optimize = FALSE)
  expect_gt(f$jitter, 0)
  # the matrix as it is fails; the escalation starts at 1e-10 of the mean
  # diagonal (and grows tenfold), which is enough here
  expect_error(sparsevgp:::.ffi_chol(kernel_matrix(k, Z), 0, 1e-12), "not positive definite")
  expect_equal(f$jitter_relative, 1e-10)
  # what it costs is in the fit and the summary
  expect_true(is.finite(f$jitter_cost))
  expect_output(print(summary(f)), "changes the bound by about")
  # past the cap: a clear error, never NaN
  expect_error(sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, optimize = FALSE,
                    control = list(jitter_cap = 1e-14)), "not positive definite")
  # so small a jitter is reported, not warned about; the factor is one the
  # solves can use (a pivot ratio of at least 1e-12)
  expect_silent(sgpr(x, y, kernel = k, inducing = Z, noise = 0.01, optimize = FALSE))
  L <- sparsevgp:::.ffi_chol(kernel_matrix(k, Z), 0, 1e-2)$L
  expect_gte(min(diag(L)^2 / (diag(kernel_matrix(k, Z)) + 1e-10)), 1e-12)
})
