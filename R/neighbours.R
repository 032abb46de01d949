# The neighbour sets of the Vecchia approximation of the residual process
# in sgpr(neighbours = K) (R/vif.R): the ordering, the search, the choice by
# residual correlation, when they are chosen anew, and the blocks of rows
# over which the likelihood is summed. The search is in src/neighbours.c.
#
# Ordering. The points are put in a random order, drawn once when the model
# is built (set.seed() reproduces it): random orderings give far sharper
# Vecchia approximations than coordinate-based ones (Guinness 2018), and a
# random ordering is what the Vecchia-inducing-points full-scale
# approximation (VIF) of Gyger, Furrer and Sigrist (2025) uses (it is
# GPBoost's default for it). Each point conditions only on points earlier
# in this order, which makes the approximation a valid Gaussian model for
# any neighbour sets.
#
# Choice. For each point, the Kc = 2K Euclidean nearest earlier points in
# the inputs divided by the kernel lengthscales are the candidates (a
# kd-tree search, O(N log N)); of these the K most correlated under the
# residual process are kept, rho_ij = R_ij / sqrt(R_ii R_jj) with
# R = Kff - Qff the kernel minus its Nystrom part (Gyger et al. 2025 choose
# by this correlation over all earlier points; the Euclidean candidate set
# keeps the choice O(N K M)). Near an inducing input the residual process
# is small and its correlation no longer falls off with distance alone,
# which is why the choice looks at the correlation and not only at the
# distance.
#
# When. The neighbour sets are held fixed during each optimiser run, so
# that the objective is one smooth function. They are chosen at the
# starting values and chosen again after a run whenever some lengthscale
# has changed by more than 20% since they were chosen and the new sets
# raise the likelihood at the fitted parameters by more than min_gain per
# observation (then the run is repeated from where it ended, at most
# .nb_refresh_rounds times; R/vif.R, .nb_worth_a_run()), and on all the
# data after a fit on a subsample.

# The number of candidates per neighbour, and the relative change of a
# lengthscale beyond which the neighbours are chosen anew.
.nb_candidate_factor <- 2L
.nb_refresh_change <- 0.2
.nb_refresh_rounds <- 3L

# The most times a fit's neighbour sets are chosen anew (control$neighbour_rounds).
.nb_rounds <- function(fit) {
  r <- fit$control$neighbour_rounds
  if (is.null(r)) .nb_refresh_rounds else r
}

# `neighbours` as given to sgpr(): list(K, auto). K = NA for "auto".
.check_neighbours <- function(neighbours, N) {
  if (identical(neighbours, "auto")) return(list(K = NA_integer_, auto = TRUE))
  msg <- "'neighbours' must be \"auto\" or one whole number K with 0 <= K < N (the number of observations)"
  if (!is.numeric(neighbours) || length(neighbours) != 1L || is.na(neighbours) ||
      !is.finite(neighbours)) {
    stop(msg, call. = FALSE)
  }
  if (neighbours < 0 || neighbours != round(neighbours)) {
    stop(sprintf("%s, not %s", msg, format(neighbours)), call. = FALSE)
  }
  if (neighbours >= N) {
    stop(sprintf("'neighbours' = %s must be less than N = %d: a point can condition on at most the N - 1 others (K = N - 1 is the exact GP)",
                 format(neighbours), N), call. = FALSE)
  }
  list(K = as.integer(neighbours), auto = FALSE)
}

# A new neighbour structure for N points: K, the random order, and no sets
# yet (.nb_choose() fills them). With `groups` (the group of each point, a
# vector of length N) a point's neighbours are chosen among the earlier
# points of its own group only: each group has its own random order, drawn
# from a seed of its own (the seeds are drawn here, one per group with
# points, in increasing order of the groups). This is what a fit on
# shards() does, each worker on its own rows (R/shards_vif.R), and the
# groups let one process give the same model (for tests: the option
# sparsevgp.neighbour_groups, read by .vif_setup()).
.nb_new <- function(N, K, groups = NULL) {
  nb <- list(K = as.integer(K), candidates = as.integer(min(N - 1L, .nb_candidate_factor * K)),
             order = NULL, index = NULL, spatial = NULL, lengthscale = NULL)
  if (is.null(groups)) {
    nb$order <- sample.int(N)
    return(nb)
  }
  g <- sort(unique(groups))
  nb$seeds <- sample.int(.Machine$integer.max, length(g))
  nb$groups <- match(groups, g)
  nb$orders <- lapply(seq_along(g), function(i) .nb_order(sum(nb$groups == i), nb$seeds[i]))
  nb
}

