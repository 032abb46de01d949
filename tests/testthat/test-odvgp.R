# The orthogonally decoupled SVGP (Salimbeni, Cheng, Boots and Deisenroth
# 2018) against independent routes: the non-whitened svgp, dense
# joint-Gaussian constructions of its KL divergence and predictive
# (their Appendix D), the analytic optimum of the Gaussian case (their
# Appendix E, corrected), SGPR, and central finite differences.

odvgp_setup <- function(G = 4, likelihood = "gaussian", kernel = kernel_rbf(c(0.8, 1.2), 1.3),
                        seed = 2, jitter = 0, mean = 0.3) {
  d <- toy_data(40, 2)
  Z <- d$x[c(3, 8, 14, 20, 33), ]
  O <- if (G > 0) d$x[c(5, 11, 25, 30, 2, 38)[seq_len(G)], , drop = FALSE] else 0
  y <- if (likelihood == "gaussian") d$y else factor(d$y > 0)
  f <- odvgp(d$x, y, kernel = kernel, inducing = Z, orthogonal = O, likelihood = likelihood,
             noise = if (likelihood == "gaussian") 0.1, mean = mean, optimize = FALSE,
             control = list(jitter = jitter))
  set.seed(seed)
  p <- f$params
  p$a_gamma <- rnorm(length(p$a_gamma))
  p$q_mu <- rnorm(5)
  p$q_sqrt_diag <- exp(rnorm(5, sd = 0.3))
  p$q_sqrt_lower <- rnorm(10, sd = 0.3)
  f$params <- p
  list(fit = sparsevgp:::.finish(f), d = d, y = y, Z = Z, O = if (G > 0) O)
}

# S = L_S L_S' of a fit
odvgp_S <- function(fit) {
  W <- diag(fit$params$q_sqrt_diag, length(fit$params$q_mu))
  W[lower.tri(W)] <- fit$params$q_sqrt_lower
  tcrossprod(W)
}

gauss_kl <- function(m, S, K) {
  0.5 * (sum(diag(solve(K, S))) + sum(m * solve(K, m)) - length(m) +
           as.numeric(determinant(K)$modulus) - as.numeric(determinant(S)$modulus))
}

test_that("hand gradients match central finite differences for every parameter", {
  for (lik in c("gaussian", "bernoulli", "probit")) {
    s <- odvgp_setup(likelihood = lik, jitter = 1e-8)
    expect_grad(s$fit, tol = 1e-6)
  }
  for (k in list(kernel_matern52(0.9, 1.1), kernel_matern12(c(0.7, 1.3), 0.8))) {
    expect_grad(odvgp_setup(kernel = k, jitter = 1e-8)$fit, tol = 1e-6)
  }
  expect_grad(odvgp_setup(G = 0, jitter = 1e-8)$fit, tol = 1e-6)
  # a minibatch estimate: its gradient is that of the estimate
  f <- odvgp_setup(likelihood = "bernoulli", jitter = 1e-8)$fit
  o <- sparsevgp:::.objective(f, safe = FALSE)
  batch <- c(2L, 7L, 19L, 33L)
  fn <- function(par) o$value_grad(par, batch = batch)$value
  g <- o$value_grad(o$par, batch = batch)$grad
  expect_lte(max(abs(g - fd_grad(fn, o$par))) / max(1, max(abs(g))), 1e-6)
})

test_that("with no orthogonal inputs, or a_gamma = 0, ODVGP is the non-whitened SVGP", {
  for (lik in c("gaussian", "bernoulli")) {
    s <- odvgp_setup(G = 0, likelihood = lik, jitter = 1e-8)
    p <- s$fit$params
    sv <- svgp(s$d$x, s$y, kernel = kernel_rbf(c(0.8, 1.2), 1.3), inducing = s$Z,
               likelihood = lik, noise = if (lik == "gaussian") 0.1, mean = 0.3,
               whiten = FALSE, optimize = FALSE, control = list(jitter = 1e-8))
    sv <- with_params(sv, q_mu = p$q_mu, q_sqrt_diag = p$q_sqrt_diag,
                      q_sqrt_lower = p$q_sqrt_lower)
    expect_equal(s$fit$bound, sv$bound, tolerance = 1e-10)
    expect_equal(s$fit$bound_terms, sv$bound_terms, tolerance = 1e-10)
    xs <- matrix(c(-1, 0.3, 1.7, 0.2, -0.5, 1), 3, 2)
    tp <- if (lik == "gaussian") "latent" else "link"
    expect_equal(predict(s$fit, xs, type = tp, full_cov = TRUE),
                 predict(sv, xs, type = tp, full_cov = TRUE), tolerance = 1e-10)
    s4 <- odvgp_setup(G = 4, likelihood = lik, jitter = 1e-8)
    z <- with_params(s4$fit, a_gamma = numeric(4), q_mu = p$q_mu, q_sqrt_diag = p$q_sqrt_diag,
                     q_sqrt_lower = p$q_sqrt_lower)
    expect_equal(z$bound, sv$bound, tolerance = 1e-10)
  }
})

test_that("at the prior the KL divergence is 0 and the predictive is the prior", {
  d <- toy_data(40, 2)
  k <- kernel_rbf(c(0.8, 1.2), 1.3)
  f <- odvgp(d$x, d$y, kernel = k, inducing = d$x[1:5, ], orthogonal = d$x[6:9, ],
             noise = 0.1, mean = 0.3, optimize = FALSE)
  expect_equal(unname(f$bound_terms[["neg_kl"]]), 0, tolerance = 1e-10)
  xs <- matrix(c(-1, 0.3, 1.7, 0.2, -0.5, 1), 3, 2)
  p <- predict(f, xs, full_cov = TRUE)
  expect_equal(unname(p$mean), rep(0.3, 3))
  expect_equal(unname(p$cov), naive_kernel(k, xs, xs), tolerance = 1e-7)
})

