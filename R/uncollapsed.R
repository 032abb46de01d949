# The one evaluator of the uncollapsed models, svgp() and odvgp(): the ELBO
#   sum_n E_q(f_n)[log p(y_n | f_n)] - KL[q(u) || p(u)]
# (Hensman et al. 2015; Salimbeni et al. 2018, eq. 12) and its gradient, in
# four steps:
#   1. the kernel blocks of the inducing inputs beta (Z) and gamma (O), and
#      L = chol(K_beta + jitter I) (.uc_inducing());
#   2. the basis of q(u) (R/variational.R, the dispatch class) gives, per
#      latent function, the coefficients at, ag of the mean and the change
#      D of the covariance in whitened coordinates, and the KL divergence;
#   3. the data term on the rows (.uc_rows(), in this process over row
#      chunks or on the workers of a cluster): with A = L^-1 K_beta,x,
#        mu = m + K_x,beta at + K_x,gamma ag,   s = k(x, x) + colSums(A o D A),
#      the likelihood's expectation (R/likelihoods.R) with g = dELL/dmu and
#      h = dELL/ds, and the adjoints abar = K_beta,x g, agbar = K_gamma,x g,
#      P = A diag(h) A' of at, ag and D, and
#        dF/dK_beta,x = at g' + 2 L^-T sum_j D_j A diag(h_j),
#        dF/dK_gamma,x = ag g',  dF/dk(x, x) = h,
#      contracted on the rows into the kernel gradient;
#   4. back through the basis, with dF/dL = -L^-T 2 sum_j D_j P_j from A, the
#      Cholesky backward pass (Murray 2016) to the adjoint of K_beta, and the
#      one contraction of R/kernels.R for the inducing blocks.
# Everything M x N is one triangular solve and one product per latent
# function; the rest is M x M. The derivations are this package's, checked
# against finite differences and dense formulas in the tests.

# ---- step 1: the inducing inputs ----------------------------------------------------

# The kernel at `params` and the blocks of K([beta; gamma]): K_beta (Kb),
# K_beta,gamma (Kbg) and K_gamma (Kg), with L and the jitter it needed. On
# minibatches with control$kl_columns, K_gamma is sampled by columns
# (kl_index): K_C,gamma (KCg) and the weight |gamma| / |C| (wC) replace it.
.uc_inducing <- function(fit, params, batch = NULL, kl_index = NULL) {
  k <- .kernel_at(fit$kernel, params)
  Z <- params$Z
  O <- if (is.null(params$O)) Z[0L, , drop = FALSE] else params$O
  M <- nrow(Z)
  G <- nrow(O)
  cols <- fit$control$kl_columns
  if (is.null(kl_index) && !is.null(batch) && !is.null(cols) && G > cols) {
    kl_index <- sort(sample.int(G, cols))
  }
  ib <- list(k = k, Z = Z, O = O, M = M, G = G, kl_index = kl_index,
             sampled = !is.null(kl_index) && G > 0L)
  if (ib$sampled) {
    ib$Kb <- .ffi_kern_matrix(k, Z)
    ib$Kbg <- .ffi_kern_matrix(k, Z, O)
    ib$OC <- O[kl_index, , drop = FALSE]
    ib$KCg <- .ffi_kern_matrix(k, ib$OC, O)
    ib$wC <- G / length(kl_index)
  } else {
    Kww <- .ffi_kern_matrix(k, rbind(Z, O))
    ib$Kb <- Kww[seq_len(M), seq_len(M), drop = FALSE]
    if (G > 0L) {
      ib$Kbg <- Kww[seq_len(M), M + seq_len(G), drop = FALSE]
      ib$Kg <- Kww[M + seq_len(G), M + seq_len(G), drop = FALSE]
    }
  }
  ch <- .ffi_chol(ib$Kb, fit$control$jitter, fit$control$jitter_cap)
  ib$L <- ch$L
  ib$jitter <- ch$jitter
  ib
}