# The random order of n points drawn from `seed` (R's stream is left as
# it was): a group's, or a worker's on shards.
.nb_order <- function(n, seed) .with_seed(seed, sample.int(n))

# The candidates of .nb_choose() with groups: for each point the Kc nearest
# earlier points of its group in the group's order (rows of all points, 0
# for none), as .ffi_nb_ordered() gives them within each group.
.nb_group_candidates <- function(xs, nb, Kc) {
  cand <- matrix(0L, Kc, nrow(xs))
  for (i in seq_along(nb$orders)) {
    r <- which(nb$groups == i)
    o <- nb$orders[[i]]
    cg <- .ffi_nb_ordered(xs[r[o], , drop = FALSE], Kc, o)
    cand[, r] <- ifelse(cg > 0L, r[pmax(cg, 1L)], 0L)
  }
  cand
}

# The structure restricted to the rows `rows` (a subsample): the order is
# the full order restricted to them; the sets are chosen anew.
.nb_subset <- function(nb, rows) {
  n <- length(rows)
  rank <- order(order(nb$order)[rows])
  list(K = min(nb$K, n - 1L), candidates = as.integer(min(n - 1L, .nb_candidate_factor * nb$K)),
       order = rank, index = NULL, spatial = NULL, lengthscale = NULL)
}

# The lengthscales of the neighbour search, one per input column: the
# kernel's, or for a sum or product of kernels the shortest of the parts in
# each column (the short-range part is what the residual process keeps).
.nb_lengthscales <- function(kernel, D) {
  ls <- lapply(.kern_leaves(kernel), function(k) rep_len(k$lengthscale, D))
  do.call(pmin, ls)
}

.nb_scaled <- function(x, ls) x / rep(ls, each = nrow(x))

# Whether the neighbour sets of `nb` are stale for the kernel at `params`:
# never chosen, or some lengthscale changed by more than .nb_refresh_change
# since they were.
.nb_stale <- function(nb, kernel, params, D) {
  # (the lengthscales are recorded with the sets; on shards the sets stay
  # on the workers and the master records only where they were chosen)
  if (is.null(nb$lengthscale)) return(TRUE)
  ls <- .nb_lengthscales(.kernel_at(kernel, params), D)
  any(abs(log(ls / nb$lengthscale)) > log1p(.nb_refresh_change))
}

# The neighbour sets of fit$x at `params`: nb with `index` (K x N: the rows
# each row conditions on, 0 for none, nearest first), `spatial` (the row
# order in which blocks are formed) and the lengthscales they were chosen
# at. With selection = "distance" the K nearest candidates are kept.
.nb_choose <- function(fit, params, nb = fit$neighbours, selection = "correlation") {
  x <- fit$x
  N <- nrow(x)
  K <- nb$K
  k <- .kernel_at(fit$kernel, params)
  ls <- .nb_lengthscales(k, ncol(x))
  xs <- .nb_scaled(x, ls)
  nb$spatial <- .ffi_nb_spatial_order(xs)
  nb$lengthscale <- ls
  if (K == 0L) {
    nb$index <- matrix(0L, 0L, N)
    return(nb)
  }
  Kc <- max(K, nb$candidates)
  cand <- if (is.null(nb$groups)) .ffi_nb_ordered(xs[nb$order, , drop = FALSE], Kc, nb$order) else
    .nb_group_candidates(xs, nb, Kc)
  if (Kc == K || selection == "distance") {
    nb$index <- cand[seq_len(K), , drop = FALSE]
    return(nb)
  }
  index <- matrix(0L, K, N)
  Z <- params$Z
  ch <- .stream_chol(.ffi_kern_matrix(k, Z), fit$control)
  rows <- .vif_rows(fit$control$memory, nrow(Z), Kc)
  for (own in .row_blocks(N, rows)) {
    own <- nb$spatial[own]
    b <- .nb_block(cand, own)
    xb <- x[b$U, , drop = FALSE]
    A <- forwardsolve(ch$L, .ffi_kern_matrix(k, Z, xb))
    kd <- .ffi_kern_diag(k, xb)
    r <- pmax(kd - colSums(A^2), 1e-12 * kd)
    kval <- .kern_local_cross(k, xb, b$nbl)
    sel <- .ffi_nb_select(A, r, kval, b$nbl, K)
    index[, own] <- ifelse(sel > 0L, b$U[pmax(sel, 1L)], 0L)
  }
  nb$index <- index
  nb
}