# The joint q(f_gamma, f_beta) of Salimbeni et al. 2018, Appendix D, with
# m_gamma-perp-beta = K_gamma-perp-beta a_gamma.
odvgp_joint <- function(fit, k) {
  p <- fit$params
  Kb <- naive_kernel(k, p$Z, p$Z)
  Kgb <- naive_kernel(k, p$O, p$Z)
  Kg <- naive_kernel(k, p$O, p$O)
  Kperp <- Kg - Kgb %*% solve(Kb, t(Kgb))
  S <- odvgp_S(fit)
  m <- c(Kperp %*% p$a_gamma + Kgb %*% solve(Kb, p$q_mu), p$q_mu)
  C <- rbind(cbind(Kg + Kgb %*% solve(Kb, S - Kb) %*% solve(Kb, t(Kgb)), Kgb %*% solve(Kb, S)),
             cbind(S %*% solve(Kb, t(Kgb)), S))
  Ka <- rbind(cbind(Kg, Kgb), cbind(t(Kgb), Kb))
  list(m = m, C = C, Ka = Ka, Kb = Kb, Kgb = Kgb, Kperp = Kperp)
}

test_that("the KL divergence (Prop. A.1) equals the dense joint-Gaussian KL", {
  s <- odvgp_setup()
  j <- odvgp_joint(s$fit, kernel_rbf(c(0.8, 1.2), 1.3))
  expect_equal(-unname(s$fit$bound_terms[["neg_kl"]]), gauss_kl(j$m, j$C, j$Ka),
               tolerance = 1e-8)
})

test_that("the predictive equals the dense Appendix D construction", {
  s <- odvgp_setup()
  k <- kernel_rbf(c(0.8, 1.2), 1.3)
  j <- odvgp_joint(s$fit, k)
  xs <- matrix(c(-1, 0.3, 1.7, 0.2, -0.5, 1), 3, 2)
  A <- rbind(s$fit$params$O, s$fit$params$Z)
  Ksa <- naive_kernel(k, xs, A)
  P <- Ksa %*% solve(j$Ka)
  mean <- 0.3 + drop(P %*% j$m)
  cov <- naive_kernel(k, xs, xs) - P %*% t(Ksa) + P %*% j$C %*% t(P)
  p <- predict(s$fit, xs, full_cov = TRUE)
  expect_equal(unname(p$mean), mean, tolerance = 1e-8)
  expect_equal(unname(p$cov), cov, tolerance = 1e-8)
  pv <- predict(s$fit, xs)
  expect_equal(unname(pv$var), diag(cov), tolerance = 1e-8)
  # general-alpha form: k_x,alpha a_alpha with a_alpha = [a_gamma; a_beta -
  # K_beta^-1 K_beta,gamma a_gamma], and a_alpha' K_alpha a_alpha =
  # a_gamma' K_perp a_gamma + a_beta' K_beta a_beta
  ag <- s$fit$params$a_gamma
  ab <- solve(j$Kb, s$fit$params$q_mu)
  aa <- c(ag, ab - solve(j$Kb, t(j$Kgb) %*% ag))
  expect_equal(unname(p$mean), 0.3 + drop(Ksa %*% aa), tolerance = 1e-8)
  expect_equal(sum(aa * (j$Ka %*% aa)),
               sum(ag * (j$Kperp %*% ag)) + sum(ab * (j$Kb %*% ab)), tolerance = 1e-8)
})

test_that("the orthogonal part leaves the mean at the beta inputs alone", {
  s <- odvgp_setup()
  for (seed in 1:3) {
    set.seed(seed)
    f <- with_params(s$fit, a_gamma = rnorm(4, sd = 3))
    expect_equal(unname(predict(f, s$Z)$mean), 0.3 + s$fit$params$q_mu, tolerance = 1e-8)
  }
})

# The optimum of the Gaussian case (Salimbeni et al. 2018, Appendix E, with
# the 1 / sigma^2 on K_alpha,X y that the paper omits), in the fit's
# parameters; `corrected = FALSE` gives the printed formula.
odvgp_optimum <- function(fit, k, corrected = TRUE) {
  p <- fit$params
  x <- fit$x
  y <- fit$y - p$mean
  s2 <- p$noise
  A <- rbind(p$O, p$Z)
  G <- nrow(p$O)
  Kax <- naive_kernel(k, A, x)
  Ka <- naive_kernel(k, A, A)
  a <- solve(Kax %*% t(Kax) / s2 + Ka, Kax %*% y / if (corrected) s2 else 1)
  Kb <- naive_kernel(k, p$Z, p$Z)
  Kbx <- naive_kernel(k, p$Z, x)
  S <- Kb %*% solve(Kbx %*% t(Kbx) / s2 + Kb, Kb)
  ag <- a[seq_len(G)]
  ab <- a[G + seq_len(nrow(p$Z))] + solve(Kb, naive_kernel(k, p$Z, p$O) %*% ag)
  W <- t(chol((S + t(S)) / 2))
  with_params(fit, a_gamma = drop(ag), q_mu = drop(Kb %*% ab), q_sqrt_diag = diag(W),
              q_sqrt_lower = W[lower.tri(W)])
}