# ---- step 3: the data term ---------------------------------------------------------

# What the rows need from the rest of an evaluation (sent to the workers of
# a cluster): the kernel, both inducing sets, L, the basis's at, ag and D,
# the prior mean, the likelihood with its parameters, the minibatch scale
# N / |batch|, and whether to return adjoints (grad) and contract them
# (contract; natural-gradient steps need the adjoints only).
.uc_args <- function(fit, params, ib, fw, grad, scale, contract = grad) {
  lik_par <- params[setdiff(names(params), c("variance", "lengthscale", "Z", "O",
                                             .basis_block_names))]
  list(k = ib$k, Z = ib$Z, O = ib$O, L = ib$L, at = fw$at, ag = fw$ag, D = fw$D,
       mean = params$mean, lik = .lik_of(fit), params = lik_par, scale = scale, grad = grad,
       contract = contract, want_W = .any_free(fit, c("Z", "O")))
}

# The names of the variational blocks of every basis.
.basis_block_names <- c("q_mu", "q_sqrt_diag", "q_sqrt_lower", "a_gamma", "a_beta", "L_B")

# The data term on the rows x (with their targets): list(ell, n) and, with
# a$grad, abar (M x K), agbar (G x K), P (K matrices M x M), the
# likelihood's own gradient (lik_grad), the mean's (gmean) and, with
# a$contract, the kernel gradient from these rows' blocks (gk: variance,
# lengthscale, Z, O). Memory: a few M x n and G x n matrices.
.uc_rows <- function(a, x, target) {
  M <- nrow(a$Z)
  G <- nrow(a$O)
  K <- length(a$D)
  n <- nrow(x)
  if (n == 0L) return(.uc_rows_empty(a, M, G, K))
  Kbx <- .ffi_kern_matrix(a$k, a$Z, x)
  Kgx <- if (G > 0L) .ffi_kern_matrix(a$k, a$O, x)
  A <- forwardsolve(a$L, Kbx)
  MU <- a$mean + crossprod(Kbx, a$at)
  if (G > 0L) MU <- MU + crossprod(Kgx, a$ag)
  DA <- lapply(a$D, function(D) D %*% A)
  kd <- .ffi_kern_diag(a$k, x)
  S <- pmax(vapply(DA, function(B) kd + colSums(A * B), numeric(n)), 0)
  dim(S) <- c(n, K)
  e <- .lik_ell(a$lik, MU, S, target, a$params, a$scale)
  out <- list(ell = e$ell, n = n)
  if (!a$grad) return(out)
  out$abar <- Kbx %*% e$g
  out$agbar <- if (G > 0L) Kgx %*% e$g else matrix(0, 0L, K)
  out$P <- lapply(seq_len(K), function(j) .uc_weighted_gram(A, e$h[, j]))
  out$lik_grad <- e$grad
  out$gmean <- sum(e$g)
  if (!a$contract) return(out)
  E <- Reduce(`+`, lapply(seq_len(K), function(j) DA[[j]] * rep(e$h[, j], each = M)))
  Gbx <- tcrossprod(a$at, e$g) + 2 * backsolve(a$L, E, upper.tri = FALSE, transpose = TRUE)
  gz <- .contract(a$k, x, a$Z, Gww = NULL, Gwf = Gbx, gdiag = rowSums(e$h), Kwf = Kbx,
                  want_W = a$want_W)
  gk <- list(variance = gz$variance, lengthscale = gz$lengthscale, Z = gz$W,
             O = matrix(0, G, ncol(x)))
  if (G > 0L) {
    go <- .kern_grad(a$k, a$O, x, tcrossprod(a$ag, e$g), a$want_W, K = Kgx)
    th <- .kern_split_theta(a$k, go$theta)
    gk$variance <- gk$variance + th$variance
    gk$lengthscale <- gk$lengthscale + th$lengthscale
    if (a$want_W) gk$O <- go$x
  }
  out$gk <- gk
  out
}

