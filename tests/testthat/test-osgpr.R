# Orthogonal SGPR (Fernlund 2022, ch. 5; SOLVE-GP of Shi et al. 2020 and
# ODVGP of Salimbeni et al. 2018): every quantity is checked against a
# dense formula written here from the thesis's equations (equation numbers
# are the thesis's), with the edge cases. The identities with sgpr() and
# gpr() are in test-identities.R, the gradients in test-gradients.R.

# Dense building blocks: Kuu, Kvv, Kuf, Kvf, Kuv and the orthogonal
# covariances of Fernlund (2022), eq. 5.5.
dense_blocks <- function(k, x, Z, O) {
  b <- list(Kuu = naive_kernel(k, Z, Z), Kvv = naive_kernel(k, O, O),
            Kuf = naive_kernel(k, Z, x), Kvf = naive_kernel(k, O, x),
            Kuv = naive_kernel(k, Z, O), Kff = naive_kernel(k, x, x))
  P <- solve(b$Kuu, b$Kuv)
  b$Cvv <- b$Kvv - crossprod(b$Kuv, P)
  b$Cvf <- b$Kvf - crossprod(P, b$Kuf)
  b$Qu <- crossprod(b$Kuf, solve(b$Kuu, b$Kuf))
  b$Qv <- crossprod(b$Cvf, solve(b$Cvv, b$Cvf))
  b
}

# Fernlund (2022), eq. 5.33 (with the log of the Gaussian density, which the
# thesis omits), per-point noise lambda.
dense_union <- function(k, x, y, Z, O, lambda, mean = 0) {
  b <- dense_blocks(k, x, Z, O)
  lambda <- rep_len(lambda, nrow(x))
  dense_log_normal(y - mean, b$Qu + b$Qv + diag(lambda)) -
    0.5 * sum(diag(b$Kff - b$Qu - b$Qv) / lambda)
}

# Fernlund (2022), eq. 5.26 in its own form (sigma^2 I generalised to Lambda).
closed_form_q <- function(k, x, y, Z, O, lambda, type) {
  b <- dense_blocks(k, x, Z, O)
  Lam <- diag(rep_len(lambda, nrow(x)))
  Ru <- b$Qv + Lam
  Rv <- b$Qu + Lam
  list(m_u = drop(b$Kuu %*% solve(b$Kuu + b$Kuf %*% solve(Ru, t(b$Kuf)), b$Kuf %*% solve(Ru, y))),
       m_v = drop(b$Cvv %*% solve(b$Cvv + b$Cvf %*% solve(Rv, t(b$Cvf)), b$Cvf %*% solve(Rv, y))),
       S_u = b$Kuu %*% solve(b$Kuu + b$Kuf %*% solve(Lam, t(b$Kuf)), b$Kuu),
       S_v = if (type == "solve") b$Cvv %*% solve(b$Cvv + b$Cvf %*% solve(Lam, t(b$Cvf)), b$Cvv) else b$Cvv)
}

# The uncollapsed orthogonal ELBO, Fernlund (2022), eqs 5.20-5.24 (with -M2
# for the thesis's -M in eq. 5.24) and
# 4.18, for any q: q(u) = N(m_u, S_u), q(v_perp) = N(m_v, S_v).
# The blocks `b` may be given, computed once, where the ELBO is evaluated
# many times.
uncollapsed_orth <- function(k, x, y, Z, O, lambda, m_u, S_u, m_v, S_v,
                             b = dense_blocks(k, x, Z, O)) {
  Pu <- solve(b$Kuu, b$Kuf)
  Pv <- solve(b$Cvv, b$Cvf)
  mu <- drop(crossprod(Pu, m_u) + crossprod(Pv, m_v))                 # eq. 5.14
  Sig <- b$Kff - crossprod(Pu, (b$Kuu - S_u) %*% Pu) - crossprod(Pv, (b$Cvv - S_v) %*% Pv)
  lambda <- rep_len(lambda, length(y))
  ell <- sum(dnorm(y, mu, sqrt(lambda), log = TRUE)) - 0.5 * sum(diag(Sig) / lambda)
  kl <- function(m, S, K) {
    0.5 * (sum(diag(solve(K, S))) + sum(m * solve(K, m)) - length(m) +
             as.numeric(determinant(K)$modulus) - as.numeric(determinant(S)$modulus))
  }
  ell - kl(m_u, S_u, b$Kuu) - kl(m_v, S_v, b$Cvv)                     # eqs 5.24, 4.18
}

# The predictive distribution of eq. 5.15 (SOLVE-GP) or 5.10 (ODVGP) with
# the optimal q of eq. 5.26.
dense_predict <- function(k, x, y, Z, O, lambda, type, xs) {
  q <- closed_form_q(k, x, y, Z, O, lambda, type)
  b <- dense_blocks(k, x, Z, O)
  Ksu <- naive_kernel(k, xs, Z)
  Csv <- naive_kernel(k, xs, O) - Ksu %*% solve(b$Kuu, b$Kuv)
  mean <- drop(Ksu %*% solve(b$Kuu, q$m_u) + Csv %*% solve(b$Cvv, q$m_v))   # eq. 5.41
  cov <- naive_kernel(k, xs, xs) - Ksu %*% solve(b$Kuu, (b$Kuu - q$S_u) %*% solve(b$Kuu, t(Ksu))) -
    Csv %*% solve(b$Cvv, (b$Cvv - q$S_v) %*% solve(b$Cvv, t(Csv)))
  list(mean = mean, cov = cov)
}

