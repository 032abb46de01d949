# The two decoupled bases that Salimbeni, Cheng, Boots and Deisenroth (2018)
# compare the orthogonal basis with, both from Cheng and Boots (2017):
#
# "hybrid" (Salimbeni et al. 2018, eq. 11): the mean
#   m(x) = k_x,gamma a_gamma + k_x,beta K_beta^-1 m_beta,
# with no projection of the gamma part, and the covariance of svgp on beta.
# It is the orthogonal basis at m_beta' = m_beta + K_beta,gamma a_gamma (the
# orthogonal mean at that m_beta' is k_x,gamma a_gamma + k_x,beta
# K_beta^-1 (m_beta' - K_beta,gamma a_gamma)), so .odvgp_eval() evaluates it
# through that map and takes the chain rule back (.hybrid_q(),
# .hybrid_grad()); the parameters keep the orthogonal names, q_mu being the
# m_beta of eq. 11. Its KL divergence, 1/2 |mu|^2 for the mean plus svgp's
# covariance term,
#   KL = 1/2 a_g' K_g a_g + a_g' K_gb K_b^-1 m_b + 1/2 m_b' K_b^-1 m_b
#        + 1/2 (tr(K_b^-1 S) - log|K_b^-1 S| - |beta|),
# is then the orthogonal KL at m_beta'.
#
# "decoupled" (Cheng and Boots 2017; Salimbeni et al. 2018, eq. 8): the mean
# m(x) = k_x,alpha a with alpha = beta and gamma together, the covariance
# operator (I + Psi_beta B Psi_beta')^-1 with B = L_B L_B', so that
#   s(x) = k(x, x) - k_x,beta (B^-1 + K_beta)^-1 k_beta,x
#        = k(x, x) - |H_L^-1 L_B' k_beta,x|^2,  H = I + L_B' K_beta L_B = H_L H_L',
# and (Cheng and Boots 2017, eq. 9, with tr(K_beta (B^-1 + K_beta)^-1) =
# |beta| - tr(H^-1))
#   KL = 1/2 a' K_alpha a + 1/2 (log|H| + tr(H^-1) - |beta|),
# which is the KL of Salimbeni et al. (2018, Prop. A.1) with
# S = (K_beta^-1 + B)^-1 (checked in the tests). Parameters: a_beta,
# a_gamma and L_B (its lower triangle with the diagonal, column by column, on
# the natural scale, as the paper's unconstrained Cholesky factor).
# K_beta carries the jitter of the other bases, so that with no gamma this
# is the non-whitened svgp at m = K_beta a_beta, S = (K_beta^-1 + B)^-1.

# The basis argument of odvgp().
.odvgp_basis <- function(basis) {
  if (!is.character(basis) || length(basis) < 1L || anyNA(basis) ||
      (length(basis) > 1L && !identical(basis, c("orthogonal", "hybrid", "decoupled")))) {
    stop("'basis' must be \"orthogonal\", \"hybrid\" or \"decoupled\"", call. = FALSE)
  }
  if (identical(basis, c("orthogonal", "hybrid", "decoupled"))) basis <- "orthogonal"
  if (!(basis %in% c("orthogonal", "hybrid", "decoupled"))) {
    stop("'basis' must be \"orthogonal\", \"hybrid\" or \"decoupled\"", call. = FALSE)
  }
  basis
}

# Natural gradients are defined here for the orthogonal (and coupled) basis
# only: the hybrid's m_beta and a_gamma are coupled, and the decoupled
# basis's (a, B) are not natural parameters of q(f_beta).
.odvgp_basis_control <- function(basis, control) {
  if (basis != "orthogonal" && identical(control$optimizer, "natgrad")) {
    stop(sprintf("natural gradients are available for basis = \"orthogonal\" only, not \"%s\": use control$optimizer = \"adam\" or \"lbfgsb\"",
                 basis), call. = FALSE)
  }
  invisible(control)
}