test_that("the corrected analytic optimum is stationary and beats SVGP on beta", {
  s <- odvgp_setup(jitter = 0)
  k <- kernel_rbf(c(0.8, 1.2), 1.3)
  opt <- odvgp_optimum(s$fit, k)
  g <- grad_blocks(opt)
  var_g <- unlist(g[c("a_gamma", "q_mu", "q_sqrt_diag", "q_sqrt_lower")])
  expect_lt(max(abs(var_g)), 1e-6)
  # the printed formula is not stationary when the noise variance is not 1
  bad <- grad_blocks(odvgp_optimum(s$fit, k, corrected = FALSE))
  expect_gt(max(abs(unlist(bad[c("a_gamma", "q_mu")]))), 1)
  # nesting: the optimal ODVGP ELBO is at least the optimal SVGP ELBO on beta,
  # which is the SGPR bound
  sg <- sgpr(s$d$x, s$d$y, kernel = k, inducing = s$Z, noise = 0.1, mean = 0.3,
             optimize = FALSE, control = list(jitter = 0))
  expect_gt(opt$bound, sg$bound)
  # no orthogonal inputs: the optimum is SGPR's
  s0 <- odvgp_setup(G = 0, jitter = 0)
  expect_equal(odvgp_optimum(s0$fit, k)$bound, sg$bound, tolerance = 1e-8)
})

test_that("one natural-gradient step of size 1 gives the (conditional) optimum", {
  k <- kernel_rbf(c(0.8, 1.2), 1.3)
  s0 <- odvgp_setup(G = 0, jitter = 0)
  sg <- sgpr(s0$d$x, s0$d$y, kernel = k, inducing = s0$Z, noise = 0.1, mean = 0.3,
             optimize = FALSE, control = list(jitter = 0))
  expect_equal(natgrad_step(s0$fit)$bound, sg$bound, tolerance = 1e-9)
  # with gamma: the optimum of q(f_beta) given a_gamma, where the gradient in
  # (m_beta, L_S) vanishes and a second step stays put
  s <- odvgp_setup(jitter = 0)
  f1 <- natgrad_step(s$fit)
  g <- grad_blocks(f1)
  expect_lt(max(abs(unlist(g[c("q_mu", "q_sqrt_diag", "q_sqrt_lower")]))), 1e-6)
  expect_gt(max(abs(g$a_gamma)), 1e-3)
  expect_equal(natgrad_step(f1)$bound, f1$bound, tolerance = 1e-9)
  # ... which is SGPR on the residuals y - Phi_perp a_gamma
  p <- s$fit$params
  Kb <- naive_kernel(k, p$Z, p$Z)
  Phi <- naive_kernel(k, s$d$x, p$O) - naive_kernel(k, s$d$x, p$Z) %*%
    solve(Kb, naive_kernel(k, p$Z, p$O))
  r <- sgpr(s$d$x, s$d$y - drop(Phi %*% p$a_gamma), kernel = k, inducing = s$Z, noise = 0.1,
            mean = 0.3, optimize = FALSE, control = list(jitter = 0))
  expect_equal(unname(f1$params$q_mu + 0.3), unname(posterior_inducing(r)$mean),
               tolerance = 1e-8)
})

test_that("the minibatch estimate is unbiased: its mean over a partition is the full ELBO", {
  for (lik in c("gaussian", "bernoulli")) {
    f <- odvgp_setup(likelihood = lik, jitter = 1e-8)$fit
    parts <- split(seq_len(40), rep(1:5, 8))
    est <- vapply(parts, function(b) sparsevgp:::.evaluate(f, f$params, FALSE, batch = b)$value, 1)
    expect_equal(mean(est), f$bound, tolerance = 1e-10)
  }
})

test_that("natural-gradient fits reach the optimum and agree across starts", {
  k <- kernel_rbf(c(0.8, 1.2), 1.3)
  s <- odvgp_setup(jitter = 0)
  hyper <- c("variance", "lengthscale", "noise", "mean", "Z", "O")
  opt <- odvgp_optimum(s$fit, k)
  # the problem is convex in the variational parameters: L-BFGS-B from two
  # random starts, and natural gradients with Adam on a_gamma, reach it
  ends <- vapply(1:2, function(seed) {
    set.seed(seed)
    f0 <- with_params(s$fit, a_gamma = rnorm(4), q_mu = rnorm(5))
    f <- odvgp(s$d$x, s$d$y, kernel = k, inducing = s$Z, orthogonal = s$O, noise = 0.1,
               mean = 0.3, fixed = hyper, start = f0,
               control = list(jitter = 0, min_gain = 0, factr = 10, maxit = 5000))
    f$bound
  }, 1)
  expect_equal(ends, rep(opt$bound, 2), tolerance = 1e-7)
  set.seed(1)
  f0 <- with_params(s$fit, a_gamma = rnorm(4), q_mu = rnorm(5))
  f <- odvgp(s$d$x, s$d$y, kernel = k, inducing = s$Z, orthogonal = s$O, noise = 0.1,
             mean = 0.3, fixed = hyper, start = f0,
             control = list(optimizer = "natgrad", natgrad_step = 1, lr = 0.02, maxit = 2000,
                            jitter = 0))
  expect_equal(f$bound, opt$bound, tolerance = 1e-5)
  # the coupled svgp with natural gradients: one iteration of size 1 is SGPR
  sv <- svgp(s$d$x, s$d$y, kernel = k, inducing = s$Z, likelihood = "gaussian", noise = 0.1,
             mean = 0.3, fixed = c("variance", "lengthscale", "noise", "mean", "Z"),
             control = list(optimizer = "natgrad", natgrad_step = 1, maxit = 1, jitter = 0))
  sg <- sgpr(s$d$x, s$d$y, kernel = k, inducing = s$Z, noise = 0.1, mean = 0.3,
             optimize = FALSE, control = list(jitter = 0))
  expect_equal(sv$bound, sg$bound, tolerance = 1e-8)
})

