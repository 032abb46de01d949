# The two baselines of Salimbeni, Cheng, Boots and Deisenroth (2018), the
# decoupled basis of Cheng and Boots (2017, their eq. 8) and the hybrid basis
# (their eq. 11), against independent routes: dense Gaussian KL divergences
# of q(f_alpha), dense predictive constructions, the non-whitened svgp and
# central finite differences.

dec_kernel <- function() kernel_rbf(c(0.8, 1.2), 1.3)

dec_setup <- function(basis, G = 4, likelihood = "gaussian", kernel = dec_kernel(), seed = 2,
                      jitter = 0) {
  d <- toy_data(40, 2)
  Z <- d$x[c(3, 8, 14, 20, 33), ]
  O <- if (G > 0) d$x[c(5, 11, 25, 30, 2, 38)[seq_len(G)], , drop = FALSE] else 0
  y <- if (likelihood == "gaussian") d$y else factor(d$y > 0)
  f <- odvgp(d$x, y, kernel = kernel, inducing = Z, orthogonal = O, likelihood = likelihood,
             noise = if (likelihood == "gaussian") 0.1, mean = 0.3, optimize = FALSE,
             control = list(jitter = jitter), basis = basis)
  set.seed(seed)
  p <- f$params
  p$a_gamma <- rnorm(length(p$a_gamma))
  if (basis == "decoupled") {
    p$a_beta <- rnorm(5)
    LB <- diag(exp(rnorm(5, sd = 0.3)), 5)
    LB[lower.tri(LB)] <- rnorm(10, sd = 0.3)
    p$L_B <- LB[lower.tri(LB, diag = TRUE)]
  } else {
    p$q_mu <- rnorm(5)
    p$q_sqrt_diag <- exp(rnorm(5, sd = 0.3))
    p$q_sqrt_lower <- rnorm(10, sd = 0.3)
  }
  f$params <- p
  list(fit = sparsevgp:::.finish(f), d = d, y = y, Z = Z, O = if (G > 0) O)
}

dec_B <- function(fit) {
  LB <- matrix(0, 5, 5)
  LB[lower.tri(LB, diag = TRUE)] <- fit$params$L_B
  tcrossprod(LB)
}

dec_S <- function(fit) {
  W <- diag(fit$params$q_sqrt_diag, 5)
  W[lower.tri(W)] <- fit$params$q_sqrt_lower
  tcrossprod(W)
}

dense_kl <- function(m, C, K) {
  0.5 * (sum(diag(solve(K, C))) + sum(m * solve(K, m)) - length(m) +
           as.numeric(determinant(K)$modulus) - as.numeric(determinant(C)$modulus))
}

# q(f_alpha) = N(m, C) on alpha = [gamma; beta] of either baseline, built
# from its definition in the feature space: the decoupled basis has mean
# K_alpha a and covariance Psi_alpha' (I + Psi_beta B Psi_beta')^-1
# Psi_alpha = K_alpha - K_alpha,beta (B^-1 + K_beta)^-1 K_beta,alpha; the
# hybrid has mean K_alpha,gamma a_gamma + K_alpha,beta K_beta^-1 m_beta and
# covariance K_alpha + K_alpha,beta K_beta^-1 (S - K_beta) K_beta^-1 K_beta,alpha.
dec_joint <- function(fit, k = dec_kernel()) {
  p <- fit$params
  A <- rbind(p$O, p$Z)
  Ka <- naive_kernel(k, A, A)
  Kab <- naive_kernel(k, A, p$Z)
  Kag <- naive_kernel(k, A, p$O)
  Kb <- naive_kernel(k, p$Z, p$Z)
  if (fit$basis == "decoupled") {
    m <- drop(Ka %*% c(p$a_gamma, p$a_beta))
    C <- Ka - Kab %*% solve(solve(dec_B(fit)) + Kb, t(Kab))
  } else {
    m <- drop(Kag %*% p$a_gamma + Kab %*% solve(Kb, p$q_mu))
    C <- Ka + Kab %*% solve(Kb, dec_S(fit) - Kb) %*% solve(Kb, t(Kab))
  }
  list(m = m, C = C, Ka = Ka, A = A, Kb = Kb, Kgb = naive_kernel(k, p$O, p$Z),
       Kg = naive_kernel(k, p$O, p$O))
}