# A diag(h) A' (M x M): one symmetric rank update when h <= 0 (the
# log-concave likelihoods), else the difference of two, over the columns
# with h > 0 and those with h < 0 (half the work of the general product;
# the softmax's Monte Carlo h has a few positive entries: on waveform in
# 3 of 4 evaluations, 3% of them); the general product only with
# non-finite h.
.uc_weighted_gram <- function(A, h) {
  if (isTRUE(all(h <= 0))) return(-tcrossprod(A * rep(sqrt(-h), each = nrow(A))))
  if (!all(is.finite(h))) return(tcrossprod(A * rep(h, each = nrow(A)), A))
  pos <- h > 0
  neg <- h < 0
  root <- function(cols, w) A[, cols, drop = FALSE] * rep(sqrt(w), each = nrow(A))
  out <- tcrossprod(root(pos, h[pos]))
  if (any(neg)) out <- out - tcrossprod(root(neg, -h[neg]))
  out
}

# The data term of no rows (a worker whose share holds none of a
# minibatch): zeros of the shapes of .uc_rows().
.uc_rows_empty <- function(a, M, G, K) {
  out <- list(ell = 0, n = 0L)
  if (!a$grad) return(out)
  D <- ncol(a$Z)
  th <- .kern_split_theta(a$k, numeric(length(unlist(.kern_params(a$k)))))
  out <- c(out, list(abar = matrix(0, M, K), agbar = matrix(0, G, K),
                     P = rep(list(matrix(0, M, M)), K),
                     lik_grad = lapply(.lik_ell(a$lik, matrix(0, 0L, K), matrix(0, 0L, K),
                                                numeric(0), a$params, a$scale)$grad,
                                       function(v) 0 * v),
                     gmean = 0))
  if (a$contract) {
    out$gk <- list(variance = 0 * th$variance, lengthscale = 0 * th$lengthscale,
                   Z = matrix(0, M, D), O = matrix(0, G, D))
  }
  out
}

# The data term on the rows `batch` of the data (NULL: all): in this
# process over chunks of rows, or on the workers of fit$cluster, each on its
# share (R/cluster.R); the sum of the parts.
.uc_data <- function(fit, a, batch) {
  if (!is.null(fit$cluster)) {
    return(Reduce(.stream_add, .cluster_rows(fit$cluster, ".shard_uncollapsed", a, batch)))
  }
  x <- fit$x
  target <- fit$target
  if (!is.null(batch)) {
    x <- x[batch, , drop = FALSE]
    target <- target[batch]
  }
  .uc_chunks(a, x, target)
}

# .uc_rows() over chunks of at most about 2^24 / (|beta| + |gamma|) rows
# (128 MB per M x n matrix), summed.
.uc_chunks <- function(a, x, target) {
  size <- max(1000L, floor(2^24 / (nrow(a$Z) + nrow(a$O))))
  blocks <- .row_blocks(nrow(x), size)
  if (length(blocks) <= 1L) return(.uc_rows(a, x, target))
  Reduce(.stream_add, lapply(blocks, function(b) .uc_rows(a, x[b, , drop = FALSE], target[b])))
}

# What a worker of svgp() holds: its rows of the inputs and of the targets.
.shard_svgp_data <- function(fit) {
  function(rows) list(x = fit$x[rows, , drop = FALSE], target = fit$target[rows])
}

# On a worker: the data term on its rows `each` of a minibatch (NULL: all
# of its share).
.shard_uncollapsed <- function(s, a, each = NULL) {
  if (is.null(each)) return(.uc_chunks(a, s$x, s$target))
  .uc_chunks(a, s$x[each, , drop = FALSE], s$target[each])
}

# ---- steps 2 and 4: the evaluation ----------------------------------------------------

