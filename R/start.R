# Starting values that find the signal. The optimisers of the regression
# models are local, and from a lengthscale that is far too long (the median
# distance between inputs, say, for a response that varies on a tenth of
# the input range) they settle on a flat fit that calls everything noise.
# So the parameters a user leaves unset start at the best point of a small
# grid, scored by the collapsed bound on a subsample:
#   lengthscales  l_d = c sd(x_d) with c in 2^(-5:3) (one c for all inputs,
#                 so the grid stays one-dimensional with ARD), and when the
#                 best score is at the shortest c, c halving on while
#                 the best score at c rises (at most .start_shorter
#                 times; a long series whose structure is a few
#                 thousandths of its span, 20000 points, peaks at 2^-7:
#                 the windows below now reach it from their own list),
#   noise         r var(y), r in (0.01, 0.05, 0.2, 0.5),
#   variance      (1 - r) var(y),
# on at most 1000 rows (evenly spaced in the data's order, so that no random
# numbers are used) with min(M, 200, n/2) inducing inputs chosen greedily.
# With neighbours, on data dense for that grid (.start_dense(): the median
# distance to the nearest other point at most 2^-7 sd, so that a lengthscale
# of twice it is below the grid's 2^-5; a long series with one observation
# per time unit, say), the rows are compact windows of the data instead
# (.start_windows()), where the neighbours are as close as in the full fit,
# and the multipliers start at twice the data's spacing: a subsample spread
# over all the data has its neighbours far apart, sees structure on the
# scale of a few observations as noise, and the fit from its start stays
# flat (20000 hourly observations with a daily cycle: test RMSE 0.88, and
# 0.30 from the windows' start).
# For a sum or product of kernels the grid is the same: c scales the unset
# lengthscales of all parts jointly (each part starting at its own quantile
# of the distances between inputs, R/kernels.R), the variances share
# (1 - r) var(y), and whatever the user gave is kept.
# The grid costs one pass over that subsample per multiplier (the four
# noise shares reuse it: .start_shares(), .start_score_vif_shares()), well
# under a second: far less than the evaluations it saves on the full data.

.start_multipliers <- 2^(-5:3)
# how many times the multipliers may halve below the shortest
.start_shorter <- 8L
.start_noise_ratios <- c(0.01, 0.05, 0.2, 0.5)