# The block of the rows `own` of a space whose neighbour sets are the
# columns of `index` (values: rows of the space, 0 for none): list(U (the
# rows own, then their neighbours that are not owned), no, nbl (the
# neighbours as positions in U, 0 for none)).
.nb_block <- function(index, own) {
  nb <- index[, own, drop = FALSE]
  halo <- unique(nb[nb > 0L])
  U <- c(own, halo[is.na(match(halo, own))])
  nbl <- matrix(match(nb, U, nomatch = 0L), nrow(nb), ncol(nb))
  list(U = U, no = length(own), nbl = nbl)
}

# The blocks of a space: its owned rows (the columns of `index`) in
# `spatial` order, cut into runs of `rows`. With one block and no halo the
# rows stay in their order (nothing is gathered).
.nb_blocks <- function(index, spatial, rows, nu = ncol(index)) {
  no <- ncol(index)
  if (rows >= no) {
    if (nu == no) {
      return(list(list(U = seq_len(no), no = no,
                       nbl = matrix(as.integer(index), nrow(index), no))))
    }
    return(list(.nb_block(index, seq_len(no))))
  }
  lapply(.row_blocks(no, rows), function(r) .nb_block(index, spatial[r]))
}

# ---- kernels on the local blocks (sums and products combine the parts) ----

# The local blocks K(S_c, S_c) of the first ncol(nbl) rows of x,
# (K+1)^2 x no (src/kernel_local.c).
.kern_local <- function(kernel, x, nbl) {
  if (!.is_combo(kernel)) return(.ffi_kern_local(kernel, x, nbl))
  parts <- lapply(kernel$parts, .kern_local, x = x, nbl = nbl)
  Reduce(if (kernel$op == "sum") `+` else `*`, parts)
}

# k(x_c, x_j) for the candidates j = cand[, c] of the first ncol(cand)
# rows c of x.
.kern_local_cross <- function(kernel, x, cand) {
  if (!.is_combo(kernel)) return(.ffi_kern_local_cross(kernel, x, cand))
  parts <- lapply(kernel$parts, .kern_local_cross, x = x, cand = cand)
  Reduce(if (kernel$op == "sum") `+` else `*`, parts)
}

# Whether the passes of src/vecchia.c form the local blocks of `kernel`
# themselves, in batches as they go: a single kernel or a sum of single
# kernels (a product's blocks come from .kern_local()).
.local_in_c <- function(kernel) {
  !.is_combo(kernel) || (kernel$op == "sum" && !any(vapply(kernel$parts, .is_combo, NA)))
}

# The contraction of the adjoint of the local blocks given by its factors
# Gfac (src/vecchia.c) for a kernel that .local_in_c() takes: each part's
# gradient in its log parameters, in the order of .kern_split_theta().
.kern_grad_local_fac <- function(kernel, x, nbl, Gfac) {
  if (!.is_combo(kernel)) return(.ffi_kern_local_grad_fac(kernel, x, nbl, Gfac, NULL))
  unlist(lapply(kernel$parts, .ffi_kern_local_grad_fac, x = x, nbl = nbl, G = Gfac,
                Kloc = NULL))
}

# The contraction of an adjoint G of the local blocks: the gradient in the
# log parameters of the parts, in the order of .kern_split_theta() (the
# product rule for a product, as .kern_grad()). Kloc: the blocks of a
# single kernel, or NULL.
.kern_grad_local <- function(kernel, x, nbl, G, Kloc = NULL) {
  if (!.is_combo(kernel)) return(.ffi_kern_local_grad(kernel, x, nbl, G, Kloc))
  parts <- kernel$parts
  if (kernel$op == "sum") {
    return(unlist(lapply(parts, function(k) .kern_grad_local(k, x, nbl, G))))
  }
  Ks <- lapply(parts, .kern_local, x = x, nbl = nbl)
  unlist(lapply(seq_along(parts), function(i) {
    Gi <- G
    for (j in seq_along(parts)[-i]) Gi <- Gi * Ks[[j]]
    .kern_grad_local(parts[[i]], x, nbl, Gi, if (!.is_combo(parts[[i]])) Ks[[i]])
  }))
}
