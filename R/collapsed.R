# What the collapsed Gaussian models share (sgpr, osgpr, pgpr): the
# gradient blocks of an evaluation, and the predictive distribution, the
# optimal q(u) and the effective number of parameters from the cached
# factors. The bound itself is computed by .collapsed_eval() (R/stream.R),
# which decides where it runs.

# The kernel matrices a collapsed bound reads: K(W, W), K(W, X), diag K(X, X).
.collapsed_matrices <- function(kernel, W, x) {
  list(Kww = .ffi_kern_matrix(kernel, W), Kwf = .ffi_kern_matrix(kernel, W, x),
       kdiag = .ffi_kern_diag(kernel, x))
}

# The gradient blocks of a collapsed model in the order of `params`, from
# the contraction gk, the model's own blocks (mean, noise; .targets_grad())
# and any further blocks (the inducing inputs).
.collapsed_grad <- function(params, gk, blocks, ...) {
  g <- c(list(variance = gk$variance, lengthscale = gk$lengthscale), blocks, list(...))
  g[names(params)]
}

# The predictive distribution of a collapsed model from its cached factors
# (L, LB, v) and inducing inputs W (src/predict.c), over chunks of rows for
# the diagonal path (src/bound_stream.c; blocks of 1000 rows for a sum or
# product of kernels); the constant mean is added.
.collapsed_predict <- function(fit, W, xnew, full_cov) {
  k <- .kernel_at(fit$kernel, fit$params)
  post <- fit$posterior
  if (full_cov) {
    p <- .ffi_predict_gaussian(post$L, post$LB, post$v, .ffi_kern_matrix(k, W, xnew),
                               .ffi_kern_matrix(k, xnew), TRUE)
    p$mean <- p$mean + fit$params$mean
    return(p)
  }
  if (!.is_combo(k) && nrow(xnew) > 0L) {
    # a pass over the rows with the workspace of the bound's passes
    # (src/bound_stream.c): within the fit's memory budget, nothing
    # allocated per block
    # (the two results, 16 bytes a row, within the budget too)
    at <- fit
    at$x <- xnew
    at$cluster <- NULL
    plan <- .collapsed_plan(at, nrow(W), reserve = 16 * nrow(xnew))
    ws <- .pass_work(fit$.work, plan, nrow(W), ncol(xnew))
    return(.ffi_pass_predict(k, W, xnew, post$L, post$LB, post$v, fit$params$mean, ws,
                             plan$rows, plan$threads))
  }
  mean <- var <- numeric(nrow(xnew))
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    p <- .ffi_predict_gaussian(post$L, post$LB, post$v, .ffi_kern_matrix(k, W, xb),
                               .ffi_kern_diag(k, xb), FALSE)
    mean[b] <- p$mean + fit$params$mean
    var[b] <- p$var
  }
  list(mean = mean, var = var)
}

# The optimal q(u) = N(m*, S*) of a collapsed fit from its cached factors
# (m* = L LB^-T v, S* = L B^-1 L'; Passerello 2022, Appendices B.1.2 and
# C.2.2), with the
# constant mean added.
.collapsed_qu <- function(fit) {
  post <- fit$posterior
  w <- backsolve(t(post$LB), post$v)
  LiLB <- forwardsolve(post$LB, t(post$L))
  list(Z = fit$params$Z, mean = drop(post$L %*% w) + fit$params$mean, cov = crossprod(LiLB))
}

# The effective number of parameters of a Gaussian collapsed fit whose
# predictive mean is the SGPR mean on the inducing inputs W (sgpr; osgpr on
# rbind(Z, O)): the trace of the hat matrix H = S + (I - S) 1 c' with
# S = Q (Q + Lambda)^-1 and c = C^-1 1 / (1' C^-1 1), C = Q + Lambda, the
# generalised least-squares weights of a learned constant mean (whose
# optimum is linear in y: the trace term of the bound does not depend on
# it). With A = L^-1 Kwf Lambda^-1/2 and B = I + A A', tr(S) = M - tr(B^-1)
# and C^-1 = Lambda^-1/2 (I - A' B^-1 A) Lambda^-1/2 (Woodbury); since
# I - S = Lambda C^-1, tr((I - S) 1 c') = (C^-1 1)' Lambda (C^-1 1) / 1' C^-1 1.
# O(N M^2), over the row chunks of control$memory (R/stream.R), so that no
# N x M matrix is held when the bound was computed in chunks: A A' is a sum
# over chunks, and A' B^-1 A u one pass for A u and one for A'.
.collapsed_edf <- function(fit, W) {
  .shards_refuse(fit, "df.residual()", "nobs() and logLik() count the rows")
  k <- .kernel_at(fit$kernel, fit$params)
  t <- .targets(fit, fit$params)
  N <- nrow(fit$x)
  lam_of <- function(b) if (length(t$lambda) == 1L) rep(t$lambda, length(b)) else t$lambda[b]
  M <- nrow(W)
  L <- .ffi_chol(.ffi_kern_matrix(k, W), fit$control$jitter, fit$control$jitter_cap)$L
  fit$cluster <- NULL
  blocks <- .collapsed_plan(fit, M)$blocks
  if (is.null(blocks)) blocks <- .row_blocks(N, max(1L, N))
  chunk_A <- function(b) {
    forwardsolve(L, .ffi_kern_matrix(k, W, fit$x[b, , drop = FALSE])) *
      rep(1 / sqrt(lam_of(b)), each = M)
  }
  # in one piece, A is computed once
  held <- if (length(blocks) == 1L) chunk_A(blocks[[1L]])
  A_of <- function(b) if (is.null(held)) chunk_A(b) else held
  AA <- matrix(0, M, M)
  for (b in blocks) AA <- AA + tcrossprod(A_of(b))
  LB <- t(chol(diag(M) + AA))
  tr_s <- M - sum(forwardsolve(LB, diag(M))^2)
  .edf_mean(fit, tr_s, lam_of(seq_len(N)), function(u) {
    Au <- numeric(M)
    for (b in blocks) Au <- Au + drop(A_of(b) %*% u[b])
    z <- backsolve(t(LB), forwardsolve(LB, Au))
    out <- u
    for (b in blocks) out[b] <- u[b] - drop(crossprod(A_of(b), z))
    out
  })
}

# The hat matrix's trace tr(S) plus the learned mean's share
# (C^-1 1)' Lambda (C^-1 1) / 1' C^-1 1, where `solve_half(u)` is
# Lambda^1/2 C^-1 Lambda^1/2 u.
.edf_mean <- function(fit, tr_s, lambda, solve_half) {
  if (isTRUE(fit$fixed[["mean"]]) || !("mean" %in% names(fit$fixed))) return(tr_s)
  v <- drop(solve_half(1 / sqrt(lambda))) / sqrt(lambda)
  tr_s + sum(v^2 * lambda) / sum(v)
}

#' @export
.edf.sgpr <- function(fit) {
  # the smoother of a fit with neighbours is not computed (R/vif.R)
  if (.has_neighbours(fit)) return(NULL)
  .collapsed_edf(fit, fit$params$Z)
}

#' @export
.edf.osgpr <- function(fit) .collapsed_edf(fit, rbind(fit$params$Z, fit$params$O))