# Kernel (and noise) starting values for Gaussian regression: the kernel with
# every NULL parameter filled, and `noise`, the starting noise variance when
# `noise_free` (the noise is learned and the user gave no start), else NULL.
# `M` is the number of inducing inputs the model will use (Inf for the
# exact GP); `lambda` are known noise variances (they fix the noise).
.start_regression <- function(kernel, x, y, M = Inf, noise_free = TRUE, lambda = NULL,
                              moments = NULL, neighbours = 0L) {
  D <- ncol(x)
  kernel <- .kern_ard(kernel, D)
  leaves <- .kern_leaves(kernel)
  need_ls <- any(vapply(leaves, function(k) is.null(k$lengthscale), TRUE))
  need_var <- any(vapply(leaves, function(k) is.null(k$variance), TRUE))
  # `moments`: var(y) and the sds of the columns of all rows when x and y
  # are a subsample of them (data held by workers, R/shards.R)
  vy <- if (is.null(moments)) stats::var(y) else moments$vy
  if (!is.finite(vy) || vy <= 0) vy <- 1
  if (!need_ls && !need_var && !noise_free) return(list(kernel = kernel, noise = NULL))
  sx <- .sd_or_one(if (is.null(moments)) .col_sd(x) else moments$sx)
  sx_iso <- sqrt(mean(sx^2))
  dense <- if (need_ls && isTRUE(neighbours > 0L)) .start_dense(x, sx)
  mult <- if (!need_ls) NA_real_ else if (is.null(dense)) .start_multipliers else
    2^(log2(dense):log2(max(.start_multipliers)))
  ratios <- if (noise_free) .start_noise_ratios else
    if (is.null(lambda)) 0.1 else min(0.99, mean(lambda) / vy)
  n <- nrow(x)
  idx <- if (!is.null(dense)) .start_windows(x, sx, min(n, 1000L)) else
    unique(round(seq(1, n, length.out = min(n, 1000L))))
  xs <- x[idx, , drop = FALSE]
  ys <- y[idx]
  lam_s <- if (is.null(lambda)) NULL else lambda[idx]
  m0 <- min(M, 200L, max(1L, length(idx) %/% 2L))
  spread <- if (need_ls) .kern_part_spread(kernel, xs)
  best <- list(value = -Inf)
  # a point of the grid that cannot be scored is skipped; a time limit or
  # exhausted memory stops the fit (R/interrupt.R)
  skip <- function(value) function(e) {
    .rethrow_fatal(e)
    value
  }
  # Ctrl-C ends the search with the best point so far
  # with large data, the scores' temporaries are collected as they go:
  # R would let them pile up in proportion to the data it holds (?scaling)
  collect <- length(x) >= .stage_gc_cells
  # the highest score at the multiplier c (-Inf: none could be scored)
  score_multiplier <- function(c) {
    top <- -Inf
    .interrupt_point("start")
    if (collect) .collect()
    # the parts of a combination move jointly: c scales every unset
    # lengthscale (each part's own start, R/kernels.R)
    kls <- if (need_ls) {
      .kern_fill_lengthscale(kernel, function(k) c * if (isTRUE(k$ard)) sx else sx_iso, spread)
    } else kernel
    k <- .kern_fill_variance(kls, vy)
    Z <- tryCatch(select_inducing(xs, k, M = m0, perm = seq_along(idx))$Z, error = skip(NULL))
    if (is.null(Z)) return(-Inf)
    vif <- NULL
    # with one noise variance for all points the scores at every noise share
    # come from one pass over the rows (without neighbours), or from one
    # model with its local blocks formed once (with them)
    sh <- if (is.null(lam_s)) .start_share_scales(kls, need_var, vy, ratios)
    shares <- if (!is.null(sh)) {
      if (!isTRUE(neighbours > 0L)) {
        tryCatch(.start_shares(sh$kernel, sh$scale, sh$noise, xs, ys, Z), error = skip(NULL))
      } else {
        vif <- tryCatch(.start_vif_model(sh$kernel, xs, ys, Z, NULL, neighbours, sh$noise[1L]),
                        error = skip(NULL))
        if (!is.null(vif)) {
          c(vif$bound, if (length(ratios) > 1L) {
            tryCatch(.start_score_vif_shares(vif, sh$scale[-1L], sh$noise[-1L]),
                     error = skip(rep(NA_real_, length(ratios) - 1L)))
          })
        }
      }
    }
    for (i in seq_along(ratios)) {
      r <- ratios[i]
      if (need_var) k <- .kern_fill_variance(kls, (1 - r) * vy)
      noise <- if (is.null(lam_s)) rep(r * vy, length(ys)) else lam_s
      value <- tryCatch(if (!is.null(shares)) shares[i] else
        if (!isTRUE(neighbours > 0L)) .start_score(k, xs, ys, Z, noise) else
        if (is.null(vif)) {
          # (built at the first point of the multiplier, whose score is the
          # likelihood the build computes)
          vif <- .start_vif_model(k, xs, ys, Z, lam_s, neighbours, r * vy)
          vif$bound
        } else .start_score_vif(vif, k, r * vy), error = skip(-Inf))
      if (is.finite(value)) top <- max(top, value)
      if (is.finite(value) && value > best$value) {
        best <<- list(value = value, kernel = k, noise = r * vy)
      }
    }
    top
  }
  .interruptible({
    at <- vapply(mult, score_multiplier, 0)
    # the best at the shortest multiplier: the signal may be shorter still
    # (a long series with structure on a few thousandths of its span), and
    # the multipliers go on halving while the best score rises
    if (need_ls && length(at) > 1L && is.finite(at[1L]) && which.max(at) == 1L) {
      c <- mult[1L]
      top <- at[1L]
      for (i in seq_len(.start_shorter)) {
        c <- c / 2
        v <- score_multiplier(c)
        if (!isTRUE(v > top)) break
        top <- v
      }
    }
  }, "the search for starting values")
  if (is.null(best$kernel)) {
    # nothing could be scored (a degenerate subsample): the plain defaults
    return(list(kernel = .kern_init(kernel, x, y), noise = if (noise_free) .noise_start(y)))
  }
  list(kernel = best$kernel, noise = if (noise_free) best$noise)
}

