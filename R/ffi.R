# The one file that calls .Call: a small wrapper per C entry point (src/ffi.h),
# which maps R's names (kernel families, likelihoods, bound variants) to the
# codes the C code uses. Nothing else in R/ knows a C enum value. The C entry
# points validate what they receive; the wrappers only translate.

# ---- kernels (src/kernels.c) ----------------------------------------------

.kernel_codes <- c(rbf = 1L, matern12 = 2L, matern32 = 3L, matern52 = 4L)

.combo_codes <- c(sum = 1L, product = 2L)

# Whether a kernel is a sum or product of kernels (R/kernels.R builds them):
# such a kernel goes to the C routines as the list of its parts.
.is_combo <- function(kernel) inherits(kernel, "sparsevgp_kernel_combo")

# The list the C code reads: list(family code, variance, lengthscale), or
# for a sum or product of kernels list(operator code, list(parts)) (read
# by src/kernel_combo.c).
.ffi_kernel <- function(kernel) {
  if (.is_combo(kernel)) {
    return(list(.combo_codes[[kernel$op]], lapply(kernel$parts, .ffi_kernel)))
  }
  if (is.null(kernel$variance) || is.null(kernel$lengthscale)) {
    stop("the kernel's 'variance' and 'lengthscale' must be set ",
         "(or fit a model to choose them)", call. = FALSE)
  }
  list(.kernel_codes[[kernel$family]], as.double(kernel$variance),
       as.double(kernel$lengthscale))
}

# K(x, y), or K(x, x) when y is NULL: nrow(x) x nrow(y).
.ffi_kern_matrix <- function(kernel, x, y = NULL) {
  if (.is_combo(kernel)) return(.Call(ffi_kc_matrix, .ffi_kernel(kernel), x, y))
  .Call(ffi_kern_matrix, .ffi_kernel(kernel), x, y)
}

# diag K(x, x).
.ffi_kern_diag <- function(kernel, x) {
  if (.is_combo(kernel)) return(.Call(ffi_kc_diag, .ffi_kernel(kernel), x))
  .Call(ffi_kern_diag, .ffi_kernel(kernel), x)
}

# Contraction of an adjoint G = dF/dK(x, y) (dF/dK(x, x) when y is NULL):
# list(theta = dF/d(log variance, log lengthscales), x = dF/dx or NULL),
# for a single kernel (R/kernels.R combines the parts of a combination).
# With K = K(x, y) already at hand, its exponentials are not recomputed.
# With threads > 1 the columns of K(x, y) are split over that many OpenMP
# threads.
.ffi_kern_grad <- function(kernel, x, y, G, want_x, K = NULL, threads = 1L) {
  kc <- .ffi_kernel(kernel)
  if (!identical(as.integer(threads), 1L) && !is.null(y)) {
    return(.Call(ffi_kern_grad_threads, kc, x, y, G, K, want_x, as.integer(threads)))
  }
  if (is.null(K)) return(.Call(ffi_kern_grad, kc, x, y, G, want_x))
  .Call(ffi_kern_grad_given, kc, x, y, G, K, want_x)
}

# dF/d(log variance, log lengthscales) from an adjoint g of diag K(x, x).
.ffi_kern_grad_diag <- function(kernel, x, g) {
  .Call(ffi_kern_grad_diag, .ffi_kernel(kernel), x, g)
}

# ---- linear algebra (src/linalg.c) ----------------------------------------

# Lower Cholesky factor with jitter escalation: list(L, jitter). `base` and
# `cap` are relative to the mean diagonal.
.ffi_chol <- function(S, base, cap) .Call(ffi_la_chol, S, as.double(base), as.double(cap))

# Column summaries of a double matrix without a copy of it: a 5 x D matrix
# with rows mean, sd, min, max, finite (1 when the column is all finite).
.ffi_colstats <- function(x) {
  s <- .Call(ffi_la_colstats, x)
  rownames(s) <- c("mean", "sd", "min", "max", "finite")
  s
}

# Hand memory R has freed back to the system (glibc's malloc_trim()).
.ffi_release <- function() .Call(ffi_la_release)

# ---- collapsed bounds (src/bound_gaussian.c, src/bound_orthogonal.c) -------

# The collapsed Gaussian bound with per-point noise `lambda` and targets
# `ytil` (Titsias 2009; per-point noise as in Passerello 2022, ch. 3), its
# terms, the factors L, LB, v and, with grad = TRUE, the adjoints Guu, Guf,
# gdiag, glambda and gytil.
.ffi_gaussian_bound <- function(Kuu, Kuf, kdiag, lambda, ytil, jitter, jitter_cap, grad) {
  .Call(ffi_bg_bound, Kuu, Kuf, kdiag, lambda, ytil, jitter, jitter_cap, grad)
}

