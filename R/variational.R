# The parameterisations ("bases") of q(u) in the uncollapsed models: the
# dispatch class of the one evaluator (R/uncollapsed.R).
#   whitened    svgp(): u = L v, q(v) = N(b, W W') (Hensman et al. 2015;
#               Tiao 2020, "Whitened parameterization")
#   orthogonal  odvgp() (Salimbeni, Cheng, Boots and Deisenroth 2018,
#               eq. 12 and Prop. A.1): q_mu = m_beta, L_S and a_gamma;
#               svgp(whiten = FALSE) is this basis with no gamma
#   hybrid      Salimbeni et al. (2018, eq. 11), from Cheng and Boots (2017):
#               the orthogonal basis at m_beta' = m_beta + K_beta,gamma a_gamma
#   decoupled   Cheng and Boots (2017, eq. 8): a_beta, a_gamma and L_B
# L = chol(K_beta + jitter I) throughout. Each basis maps its parameters and
# the kernel blocks of the inducing inputs (`ib`, .uc_inducing()) to what
# the data term needs for each latent function j:
#   at_j  the coefficients of k(x, beta) in the mean,
#   ag_j  those of k(x, gamma), so that mu(x) = m + k_x,beta at + k_x,gamma ag;
#   D_j   = L^-1 S_j L^-T - I, the change of the covariance of q(f_beta) in
#         whitened coordinates, so that s(x) = k(x, x) + a' D a with
#         a = L^-1 k_beta,x,
# and to its KL divergence (.basis_forward()). Back (.basis_backward()):
# from the adjoints of at, ag and D (abar = K_beta,x g, agbar, P = A diag(h)
# A', from the data term) to the gradient in its parameters, the adjoint of
# L and the adjoints of the kernel blocks K_beta (Gbb, besides L), K_beta,gamma
# (Gbg) and K_gamma (Gg, or GCg for its sampled columns). The adjoints were
# derived for this package and are checked against finite differences in the
# tests; the identities y = L^-1 z => zbar = L^-T ybar, Lbar -= zbar y' and
# z = L^-T y => ybar = L^-1 zbar, Lbar -= z ybar' do most of the work.

# The basis `name` as a dispatch class; the basis of a fit.
.new_basis <- function(name) {
  structure(list(name = name), class = c(paste0("basis_", name),
                                         if (name == "hybrid") "basis_orthogonal",
                                         "sparsevgp_basis"))
}

.basis_of <- function(fit) {
  b <- fit$basis
  if (is.null(b)) b <- if (isFALSE(fit$whiten)) "orthogonal" else "whitened"
  .new_basis(b)
}

.basis_blocks <- function(basis, M, G, nl) UseMethod(".basis_blocks")
.basis_prior <- function(basis, params, L) UseMethod(".basis_prior")
.basis_forward <- function(basis, params, ib) UseMethod(".basis_forward")
.basis_backward <- function(basis, params, ib, fw, adj) UseMethod(".basis_backward")
.basis_natural <- function(basis, params, ib) UseMethod(".basis_natural")

# Natural gradients (R/natgrad.R) need q(f_beta) = N(m, R R') in the
# coordinates of u: available for the whitened and orthogonal bases only.
#' @export
.basis_natural.sparsevgp_basis <- function(basis, params, ib) {
  stop(sprintf("natural gradients are available for basis = \"orthogonal\" only, not \"%s\"",
               basis$name), call. = FALSE)
}

# ---- shared pieces --------------------------------------------------------------

# A block as a matrix with one column per latent function, and back.
.qcols <- function(v) if (is.matrix(v)) v else matrix(v, ncol = 1L)
.qshape <- function(m, like) if (is.matrix(like)) m else as.vector(m)

# Lower-triangular square roots from their diagonal and strict lower
# triangle (column j of each block for latent function j).
.qsqrt <- function(params, j = 1L) {
  d <- .qcols(params$q_sqrt_diag)[, j]
  W <- diag(d, length(d))
  W[lower.tri(W)] <- .qcols(params$q_sqrt_lower)[, j]
  W
}