test_that("natural gradients with Adam improve a classifier, with the warm-up", {
  d <- classification_data("banana")[1:200, ]
  set.seed(1)
  f0 <- odvgp(y ~ x1 + x2, data = d, inducing = 8, orthogonal = 16, optimize = FALSE)
  set.seed(1)
  f <- odvgp(y ~ x1 + x2, data = d, inducing = 8, orthogonal = 16,
             control = list(optimizer = "natgrad", natgrad_step = 0.1, natgrad_warmup = 10,
                            maxit = 60, snapshots = c(1, 30, 60)))
  expect_gt(f$bound, f0$bound + 10)
  expect_length(f$optim$trace, 60L)
  expect_equal(vapply(f$optim$snapshots, `[[`, 1, "iteration"), c(1, 30, 60))
  expect_true(all(diff(vapply(f$optim$snapshots, `[[`, 1, "cpu")) >= 0))
  # Adam on everything ("Orth") with minibatches
  set.seed(1)
  a <- odvgp(y ~ x1 + x2, data = d, inducing = 8, orthogonal = 16, batch_size = 50,
             control = list(maxit = 60, lr = 0.05))
  expect_identical(a$optim$method, "Adam")
  expect_gt(a$bound, f0$bound)
  # svgp with natural gradients on minibatches (CoupledNat)
  set.seed(1)
  s <- svgp(y ~ x1 + x2, data = d, inducing = 8, batch_size = 50,
            control = list(optimizer = "natgrad", maxit = 30, natgrad_step = 0.1))
  expect_true(is.finite(s$bound))
  expect_length(s$optim$trace, 30L)
})

test_that("an indefinite natural-gradient step is halved until it is positive definite", {
  K <- diag(2)
  GS <- diag(c(0.3, 0.2))           # K^-1 - 2 GS with step 1 is still PD
  mv <- sparsevgp:::.natgrad_move(c(1, 0), diag(2), K, c(0, 0), GS, 1, TRUE, NULL)
  expect_equal(mv$halvings, 0L)
  GS <- diag(c(2, 0.2))             # I - 2 step GS is PD only for step < 1/4
  mv <- sparsevgp:::.natgrad_move(c(1, 0), diag(2), K, c(0, 0), GS, 1, TRUE, NULL)
  expect_equal(mv$halvings, 3L)
  expect_null(sparsevgp:::.natgrad_move(c(1, 0), diag(2), K, c(0, 0), GS, 1, FALSE, NULL)$b)
})

test_that("odvgp fits honour the model contract", {
  d <- toy_data(30, 2)
  set.seed(4)
  fits <- list(reg = odvgp(d$x, d$y, inducing = 4, orthogonal = 5, optimize = FALSE),
               cls = odvgp(d$x, factor(d$y > 0), inducing = 4, orthogonal = 5,
                           optimize = FALSE))
  xs <- matrix(c(-1, 0, 0.5, 1.5, 0.2, -0.4), 3, 2, dimnames = list(c("a", "b", "c"), NULL))
  for (fit in fits) {
    p <- predict(fit, xs, type = if (fit$likelihood == "gaussian") "latent" else "link")
    expect_named(p$mean, c("a", "b", "c"))
    expect_true(all(p$var >= 0))
    ll <- logLik(fit)
    # inducing inputs are variational too (issue 20: df no longer counts Z, O)
    var_par <- grepl("^(q_mu|log_q_sqrt_diag|q_sqrt_lower|a_gamma|[ZO]\\[)", names(fit$fixed))
    expect_equal(attr(ll, "df"), sum(!fit$fixed & !var_par))
    expect_false(any(grepl("^(q_|a_gamma)", names(coef(fit)))))
    o <- objective(fit)
    expect_equal(-o$fn(o$par), as.numeric(ll), tolerance = 1e-10)
    expect_output(print(fit), "Orthogonally decoupled")
    expect_output(print(summary(fit)))
    pdf(NULL)
    pd <- plot(fit, n = 10)
    dev.off()
    expect_true(is.data.frame(pd))
  }
  expect_equal(fits$cls$likelihood, "bernoulli")
  pr <- predict(fits$cls, xs, type = "prob")
  expect_true(is.numeric(pr) && all(pr > 0 & pr < 1))
  # default sets: k-means beta and 2 |beta| random gamma; gamma may be empty
  set.seed(1)
  f <- odvgp(y ~ x, data = snelson, inducing = 5, optimize = FALSE)
  expect_equal(dim(f$params$O), c(10L, 1L))
  f0 <- odvgp(y ~ x, data = snelson, inducing = 5, orthogonal = 0, optimize = FALSE)
  expect_equal(dim(f0$params$O), c(0L, 1L))
  expect_length(f0$params$a_gamma, 0L)
  # a warm start keeps the variational parameters
  g <- update(with_params(f, a_gamma = rep(0.1, 10)), optimize = FALSE)
  expect_equal(g$params$a_gamma, rep(0.1, 10))
})