# The ELBO at `params` on the rows `batch` (NULL: all; the expected
# log-likelihood is then scaled by N / |batch|, Hensman et al. 2013), its
# terms and the predictive cache, and with grad = TRUE its gradient in every
# block (the kernel's and the inducing inputs' by the contraction).
#' @export
.evaluate.svgp <- function(fit, params, grad = TRUE, batch = NULL, kl_index = NULL, ...) {
  ib <- .uc_inducing(fit, params, batch, kl_index)
  basis <- .basis_of(fit)
  fw <- .basis_forward(basis, params, ib)
  scale <- if (is.null(batch)) 1 else .nobs(fit) / length(batch)
  d <- .uc_data(fit, .uc_args(fit, params, ib, fw, grad, scale), batch)
  out <- list(value = d$ell - fw$kl, terms = c(ell = d$ell, neg_kl = -fw$kl),
              jitter = ib$jitter, jitter_scale = mean(diag(ib$Kb)),
              posterior = list(L = ib$L, a_tilde = fw$at, a_gamma = fw$ag, D = fw$D))
  if (!grad) return(out)
  bw <- .basis_backward(basis, params, ib, fw, d)
  # A = L^-1 K_beta,x depends on L: dF/dL gains -L^-T 2 sum_j D_j P_j
  DP <- Reduce(`+`, Map(`%*%`, fw$D, d$P))
  Lbar <- bw$Lbar - 2 * backsolve(ib$L, DP, upper.tri = FALSE, transpose = TRUE)
  gi <- .uc_contract_inducing(ib, .chol_adjoint(ib$L, Lbar) + bw$Gbb, bw$Gbg, bw$Gg,
                              .any_free(fit, c("Z", "O")))
  gk <- .stream_add(gi, d$gk)
  g <- c(list(variance = gk$variance, lengthscale = gk$lengthscale, mean = d$gmean,
              Z = gk$Z, O = gk$O), d$lik_grad, bw$grad)
  out$grad <- g[names(params)]
  out
}

# The adjoint of K from the adjoint Lbar of its Cholesky factor L (lower
# triangle read): sym(L^-T Phi(L' Lbar) L^-1), Phi the lower triangle with
# the diagonal halved (Murray 2016, the backward pass of the Cholesky
# decomposition).
.chol_adjoint <- function(L, Lbar) {
  Lbar[upper.tri(Lbar)] <- 0
  X <- crossprod(L, Lbar)
  X[upper.tri(X)] <- 0
  diag(X) <- diag(X) / 2
  P <- backsolve(L, X, upper.tri = FALSE, transpose = TRUE)
  P <- t(backsolve(L, t(P), upper.tri = FALSE, transpose = TRUE))
  (P + t(P)) / 2
}

# The contraction of the adjoints of the inducing blocks: Gbb of K_beta
# (which carries the jitter, relative to k(x, x): see .contract()), Gbg of
# K_beta,gamma and Gg of K_gamma, or of its sampled columns K_C,gamma. Each
# cross block K(A, B) of two different sets is contracted for the inputs of
# both sides (the contraction gives the gradient in its first argument).
# list(variance, lengthscale, Z, O).
.uc_contract_inducing <- function(ib, Gbb, Gbg, Gg, want_W) {
  k <- ib$k
  M <- ib$M
  G <- ib$G
  if (!ib$sampled) {
    Gww <- matrix(0, M + G, M + G)
    Gww[seq_len(M), seq_len(M)] <- Gbb
    if (G > 0L) {
      Gww[seq_len(M), M + seq_len(G)] <- Gbg
      Gww[M + seq_len(G), M + seq_len(G)] <- Gg
    }
    r <- .contract(k, NULL, rbind(ib$Z, ib$O), Gww, NULL, NULL,
                   jitter = c(rep(ib$jitter, M), rep(0, G)), want_W = want_W)
    return(list(variance = r$variance, lengthscale = r$lengthscale,
                Z = r$W[seq_len(M), , drop = FALSE], O = r$W[M + seq_len(G), , drop = FALSE]))
  }
  bb <- .kern_grad(k, ib$Z, NULL, Gbb, want_W)
  bg <- .kern_grad(k, ib$Z, ib$O, Gbg, want_W)
  cg <- .kern_grad(k, ib$OC, ib$O, Gg, want_W)
  th <- .kern_split_theta(k, bb$theta + bg$theta + cg$theta)
  th$variance <- th$variance + sum(diag(Gbb)) * ib$jitter * .jitter_variance_grad(k)
  D <- ncol(ib$Z)
  gZ <- matrix(0, M, D)
  gO <- matrix(0, G, D)
  if (want_W) {
    gZ <- bb$x + bg$x
    gO <- .kern_grad(k, ib$O, ib$Z, t(Gbg), TRUE)$x + .kern_grad(k, ib$O, ib$OC, t(Gg), TRUE)$x
    gO[ib$kl_index, ] <- gO[ib$kl_index, ] + cg$x
  }
  list(variance = th$variance, lengthscale = th$lengthscale, Z = gZ, O = gO)
}