# The prior at the start: the variational blocks of an M-point beta set, G
# gamma inputs and nl latent functions, zeros with square roots I.
.q_blocks <- function(M, G, nl) {
  shape <- function(n, v) if (nl == 1L) rep(v, n) else matrix(v, n, nl)
  list(params = list(a_gamma = shape(G, 0), q_mu = shape(M, 0), q_sqrt_diag = shape(M, 1),
                     q_sqrt_lower = shape(M * (M - 1L) / 2, 0)),
       transforms = c(a_gamma = "identity", q_mu = "identity", q_sqrt_diag = "log",
                      q_sqrt_lower = "identity"))
}

# The term a_gamma' K_gamma a_gamma of the KL divergences, exact or from the
# sampled columns C of K_gamma ((|gamma| / |C|) sum_{i in C} a_i [K_C,gamma
# a]_i, unbiased; Salimbeni et al. 2018, Appendix A.3).
.gamma_quad <- function(ib, ag) {
  if (ib$G == 0L) return(0)
  if (ib$sampled) return(ib$wC * sum(ag[ib$kl_index] * (ib$KCg %*% ag)))
  sum(ag * (ib$Kg %*% ag))
}

# The adjoints of coef times that term: list(ag, K) with K the adjoint of
# K_gamma (or of K_C,gamma when sampled).
.gamma_quad_adj <- function(ib, ag, coef) {
  if (ib$G == 0L) return(list(ag = numeric(0), K = NULL))
  if (!ib$sampled) {
    return(list(ag = 2 * coef * drop(ib$Kg %*% ag), K = coef * outer(ag, ag)))
  }
  C <- ib$kl_index
  g <- coef * ib$wC * drop(crossprod(ib$KCg, ag[C]))
  g[C] <- g[C] + coef * ib$wC * drop(ib$KCg %*% ag)
  list(ag = g, K = coef * ib$wC * outer(ag[C], ag))
}

# An empty set of kernel-block adjoints for the M + G inducing inputs.
.basis_adjoints <- function(ib) {
  list(Lbar = matrix(0, ib$M, ib$M), Gbb = matrix(0, ib$M, ib$M),
       Gbg = matrix(0, ib$M, ib$G),
       Gg = if (ib$sampled) matrix(0, length(ib$kl_index), ib$G) else matrix(0, ib$G, ib$G))
}

# Gradient blocks from per-latent lists (one column per latent function).
.basis_collect <- function(gq, params, blocks) {
  out <- list()
  for (b in blocks) {
    gb <- vapply(gq, `[[`, numeric(length(gq[[1L]][[b]])), b)
    out[[b]] <- .qshape(matrix(gb, ncol = length(gq)), params[[b]])
  }
  out
}

# ---- whitened ---------------------------------------------------------------------

#' @export
.basis_blocks.basis_whitened <- function(basis, M, G, nl) {
  q <- .q_blocks(M, 0L, nl)
  q$params$a_gamma <- NULL
  q$transforms <- q$transforms[-1L]
  q
}

#' @export
.basis_prior.basis_whitened <- function(basis, params, L) params

# at = L^-T b, D = W W' - I, KL = 1/2 (|W|_F^2 + |b|^2 - M) - sum log|W_ii|
# (the prior of v is N(0, I)).
#' @export
.basis_forward.basis_whitened <- function(basis, params, ib) {
  b <- .qcols(params$q_mu)
  M <- ib$M
  lat <- lapply(seq_len(ncol(b)), function(j) {
    W <- .qsqrt(params, j)
    list(W = W, D = tcrossprod(W) - diag(M),
         kl = 0.5 * (sum(W^2) + sum(b[, j]^2) - M) - sum(log(abs(diag(W)))))
  })
  list(at = backsolve(ib$L, b, upper.tri = FALSE, transpose = TRUE), ag = NULL,
       D = lapply(lat, `[[`, "D"), kl = sum(vapply(lat, `[[`, 1, "kl")), lat = lat)
}