# The decoupled basis's variational blocks in place of q_mu and q_sqrt_*:
# a_beta and L_B start near zero (scale 1e-6, as Salimbeni et al. 2018,
# Appendix F; L_B = 0 would be a stationary point in L_B), a_gamma at 0.
.decoupled_params <- function(params, transforms, M, nl) {
  shape <- function(n, v) if (nl == 1L) rep(v, n) else matrix(v, n, nl)
  params$q_mu <- params$q_sqrt_diag <- params$q_sqrt_lower <- NULL
  LB <- diag(1e-6, M)
  params$a_beta <- shape(M, 1e-6)
  params$L_B <- shape(M * (M + 1L) / 2, 0)
  params$L_B[] <- LB[lower.tri(LB, diag = TRUE)]
  transforms <- transforms[!(names(transforms) %in% c("q_mu", "q_sqrt_diag", "q_sqrt_lower"))]
  list(params = params, transforms = c(transforms, a_beta = "identity", L_B = "identity"))
}

# The hybrid basis as the orthogonal one: m_beta' = m_beta + K_beta,gamma a_gamma
# for each latent function.
.hybrid_q <- function(qs, Kbg) {
  lapply(qs, function(q) {
    q$mb <- q$mb + drop(Kbg %*% q$ag)
    q
  })
}

# The chain rule back from the orthogonal gradient at m_beta': with d =
# dF/dm_beta', dF/dm_beta = d, dF/da_gamma gains K_gamma,beta d and
# dF/dK_beta,gamma gains d a_gamma'. Returns list(gq, Gbg).
.hybrid_grad <- function(gq, q, Kbg, Gbg) {
  d <- gq$q_mu
  gq$a_gamma <- gq$a_gamma + drop(crossprod(Kbg, d))
  list(gq = gq, Gbg = Gbg + outer(d, q$ag))
}

# The variational parameters of each latent function of the decoupled
# basis: list over the columns of a_beta of list(ab, ag, LB).
.decoupled_q <- function(params) {
  ab <- as.matrix(params$a_beta)
  M <- nrow(ab)
  ag <- params$a_gamma
  ag <- if (is.matrix(ag)) ag else matrix(ag, ncol = 1L)
  lb <- if (is.matrix(params$L_B)) params$L_B else matrix(params$L_B, ncol = 1L)
  lapply(seq_len(ncol(ab)), function(j) {
    LB <- matrix(0, M, M)
    LB[lower.tri(LB, diag = TRUE)] <- lb[, j]
    list(ab = ab[, j], ag = ag[, j], LB = LB)
  })
}