# What a natural-gradient step needs (R/natgrad.R), on the rows `batch`:
# the bound before the step (value), L, K_beta^-1 (Kinv) and, per latent
# function, r = K_beta,x g and P = B diag(h) B' with B = K_beta^-1 K_beta,x
# (latents), from the forward pass and the data term without contraction.
.uc_natural <- function(fit, params, batch = NULL) {
  ib <- .uc_inducing(fit, params, batch)
  fw <- .basis_forward(.basis_of(fit), params, ib)
  scale <- if (is.null(batch)) 1 else .nobs(fit) / length(batch)
  d <- .uc_data(fit, .uc_args(fit, params, ib, fw, TRUE, scale, contract = FALSE), batch)
  L <- ib$L
  Li <- forwardsolve(L, diag(ib$M))
  latents <- lapply(seq_along(d$P), function(j) {
    list(r = d$abar[, j], P = crossprod(Li, d$P[[j]] %*% Li))
  })
  list(value = d$ell - fw$kl, ib = ib, Kinv = crossprod(Li), latents = latents)
}

# ---- prediction -------------------------------------------------------------------

# q(f*) at the rows of xnew from the fit's cache (L, at, ag, D): the mean
# m + K_*,beta at + K_*,gamma ag and the variance k** + colSums(A o D A)
# with A = L^-1 K_beta,* (the covariance K** + A' D A); one column per
# latent function (matrices for several). Blocks of 1000 rows.
#' @export
.predict_latent.svgp <- function(fit, xnew, full_cov) {
  k <- .kernel_at(fit$kernel, fit$params)
  p <- fit$params
  post <- fit$posterior
  nl <- length(post$D)
  G <- NROW(p$O)
  parts <- function(xb) {
    Kbx <- .ffi_kern_matrix(k, p$Z, xb)
    m <- p$mean + crossprod(Kbx, post$a_tilde)
    if (G > 0L) m <- m + crossprod(.ffi_kern_matrix(k, p$O, xb), post$a_gamma)
    list(mean = m, A = forwardsolve(post$L, Kbx))
  }
  if (full_cov) {
    if (nl > 1L) stop("'full_cov = TRUE' is not available for multiclass fits", call. = FALSE)
    q <- parts(xnew)
    return(list(mean = drop(q$mean),
                cov = .ffi_kern_matrix(k, xnew) + crossprod(q$A, post$D[[1L]] %*% q$A)))
  }
  mean <- var <- matrix(0, nrow(xnew), nl)
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    q <- parts(xb)
    mean[b, ] <- q$mean
    kd <- .ffi_kern_diag(k, xb)
    for (j in seq_len(nl)) var[b, j] <- kd + colSums(q$A * (post$D[[j]] %*% q$A))
  }
  if (nl == 1L) return(list(mean = drop(mean), var = drop(var)))
  list(mean = mean, var = var)
}