.bound_variants <- c(union = 0L, solve = 1L, odvgp = 2L)

# The orthogonal collapsed bound on W = rbind(Z, O) (M1 regular rows), for
# the variant "union" (the SGPR bound on W), "solve" or "odvgp", with the
# adjoints of K(W, W), K(W, X) and diag K(X, X).
.ffi_orthogonal_bound <- function(Kww, Kwf, M1, kdiag, lambda, ytil, variant, jitter,
                                  jitter_cap, grad) {
  .Call(ffi_bo_bound, Kww, Kwf, M1, kdiag, lambda, ytil, .bound_variants[[variant]],
        jitter, jitter_cap, grad)
}

# ---- prediction (src/predict.c) -------------------------------------------

# The collapsed predictive from the factors L, LB and v: list(mean, var) or
# list(mean, cov) with full = TRUE.
.ffi_predict_gaussian <- function(L, LB, v, Kus, kss, full) {
  .Call(ffi_pred_gaussian, L, LB, v, Kus, kss, full)
}

# ---- selection (src/select.c) ---------------------------------------------

# Weighted greedy conditional variance: list(index, trace, trace0, d, stop,
# factor).
.ffi_select_greedy <- function(kernel, x, weights, M, threshold, perm, tol, block, factor) {
  .Call(ffi_sel_greedy, .ffi_kernel(kernel), x, weights, as.double(M), as.double(threshold),
        perm, as.double(tol), as.double(block), factor)
}

# The weighted traces of the nested prefixes of the inducing inputs Z.
.ffi_select_trace <- function(kernel, x, weights, Z, tol, factor) {
  .Call(ffi_sel_trace, .ffi_kernel(kernel), x, weights, Z, as.double(tol), factor)
}

# ---- Polya-Gamma helpers (src/polya_gamma.c) ------------------------------

.ffi_pg_theta <- function(c) .Call(ffi_pg_theta, c)
.ffi_pg_log_cosh <- function(x) .Call(ffi_pg_log_cosh, x)
.ffi_pg_kl <- function(c) .Call(ffi_pg_kl, c)

# ---- softmax (src/softmax.c) -----------------------------------------------

# The Monte Carlo expected log-likelihood of the softmax summed over the n
# rows of MU (n x K means) and sd (their standard deviations) with the
# S x K standard-normal draws, and its derivatives g and h in the means and
# variances: list(ell, g, h).
.ffi_softmax_ell <- function(MU, sd, y, draws) {
  .Call(ffi_softmax_ell, .as_double_matrix(MU), .as_double_matrix(sd), as.integer(y),
        .as_double_matrix(draws))
}

# The class probabilities averaged over the draws: n x K.
.ffi_softmax_prob <- function(MU, sd, draws) {
  .Call(ffi_softmax_prob, .as_double_matrix(MU), .as_double_matrix(sd), .as_double_matrix(draws))
}

.as_double_matrix <- function(x) {
  if (!is.double(x)) storage.mode(x) <- "double"
  x
}

# ---- SVGP (src/svgp.c) ----------------------------------------------------

.likelihood_codes <- c(bernoulli = 1L, gaussian = 2L, probit = 3L)

# The expected log-likelihood of the marginals N(mu_n, var_n) under a
# Gaussian or binary likelihood (Gauss-Hermite nodes and weights `gh` for the
# latter; R/likelihoods.R): list(ell, g, h, gnoise), everything multiplied
# by ell_scale (N / batch size on minibatches).
.ffi_svgp_ell <- function(mu, var, y, likelihood, noise, gh, ell_scale) {
  lik <- list(type = .likelihood_codes[[likelihood]], y = y, noise = as.double(noise),
              gh_x = gh$x, gh_w = gh$w, scale = as.double(ell_scale))
  .Call(ffi_svgp_ell, as.double(mu), as.double(var), lik)
}

# ---- the collapsed bound over row chunks (src/bound_stream.c) --------------

# K(W, x) for a chunk x in `threads` OpenMP threads.
.ffi_stream_kern <- function(kernel, W, x, threads) {
  # sums and products are combined by src/kernel_combo.c, in one thread
  if (.is_combo(kernel)) return(.ffi_kern_matrix(kernel, W, x))
  .Call(ffi_bs_kern_cross, .ffi_kernel(kernel), W, x, as.integer(threads))
}

# Pass 1 over one chunk: list(AA, w, yy, kl, trace, sumloglam, n).
.ffi_stream_stats <- function(L, Kuf, kdiag, lambda, ytil, threads) {
  .Call(ffi_bs_stats, L, Kuf, kdiag, lambda, ytil, as.integer(threads))
}

# The bound from the summed statistics `s`: list(bound, logdet, fit, trace,
# LB, v) and, with grad, the M x M adjoint pieces Guu, E, alpha, vt.
.ffi_stream_value <- function(L, s, N, grad) {
  .Call(ffi_bs_value, L, s$AA, s$w, c(s$yy, s$kl, s$trace, s$sumloglam), as.double(N), grad)
}