# The shortest lengthscale multiplier that the data `x` (sds of its
# columns `sx`) can identify with neighbours, when it is shorter than the
# grid's (.start_multipliers): the power of two at or above
# .start_dense_factor times the data's spacing (.start_spacing()); else
# NULL.
.start_dense_factor <- 2
.start_dense <- function(x, sx) {
  h <- .start_spacing(x, sx)
  if (!isTRUE(h > 0)) return(NULL)
  c <- 2^ceiling(log2(.start_dense_factor * h))
  if (c < min(.start_multipliers)) c else NULL
}

# The median distance from a point of the data to its nearest other point
# (rows of x scaled by the sds sx), from at most 200 rows evenly spaced in
# the data's order; NA when there are no two distinct points. The nearest
# of 11 rows that is not a replicate of the point (a design replicated up
# to 10 times has the spacing of its distinct points).
.start_spacing <- function(x, sx, probes = 200L) {
  n <- nrow(x)
  if (n < 2L) return(NA_real_)
  xs <- x / rep(sx, each = n)
  p <- unique(round(seq(1, n, length.out = min(n, probes))))
  nn <- .ffi_nb_query(xs, xs[p, , drop = FALSE], min(n, 11L))
  d <- vapply(seq_along(p), function(i) {
    dist <- sqrt(colSums((t(xs[nn[, i], , drop = FALSE]) - xs[p[i], ])^2))
    dist <- dist[dist > 0]
    if (length(dist)) min(dist) else NA_real_
  }, 0)
  if (all(is.na(d))) NA_real_ else stats::median(d, na.rm = TRUE)
}

# Rows of `windows` disjoint compact windows of the data x (sds sx), n rows
# in all, sorted: to each of `windows` centres evenly spaced in the data's
# order (no random numbers), its nearest n / windows rows (scaled by sx)
# that an earlier window has not taken (one search: each centre's
# n nearest rows hold enough).
.start_windows_count <- 4L
.start_windows <- function(x, sx, n, windows = .start_windows_count) {
  N <- nrow(x)
  if (n >= N) return(seq_len(N))
  xs <- x / rep(sx, each = N)
  size <- ceiling(n / windows)
  centres <- round(seq(1, N, length.out = windows + 2L))[-c(1L, windows + 2L)]
  nn <- .ffi_nb_query(xs, xs[centres, , drop = FALSE], min(N, size * windows))
  taken <- integer(0)
  for (w in seq_len(windows)) {
    free <- nn[!(nn[, w] %in% taken), w]
    taken <- c(taken, free[seq_len(min(length(free), size, n - length(taken)))])
  }
  sort(taken)
}

# The model with `neighbours` neighbours per point on the grid's rows, at
# the kernel `k` of one lengthscale multiplier and the noise variance `noise`
# (or the known variances `lambda`; its neighbour sets depend on
# the lengthscales only: the residual correlation that chooses them does not
# change with the kernel's variance), for .start_score_vif(). With
# neighbours the grid is scored by the model's own likelihood: the
# collapsed bound with the few inducing inputs such a model has cannot see
# structure shorter than their spacing and prefers to call it noise (a
# smooth trend plus short-range bumps in 3 inputs, 5000 rows: noise 0.048
# where it is 0.0025, test RMSE 0.215 against 0.059).
.start_vif_model <- function(k, x, y, Z, lambda, neighbours, noise = 1) {
  K <- min(as.integer(neighbours), nrow(x) - 1L)
  # (the grid's rows, gathered from shards or not, are one group: the same
  # start in one process and on shards)
  old <- options(sparsevgp.neighbour_groups = NULL)
  on.exit(options(old), add = TRUE)
  .with_seed(1L, suppressWarnings(
    sgpr.default(x, y, kernel = k, inducing = Z, noise = if (is.null(lambda)) noise else lambda,
                 neighbours = K, optimize = FALSE)))
}

# Its log likelihood with the kernel `k` (the same lengthscales, another
# variance) and the noise variance `noise` (ignored for known variances).
.start_score_vif <- function(fit, k, noise) {
  p <- fit$params
  kp <- .kern_params(k)
  p[names(kp)] <- kp
  if (!is.null(p[["noise"]])) p[["noise"]] <- noise
  .evaluate(fit, p, grad = FALSE)$value
}