test_that("decoupled and hybrid: hand gradients match central finite differences", {
  sum_k <- kernel_matern52(0.9, 1.1) + kernel_rbf(c(1.5, 0.8), 0.7)
  for (basis in c("decoupled", "hybrid")) {
    for (lik in c("gaussian", "bernoulli", "probit")) {
      expect_grad(dec_setup(basis, likelihood = lik, jitter = 1e-8)$fit, tol = 1e-6)
    }
    expect_grad(dec_setup(basis, kernel = sum_k, jitter = 1e-8)$fit, tol = 1e-6)
    expect_grad(dec_setup(basis, likelihood = "bernoulli", kernel = sum_k,
                          jitter = 1e-8)$fit, tol = 1e-6)
    expect_grad(dec_setup(basis, G = 0, jitter = 1e-8)$fit, tol = 1e-6)
    # a minibatch with the column-sampled KL: the gradient of the estimate;
    # the mean over every pair of columns is the exact bound
    f <- dec_setup(basis, likelihood = "bernoulli", jitter = 1e-8)$fit
    o <- sparsevgp:::.objective(f, safe = FALSE)
    b <- c(2L, 7L, 19L, 33L)
    fn <- function(par) o$value_grad(par, batch = b, kl_index = c(1L, 3L))$value
    g <- o$value_grad(o$par, batch = b, kl_index = c(1L, 3L))$grad
    expect_lte(max(abs(g - fd_grad(fn, o$par))) / max(1, max(abs(g))), 1e-6)
    est <- apply(combn(4, 2), 2L, function(idx) {
      sparsevgp:::.evaluate(f, f$params, FALSE, batch = 1:40, kl_index = idx)$value
    })
    expect_equal(mean(est), f$bound, tolerance = 1e-10)
  }
})

test_that("decoupled and hybrid: multiclass gradients match finite differences", {
  set.seed(3)
  x <- matrix(runif(80, -2, 2), 40, 2)
  y <- factor(c("a", "b", "c")[1 + (x[, 1] > 0) + (x[, 2] > 0.5)])
  for (basis in c("decoupled", "hybrid")) for (lik in c("robustmax", "softmax")) {
    f <- odvgp(x, y, inducing = x[1:4, ], orthogonal = x[5:9, ], kernel = dec_kernel(),
               optimize = FALSE, basis = basis, likelihood = lik,
               control = c(list(jitter = 1e-8), if (lik == "softmax") list(mc_samples = 20)))
    set.seed(5)
    for (b in intersect(names(f$params), c("a_gamma", "a_beta", "L_B", "q_mu", "q_sqrt_lower"))) {
      f$params[[b]][] <- rnorm(length(f$params[[b]]), sd = 0.5)
    }
    f <- sparsevgp:::.finish(f)
    expect_grad(f, tol = 1e-6)
    pr <- predict(f, x[1:3, ], type = "prob")
    expect_equal(unname(rowSums(pr)), rep(1, 3), tolerance = 1e-10)
  }
})

test_that("the decoupled KL (Cheng and Boots 2017, eq. 9) is Prop. A.1 with S = (K^-1 + B)^-1 and the dense KL", {
  s <- dec_setup("decoupled")
  f <- s$fit
  j <- dec_joint(f)
  kl <- -unname(f$bound_terms[["neg_kl"]])
  expect_equal(kl, dense_kl(j$m, j$C, j$Ka), tolerance = 1e-8)
  # Cheng and Boots's form
  B <- dec_B(f)
  a <- c(f$params$a_gamma, f$params$a_beta)
  cb <- 0.5 * sum(a * (j$Ka %*% a)) +
    0.5 * as.numeric(determinant(diag(5) + j$Kb %*% B)$modulus) -
    0.5 * sum(diag(j$Kb %*% solve(solve(B) + j$Kb)))
  expect_equal(kl, cb, tolerance = 1e-8)
  # Salimbeni et al. (2018), Prop. A.1, covariance part with S = (K_beta^-1 + B)^-1
  S <- solve(solve(j$Kb) + B)
  KiS <- solve(j$Kb, S)
  a1 <- 0.5 * sum(a * (j$Ka %*% a)) +
    0.5 * (sum(diag(KiS)) - as.numeric(determinant(KiS)$modulus) - 5)
  expect_equal(kl, a1, tolerance = 1e-8)
})