test_that("bad arguments give clear errors", {
  d <- toy_data(30, 2)
  expect_error(odvgp(d$x, d$y, orthogonal = -1, optimize = FALSE), "'orthogonal'")
  expect_error(odvgp(d$x, d$y, orthogonal = 31, optimize = FALSE), "'orthogonal'")
  expect_error(odvgp(d$x, d$y, orthogonal = matrix(0, 2, 3), optimize = FALSE), "'orthogonal'")
  for (bad in list("kmeans", d$x[1:3, 1], c(1, 2), 2.5)) {
    expect_error(odvgp(d$x, d$y, orthogonal = bad, optimize = FALSE),
                 "'orthogonal' must be a whole number")
  }
  expect_error(odvgp(d$x, d$y, likelihood = "bogus", optimize = FALSE), "should be one of")
  expect_error(odvgp(d$x, factor(d$y > 0), noise = 0.1, optimize = FALSE), "'noise'")
  expect_error(odvgp(d$x, d$y, control = list(optimizer = "bfgs"), optimize = FALSE),
               "'control\\$optimizer'")
  expect_error(odvgp(d$x, d$y, batch_size = 10, control = list(optimizer = "lbfgsb"),
                     optimize = FALSE), "full batch")
  expect_error(odvgp(d$x, d$y, control = list(natgrad_step = 2), optimize = FALSE),
               "natgrad_step")
  expect_error(odvgp(d$x, d$y, control = list(optimizer = "natgrad"), fixed = "q_mu"),
               "natural gradients move all")
  expect_error(svgp(d$x, d$y, likelihood = "gaussian", control = list(snapshots = 0),
                    optimize = FALSE), "snapshots")
})

# ---- multiclass (robust-max) ---------------------------------------------------

multiclass_data <- function(n = 60, seed = 3) {
  set.seed(seed)
  x <- matrix(runif(2 * n, -2, 2), n, 2)
  list(x = x, y = factor(c("a", "b", "c")[1 + (x[, 1] > 0) + (x[, 2] > 0.5)]))
}

test_that("robust-max: hand gradients match finite differences", {
  d <- multiclass_data()
  for (O in list(d$x[6:9, ], 0)) {
    f <- odvgp(d$x, d$y, kernel = kernel_rbf(0.9, 1.5), inducing = d$x[1:5, ], orthogonal = O,
               likelihood = "robustmax", optimize = FALSE)
    expect_equal(f$likelihood, "robustmax")
    set.seed(2)
    p <- f$params
    p$a_gamma[] <- rnorm(length(p$a_gamma))
    p$q_mu[] <- rnorm(length(p$q_mu))
    p$q_sqrt_lower[] <- rnorm(length(p$q_sqrt_lower), sd = 0.3)
    p$q_sqrt_diag[] <- exp(rnorm(length(p$q_sqrt_diag), sd = 0.3))
    f$params <- p
    expect_grad(sparsevgp:::.finish(f), tol = 1e-6)
  }
})

test_that("robust-max expectations match exact and Monte Carlo routes", {
  gh <- sparsevgp:::.gauss_hermite(40L)
  # two classes: P(f_y > f_o) = Phi((mu_y - mu_o) / sqrt(s_y + s_o)) exactly
  MU <- cbind(c(0.3, -1, 2), c(-0.2, 0.5, 1.9))
  S <- cbind(c(0.5, 2, 0.1), c(1.2, 0.3, 0.05))
  y <- c(1L, 2L, 1L)
  P <- sparsevgp:::.robustmax_P(MU, S, y, gh)$P
  o <- 3L - y
  iy <- cbind(1:3, y)
  io <- cbind(1:3, o)
  expect_equal(P, pnorm((MU[iy] - MU[io]) / sqrt(S[iy] + S[io])), tolerance = 1e-8)
  # three classes: the expected log-likelihood against 4e5 Monte Carlo draws
  MU3 <- cbind(MU, c(0, 0.2, 2.2))
  S3 <- cbind(S, c(0.7, 1, 0.2))
  y3 <- c(1L, 3L, 2L)
  e <- sparsevgp:::.robustmax_ell(MU3, S3, y3, gh, 1)
  set.seed(1)
  nd <- 4e5
  eps <- 1e-3
  vals <- vapply(1:3, function(n) {
    f <- matrix(rnorm(3 * nd, MU3[n, ], sqrt(S3[n, ])), ncol = 3, byrow = TRUE)
    hit <- max.col(f) == y3[n]
    c(mean(ifelse(hit, log(1 - eps), log(eps / 2))), sd(ifelse(hit, log(1 - eps), log(eps / 2))))
  }, numeric(2))
  expect_lt(abs(e$ell - sum(vals[1, ])), 4 * sqrt(sum(vals[2, ]^2) / nd))
  # the probabilities of the classes sum to one before normalisation, up to
  # the quadrature error (about 1e-6 with 40 nodes for these variances)
  tot <- rowSums(vapply(1:3, function(k) {
    sparsevgp:::.robustmax_P(MU3, S3, rep(k, 3), gh, deriv = FALSE)$P
  }, numeric(3)))
  expect_lt(max(abs(tot - 1)), 1e-5)
})

test_that("multiclass fits predict probabilities that sum to one and factor classes", {
  d <- multiclass_data()
  df <- data.frame(x1 = d$x[, 1], x2 = d$x[, 2], y = d$y)
  set.seed(1)
  f0 <- odvgp(y ~ x1 + x2, data = df, inducing = 5, orthogonal = 8, likelihood = "robustmax",
              optimize = FALSE)
  set.seed(1)
  f <- odvgp(y ~ x1 + x2, data = df, inducing = 5, orthogonal = 8, likelihood = "robustmax",
             control = list(optimizer = "natgrad", maxit = 100, natgrad_step = 0.1,
                            natgrad_warmup = 10))
  expect_gt(f$bound, f0$bound + 10)
  expect_equal(dim(f$params$q_mu), c(5L, 3L))
  expect_equal(dim(f$params$a_gamma), c(8L, 3L))
  nd <- df[1:4, ]
  rownames(nd) <- c("p", "q", "r", "s")
  pr <- predict(f, nd, type = "prob")
  expect_equal(dimnames(pr), list(c("p", "q", "r", "s"), c("a", "b", "c")))
  expect_equal(unname(rowSums(pr)), rep(1, 4), tolerance = 1e-12)
  cls <- predict(f, nd, type = "class")
  expect_true(is.factor(cls) && identical(levels(cls), c("a", "b", "c")))
  expect_equal(unname(as.character(cls)), colnames(pr)[max.col(pr)])
  expect_gt(mean(predict(f, type = "class") == df$y), 0.8)
  lk <- predict(f, nd)
  expect_equal(dim(lk$mean), c(4L, 3L))
  expect_true(all(lk$var >= 0))
  expect_equal(dim(fitted(f)), c(60L, 3L))
  expect_error(predict(f, nd, full_cov = TRUE), "multiclass")
  expect_error(residuals(f), "multiclass")
  expect_error(odvgp(y ~ x1 + x2, data = df, mean = 1, optimize = FALSE), "'mean'")
  expect_output(print(f), "robust-max")
  # two levels keep the binary Bernoulli model
  df2 <- df[df$y != "c", ]
  df2$y <- droplevels(df2$y)
  expect_equal(odvgp(y ~ x1 + x2, data = df2, inducing = 4, orthogonal = 0,
                     optimize = FALSE)$likelihood, "bernoulli")
})