# Pass 2 over one chunk: list(Guf, gdiag, glambda, gytil, mu).
.ffi_stream_adjoints <- function(L, v, Kuf, kdiag, lambda, ytil, threads) {
  .Call(ffi_bs_adjoints, L, v$E, v$alpha, v$vt, Kuf, kdiag, lambda, ytil, as.integer(threads))
}

# Both passes over all rows of x in chunks of `rows` rows, with the
# workspace `work` (a double vector of .ffi_pass_work() entries that the
# caller keeps between evaluations; src/bound_stream.c writes into it), for
# a single kernel `kernel` and the targets t of .targets(): pass 1 gives the
# statistics of .ffi_stream_stats() summed over the chunks; pass 2, from the
# pieces v = list(E, alpha, vt) of .ffi_stream_value(), gives list(theta =
# dF/d(log variance, log lengthscales), W = dF/dW or NULL, glambda =
# sum_n lambda_n dF/dlambda_n, gytil = sum_n dF/dytil_n, glambda_points =
# the terms lambda_n dF/dlambda_n when per_point).
.ffi_pass_stats <- function(kernel, W, x, L, t, work, rows, threads) {
  .Call(ffi_bs_pass_stats, .ffi_kernel(kernel), W, x, L, as.double(t$lambda), t$y,
        as.double(t$shift), work, as.integer(rows), as.integer(threads))
}

.ffi_pass_grad <- function(kernel, W, x, L, v, t, work, rows, threads, want_W, per_point) {
  .Call(ffi_bs_pass_grad, .ffi_kernel(kernel), W, x, L, v$E, v$alpha, v$vt,
        as.double(t$lambda), t$y, as.double(t$shift), work, as.integer(rows),
        as.integer(threads), want_W, per_point)
}

# The latent predictive (with the constant mean `shift`) at every row of x,
# over chunks with the workspace of the passes: list(mean, var).
.ffi_pass_predict <- function(kernel, W, x, L, LB, v, shift, work, rows, threads) {
  .Call(ffi_bs_predict, .ffi_kernel(kernel), W, x, L, LB, v, as.double(shift), work,
        as.integer(rows), as.integer(threads))
}

# The number of doubles of the workspace of the passes.
.ffi_pass_work <- function(M, D, rows, threads) {
  .Call(ffi_bs_work, as.double(M), as.double(D), as.double(rows), as.integer(threads))
}

# The orthogonal bounds over row chunks (src/bound_stream_orthogonal.c;
# the passes are those above): the block factor of K(W, W) with M1 regular
# rows, list(L, jitter); and the bounds from the summed statistics `s`,
# with, for grad, the adjoint Gww and the pieces E, alpha, vt of pass 2.
.ffi_stream_orthogonal_chol <- function(Kww, M1, jitter, jitter_cap) {
  .Call(ffi_bso_chol, Kww, as.integer(M1), jitter, jitter_cap)
}

.ffi_stream_orthogonal_value <- function(L, M1, s, N, variant, grad) {
  .Call(ffi_bso_value, L, as.integer(M1), s$AA, s$w, c(s$yy, s$kl, s$trace, s$sumloglam),
        as.double(N), .bound_variants[[variant]], grad)
}

# The threads a chunk may use for `want` within OpenMP's limit; want = 0:
# the most an OpenMP region may use (1 without OpenMP).
.ffi_threads <- function(want = 0L) .Call(ffi_bs_threads, as.integer(want))

# ---- the Vecchia approximation of the residual process (sgpr(neighbours = K)) ----
# src/neighbours.c, src/kernel_local.c, src/vecchia.c; R/neighbours.R and
# R/vif.R use them.

# Ordered neighbours: the Kc Euclidean nearest earlier positions of each
# position of the scaled points xs (rows in the Vecchia order), Kc x N;
# with `order` (the rows at positions 1..N), the neighbours' rows by row.
.ffi_nb_ordered <- function(xs, Kc, order = NULL) {
  .Call(ffi_nb_ordered, xs, as.integer(Kc), if (!is.null(order)) as.integer(order))
}

# The Kc nearest rows of xs to each row of xsnew (both scaled), Kc x n.
.ffi_nb_query <- function(xs, xsnew, Kc) .Call(ffi_nb_query, xs, xsnew, as.integer(Kc))

# The leaf order of a kd-tree over the rows of xs.
.ffi_nb_spatial_order <- function(xs) .Call(ffi_nb_spatial_order, xs)

# K of the candidates `cand` of each point by the residual correlation.
.ffi_nb_select <- function(A, r, kval, cand, K) {
  .Call(ffi_nb_select, A, as.double(r), kval, cand, as.integer(K))
}