test_that("the hybrid KL, derived from KL(q(f_alpha) || p), equals the dense KL", {
  s <- dec_setup("hybrid")
  f <- s$fit
  j <- dec_joint(f)
  kl <- -unname(f$bound_terms[["neg_kl"]])
  expect_equal(kl, dense_kl(j$m, j$C, j$Ka), tolerance = 1e-8)
  # 1/2 |mu|^2 + svgp's covariance term, with the 1/2 on the log-determinant
  ag <- f$params$a_gamma
  m <- f$params$q_mu
  S <- dec_S(f)
  Kim <- solve(j$Kb, m)
  KiS <- solve(j$Kb, S)
  form <- 0.5 * sum(m * Kim) + sum(Kim * (t(j$Kgb) %*% ag)) + 0.5 * sum(ag * (j$Kg %*% ag)) -
    0.5 * as.numeric(determinant(KiS)$modulus) + 0.5 * sum(diag(KiS)) - 0.5 * 5
  expect_equal(kl, form, tolerance = 1e-8)
  # the log-determinant without the 1/2 (as printed by Cheng and Boots, eq. 14) differs
  expect_gt(abs(kl - (form - 0.5 * as.numeric(determinant(KiS)$modulus))), 1e-3)
})

test_that("decoupled and hybrid predictive equal the dense construction", {
  xs <- matrix(c(-1, 0.3, 1.7, 0.2, -0.5, 1), 3, 2)
  k <- dec_kernel()
  for (basis in c("decoupled", "hybrid")) {
    f <- dec_setup(basis)$fit
    j <- dec_joint(f)
    Ksa <- naive_kernel(k, xs, j$A)
    P <- Ksa %*% solve(j$Ka)
    mean <- 0.3 + drop(P %*% j$m)
    cov <- naive_kernel(k, xs, xs) - P %*% t(Ksa) + P %*% j$C %*% t(P)
    p <- predict(f, xs, full_cov = TRUE)
    expect_equal(unname(p$mean), mean, tolerance = 1e-8)
    expect_equal(unname(p$cov), cov, tolerance = 1e-8)
    expect_equal(unname(predict(f, xs)$var), diag(cov), tolerance = 1e-8)
  }
})

test_that("with no gamma, or a_gamma = 0, both baselines are the non-whitened SVGP", {
  xs <- matrix(c(-1, 0.3, 1.7, 0.2, -0.5, 1), 3, 2)
  k <- dec_kernel()
  for (lik in c("gaussian", "bernoulli")) {
    for (basis in c("decoupled", "hybrid")) {
      for (G in c(0, 4)) {
        s <- dec_setup(basis, G = G, likelihood = lik)
        f <- s$fit
        if (G > 0) f <- with_params(f, a_gamma = numeric(4))
        Kb <- naive_kernel(k, s$Z, s$Z)
        if (basis == "decoupled") {
          m <- drop(Kb %*% f$params$a_beta)
          S <- solve(solve(Kb) + dec_B(f))
        } else {
          m <- f$params$q_mu
          S <- dec_S(f)
        }
        W <- t(chol(S))
        sv <- svgp(s$d$x, s$y, kernel = k, inducing = s$Z, likelihood = lik,
                   noise = if (lik == "gaussian") 0.1, mean = 0.3, whiten = FALSE,
                   optimize = FALSE, control = list(jitter = 0))
        sv <- with_params(sv, q_mu = m, q_sqrt_diag = diag(W), q_sqrt_lower = W[lower.tri(W)])
        expect_equal(f$bound, sv$bound, tolerance = 1e-10)
        expect_equal(f$bound_terms, sv$bound_terms, tolerance = 1e-10)
        tp <- if (lik == "gaussian") "latent" else "link"
        expect_equal(predict(f, xs, type = tp, full_cov = TRUE),
                     predict(sv, xs, type = tp, full_cov = TRUE), tolerance = 1e-9)
      }
    }
  }
})