# Fernlund (2022), Algorithm 3 literally (lines 1-30, homoscedastic noise s2),
# with line 20 corrected to C_v* = K_v* - d_v' d_*, including its N x N
# matrices D, D_u, D_v.
algorithm3 <- function(k, x, y, Z, O, s2, xs) {
  s <- sqrt(s2)
  N <- nrow(x)
  Kuu <- naive_kernel(k, Z, Z); Kvv <- naive_kernel(k, O, O)
  Kuf <- naive_kernel(k, Z, x); Kuv <- naive_kernel(k, Z, O); Kvf <- naive_kernel(k, O, x)
  Lu <- t(chol(Kuu))
  df <- forwardsolve(Lu, Kuf); dv <- forwardsolve(Lu, Kuv)
  Cvf <- Kvf - crossprod(dv, df); Cvv <- Kvv - crossprod(dv)
  Lv <- t(chol(Cvv))
  Au <- df / s; Av <- forwardsolve(Lv, Cvf) / s
  A <- rbind(Au, Av)
  Bu <- diag(nrow(Z)) + tcrossprod(Au); Bv <- diag(nrow(O)) + tcrossprod(Av)
  Buv <- tcrossprod(Au, Av)
  LBu <- t(chol(Bu)); gam <- forwardsolve(LBu, Buv)
  LQ <- t(chol(Bv - crossprod(gam)))
  LB <- rbind(cbind(LBu, matrix(0, nrow(Z), nrow(O))), cbind(t(gam), LQ))
  cc <- forwardsolve(LB, A %*% y) / s
  bound <- -N / 2 * log(2 * pi * s2) - sum(log(diag(LB))) - 0.5 * sum(y^2) / s2 +
    0.5 * sum(cc^2) - 0.5 * N * k$variance / s2 + 0.5 * sum(A^2)
  Kss <- naive_kernel(k, xs, xs); Kus <- naive_kernel(k, Z, xs); Kvs <- naive_kernel(k, O, xs)
  ds <- forwardsolve(Lu, Kus)
  Cvs <- Kvs - crossprod(dv, ds)                        # line 20, corrected
  LBv <- t(chol(Bv))
  C <- forwardsolve(LB, A); Cu <- forwardsolve(LBu, Au); Cv <- forwardsolve(LBv, Av)
  D <- diag(N) - crossprod(C); Du <- diag(N) - crossprod(Cu); Dv <- diag(N) - crossprod(Cv)
  Eu <- diag(nrow(Z)) - Au %*% D %*% t(Au); Ev <- diag(nrow(O)) - Av %*% D %*% t(Av)
  Fuv <- Eu %*% Au %*% Dv / s; Fvu <- Ev %*% Av %*% Du / s
  au <- ds; av <- forwardsolve(Lv, Cvs)
  bu <- forwardsolve(LBu, au); bv <- forwardsolve(LBv, av)
  mean <- drop(crossprod(au, Fuv %*% y) + crossprod(av, Fvu %*% y))   # eq. 5.55
  cov_od <- Kss - crossprod(au) + crossprod(bu)                      # eq. 5.56
  list(bound = bound, mean = mean, cov_odvgp = cov_od,
       cov_solve = cov_od - crossprod(av) + crossprod(bv),           # eq. 5.57
       logdet_Bv = 2 * sum(log(diag(LBv))), logdet_Q = 2 * sum(log(diag(LQ))),
       trAvAv = sum(Av^2))
}

d1 <- toy_data(30, 1)
Z1 <- matrix(c(-1.6, -0.4, 0.7, 1.5))
O1 <- matrix(c(-1.1, 0.1, 1.1))
xs1 <- matrix(seq(-2.5, 2.5, length.out = 9))