#' @export
.basis_backward.basis_whitened <- function(basis, params, ib, fw, adj) {
  out <- .basis_adjoints(ib)
  b <- .qcols(params$q_mu)
  ubar <- forwardsolve(ib$L, adj$abar)
  out$Lbar <- -tcrossprod(fw$at, ubar)
  gq <- lapply(seq_len(ncol(b)), function(j) {
    W <- fw$lat[[j]]$W
    gW <- 2 * adj$P[[j]] %*% W - W
    gW[upper.tri(gW)] <- 0
    diag(gW) <- diag(gW) + 1 / diag(W)
    list(q_mu = ubar[, j] - b[, j], q_sqrt_diag = diag(gW) * diag(W),
         q_sqrt_lower = gW[lower.tri(gW)])
  })
  out$grad <- .basis_collect(gq, params, c("q_mu", "q_sqrt_diag", "q_sqrt_lower"))
  out
}

# q(u) = N(L b, L W W' L'), stepped in the whitened coordinates.
#' @export
.basis_natural.basis_whitened <- function(basis, params, ib) {
  b <- .qcols(params$q_mu)
  lapply(seq_len(ncol(b)), function(j) {
    list(m = drop(ib$L %*% b[, j]), R = ib$L %*% .qsqrt(params, j), Lw = ib$L)
  })
}

# ---- orthogonal (and svgp without whitening) ---------------------------------------

#' @export
.basis_blocks.basis_orthogonal <- function(basis, M, G, nl) .q_blocks(M, G, nl)

# The prior: m_beta = 0 and S = K_beta, L_S = L (Salimbeni et al. 2018,
# Appendix F).
#' @export
.basis_prior.basis_orthogonal <- function(basis, params, L) {
  nl <- ncol(.qcols(params$q_mu))
  params$q_sqrt_diag[] <- rep(diag(L), nl)
  params$q_sqrt_lower[] <- rep(L[lower.tri(L)], nl)
  params
}

# With v = K_beta,gamma a_gamma, u = L^-1 (m_beta - v), R = L^-1 L_S:
#   at = L^-T u = K_beta^-1 (m_beta - v),  D = R R' - I,
#   KL = 1/2 (a_g' K_g a_g - |L^-1 v|^2 + |L^-1 m_b|^2 + |R|_F^2
#        - 2 sum log|L_S,ii| + 2 sum log L_ii - |beta|)
# (Salimbeni et al. 2018, Prop. A.1, with Cholesky factors).
#' @export
.basis_forward.basis_orthogonal <- function(basis, params, ib) {
  m <- .qcols(params$q_mu)
  ag <- if (ib$G > 0L) .qcols(params$a_gamma)
  L <- ib$L
  M <- ib$M
  lat <- lapply(seq_len(ncol(m)), function(j) {
    v <- if (ib$G > 0L) drop(ib$Kbg %*% ag[, j]) else numeric(M)
    uv <- forwardsolve(L, v)
    um <- forwardsolve(L, m[, j])
    LS <- .qsqrt(params, j)
    R <- forwardsolve(L, LS)
    kl <- 0.5 * (.gamma_quad(ib, ag[, j]) - sum(uv^2) + sum(um^2) + sum(R^2) -
                   2 * sum(log(abs(diag(LS)))) + 2 * sum(log(diag(L))) - M)
    list(uv = uv, um = um, u = um - uv, LS = LS, R = R, D = tcrossprod(R) - diag(M), kl = kl)
  })
  u <- vapply(lat, `[[`, numeric(M), "u")
  list(at = backsolve(L, matrix(u, M), upper.tri = FALSE, transpose = TRUE), ag = ag,
       D = lapply(lat, `[[`, "D"), kl = sum(vapply(lat, `[[`, 1, "kl")), lat = lat)
}