test_that("parameter maps round-trip and the natural-gradient step is the expectation gradient", {
  s <- odvgp_setup(jitter = 0)
  f <- s$fit
  m <- f$params$q_mu
  S <- odvgp_S(f)
  R <- t(chol(S))
  nat <- sparsevgp:::.uc_natural(f, f$params)
  Kinv <- nat$Kinv
  gm <- drop(Kinv %*% nat$latents[[1]]$r)
  P <- nat$latents[[1]]$P
  # model (m, L_S) -> natural (S^-1 m, S^-1) -> model, with a step of 0
  mv <- sparsevgp:::.natgrad_move(m, R, Kinv, gm, P, 0, FALSE, NULL)
  expect_equal(mv$b, m, tolerance = 1e-10)
  expect_equal(mv$W, R, tolerance = 1e-10)
  # (16b): the change of theta_1 = S^-1 m per unit step is the gradient of the
  # ELBO in the expectation parameter eta_1 = m at fixed eta_2 = S + m m'
  step <- 0.3
  mv <- sparsevgp:::.natgrad_move(m, R, Kinv, gm, P, step, FALSE, NULL)
  th_new <- solve(tcrossprod(mv$W), mv$b)
  eta2 <- S + tcrossprod(m)
  elbo_eta <- function(e1) {
    Se <- eta2 - tcrossprod(e1)
    W <- t(chol(Se))
    with_params(f, q_mu = e1, q_sqrt_diag = diag(W), q_sqrt_lower = W[lower.tri(W)])$bound
  }
  fd <- fd_grad(elbo_eta, m, h = 1e-6)
  expect_equal((th_new - solve(S, m)) / step, fd, tolerance = 1e-6)
  # (16c): the change of S^-1 = -2 theta_2 per unit step is -2 times the
  # gradient in eta_2 = S + m m' at fixed eta_1 (by finite differences in
  # symmetric perturbations of S)
  elbo_S <- function(Sx) {
    W <- t(chol(Sx))
    with_params(f, q_sqrt_diag = diag(W), q_sqrt_lower = W[lower.tri(W)])$bound
  }
  h <- 1e-6
  Gfd <- matrix(0, 5, 5)
  for (i in 1:5) for (j in 1:i) {
    E <- matrix(0, 5, 5)
    E[i, j] <- E[j, i] <- if (i == j) 1 else 0.5
    Gfd[i, j] <- Gfd[j, i] <- (elbo_S(S + h * E) - elbo_S(S - h * E)) / (2 * h)
  }
  expect_equal((solve(tcrossprod(mv$W)) - solve(S)) / step, -2 * Gfd, tolerance = 1e-6)
})

test_that("the column-sampled KL is unbiased and its gradient is exact", {
  s <- odvgp_setup(G = 4, jitter = 1e-8)
  f <- s$fit
  f$control$kl_columns <- 2L
  ev <- function(idx, grad = FALSE, params = f$params) {
    sparsevgp:::.evaluate(f, params, grad, batch = 1:40, kl_index = idx)
  }
  # all columns: the exact value; the mean over every pair of columns: exact too
  expect_equal(ev(1:4)$value, f$bound, tolerance = 1e-10)
  pairs <- combn(4, 2)
  est <- apply(pairs, 2L, function(idx) ev(idx)$value)
  expect_equal(mean(est), f$bound, tolerance = 1e-10)
  expect_gt(sd(est), 1e-3)
  # gradient of the estimate at fixed columns, every parameter
  o <- sparsevgp:::.objective(f, safe = FALSE)
  fn <- function(par) o$value_grad(par, batch = 1:40, kl_index = c(1L, 3L))$value
  g <- o$value_grad(o$par, batch = 1:40, kl_index = c(1L, 3L))$grad
  expect_lte(max(abs(g - fd_grad(fn, o$par))) / max(1, max(abs(g))), 1e-6)
  # the mean gradient over the pairs is the exact gradient
  gs <- apply(pairs, 2L, function(idx) o$value_grad(o$par, batch = 1:40, kl_index = idx)$grad)
  expect_equal(rowMeans(gs), o$value_grad(o$par)$grad, tolerance = 1e-8)
  # fits sample the columns on minibatches
  set.seed(1)
  a <- odvgp(s$d$x, s$d$y, inducing = s$Z, orthogonal = s$O, batch_size = 20,
             control = list(maxit = 30, kl_columns = 2))
  expect_true(is.finite(a$bound))
  expect_error(odvgp(s$d$x, s$d$y, control = list(kl_columns = 0), optimize = FALSE),
               "kl_columns")
})