# The local kernel blocks K(S_c, S_c) of a single kernel, (K+1)^2 x no.
.ffi_kern_local <- function(kernel, x, nbl) .Call(ffi_kern_local, .ffi_kernel(kernel), x, nbl)

# k(x_c, x_j) for the candidates j of each point c, Kc x no.
.ffi_kern_local_cross <- function(kernel, x, cand) {
  .Call(ffi_kern_local_cross, .ffi_kernel(kernel), x, cand)
}

# The contraction of an adjoint of the local blocks: d/d(log variance, log
# lengthscales); Kloc (the blocks) saves their exponentials.
.ffi_kern_local_grad <- function(kernel, x, nbl, G, Kloc = NULL) {
  .Call(ffi_kern_local_grad, .ffi_kernel(kernel), x, nbl, G, Kloc)
}

# The same contraction with the adjoint given by its factors, (2K+3) x no
# (t, beta~, dbar of each point; .ffi_vf_adjoints(fac = TRUE)).
.ffi_kern_local_grad_fac <- function(kernel, x, nbl, G, Kloc = NULL) {
  .Call(ffi_kern_local_grad_fac, .ffi_kernel(kernel), x, nbl, G, Kloc)
}

# Pass 1 of the VIF likelihood over one block: list(BB, w, sums, n, recs);
# with keep = TRUE, recs holds the points' local regressions for pass 2.
.ffi_vf_stats <- function(L, Kuf, Kloc, nbl, lambda, ytil, keep = FALSE) {
  .Call(ffi_vf_stats, L, Kuf, Kloc, nbl, as.double(lambda), as.double(ytil), keep)
}

# The same with the local kernel blocks of a single kernel (or a sum of
# single kernels) formed from the block's rows x in batches of 64 points
# (no (K+1)^2 x no matrix); with keep = TRUE also A, the features L^-1 Kuf.
.ffi_vf_stats_kern <- function(L, Kuf, kernel, x, nbl, lambda, ytil, keep = FALSE) {
  .Call(ffi_vf_stats_kern, L, Kuf, .ffi_kernel(kernel), x, nbl, as.double(lambda),
        as.double(ytil), keep)
}

# Pass 1 over one block at the kernel scales `scale` and noise variances
# `noise` (one pair per column of the results), from L, Kuf and the local
# blocks (Kloc, or those of the kernel `kernel` on x, single or a sum of
# single kernels) of the kernel at scale 1: list(BB (M x M x J), w (M x J),
# sums (4 x J), n).
.ffi_vf_stats_shares <- function(L, Kuf, Kloc, kernel, x, nbl, ytil, scale, noise) {
  .Call(ffi_vf_stats_shares, L, Kuf, Kloc, if (is.null(Kloc)) .ffi_kernel(kernel), x, nbl,
        as.double(ytil), as.double(scale), as.double(noise))
}

# The VIF log likelihood from the summed statistics: list(bound, logdet,
# fit, LB, v, vt[, Binv]).
.ffi_vf_value <- function(s, N, grad) {
  .Call(ffi_vf_value, s$BB, s$w, s$sums, as.double(N), grad)
}

# Pass 2 over one block: list(Guf, Gloc, glambda, gytil, AbarA); recs: the
# records of pass 1 (or NULL). With fac = TRUE, Gfac (the factors of the
# local adjoints, 2K + 3 doubles per point) in place of Gloc ((K+1)^2), and
# with neither Kloc nor recs the local blocks of the kernel `kernel` (single,
# or a sum of single kernels)
# formed from the block's rows x in batches of 64 points, and then also
# theta, their contraction (.ffi_kern_local_grad_fac()); A: pass 1's
# features L^-1 Kuf (.ffi_vf_stats_kern(keep = TRUE)), or NULL.
.ffi_vf_adjoints <- function(L, Binv, vt, Kuf, Kloc, nbl, lambda, ytil, recs = NULL,
                             fac = FALSE, kernel = NULL, x = NULL, A = NULL) {
  if (!fac) {
    return(.Call(ffi_vf_adjoints, L, Binv, vt, Kuf, Kloc, nbl, as.double(lambda),
                 as.double(ytil), recs))
  }
  .Call(ffi_vf_adjoints_fac, L, Binv, vt, Kuf, Kloc, nbl, as.double(lambda), as.double(ytil),
        recs, if (!is.null(kernel)) .ffi_kernel(kernel), x, A)
}

# The VIF predictive at the first ncol(nbl) points of a block:
# list(mean, var, C, d).
.ffi_vf_predict <- function(L, Binv, vt, Kuf, Kloc, nbl, lambda, ytil, full) {
  .Call(ffi_vf_predict, L, Binv, vt, Kuf, Kloc, nbl, as.double(lambda), as.double(ytil), full)
}