#' @export
.basis_backward.basis_orthogonal <- function(basis, params, ib, fw, adj) {
  out <- .basis_adjoints(ib)
  L <- ib$L
  ag <- fw$ag
  ubar <- forwardsolve(L, adj$abar)
  out$Lbar <- -tcrossprod(fw$at, ubar)
  gq <- vector("list", length(fw$lat))
  for (j in seq_along(fw$lat)) {
    la <- fw$lat[[j]]
    # the mean and the KL's |L^-1 m|^2 - |L^-1 v|^2
    mbar <- backsolve(L, ubar[, j] - la$um, upper.tri = FALSE, transpose = TRUE)
    vbar <- backsolve(L, la$uv - ubar[, j], upper.tri = FALSE, transpose = TRUE)
    out$Lbar <- out$Lbar - tcrossprod(mbar, la$um) - tcrossprod(vbar, la$uv)
    # the covariance: D = R R' - I and the KL's |R|^2 / 2 - log|L_S| + log|L|
    LSbar <- backsolve(L, 2 * adj$P[[j]] %*% la$R - la$R, upper.tri = FALSE, transpose = TRUE)
    out$Lbar <- out$Lbar - tcrossprod(LSbar, la$R)
    diag(out$Lbar) <- diag(out$Lbar) - 1 / diag(L)
    LSbar[upper.tri(LSbar)] <- 0
    diag(LSbar) <- diag(LSbar) + 1 / diag(la$LS)
    gag <- numeric(0)
    if (ib$G > 0L) {
      # v = K_beta,gamma a_gamma and the KL's a_gamma' K_gamma a_gamma / 2
      gd <- .gamma_quad_adj(ib, ag[, j], -0.5)
      out$Gbg <- out$Gbg + outer(vbar, ag[, j])
      out$Gg <- out$Gg + gd$K
      gag <- adj$agbar[, j] + drop(crossprod(ib$Kbg, vbar)) + gd$ag
    }
    gq[[j]] <- list(a_gamma = gag, q_mu = mbar, q_sqrt_diag = diag(LSbar) * diag(la$LS),
                    q_sqrt_lower = LSbar[lower.tri(LSbar)])
  }
  out$grad <- .basis_collect(gq, params, intersect(c("a_gamma", "q_mu", "q_sqrt_diag",
                                                     "q_sqrt_lower"), names(params)))
  out
}

#' @export
.basis_natural.basis_orthogonal <- function(basis, params, ib) {
  m <- .qcols(params$q_mu)
  lapply(seq_len(ncol(m)), function(j) list(m = m[, j], R = .qsqrt(params, j), Lw = NULL))
}

# ---- hybrid: the orthogonal basis at m_beta' = m_beta + K_beta,gamma a_gamma ----------

.hybrid_params <- function(params, ib) {
  if (ib$G > 0L) {
    params$q_mu <- .qshape(.qcols(params$q_mu) + ib$Kbg %*% .qcols(params$a_gamma),
                           params$q_mu)
  }
  params
}

#' @export
.basis_forward.basis_hybrid <- function(basis, params, ib) {
  .basis_forward.basis_orthogonal(basis, .hybrid_params(params, ib), ib)
}

# The chain rule back from the orthogonal gradient at m_beta': with d =
# dF/dm_beta', dF/dm_beta = d, dF/da_gamma gains K_gamma,beta d and
# dF/dK_beta,gamma gains d a_gamma'.
#' @export
.basis_backward.basis_hybrid <- function(basis, params, ib, fw, adj) {
  out <- .basis_backward.basis_orthogonal(basis, .hybrid_params(params, ib), ib, fw, adj)
  if (ib$G > 0L) {
    d <- .qcols(out$grad$q_mu)
    ag <- .qcols(params$a_gamma)
    out$grad$a_gamma <- .qshape(.qcols(out$grad$a_gamma) + crossprod(ib$Kbg, d),
                                params$a_gamma)
    out$Gbg <- out$Gbg + tcrossprod(d, ag)
  }
  out
}