test_that("softmax: Monte Carlo gradients in mu and s match finite differences at fixed draws", {
  set.seed(4)
  n <- 5
  K <- 3
  MU <- matrix(rnorm(n * K), n, K)
  S <- matrix(exp(rnorm(n * K, sd = 0.5)), n, K)
  y <- c(1L, 3L, 2L, 2L, 1L)
  draws <- matrix(rnorm(30 * K), 30, K)
  e <- sparsevgp:::.softmax_ell(MU, S, y, draws, 2.5)
  fn <- function(M, V) sparsevgp:::.softmax_ell(M, V, y, draws, 2.5)$ell
  h <- 1e-6
  gfd <- hfd <- matrix(0, n, K)
  for (i in seq_len(n * K)) {
    d <- replace(numeric(n * K), i, h)
    gfd[i] <- (fn(MU + d, S) - fn(MU - d, S)) / (2 * h)
    hfd[i] <- (fn(MU, S + d) - fn(MU, S - d)) / (2 * h)
  }
  expect_equal(e$g, gfd, tolerance = 1e-7)
  expect_equal(e$h, hfd, tolerance = 1e-7)
  # the value: the average of log p(y | mu + sqrt(s) eps) over the draws, by hand
  lp <- vapply(seq_len(n), function(i) {
    mean(apply(draws, 1, function(z) {
      f <- MU[i, ] + sqrt(S[i, ]) * z
      f[y[i]] - log(sum(exp(f)))
    }))
  }, 1)
  expect_equal(e$ell, 2.5 * sum(lp), tolerance = 1e-12)
})

test_that("softmax: the C estimator equals the draw-by-draw formula, without overflow", {
  # the reference: every row and draw by hand in R, log-sum-exp shifted by
  # the maximum, with g = mean_s (1[k = y] - p_k) and
  # h = mean_s (1[k = y] - p_k) eps_k / (2 sd_k)
  ref <- function(MU, S, y, draws) {
    n <- nrow(MU)
    K <- ncol(MU)
    sd <- sqrt(pmax(S, 1e-12))
    ell <- 0
    g <- h <- P <- matrix(0, n, K)
    for (i in seq_len(n)) {
      for (s in seq_len(nrow(draws))) {
        f <- MU[i, ] + sd[i, ] * draws[s, ]
        lse <- max(f) + log(sum(exp(f - max(f))))
        p <- exp(f - lse)
        ell <- ell + f[y[i]] - lse
        r <- (seq_len(K) == y[i]) - p
        g[i, ] <- g[i, ] + r
        h[i, ] <- h[i, ] + r * draws[s, ]
        P[i, ] <- P[i, ] + p
      }
    }
    ns <- nrow(draws)
    list(ell = ell / ns, g = g / ns, h = h / (2 * sd * ns), P = P / ns)
  }
  set.seed(11)
  for (K in c(2L, 3L, 6L)) {
    n <- 7
    MU <- matrix(rnorm(n * K, sd = 3), n, K)
    MU[1, 1] <- 800  # exp(800) overflows: the shift by the maximum keeps it finite
    S <- matrix(exp(rnorm(n * K)), n, K)
    S[2, 2] <- 0  # floored at 1e-12 for the value, at 0 for the probabilities
    y <- sample.int(K, n, replace = TRUE)
    draws <- matrix(rnorm(13 * K), 13, K)
    r <- ref(MU, S, y, draws)
    e <- sparsevgp:::.softmax_ell(MU, S, y, draws, 1.5)
    expect_equal(e$ell, 1.5 * r$ell, tolerance = 1e-12)
    expect_equal(e$g, 1.5 * r$g, tolerance = 1e-12)
    expect_equal(e$h, 1.5 * r$h, tolerance = 1e-12)
    S0 <- S
    S0[2, 2] <- 1e-12
    expect_equal(sparsevgp:::.softmax_prob(MU, S0, draws), r$P, tolerance = 1e-12)
    # y stored as doubles is read as the same classes
    expect_equal(sparsevgp:::.softmax_ell(MU, S, as.double(y), draws, 1.5)$ell, e$ell)
  }
  sd <- sqrt(S + 1)
  expect_error(sparsevgp:::.ffi_softmax_ell(MU, sd, c(y[-1], K + 1L), draws),
               "classes 1 to 6")
  expect_error(sparsevgp:::.ffi_softmax_ell(MU, sd, y[-1], draws), "7 integers")
  expect_error(sparsevgp:::.ffi_softmax_prob(MU, sd, draws[, -1]), "S x K")
  # a zero standard deviation divides h: refused (the R code floors the
  # variance at 1e-12); the probabilities take it
  expect_error(sparsevgp:::.ffi_softmax_ell(MU, replace(sd, 2, 0), y, draws), "positive")
  expect_true(all(is.finite(sparsevgp:::.ffi_softmax_prob(MU, replace(sd, 2, 0), draws))))
  expect_error(sparsevgp:::.ffi_softmax_prob(replace(MU, 1, NaN), sd, draws), "finite")
  expect_error(sparsevgp:::.ffi_softmax_ell(MU, sd, y, replace(draws, 1, Inf)), "finite")
  # finite arguments whose draws overflow: an error, not an infinite value
  expect_error(sparsevgp:::.ffi_softmax_ell(replace(MU, 1, 1.7e308), replace(sd, 1, 1e308), y,
                                            draws), "not finite")
})