# The log likelihoods of the model `fit` with neighbours (.start_vif_model(),
# one noise variance for all points) with its kernel times each `scale` and
# the noise variances `noise`, its inducing inputs and neighbour sets held:
# .start_score_vif() at each, from one pass over the rows (the local
# blocks K(S,S) - A_S'A_S are formed once; src/vecchia.c). NA where a
# likelihood cannot be evaluated.
.start_score_vif_shares <- function(fit, scale, noise) {
  p <- fit$params
  k <- .kernel_at(fit$kernel, p)
  L <- .stream_chol(.ffi_kern_matrix(k, p$Z), fit$control)$L
  t <- .targets(fit, p)
  x <- fit$x
  nbl <- fit$neighbours$index
  Kloc <- if (!.local_in_c(k)) .kern_local(k, x, nbl)
  s <- .ffi_vf_stats_shares(L, .ffi_kern_matrix(k, p$Z, x), Kloc, k, x, nbl, t$y - t$shift,
                            scale, noise)
  vapply(seq_along(scale), function(j) {
    M <- nrow(L)
    sj <- list(BB = matrix(s$BB[, , j], M, M), w = s$w[, j], sums = s$sums[, j])
    tryCatch(.ffi_vf_value(sj, nrow(x), FALSE)$bound, error = function(e) {
      .rethrow_fatal(e)
      NA_real_
    })
  }, 0)
}

# The grid's noise shares r of `ratios` as multiples of one kernel: the
# kernel `kernel` with its unset variances filled with (1 - r1) vy for the
# first share (when `need_var`), and for each share r the scale a of that
# kernel ((1 - r) / (1 - r1), or 1 with the variances given) and the noise
# variance r vy. NULL when the kernel does not scale with the filled
# variance (a user's variance in a part of a sum): then the shares are
# scored one at a time.
.start_share_scales <- function(kernel, need_var, vy, ratios) {
  if (need_var && !.kern_variance_linear(kernel)) return(NULL)
  list(kernel = if (need_var) .kern_fill_variance(kernel, (1 - ratios[1L]) * vy) else kernel,
       scale = if (need_var) (1 - ratios) / (1 - ratios[1L]) else rep(1, length(ratios)),
       noise = ratios * vy)
}

# The collapsed bound of a constant-mean SGPR with the kernel `kernel`
# times each `scale` and the noise variances `noise`, from one pass over the
# rows: with the kernel scaled by a and the noise variance s2, the
# statistics of the bound's stable form (src/bound_gaussian.c) at unit
# noise become A A' a / s2, A ytil sqrt(a) / s2, |ytil|^2 / s2,
# sum k_nn a / s2 and the trace term a / s2, and only B = I + A A' is
# factorised anew (M^3 / 3 against M^2 N). The value is that of
# .start_score() to rounding; NA where the bound cannot be evaluated.
.start_shares <- function(kernel, scale, noise, x, y, Z) {
  km <- .collapsed_matrices(kernel, Z, x)
  L <- .ffi_chol(km$Kww, 0, 1e-2)$L
  n <- length(y)
  s1 <- .ffi_stream_stats(L, km$Kwf, km$kdiag, rep(1, n), y - mean(y), 1L)
  vapply(seq_along(scale), function(j) {
    a <- scale[j]
    s2 <- noise[j]
    s <- list(AA = s1$AA * (a / s2), w = s1$w * (sqrt(a) / s2), yy = s1$yy / s2,
              kl = s1$kl * a / s2, trace = s1$trace * a / s2, sumloglam = n * log(s2))
    tryCatch(.ffi_stream_value(L, s, n, FALSE)$bound, error = function(e) {
      .rethrow_fatal(e)
      NA_real_
    })
  }, 0)
}

# The collapsed bound of a constant-mean SGPR at the given parameters.
.start_score <- function(kernel, x, y, Z, lambda) {
  km <- .collapsed_matrices(kernel, Z, x)
  .ffi_gaussian_bound(km$Kww, km$Kwf, km$kdiag, lambda, y - mean(y), 0, 1e-2, FALSE)$bound
}