test_that("the baselines start as the paper's, fit, print and predict", {
  d <- toy_data(40, 2)
  set.seed(1)
  dec <- odvgp(d$x, d$y, inducing = 4, orthogonal = 6, basis = "decoupled", optimize = FALSE)
  expect_equal(dec$basis, "decoupled")
  expect_equal(dec$params$a_beta, rep(1e-6, 4))
  expect_equal(dec$params$a_gamma, numeric(6))
  LB <- matrix(0, 4, 4)
  LB[lower.tri(LB, diag = TRUE)] <- dec$params$L_B
  expect_equal(LB, diag(1e-6, 4))
  expect_null(dec$params$q_mu)
  hyb <- odvgp(d$x, d$y, inducing = dec$params$Z, orthogonal = dec$params$O,
               basis = "hybrid", optimize = FALSE)
  # hybrid at the prior: a_gamma = 0, m_beta = 0, S = K_beta, so KL = 0
  expect_equal(unname(hyb$bound_terms[["neg_kl"]]), 0, tolerance = 1e-10)
  expect_equal(hyb$params$a_gamma, numeric(6))
  expect_lt(abs(dec$bound_terms[["neg_kl"]]), 1e-8)
  xs <- matrix(c(-1, 0.3, 1.7, 0.2, -0.5, 1), 3, 2, dimnames = list(c("a", "b", "c"), NULL))
  for (basis in c("decoupled", "hybrid")) {
    set.seed(2)
    f0 <- odvgp(d$x, d$y, inducing = 4, orthogonal = 6, basis = basis, optimize = FALSE)
    set.seed(2)
    f <- odvgp(d$x, d$y, inducing = 4, orthogonal = 6, basis = basis,
               control = list(optimizer = "adam", maxit = 150, lr = 0.02))
    expect_gt(f$bound, f0$bound)
    expect_output(print(f), if (basis == "hybrid") "Hybrid" else "Decoupled")
    expect_output(print(summary(f)))
    expect_false(any(grepl("^(q_|a_gamma|a_beta|L_B)", names(coef(f)))))
    ll <- logLik(f)
    # inducing inputs are variational too (issue 20: df no longer counts Z, O)
    var_par <- grepl("^(q_mu|log_q_sqrt_diag|q_sqrt_lower|a_gamma|a_beta|L_B|[ZO]\\[)",
                     names(f$fixed))
    expect_equal(attr(ll, "df"), sum(!f$fixed & !var_par))
    p <- predict(f, xs, type = "latent")
    expect_named(p$mean, c("a", "b", "c"))
    expect_true(all(p$var >= 0))
    # a warm start of the same basis keeps the variational parameters
    g <- update(f, optimize = FALSE)
    expect_equal(g$bound, f$bound, tolerance = 1e-10)
    # L-BFGS-B and a classifier
    fl <- suppressWarnings(odvgp(d$x, d$y, inducing = 4, orthogonal = 6, basis = basis,
                                 control = list(maxit = 50)))
    expect_true(is.finite(fl$bound))
    fc <- odvgp(d$x, factor(d$y > 0), inducing = 4, orthogonal = 6, basis = basis,
                control = list(optimizer = "adam", maxit = 30))
    pr <- predict(fc, xs, type = "prob")
    expect_true(all(pr > 0 & pr < 1))
  }
})

test_that("the baselines refuse natural gradients and bad bases clearly", {
  d <- toy_data(30, 2)
  for (basis in c("decoupled", "hybrid")) {
    expect_error(odvgp(d$x, d$y, inducing = 4, orthogonal = 4, basis = basis,
                       control = list(optimizer = "natgrad")),
                 "natural gradients are available for basis = \"orthogonal\" only")
    f <- odvgp(d$x, d$y, inducing = 4, orthogonal = 4, basis = basis, optimize = FALSE)
    expect_error(natgrad_step(f), "natural gradients are available")
  }
  expect_error(odvgp(d$x, d$y, basis = "coupled", optimize = FALSE), "'basis'")
  expect_error(odvgp(d$x, d$y, basis = NA_character_, optimize = FALSE), "'basis'")
  expect_error(odvgp(d$x, d$y, basis = 1, optimize = FALSE), "'basis'")
})