#' @export
.basis_natural.basis_hybrid <- function(basis, params, ib) {
  stop("natural gradients are available for basis = \"orthogonal\" only, not \"hybrid\"",
       call. = FALSE)
}

# ---- decoupled (Cheng and Boots 2017) ---------------------------------------------

# a_beta and L_B start near zero (scale 1e-6, as Salimbeni et al. 2018,
# Appendix F; L_B = 0 would be a stationary point in L_B), a_gamma at 0.
# L_B is the lower triangle with the diagonal, column by column, on the
# natural scale (the paper's unconstrained Cholesky factor).
#' @export
.basis_blocks.basis_decoupled <- function(basis, M, G, nl) {
  shape <- function(n, v) if (nl == 1L) rep(v, n) else matrix(v, n, nl)
  LB <- diag(1e-6, M)
  lb <- shape(M * (M + 1L) / 2, 0)
  lb[] <- LB[lower.tri(LB, diag = TRUE)]
  list(params = list(a_gamma = shape(G, 0), a_beta = shape(M, 1e-6), L_B = lb),
       transforms = c(a_gamma = "identity", a_beta = "identity", L_B = "identity"))
}

#' @export
.basis_prior.basis_decoupled <- function(basis, params, L) params

# With K = L L' (K_beta with its jitter), R2 = L' L_B, H = I + R2' R2 =
# I + L_B' K L_B and E = H_L^-1 R2':
#   at = a_beta,  D = -E' E  (so that s = k_xx - k_x,beta L_B H^-1 L_B' k_beta,x),
#   KL = 1/2 (a_b' K a_b + 2 a_b' K_bg a_g + a_g' K_g a_g) + 1/2 (log|H| + tr H^-1 - |beta|)
# (Cheng and Boots 2017, eq. 9, with tr(K (B^-1 + K)^-1) = |beta| - tr H^-1;
# it is the KL of Salimbeni et al. 2018, Prop. A.1, at S = (K^-1 + B)^-1).
#' @export
.basis_forward.basis_decoupled <- function(basis, params, ib) {
  ab <- .qcols(params$a_beta)
  ag <- if (ib$G > 0L) .qcols(params$a_gamma)
  lb <- .qcols(params$L_B)
  M <- ib$M
  lat <- lapply(seq_len(ncol(ab)), function(j) {
    LB <- matrix(0, M, M)
    LB[lower.tri(LB, diag = TRUE)] <- lb[, j]
    R2 <- crossprod(ib$L, LB)
    Hl <- t(chol(diag(M) + crossprod(R2)))
    E <- forwardsolve(Hl, t(R2))
    quad <- sum(crossprod(ib$L, ab[, j])^2)
    if (ib$G > 0L) quad <- quad + 2 * sum(ab[, j] * (ib$Kbg %*% ag[, j])) + .gamma_quad(ib, ag[, j])
    Hinv <- chol2inv(t(Hl))
    list(LB = LB, R2 = R2, Hinv = Hinv, D = -crossprod(E),
         kl = 0.5 * (quad + 2 * sum(log(diag(Hl))) + sum(diag(Hinv)) - M))
  })
  list(at = ab, ag = ag, D = lapply(lat, `[[`, "D"), kl = sum(vapply(lat, `[[`, 1, "kl")),
       lat = lat)
}