# The ELBO of the decoupled basis, as .odvgp_eval(): terms, marginals and,
# with grad = TRUE, the gradient of every block. With g = dELL/dmu,
# h = dELL/ds, Kj = K_beta + jitter I, Q = L_B H^-1 L_B' (so that
# s = k_xx - k_x,beta Q k_beta,x) and a_w = [a_beta; a_gamma] on W = [Z; O]
# (derived for this package and checked against finite differences):
#   dF/dK_wx = a_w g' - 2 [Q K_bx diag(h); 0],   dF/da_w = K_wx g - K_w a_w,
#   dF/dK_w  = -a_w a_w' / 2 + [dF/dKj 0; 0 0],
# and, with G = dF/dQ = -K_bx diag(h) K_xb, T = H^-1 L_B' G L_B H^-1 and
# U = H^-1 - H^-2 (from d(log|H| + tr H^-1) = tr(U dH)),
#   dF/dL_B = 2 G L_B H^-1 - 2 Kj L_B T - Kj L_B U   (lower triangle),
#   dF/dKj  = -L_B T L_B' - L_B U L_B' / 2.
.decoupled_eval <- function(fit, params, grad = TRUE, batch = NULL, kl_index = NULL) {
  # the data, kernel blocks and Cholesky factor of the orthogonal basis
  blk <- .odvgp_blocks(fit, params, batch, kl_index)
  x <- blk$x
  target <- blk$target
  scale <- blk$scale
  k <- blk$k
  Z <- blk$Z
  O <- blk$O
  M <- blk$M
  G <- blk$G
  ib <- blk$ib
  ig <- blk$ig
  kl_index <- blk$kl_index
  sampled <- blk$sampled
  Kb <- blk$Kb
  Kbg <- blk$Kbg
  Kg <- blk$Kg
  OC <- blk$OC
  KCg <- blk$KCg
  wC <- blk$wC
  Kbx <- blk$Kbx
  Kgx <- blk$Kgx
  kd <- blk$kd
  ch <- blk$ch
  # the jitter of the other bases (the same Cholesky), added to K_beta
  Kj <- Kb
  diag(Kj) <- diag(Kj) + ch$jitter
  n <- ncol(Kbx)
  qs <- .decoupled_q(params)
  nl <- length(qs)
  lat <- lapply(qs, function(q) {
    H <- diag(M) + crossprod(q$LB, Kj %*% q$LB)
    Lh <- t(chol(H))
    C0 <- crossprod(q$LB, Kbx)
    Cn <- forwardsolve(Lh, C0)
    mu <- params$mean + drop(crossprod(Kbx, q$ab))
    if (G > 0L) mu <- mu + drop(crossprod(Kgx, q$ag))
    Kab <- drop(Kj %*% q$ab)
    quad <- sum(q$ab * Kab)
    if (G > 0L) {
      Kbga <- drop(Kbg %*% q$ag)
      quad <- quad + 2 * sum(q$ab * Kbga) + if (sampled) {
        wC * sum(q$ag[kl_index] * (KCg %*% q$ag))
      } else {
        sum(q$ag * (Kg %*% q$ag))
      }
    }
    Hinv <- chol2inv(t(Lh))
    kl <- 0.5 * (quad + 2 * sum(log(diag(Lh))) + sum(diag(Hinv)) - M)
    list(mu = mu, s = pmax(kd - colSums(Cn^2), 0), kl = kl, Lh = Lh, C0 = C0, Cn = Cn,
         Hinv = Hinv, R = forwardsolve(Lh, t(q$LB)))
  })
  MU <- vapply(lat, `[[`, numeric(n), "mu")
  SV <- vapply(lat, `[[`, numeric(n), "s")
  dim(MU) <- dim(SV) <- c(n, nl)
  e <- .odvgp_ell(fit, MU, SV, target, params, scale)
  kl <- sum(vapply(lat, `[[`, 1, "kl"))
  out <- list(value = e$ell - kl, ell = e$ell, kl = kl, mu = MU, var = SV,
              R = lapply(lat, `[[`, "R"), jitter = ch$jitter, jitter_scale = mean(diag(Kb)))
  if (!grad) return(out)
  Gww <- matrix(0, M + G, M + G)
  Gbx <- matrix(0, M, n)
  Ggx <- matrix(0, G, n)
  if (sampled) GCg <- matrix(0, length(kl_index), G)
  gq <- vector("list", nl)
  for (j in seq_len(nl)) {
    q <- qs[[j]]
    la <- lat[[j]]
    g <- e$g[, j]
    h <- e$h[, j]
    LB <- q$LB
    # the mean
    Gbx <- Gbx + outer(q$ab, g)
    gab <- drop(Kbx %*% g) - drop(Kj %*% q$ab)
    Gww[ib, ib] <- Gww[ib, ib] - 0.5 * outer(q$ab, q$ab)
    gag <- numeric(0)
    if (G > 0L) {
      Ggx <- Ggx + outer(q$ag, g)
      Gww[ib, ig] <- Gww[ib, ig] - outer(q$ab, q$ag)
      gab <- gab - drop(Kbg %*% q$ag)
      gag <- drop(Kgx %*% g) - drop(crossprod(Kbg, q$ab))
      if (sampled) {
        aC <- q$ag[kl_index]
        GCg <- GCg - 0.5 * wC * outer(aC, q$ag)
        gag <- gag - 0.5 * wC * drop(crossprod(KCg, aC))
        gag[kl_index] <- gag[kl_index] - 0.5 * wC * drop(KCg %*% q$ag)
      } else {
        Gww[ig, ig] <- Gww[ig, ig] - 0.5 * outer(q$ag, q$ag)
        gag <- gag - drop(Kg %*% q$ag)
      }
    }
    # the variance: Q K_bx = L_B H^-1 L_B' K_bx
    QKbx <- LB %*% backsolve(t(la$Lh), la$Cn)
    Gbx <- Gbx - 2 * QKbx * rep(h, each = M)
    GL <- -tcrossprod(Kbx * rep(h, each = M), la$C0)
    Tm <- la$Hinv %*% crossprod(LB, GL) %*% la$Hinv
    U <- la$Hinv - la$Hinv %*% la$Hinv
    KjLB <- Kj %*% LB
    dLB <- 2 * GL %*% la$Hinv - 2 * KjLB %*% Tm - KjLB %*% U
    Gww[ib, ib] <- Gww[ib, ib] - LB %*% Tm %*% t(LB) - 0.5 * LB %*% U %*% t(LB)
    gq[[j]] <- list(a_gamma = gag, a_beta = gab, L_B = dLB[lower.tri(dLB, diag = TRUE)])
  }
  gk <- .odvgp_contract(k, x, Z, O, Gww, Gbx, Ggx, rowSums(e$h), Kbx, Kgx, ch$jitter,
                        .any_free(fit, c("Z", "O")),
                        if (sampled) list(OC = OC, index = kl_index, GCg = GCg))
  gW <- gk$W
  out$grad <- list(variance = gk$variance, lengthscale = gk$lengthscale,
                   noise = if (is.null(params$noise)) NULL else e$gnoise * params$noise,
                   mean = sum(e$g), Z = gW[ib, , drop = FALSE], O = gW[ig, , drop = FALSE])
  for (b in c("a_gamma", "a_beta", "L_B")) {
    gb <- vapply(gq, `[[`, numeric(length(gq[[1L]][[b]])), b)
    out$grad[[b]] <- if (nl == 1L) as.vector(gb) else matrix(gb, ncol = nl)
  }
  out
}