test_that("softmax with two classes is the Bernoulli-logit expectation", {
  # E[log softmax_y(f)] with f1 ~ N(m1, s1), f2 ~ N(m2, s2) equals
  # E[log sigmoid(g)] with g ~ N(m_y - m_o, s_y + s_o): against svgp's
  # Gauss-Hermite logit expectation within Monte Carlo error
  MU <- cbind(c(0.3, -1, 2, 0), c(-0.2, 0.5, 1.9, 1))
  S <- cbind(c(0.5, 2, 0.1, 3), c(1.2, 0.3, 0.05, 0.4))
  y <- c(1L, 2L, 1L, 2L)
  gh <- sparsevgp:::.gauss_hermite(60L)
  set.seed(7)
  nd <- 2e4
  draws <- matrix(rnorm(2 * nd), nd, 2)
  o <- 3L - y
  iy <- cbind(1:4, y)
  io <- cbind(1:4, o)
  for (i in 1:4) {
    e <- sparsevgp:::.softmax_ell(MU[i, , drop = FALSE], S[i, , drop = FALSE], y[i], draws, 1)
    ref <- sparsevgp:::.ffi_svgp_ell(MU[iy][i] - MU[io][i], S[iy][i] + S[io][i], 1,
                                     "bernoulli", 1, gh, 1)$ell
    vals <- -log1p(exp(-(MU[iy][i] + sqrt(S[iy][i]) * draws[, y[i]] -
                           MU[io][i] - sqrt(S[io][i]) * draws[, o[i]])))
    expect_equal(e$ell, mean(vals), tolerance = 1e-10)
    expect_lt(abs(e$ell - ref), 4 * sd(vals) / sqrt(nd))
  }
  # the class probabilities: E[sigmoid(g)] by Gauss-Hermite, within Monte Carlo error
  P <- sparsevgp:::.softmax_prob(MU, S, draws)
  expect_equal(rowSums(P), rep(1, 4), tolerance = 1e-12)
  d <- MU[, 1] - MU[, 2]
  v <- S[, 1] + S[, 2]
  ref <- vapply(1:4, function(i) sum(gh$w / sqrt(pi) * plogis(d[i] + sqrt(2 * v[i]) * gh$x)), 1)
  expect_lt(max(abs(P[, 1] - ref)), 4 * 0.5 / sqrt(nd))
})

test_that("softmax fits: whole-model gradients, determinism, probabilities and classes", {
  d <- multiclass_data()
  for (O in list(d$x[6:9, ], 0)) {
    set.seed(1)
    f <- odvgp(d$x, d$y, kernel = kernel_rbf(0.9, 1.5), inducing = d$x[1:5, ], orthogonal = O,
               likelihood = "softmax", control = list(mc_samples = 20), optimize = FALSE)
    expect_equal(f$likelihood, "softmax")
    expect_equal(dim(f$mc$draws), c(20L, 3L))
    set.seed(2)
    p <- f$params
    p$a_gamma[] <- rnorm(length(p$a_gamma))
    p$q_mu[] <- rnorm(length(p$q_mu))
    p$q_sqrt_lower[] <- rnorm(length(p$q_sqrt_lower), sd = 0.3)
    p$q_sqrt_diag[] <- exp(rnorm(length(p$q_sqrt_diag), sd = 0.3))
    f$params <- p
    f <- sparsevgp:::.finish(f)
    expect_grad(f, tol = 1e-6)
    # the objective is deterministic: the draws are fixed in the fit
    o <- objective(f)
    expect_identical(o$fn(o$par), o$fn(o$par))
  }
  # the same seed gives the same draws and does not move the random stream
  set.seed(5)
  a <- odvgp(d$x, d$y, inducing = 4, orthogonal = 0, likelihood = "softmax", optimize = FALSE)
  u1 <- runif(1)
  set.seed(5)
  b <- odvgp(d$x, d$y, inducing = 4, orthogonal = 0, likelihood = "softmax", optimize = FALSE)
  expect_identical(a$mc, b$mc)
  expect_identical(runif(1), u1)
  expect_equal(dim(a$mc$draws), c(100L, 3L))
  set.seed(1)
  f <- odvgp(d$x, d$y, inducing = 5, orthogonal = 8, likelihood = "softmax",
             control = list(mc_samples = 50))
  expect_true(any(grepl("softmax (3 classes, 50 Monte Carlo draws)", capture.output(print(f)), fixed = TRUE)))
  pr <- predict(f, d$x[1:6, ], type = "prob")
  expect_equal(unname(rowSums(pr)), rep(1, 6), tolerance = 1e-12)
  expect_equal(colnames(pr), c("a", "b", "c"))
  # against an independent Monte Carlo average of the softmax with fresh draws
  lat <- predict(f, d$x[1:6, ])
  set.seed(9)
  ref <- t(vapply(1:6, function(i) {
    z <- matrix(rnorm(3 * 4e4), ncol = 3)
    fz <- sweep(sweep(z, 2, sqrt(lat$var[i, ]), `*`), 2, lat$mean[i, ], `+`)
    colMeans(exp(fz) / rowSums(exp(fz)))
  }, numeric(3)))
  expect_lt(max(abs(unname(pr) - ref)), 0.05)
  cls <- predict(f, d$x[1:6, ], type = "class")
  expect_true(is.factor(cls) && identical(levels(cls), c("a", "b", "c")))
  expect_gt(mean(predict(f, type = "class") == d$y), 0.8)
  expect_equal(dim(fitted(f)), c(60L, 3L))
  expect_error(residuals(f), "multiclass")
  expect_error(plot(f), "multiclass")
  expect_error(odvgp(d$x, d$y, likelihood = "softmax", control = list(mc_samples = 0),
                     optimize = FALSE), "mc_samples")
  expect_error(odvgp(d$x, d$y, likelihood = "robustmax", control = list(mc_samples = 10),
                     optimize = FALSE), "softmax likelihood only")
  expect_error(odvgp(d$x, d$y, likelihood = "softmax", mean = 1, optimize = FALSE), "mean")
})