# With U = H^-1 R2' and T = U P U': dF/dR2 = -2 P U' + 2 R2 T from the data
# term and 2 R2 Hbar, Hbar = -(H^-1 - H^-2)/2, from the KL; then
# dF/dL_B = L dF/dR2 and dF/dL gains L_B dF/dR2'. The mean's quadratic form
# is in K itself (Gbb = -a_b a_b' / 2).
#' @export
.basis_backward.basis_decoupled <- function(basis, params, ib, fw, adj) {
  out <- .basis_adjoints(ib)
  ab <- fw$at
  ag <- fw$ag
  Kj <- tcrossprod(ib$L)
  gq <- vector("list", length(fw$lat))
  for (j in seq_along(fw$lat)) {
    la <- fw$lat[[j]]
    gab <- adj$abar[, j] - drop(Kj %*% ab[, j])
    out$Gbb <- out$Gbb - 0.5 * outer(ab[, j], ab[, j])
    gag <- numeric(0)
    if (ib$G > 0L) {
      gd <- .gamma_quad_adj(ib, ag[, j], -0.5)
      gab <- gab - drop(ib$Kbg %*% ag[, j])
      gag <- adj$agbar[, j] - drop(crossprod(ib$Kbg, ab[, j])) + gd$ag
      out$Gbg <- out$Gbg - outer(ab[, j], ag[, j])
      out$Gg <- out$Gg + gd$K
    }
    U <- la$Hinv %*% t(la$R2)
    Tm <- U %*% adj$P[[j]] %*% t(U)
    Hbar <- -0.5 * (la$Hinv - la$Hinv %*% la$Hinv)
    R2bar <- -2 * adj$P[[j]] %*% t(U) + 2 * la$R2 %*% (Tm + Hbar)
    LBbar <- ib$L %*% R2bar
    out$Lbar <- out$Lbar + tcrossprod(la$LB, R2bar)
    gq[[j]] <- list(a_gamma = gag, a_beta = gab, L_B = LBbar[lower.tri(LBbar, diag = TRUE)])
  }
  out$grad <- .basis_collect(gq, params, c("a_gamma", "a_beta", "L_B"))
  out
}

# ---- q(u) given as a distribution -----------------------------------------------------

# The variational parameters of the whitened or non-whitened svgp for q(u)
# = N(mean, cov) (mean including the constant prior mean; cov = NULL means
# Kuu, the prior): whitened b = L^-1 (mean - m), W = chol(L^-1 cov L^-T);
# non-whitened b = mean - m, W = chol(cov). L = chol(Kuu) with the jitter of
# the bound.
.svgp_set_q <- function(q_u, params, kernel, control, whiten) {
  M <- length(params$q_mu)
  if (!is.list(q_u) || is.null(q_u$mean) || length(q_u$mean) != M ||
      any(!is.finite(q_u$mean)) ||
      (!is.null(q_u$cov) && (!is.matrix(q_u$cov) || any(dim(q_u$cov) != M) ||
                               any(!is.finite(q_u$cov))))) {
    stop(sprintf("'q_u' must be list(mean, cov) with a mean of length %d and a %d x %d covariance",
                 M, M, M), call. = FALSE)
  }
  L <- .svgp_chol(params, kernel, control)
  b <- q_u$mean - params$mean
  cov <- if (is.null(q_u$cov)) tcrossprod(L) else q_u$cov
  if (whiten) {
    b <- forwardsolve(L, b)
    cov <- forwardsolve(L, t(forwardsolve(L, cov)))
  }
  cov <- (cov + t(cov)) / 2
  W <- tryCatch(t(chol(cov)), error = function(e) {
    stop("'q_u$cov' must be positive definite", call. = FALSE)
  })
  params$q_mu <- drop(b)
  params$q_sqrt_diag <- diag(W)
  params$q_sqrt_lower <- W[lower.tri(W)]
  params
}

# L = chol(Kuu + jitter I) at `params`, with the jitter of the bound.
.svgp_chol <- function(params, kernel, control) {
  Kuu <- .ffi_kern_matrix(.kernel_at(kernel, params), params$Z)
  .ffi_chol(Kuu, control$jitter, control$jitter_cap)$L
}