# The marginals of the decoupled basis at new inputs: the mean
# k_x,beta a_beta + k_x,gamma a_gamma and the variance
# k(x, x) - |R_j k_beta,x|^2 with R_j = H_L^-1 L_B' from the fit.
.decoupled_predict <- function(fit, xnew, full_cov) {
  k <- .kernel_at(fit$kernel, fit$params)
  p <- fit$params
  R <- fit$posterior$R
  ab <- as.matrix(p$a_beta)
  ag <- if (is.matrix(p$a_gamma)) p$a_gamma else matrix(p$a_gamma, ncol = 1L)
  nl <- length(R)
  G <- nrow(p$O)
  parts <- function(xb) {
    Kbx <- .ffi_kern_matrix(k, p$Z, xb)
    m <- p$mean + crossprod(Kbx, ab)
    if (G > 0L) m <- m + crossprod(.ffi_kern_matrix(k, p$O, xb), ag)
    list(mean = m, V = lapply(R, function(r) r %*% Kbx))
  }
  if (full_cov) {
    if (nl > 1L) stop("'full_cov = TRUE' is not available for multiclass fits", call. = FALSE)
    q <- parts(xnew)
    return(list(mean = drop(q$mean), cov = .ffi_kern_matrix(k, xnew) - crossprod(q$V[[1L]])))
  }
  mean <- var <- matrix(0, nrow(xnew), nl)
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    q <- parts(xb)
    mean[b, ] <- q$mean
    kd <- .ffi_kern_diag(k, xb)
    for (j in seq_len(nl)) var[b, j] <- kd - colSums(q$V[[j]]^2)
  }
  if (nl == 1L) return(list(mean = drop(mean), var = drop(var)))
  list(mean = mean, var = var)
}