test_that("the union bound equals eq. 5.33 written densely (Fernlund 2022, with its missing log restored)", {
  d <- toy_data(40, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  lam <- seq(0.02, 0.3, length.out = 40)
  for (k in all_kernels(2)) {
    for (noise in list(0.05, lam)) {
      f <- osgpr_at(d, k, Z, O, bound = "union", noise = noise, mean = 0.1,
                    control = list(jitter = 0))
      ref <- dense_union(k, d$x, d$y, Z, O, noise, 0.1)
      expect_equal(as.numeric(logLik(f)), ref, tolerance = 1e-10)
    }
  }
})

test_that("Algorithm 3 (with line 20 corrected) agrees with the C routine: bound, mean (eq. 5.55), covariances (eqs 5.56, 5.57)", {
  k <- kernel_rbf(0.7, 1.2)
  f <- osgpr_at(d1, k, Z1, O1, type = "solve", control = list(jitter = 0))
  a3 <- algorithm3(k, d1$x, d1$y, Z1, O1, 0.05, xs1)
  expect_equal(f$bounds[["union"]], a3$bound, tolerance = 1e-10)
  ps <- predict(f, xs1, full_cov = TRUE)
  expect_equal(unname(ps$mean), a3$mean, tolerance = 1e-9)      # the cheap form = eq. 5.55
  expect_equal(unname(ps$cov), a3$cov_solve, tolerance = 1e-9)
  fo <- osgpr_at(d1, k, Z1, O1, type = "odvgp", control = list(jitter = 0))
  po <- predict(fo, xs1, full_cov = TRUE)
  expect_equal(unname(po$mean), a3$mean, tolerance = 1e-9)
  expect_equal(unname(po$cov), a3$cov_odvgp, tolerance = 1e-9)
  # the family bounds are the union bound corrected by log|B_v|, tr(A_v A_v') and
  # log|Q| (see ?osgpr)
  expect_equal(f$bounds[["solve"]], a3$bound - 0.5 * a3$logdet_Bv + 0.5 * a3$logdet_Q,
               tolerance = 1e-10)
  expect_equal(f$bounds[["odvgp"]], a3$bound - 0.5 * a3$trAvAv + 0.5 * a3$logdet_Q,
               tolerance = 1e-10)
})

test_that("predictions equal eqs 5.41, 5.14 and 5.9 with the optimal q of eq. 5.26", {
  d <- toy_data(30, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  xs <- matrix(c(-1, 0.5, 1.5, 0, -0.3, 0.7, 1.2, -1.4), 4)
  lam <- seq(0.03, 0.2, length.out = 30)
  for (k in all_kernels(2)[c("rbf", "matern32_ard", "matern12")]) {
    for (type in c("solve", "odvgp")) {
      f <- osgpr_at(d, k, Z, O, type = type, noise = lam, mean = 0.3, control = list(jitter = 0))
      ref <- dense_predict(k, d$x, d$y - 0.3, Z, O, lam, type, xs)
      p <- predict(f, xs, full_cov = TRUE)
      expect_equal(unname(p$mean), ref$mean + 0.3, tolerance = 1e-9)
      expect_equal(unname(p$cov), ref$cov, tolerance = 1e-9)
      expect_equal(unname(predict(f, xs)$var), diag(ref$cov), tolerance = 1e-9)
    }
  }
  f <- osgpr_at(d, kernel_rbf(0.8, 1), Z, O, noise = 0.04)
  expect_equal(unname(predict(f, xs, type = "response")$var - predict(f, xs)$var), rep(0.04, 4))
  expect_equal(unname(fitted(f)), unname(predict(f)$mean))
})

test_that("the uncollapsed ELBO (eqs 5.20-5.24) at the closed-form optimum (eq. 5.26) is the family bound", {
  k <- kernel_matern52(0.7, 1.1)
  lam <- seq(0.03, 0.2, length.out = 30)
  y <- d1$y - 0.1
  for (type in c("solve", "odvgp")) {
    f <- osgpr_at(d1, k, Z1, O1, type = type, noise = lam, mean = 0.1, control = list(jitter = 0))
    q <- closed_form_q(k, d1$x, y, Z1, O1, lam, type)
    e <- uncollapsed_orth(k, d1$x, y, Z1, O1, lam, q$m_u, q$S_u, q$m_v, q$S_v)
    expect_equal(e, f$bounds[[type]], tolerance = 1e-9)
    expect_equal(as.numeric(logLik(f)), e, tolerance = 1e-9)
    # the package's q(u, v) is eq. 5.26 ...
    po <- posterior_orthogonal(f)
    expect_equal(unname(po$mean_u) - 0.1, q$m_u, tolerance = 1e-9)
    expect_equal(unname(po$mean_v), q$m_v, tolerance = 1e-9)
    expect_equal(unname(po$cov_u), q$S_u, tolerance = 1e-9)
    expect_equal(unname(po$cov_v), q$S_v, tolerance = 1e-9)
    # ... whose means are the simpler forms K_uf R^-1 y and C_vf R^-1 y
    b <- dense_blocks(k, d1$x, Z1, O1)
    R <- b$Qu + b$Qv + diag(lam)
    expect_equal(q$m_u, drop(b$Kuf %*% solve(R, y)), tolerance = 1e-9)
    expect_equal(q$m_v, drop(b$Cvf %*% solve(R, y)), tolerance = 1e-9)
    # stationarity: moving any parameter away lowers the ELBO
    expect_lt(uncollapsed_orth(k, d1$x, y, Z1, O1, lam, q$m_u + 0.05, q$S_u, q$m_v, q$S_v), e)
    expect_lt(uncollapsed_orth(k, d1$x, y, Z1, O1, lam, q$m_u, q$S_u, q$m_v - 0.05, q$S_v), e)
    expect_lt(uncollapsed_orth(k, d1$x, y, Z1, O1, lam, q$m_u, q$S_u * 1.1, q$m_v, q$S_v), e)
    if (type == "solve") {
      expect_lt(uncollapsed_orth(k, d1$x, y, Z1, O1, lam, q$m_u, q$S_u, q$m_v, q$S_v * 0.9), e)
      # SOLVE-GP with S_v = C_vv is ODVGP
      expect_equal(uncollapsed_orth(k, d1$x, y, Z1, O1, lam, q$m_u, q$S_u, q$m_v, b$Cvv),
                   f$bounds[["odvgp"]], tolerance = 1e-9)
    }
  }
  # the union bound is the ELBO of the full-covariance q(u, v): the joint
  # q(u, v) of SGPR on rbind(Z, O), with the SOLVE/ODVGP mean
  fu <- osgpr_at(d1, k, Z1, O1, bound = "union", noise = lam, control = list(jitter = 0))
  s <- sgpr(d1$x, d1$y, kernel = k, inducing = rbind(Z1, O1), noise = lam, mean = 0,
            optimize = FALSE, control = list(jitter = 0))
  expect_equal(unname(posterior_orthogonal(fu)$joint$mean), unname(posterior_inducing(s)$mean),
               tolerance = 1e-9)
})

# Symmetric perturbation directions for a covariance S, scaled by its Cholesky
# factor (t(R) E R) so that a step of the same size is equally small for every
# eigenvalue of S.
scaled_sym_directions <- function(S) {
  R <- chol(S)
  n <- nrow(S)
  out <- list()
  for (i in seq_len(n)) for (j in seq_len(i)) {
    E <- matrix(0, n, n)
    E[i, j] <- E[j, i] <- 1
    out[[length(out) + 1L]] <- crossprod(R, E %*% R)
  }
  out
}

test_that("the uncollapsed ELBO is stationary at eq. 5.26's q: its finite-difference gradient vanishes", {
  k <- kernel_rbf(0.8, 1.2)
  lam <- 0.06
  y <- d1$y
  q <- closed_form_q(k, d1$x, y, Z1, O1, lam, "solve")
  b <- dense_blocks(k, d1$x, Z1, O1)
  elbo <- function(m_u = q$m_u, S_u = q$S_u, m_v = q$m_v, S_v = q$S_v) {
    uncollapsed_orth(k, d1$x, y, Z1, O1, lam, m_u, S_u, m_v, S_v, b = b)
  }
  h <- 1e-5
  cd <- function(fp, fm) (fp - fm) / (2 * h)
  for (i in seq_along(q$m_u)) {
    e <- replace(numeric(length(q$m_u)), i, h)
    expect_lt(abs(cd(elbo(m_u = q$m_u + e), elbo(m_u = q$m_u - e))), 1e-6)
  }
  for (i in seq_along(q$m_v)) {
    e <- replace(numeric(length(q$m_v)), i, h)
    expect_lt(abs(cd(elbo(m_v = q$m_v + e), elbo(m_v = q$m_v - e))), 1e-6)
  }
  for (E in scaled_sym_directions(q$S_u)) {
    expect_lt(abs(cd(elbo(S_u = q$S_u + h * E), elbo(S_u = q$S_u - h * E))), 1e-6)
  }
  for (E in scaled_sym_directions(q$S_v)) {
    expect_lt(abs(cd(elbo(S_v = q$S_v + h * E), elbo(S_v = q$S_v - h * E))), 1e-6)
  }
  # the check has power: away from q the same derivative is far from zero
  expect_gt(abs(cd(elbo(m_u = q$m_u + 0.3 + h), elbo(m_u = q$m_u + 0.3 - h))), 1e-2)
})

test_that("maximising the uncollapsed ELBO numerically gives the family bounds", {
  k <- kernel_rbf(0.8, 1.2)
  lam <- 0.06
  fit <- list(solve = osgpr_at(d1, k, Z1, O1, type = "solve", noise = lam, control = list(jitter = 0)),
              odvgp = osgpr_at(d1, k, Z1, O1, type = "odvgp", noise = lam, control = list(jitter = 0)))
  b <- dense_blocks(k, d1$x, Z1, O1)
  M1 <- nrow(Z1); M2 <- nrow(O1)
  chol_from <- function(p, n) {
    L <- matrix(0, n, n)
    L[lower.tri(L, diag = TRUE)] <- p
    tcrossprod(L)
  }
  nu <- M1 * (M1 + 1) / 2; nv <- M2 * (M2 + 1) / 2
  for (type in c("solve", "odvgp")) {
    negelbo <- function(p) {
      S_v <- if (type == "solve") chol_from(p[M1 + M2 + nu + seq_len(nv)], M2) else b$Cvv
      -uncollapsed_orth(k, d1$x, d1$y, Z1, O1, lam, p[seq_len(M1)],
                        chol_from(p[M1 + M2 + seq_len(nu)], M1), p[M1 + seq_len(M2)], S_v,
                        b = b)
    }
    # start at the prior: m = 0, S = K
    p <- c(numeric(M1 + M2), t(chol(b$Kuu))[lower.tri(b$Kuu, diag = TRUE)],
           if (type == "solve") t(chol(b$Cvv))[lower.tri(b$Cvv, diag = TRUE)])
    for (rep in 1:3) {
      p <- stats::optim(p, negelbo, method = "BFGS",
                        control = list(reltol = 1e-15, maxit = 5000))$par
    }
    expect_equal(-negelbo(p), fit[[type]]$bounds[[type]], tolerance = 1e-7)
  }
})

test_that("the odvgp bound is the ODVGP ELBO at its analytic optimum (Salimbeni et al. 2018, App. E corrected, Prop. A.1)", {
  k <- kernel_matern52(0.9, 1.1)
  s2 <- 0.07
  fo <- osgpr_at(d1, k, Z1, O1, type = "odvgp", noise = s2, control = list(jitter = 0))
  # Salimbeni et al.'s notation: beta = Z (regular), gamma = O (orthogonal),
  # alpha = [gamma; beta]
  al <- rbind(O1, Z1)
  KaX <- naive_kernel(k, al, d1$x)
  a <- solve(tcrossprod(KaX) + s2 * naive_kernel(k, al, al), KaX %*% d1$y)   # App. E, corrected
  b <- dense_blocks(k, d1$x, Z1, O1)
  a_g <- a[seq_len(nrow(O1))]
  a_b <- a[nrow(O1) + seq_len(nrow(Z1))] + solve(b$Kuu, b$Kuv %*% a_g)       # to ODVGP coordinates
  S <- b$Kuu %*% solve(tcrossprod(b$Kuf) / s2 + b$Kuu, b$Kuu)                 # the Titsias S*
  Pu <- solve(b$Kuu, b$Kuf)
  m <- drop(crossprod(b$Kvf - crossprod(b$Kuv, Pu), a_g) + crossprod(b$Kuf, a_b))   # their eq. 12 mean
  s <- diag(b$Kff) - colSums(b$Kuf * Pu) + colSums(Pu * (S %*% Pu))
  ell <- sum(dnorm(d1$y, m, sqrt(s2), log = TRUE)) - 0.5 * sum(s) / s2
  kl <- 0.5 * (sum(a_g * (b$Cvv %*% a_g)) + sum(a_b * (b$Kuu %*% a_b)) + sum(diag(solve(b$Kuu, S))) -
                 as.numeric(determinant(S)$modulus) + as.numeric(determinant(b$Kuu)$modulus) -
                 nrow(Z1))                                                      # Prop. A.1
  expect_equal(fo$bounds[["odvgp"]], ell - kl, tolerance = 1e-9)
  # orthogonal decoupling: the mean at the regular inducing inputs is m_u
  expect_equal(unname(predict(fo, Z1)$mean), unname(posterior_orthogonal(fo)$mean_u),
               tolerance = 1e-9)
  expect_equal(unname(predict(fo, Z1)$mean), drop(b$Kuu %*% a_b), tolerance = 1e-9)
})

test_that("well-separated sets: the family bound equals the union bound, SOLVE-GPR is SGPR(Z, O)", {
  set.seed(4)
  x <- matrix(c(runif(20, -6, -4), runif(20, 4, 6)))
  y <- sin(2 * x[, 1]) + rnorm(40, sd = 0.1)
  d <- list(x = x, y = y)
  k <- kernel_rbf(0.5, 1)
  Z <- matrix(c(-5.6, -5, -4.4))
  O <- matrix(c(4.4, 5, 5.6))
  f <- osgpr_at(d, k, Z, O, control = list(jitter = 0))
  expect_equal(f$bounds[["solve"]], f$bounds[["union"]], tolerance = 1e-10)
  xs <- matrix(c(-5.2, -4.8, 4.8, 5.2))
  sw <- sgpr(x, y, kernel = k, inducing = rbind(Z, O), noise = 0.05, mean = 0,
             optimize = FALSE, control = list(jitter = 0))
  expect_equal(predict(f, xs, full_cov = TRUE)$cov, predict(sw, xs, full_cov = TRUE)$cov,
               tolerance = 1e-10)
  # ODVGP still pays for fixing S_v = C_vv
  expect_lt(f$bounds[["odvgp"]], f$bounds[["solve"]] - 1)
})

test_that("adding a point to either set never decreases the union bound", {
  set.seed(5)
  k <- kernel_matern32(0.6, 1)
  Zall <- matrix(runif(6, -2, 2))
  Oall <- matrix(runif(6, -2, 2))
  b <- c()
  for (m in 1:6) {
    b <- c(b, osgpr_at(d1, k, Zall[1:m, , drop = FALSE], Oall[1:max(1, m - 1), , drop = FALSE],
                       bound = "union")$bound,
           osgpr_at(d1, k, Zall[1:m, , drop = FALSE], Oall[1:m, , drop = FALSE],
                    bound = "union")$bound)
  }
  expect_true(all(diff(b) > -1e-9))
})

test_that("permuting X, Z or O changes nothing", {
  d <- toy_data(30, 2)
  Z <- d$x[1:4, ] + 0.05
  O <- d$x[5:7, ] - 0.05
  k <- kernel_matern52(c(0.7, 1.1), 1)
  xs <- matrix(c(0.1, -0.5, 1, 0.3), 2)
  for (type in c("solve", "odvgp")) {
    f <- osgpr_at(d, k, Z, O, type = type)
    p <- sample(30)
    dp <- list(x = d$x[p, ], y = d$y[p])
    g <- osgpr_at(dp, k, Z[c(3, 1, 4, 2), ], O[c(2, 3, 1), ], type = type)
    expect_equal(g$bounds, f$bounds, tolerance = 1e-10)
    expect_equal(predict(g, xs, full_cov = TRUE), predict(f, xs, full_cov = TRUE),
                 tolerance = 1e-10)
  }
})

test_that("the orthogonal bound's entry point checks its arguments", {
  k <- kernel_matern52(0.6, 1.1)
  W <- rbind(Z1, O1)
  Kww <- naive_kernel(k, W, W)
  Kwf <- naive_kernel(k, W, d1$x)
  kd <- rep(1.1, 30)
  lam <- seq(0.03, 0.1, length.out = 30)
  yt <- d1$y - 0.1
  bo <- function(Kww, Kwf, kd, lam, yt, v, grad = FALSE) {
    .Call(sparsevgp:::ffi_bo_bound, Kww, Kwf, 4L, kd, lam, yt, v, 0, 1e-2, grad)
  }
  expect_error(bo(Kww[, 1:6], Kwf, kd, lam, yt, 0L), "square")
  expect_error(bo(Kww, Kwf[1:6, ], kd, lam, yt, 0L), "7 rows")
  expect_error(bo(Kww, Kwf, kd[-1], lam, yt, 0L), "'kdiag' must have length 30")
  expect_error(bo(Kww, Kwf, kd, -lam, yt, 0L), "positive")
  expect_error(bo(Kww, Kwf, kd, lam, replace(yt, 3, NA), 0L), "NA/NaN/Inf in 'ytil'")
  expect_error(bo(Kww, Kwf, kd, lam, yt, 3L), "'variant'")
  expect_error(.Call(sparsevgp:::ffi_bo_bound, Kww, Kwf, 8L, kd, lam, yt, 0L, 0, 1e-2, FALSE), "'M1'")
  expect_error(.Call(sparsevgp:::ffi_bo_bound, Kww, Kwf, 4, kd, lam, yt, 0L, 0, 1e-2, FALSE), "'M1'")
})

test_that("co-located and nearly co-located Z and O: jitter, a warning, never NaN", {
  k <- kernel_rbf(0.7, 1.2)
  sz <- sgpr(d1$x, d1$y, kernel = k, inducing = Z1, noise = 0.05, mean = 0, optimize = FALSE)
  for (eps in c(0, 1e-9)) {
    O <- Z1[1:3, , drop = FALSE] + eps
    f <- NULL
    expect_warning(f <- osgpr_at(d1, k, Z1, O), "nearly coincide")
    expect_true(all(is.finite(f$bounds)))
    # u = v: SOLVE-GPR recovers SGPR(Z), up to the jitter
    expect_equal(f$bound, sz$bound, tolerance = 1e-5)
    p <- predict(f, xs1, full_cov = TRUE)
    expect_true(all(is.finite(p$mean)) && all(is.finite(p$cov)))
    expect_equal(p$mean, predict(sz, xs1, full_cov = TRUE)$mean, tolerance = 1e-4)
    expect_equal(p$cov, predict(sz, xs1, full_cov = TRUE)$cov, tolerance = 1e-4)
    o <- objective(f)
    expect_true(all(is.finite(o$gr(o$par))))
    # without jitter the factorisation needs escalation (to 1e-10 of the
    # mean diagonal, which is recorded and reported; no warning about the
    # jitter below 1e-8)
    g <- NULL
    expect_warning(g <- osgpr_at(d1, k, Z1, O, control = list(jitter = 0)), "nearly coincide")
    expect_gt(g$posterior$jitter[["Cvv"]], 0)
    expect_output(print(summary(g)), "Jitter added to the Cholesky factorisation: [0-9.e-]+ \\(")
    expect_true(all(is.finite(g$bounds)))
    expect_output(print(summary(g)), "Jitter on Kuu, Cvv")
  }
  # O a little off Z. At 1e-7 C_vv is about 1e-14 of the kernel's variance,
  # within a hundred rounding errors of its entries (about 1e-15 here):
  # its pivots are judged against that error, not against C_vv's own
  # diagonal, and the factorisation is jittered, with any BLAS. At 1e-6 it
  # is about 1e-12, well above: factorised as it is, with no jitter, and
  # the orthogonal inputs carry the kernel's difference quotients (the
  # bound is that of O = Z + 1e-5 to 1e-3, far above SGPR's)
  cvv <- function(e) {
    O <- Z1[1:3, , drop = FALSE] + e
    max(diag(kernel_matrix(k, O) - kernel_matrix(k, O, Z1) %*%
               solve(kernel_matrix(k, Z1), kernel_matrix(k, Z1, O))))
  }
  expect_lt(cvv(1e-7), 1e-13)
  expect_gt(cvv(1e-6), 1e-12)
  at <- function(e) {
    g <- NULL
    expect_warning(g <- osgpr_at(d1, k, Z1, Z1[1:3, , drop = FALSE] + e,
                                 control = list(jitter = 0)), "nearly coincide")
    g
  }
  g7 <- at(1e-7)
  expect_gt(g7$posterior$jitter[["Cvv"]], 0)
  expect_true(is.finite(g7$bound))
  g6 <- at(1e-6)
  expect_identical(g6$posterior$jitter[["Cvv"]], 0)
  g5 <- suppressWarnings(osgpr_at(d1, k, Z1, Z1[1:3, , drop = FALSE] + 1e-5,
                                  control = list(jitter = 0)))
  expect_equal(g6$bound, g5$bound, tolerance = 1e-3)
  expect_gt(g6$bound, sz$bound + 10)
  # past the cap: a clear error
  expect_error(suppressWarnings(osgpr_at(d1, k, Z1, Z1[1:2, , drop = FALSE],
                                         control = list(jitter = 0, jitter_cap = 1e-14))),
               "orthogonal covariance")
})

test_that("the g, h, l decomposition adds up (eqs 5.11, 5.16)", {
  k <- kernel_matern32(0.8, 1)
  for (type in c("solve", "odvgp")) {
    f <- osgpr_at(d1, k, Z1, O1, type = type, mean = 0.2)
    dc <- osgpr_components(f, xs1)
    p <- predict(f, xs1)
    expect_equal(dc$g$mean + dc$h$mean + dc$constant, p$mean, tolerance = 1e-10)
    expect_equal(dc$g$var + dc$h$var + dc$l$var, p$var, tolerance = 1e-10)
    expect_equal(dc$total$var, p$var, tolerance = 1e-10)
    expect_true(all(dc$l$var >= -1e-10) && all(dc$g$var >= -1e-10))
    if (type == "odvgp") expect_equal(unname(dc$h$var), numeric(9))
    else expect_true(all(dc$h$var > 0))
  }
  # each part against eq. 5.16 written densely, for both types: g is the
  # regular part (K*u Kuu^-1 u), h the orthogonal part (C*v Cvv^-1 v), l the
  # rest; ODVGP's v keeps its prior, so its h variance is reported with l
  b <- dense_blocks(k, d1$x, Z1, O1)
  Ksu <- naive_kernel(k, xs1, Z1)
  Csv <- naive_kernel(k, xs1, O1) - Ksu %*% solve(b$Kuu, b$Kuv)
  Au <- t(solve(b$Kuu, t(Ksu)))
  Av <- t(solve(b$Cvv, t(Csv)))
  for (type in c("solve", "odvgp")) {
    f <- osgpr_at(d1, k, Z1, O1, type = type, control = list(jitter = 0))
    q <- posterior_orthogonal(f)
    dc <- osgpr_components(f, xs1)
    expect_equal(unname(dc$g$mean), drop(Au %*% q$mean_u), tolerance = 1e-9)
    expect_equal(unname(dc$g$var), rowSums((Au %*% q$cov_u) * Au), tolerance = 1e-9)
    expect_equal(unname(dc$h$mean), drop(Av %*% q$mean_v), tolerance = 1e-9)
    h_var <- rowSums((Av %*% q$cov_v) * Av)
    l_var <- diag(naive_kernel(k, xs1, xs1)) - rowSums(Au * Ksu) - rowSums(Av * Csv)
    if (type == "solve") {
      expect_equal(unname(dc$h$var), h_var, tolerance = 1e-9)
      expect_equal(unname(dc$l$var), l_var, tolerance = 1e-9)
    } else {
      expect_equal(unname(dc$l$var), h_var + l_var, tolerance = 1e-9)
    }
  }
})

test_that("the Gaussian KL is the dense formula; the KL of SOLVE-GPR to SGPR(Z, O) vanishes far apart (Fernlund 2022, Fig. 6.2)", {
  set.seed(6)
  S1 <- crossprod(matrix(rnorm(16), 4)) + diag(4)
  S2 <- crossprod(matrix(rnorm(16), 4)) + diag(4)
  m1 <- rnorm(4)
  m2 <- rnorm(4)
  ref <- 0.5 * (sum(diag(solve(S2, S1))) + sum((m2 - m1) * solve(S2, m2 - m1)) - 4 +
                  log(det(S2)) - log(det(S1)))
  expect_equal(kl_gaussian(m1, S1, m2, S2), ref, tolerance = 1e-12)
  expect_equal(kl_gaussian(m1, S1, m1, S1), 0, tolerance = 1e-12)
  expect_error(kl_gaussian(m1, S1, m2[1:3], S2), "same length")
  expect_error(kl_gaussian(m1, -S1, m2, S2), "not positive definite")
  # Fernlund (2022), Fig. 6.2 at fixed hyperparameters: KL[SOLVE-GPR(M, M) || SGPR(2M)]
  k <- kernel_rbf(0.5, 1)
  Z <- matrix(seq(-1.8, 1.8, length.out = 4))
  xs <- data.frame(x = seq(-2, 2, length.out = 40))
  dd <- data.frame(x = d1$x[, 1], y = d1$y)
  kl_at <- function(shift) {
    O <- Z + shift
    so <- osgpr(y ~ x, dd, kernel = k, inducing = Z, orthogonal = O, noise = 0.05, mean = 0,
                optimize = FALSE)
    sg <- sgpr(y ~ x, dd, kernel = k, inducing = rbind(Z, O), noise = 0.05, mean = 0,
               optimize = FALSE)
    # the means agree (both are SGPR's on rbind(Z, O)): the KL comes from the
    # covariance alone
    expect_equal(predict(so, xs)$mean, predict(sg, xs)$mean, tolerance = 1e-8)
    kl_predictive(so, sg, xs, jitter = 1e-6)
  }
  kl_mid <- kl_at(0.5)
  kl_far <- kl_at(20)
  expect_gt(kl_mid, 0.1)
  expect_lt(kl_far, 1e-6)
  expect_error(kl_predictive(1, 2, xs), "fitted sparsevgp models")
})

test_that("fitting on Snelson: both types, both bounds, methods", {
  set.seed(1)
  f <- osgpr(y ~ x, data = snelson, inducing = 4, orthogonal = 4)
  expect_equal(f$optim$convergence, 0L)
  expect_equal(nrow(f$params$Z), 4L)
  expect_equal(nrow(f$params$O), 4L)
  expect_equal(as.numeric(logLik(f)), f$bounds[["solve"]])
  expect_lte(f$bounds[["solve"]], f$bounds[["union"]])
  expect_output(print(summary(f)), "family bound")
  expect_output(print(summary(f)), "union bound")
  expect_output(print(f), "SOLVE-GPR")
  g <- gpr(y ~ x, data = snelson)
  expect_lt(as.numeric(logLik(f)), as.numeric(logLik(g)))
  # the thesis's objective: the fit then maximises SGPR on the union
  u <- osgpr(y ~ x, data = snelson, inducing = f$params$Z, orthogonal = f$params$O,
             type = "odvgp", bound = "union")
  expect_equal(as.numeric(logLik(u)), u$bounds[["union"]])
  expect_gt(u$bounds[["union"]], u$bounds[["odvgp"]])
  # plot marks both sets and returns its data
  grDevices::pdf(NULL)
  pd <- plot(f)
  grDevices::dev.off()
  expect_named(pd, c("x", "mean", "sd_f", "sd_y"))
  mk <- sparsevgp:::.inducing_marks(f)
  expect_length(mk, 2L)
  expect_equal(mk[[1]]$at, f$params$Z[, 1])
  expect_equal(mk[[2]]$at, f$params$O[, 1])
  expect_false(mk[[1]]$pch == mk[[2]]$pch)
  # warm-started update with fixed orthogonal inputs
  f2 <- update(f, fixed = "O")
  expect_equal(f2$params$O, f$params$O)
  expect_gte(as.numeric(logLik(f2)), as.numeric(logLik(f)) - 1e-6)
  expect_output(print(summary(update(f, fixed = c("Z", "O")))), "fixed")
  # matrix interface and predictions by name
  m <- osgpr(snelson$x, snelson$y, inducing = f$params$Z, orthogonal = f$params$O,
             optimize = FALSE, start = f)
  expect_equal(m$bound, f$bound, tolerance = 1e-10)
  expect_equal(unname(predict(m, c(1, 2))$mean),
               unname(predict(f, data.frame(x = c(1, 2)))$mean), tolerance = 1e-10)
})

test_that("bad input gives clear errors", {
  d <- toy_data(20, 2)
  expect_error(osgpr(d$x, d$y, inducing = 12, orthogonal = 10), "M1 \\+ M2 = 22")
  expect_error(osgpr(d$x, d$y, inducing = 3, orthogonal = d$x[1:2, 1, drop = FALSE]),
               "'orthogonal' must have 2 columns")
  expect_error(osgpr(d$x, d$y, inducing = 3, orthogonal = rbind(d$x[1:2, ], d$x[1, ])),
               "'orthogonal' contains duplicated rows")
  expect_error(osgpr(d$x, d$y, inducing = "a", orthogonal = 2), "'inducing' must be")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2.5), "whole number")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, type = "fitc"), "'arg'")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, bound = "thesis"), "'arg'")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, start = 1), "osgpr fit")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, fixed = "V"), "unknown parameters")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, foo = 1), "unused")
  expect_error(posterior_orthogonal(gpr(d$x, d$y, optimize = FALSE)), "osgpr fit")
  expect_error(osgpr_components(1), "osgpr fit")
  # new inputs go through the same checks as predict(), and rows with
  # missing inputs are named
  fo <- osgpr(d$x, d$y, inducing = 2, orthogonal = 2, optimize = FALSE)
  expect_error(osgpr_components(fo, matrix(0, 2, 3)), "'newdata' must have 2 columns")
  expect_error(osgpr_components(fo, rbind(c(0, 0), c(NA, 1))), "missing inputs in row 2")
  expect_equal(osgpr_components(fo, d$x[1:3, ])$total$mean + fo$params$mean,
               predict(fo, d$x[1:3, ])$mean, tolerance = 1e-10)
})
