# Starting values of a binary classifier, found by the bound. From a single
# start (variance 1 and the median distance between inputs, say) the
# optimisers of the classifiers settle on poor optima: a latent function
# too flat to separate the classes, or, with one lengthscale per input, some
# inputs switched off before the others have been learned. So the kernel
# parameters a user leaves unset start at the best point of a small grid,
# scored by the collapsed Polya-Gamma bound of Passerello (2022, eq. 4.7)
# on a subsample, with the local parameters c at their optimum for each
# candidate (closed-form updates, Passerello 2022, eq. 4.11, which never
# lower the bound). The PG bound is a lower bound on the log marginal
# likelihood of the logistic model, so it scores kernels for any logit
# classifier.
#   lengthscales  l_d = m sd(x_d) sqrt(D) with m in 2^(-4:3): one multiplier
#                 for all inputs, so that the start has no input switched
#                 off (sqrt(D): distances between points grow as sqrt(D));
#   variance      v in 4^(0:3) (the latent scale: 1 for classes that
#                 overlap, larger for classes that separate);
# on at most 1000 rows (evenly spaced in the data's order: no random
# numbers are used) with min(M, 50, n/4) inducing inputs chosen by greedy
# variance at each lengthscale; c is updated from the previous variance's
# until the bound rises by less than 1e-4 nats per row (20 updates at most).

.class_start_multipliers <- 2^(-4:3)
.class_start_variances <- 4^(0:3)

# The collapsed PG bound at kernel `kernel`, inducing inputs Z and local
# parameters c for labels ypm (+/-1) and a fixed prior mean, and the c of
# one closed-form update from the q*(f) there: list(value, trace, c_new).
# `trace` is the theta-weighted trace sum_n theta_n [Kff - Qff]_nn.
.pg_bound_at <- function(km, ypm, c, mean = 0, jitter = 1e-8, jitter_cap = 1e-2) {
  theta <- .ffi_pg_theta(c)
  b <- .ffi_gaussian_bound(km$Kww, km$Kwf, km$kdiag, 1 / theta, ypm / (2 * theta) - mean,
                           jitter, jitter_cap, FALSE)
  value <- b$fit + b$logdet - 0.5 * b$trace + sum(1 / theta) / 8 - 0.5 * sum(log(theta)) -
    length(ypm) * log(2) - sum(.ffi_pg_kl(c))
  p <- .ffi_predict_gaussian(b$L, b$LB, b$v, km$Kwf, km$kdiag, FALSE)
  list(value = value, trace = b$trace, c_new = sqrt((p$mean + mean)^2 + pmax(p$var, 0)))
}

# c at its optimum for fixed kernel matrices: closed-form updates from `c`
# until the bound rises by less than `tol` (or `iters` updates). Returns
# list(value, trace, c) at the last c evaluated.
.pg_optimal_c <- function(km, ypm, c, mean = 0, iters = 30L, tol = 1e-3, jitter = 1e-8,
                          jitter_cap = 1e-2) {
  r <- .pg_bound_at(km, ypm, c, mean, jitter, jitter_cap)
  for (i in seq_len(iters)) {
    s <- .pg_bound_at(km, ypm, r$c_new, mean, jitter, jitter_cap)
    gain <- s$value - r$value
    c <- r$c_new
    r <- s
    if (gain < tol) break
  }
  list(value = r$value, trace = r$trace, c = c)
}

# The kernel at lengthscale multiplier m of the classifiers' grids: every
# unset lengthscale m sqrt(D) times the inputs' sd `sx` (per input with
# ARD, their root-mean-square otherwise), the parts of a combination spread
# over the distances of the rows xs as the regression starts do.
.class_grid_lengthscale <- function(kernel, m, sx, xs) {
  sx_iso <- sqrt(mean(sx^2))
  .kern_fill_lengthscale(kernel, function(k) {
    m * sqrt(length(sx)) * if (isTRUE(k$ard)) sx else sx_iso
  }, .kern_part_spread(kernel, xs))
}

# The starting kernel of a binary classifier: `kernel` with every NULL
# parameter filled from the grid above (a kernel whose parameters are all
# given is returned as it is). `M` is the number of inducing inputs the
# model will use; `ypm` the labels coded -1/+1.
.start_classifier <- function(kernel, x, ypm, M = 100L, mean = 0) {
  D <- ncol(x)
  kernel <- .kern_ard(kernel, D)
  leaves <- .kern_leaves(kernel)
  need_ls <- any(vapply(leaves, function(k) is.null(k$lengthscale), TRUE))
  need_var <- any(vapply(leaves, function(k) is.null(k$variance), TRUE))
  if (!need_ls && !need_var) return(kernel)
  sx <- .column_sd(x)
  n <- nrow(x)
  idx <- unique(round(seq(1, n, length.out = min(n, 1000L))))
  xs <- x[idx, , drop = FALSE]
  ys <- ypm[idx]
  m0 <- max(1L, min(M, 50L, length(idx) %/% 4L))
  mult <- if (need_ls) .class_start_multipliers else NA_real_
  vars <- if (need_var) .class_start_variances else NA_real_
  best <- list(value = -Inf)
  for (m in mult) {
    kls <- if (need_ls) .class_grid_lengthscale(kernel, m, sx, xs) else kernel
    Z <- tryCatch(select_inducing(xs, .kern_fill_variance(kls, 1), M = m0,
                                  perm = seq_along(idx))$Z,
                  error = function(e) NULL)
    if (is.null(Z)) next
    # c carried from one variance to the next (warm start)
    cc <- rep(0.1, length(ys))
    for (v in vars) {
      k <- if (need_var) .kern_fill_variance(kls, v) else kls
      r <- tryCatch({
        km <- .collapsed_matrices(k, Z, xs)
        .pg_optimal_c(km, ys, cc, mean, iters = 20L, tol = 1e-4 * length(ys))
      }, error = function(e) NULL)
      if (is.null(r) || !is.finite(r$value)) next
      cc <- r$c
      if (r$value > best$value) best <- list(value = r$value, kernel = k)
    }
  }
  if (is.null(best$kernel)) return(.kern_init(kernel, x, NULL))
  best$kernel
}
