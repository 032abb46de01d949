# sgpr(neighbours = K) on data = shards(): the Vecchia-inducing-points
# model (R/vif.R) when the rows stay on the workers.
#
# With cluster = cl the master holds the rows, orders them, finds every
# row's neighbours over all of them and sends each worker a run of the
# spatial order with its halo (.share_vif()). On shards the master never
# holds the rows, so each worker orders its own rows (a random order drawn
# from a seed the master sends, as set.seed() reproduces) and chooses each
# row's neighbours among the earlier rows of its own shard: the search, the
# choice by residual correlation and the choice anew when the lengthscales
# change all run on the workers (.nb_choose() on the worker's rows). This
# is still a Vecchia approximation of the residual process, with the
# conditioning sets restricted to a shard: the residual is independent
# across shards given the inducing-point part, which stays global. The
# objective is the exact likelihood of that approximate prior, and its two
# passes are sums over the workers as over blocks (.shard_vif()).
#
# One process gives the same model with the neighbour sets restricted to
# groups of rows (.nb_new(groups =), the shard of each row); the tests
# compare the two (the option sparsevgp.neighbour_groups, which
# .vif_setup() reads, is for them and not a user argument).
#
# Predictions condition the residual at a new point on its K nearest rows
# (by residual correlation among the 2K nearest, as in one process) of a
# single shard: the shard that holds the training row nearest to it in the
# inputs scaled by the lengthscales (the first such shard on ties). Every
# worker predicts every new point from its own rows and reports its
# nearest distance; the master keeps, for each point, the prediction of
# the nearest shard. For spatial shards (regions) that is the region of the
# point, and the prediction is that of one process on the region's rows.
# fitted() and residuals() at a worker's rows condition on that worker's
# rows (each row's own shard).

# ---- the neighbour structure on the master ----------------------------------------

# The groups of the rows of x for the neighbour sets in one process (NULL:
# none): the option sparsevgp.neighbour_groups, when it has one value per
# row (the trial of neighbours = "auto" fits subsamples, which it leaves
# ungrouped).
.nb_groups_option <- function(N) {
  g <- getOption("sparsevgp.neighbour_groups")
  if (is.null(g) || length(g) != N) return(NULL)
  g
}

# The fit on shards with K neighbours: what the master keeps of the
# neighbour structure (K, the workers' seeds of their orders, the
# parameters and lengthscales at which the workers last chose the sets;
# the sets themselves stay on the workers), the objective a likelihood and
# the label, as .vif_setup() makes them. The seeds are drawn as .nb_new()
# draws those of groups, one per worker with rows; a warm start `from` on
# shards of as many rows per worker keeps its seeds and where its sets were
# chosen, so that update(fit, optimize = FALSE) reproduces the fit.
.shards_vif_setup <- function(fit, K, n, from = NULL) {
  N <- .nobs(fit)
  nb <- from$neighbours
  if (isTRUE(nb$shards) && identical(nb$K, as.integer(K)) && identical(from$shards$n, n)) {
    fit$neighbours <- nb
  } else {
    fit$neighbours <- list(K = as.integer(K),
                           candidates = as.integer(min(N - 1L, .nb_candidate_factor * K)),
                           seeds = sample.int(.Machine$integer.max, length(n)), shards = TRUE,
                           index = NULL, spatial = NULL, lengthscale = NULL, at = NULL)
  }
  fit$loglik_kind <- "likelihood"
  fit$model <- sub("^Sparse GP regression \\(SGPR\\)",
                   sprintf("Sparse GP regression with a Vecchia residual (VIF, K = %d neighbours from the same shard)", K),
                   fit$model)
  fit
}

# The workers of fit$cluster choose their rows' neighbour sets at `params`
# (each among its own rows); the master records where they were chosen.
.shards_vif_choose <- function(fit, params) {
  nb <- fit$neighbours
  .cluster_call(fit$cluster, ".shard_vif_choose", list(params = params, K = nb$K),
                as.list(nb$seeds))
  nb$lengthscale <- .nb_lengthscales(.kernel_at(fit$kernel, params), ncol(fit$x))
  nb$at <- params
  fit$neighbours <- nb
  fit
}

# On a worker: the neighbour sets of its rows at the parameters in `a`, in
# the random order drawn from its seed `each` (kept across choices), held
# where .shard_vif() reads them.
.shard_vif_choose <- function(s, a, each) {
  fit <- s$fit
  n <- nrow(fit$x)
  s$K <- a$K
  if (n == 0L) {
    s$index <- matrix(0L, a$K, 0L)
    s$spatial <- integer(0)
    return(TRUE)
  }
  nb <- s$nb
  if (is.null(nb) || !identical(nb$seed, each)) {
    nb <- list(K = as.integer(a$K),
               candidates = as.integer(min(n - 1L, .nb_candidate_factor * a$K)),
               order = .nb_order(n, each), seed = each)
  }
  nb <- .nb_choose(fit, a$params, nb)
  s$nb <- nb
  s$index <- nb$index
  s$spatial <- nb$spatial
  TRUE
}

# The workers of a new handle h (objective(fit, cluster = sh)) choose the
# fit's neighbour sets again, at the parameters where they were chosen:
# the same sets (the orders come from the same seeds).
.shards_vif_attach <- function(fit, h) {
  if (length(h$cl) != length(fit$neighbours$seeds)) {
    .cluster_release(h)
    stop(sprintf("the fit's neighbour sets were chosen on %d workers with rows, and these shards have %d: give the shards the fit was made on",
                 length(fit$neighbours$seeds), length(h$cl)), call. = FALSE)
  }
  fit$cluster <- h
  .shards_vif_choose(fit, fit$neighbours$at)
  h
}

# ---- training ---------------------------------------------------------------------

# .train_vif() on shards: L-BFGS-B over the free parameters with the
# workers' neighbour sets held, chosen anew on the workers between runs
# (at most .nb_refresh_rounds times, when a lengthscale changed by more than
# 20% and the new sets raise the likelihood, .nb_worth_a_run()); with more
# rows than the subsample of the shards (at most .vif_train_subsample),
# first the fit with neighbours on a random subsample of rows gathered here
# (its own neighbour sets, over all its rows), then the kernel, noise and
# mean on all rows with the inducing inputs held, as in one process.
.shards_train_vif <- function(fit) {
  start <- proc.time()[["elapsed"]]
  N <- .nobs(fit)
  reports <- list()
  nsub <- min(.vif_train_subsample, .shards_subsample_rows())
  if (is.null(fit$neighbours$at)) fit <- .shards_vif_choose(fit, fit$params)
  if (N > nsub) {
    sub <- .shards_subsample(fit, nsub)$fit
    sub$neighbours <- .nb_new(nrow(sub$x), min(fit$neighbours$K, nrow(sub$x) - 1L))
    sub$neighbours <- .nb_choose(sub, sub$params)
    sub <- .train_vif(sub)
    reports$subsample <- sub$optim
    fit$params <- sub$params
    .shards_checkpoint(fit, sub$params)
    fit <- .shards_vif_choose(fit, fit$params)
    if (isTRUE(sub$optim$interrupted)) {
      fit$optim <- .stage_report(sub$optim, reports, schedule = "neighbours")
      fit$time <- proc.time()[["elapsed"]] - start
      return(fit)
    }
    fit$fixed[.block_mask(fit, "Z")] <- TRUE
  }
  rounds <- .nb_rounds(fit)
  for (round in 0:rounds) {
    fit <- .fit_lbfgsb(fit, if (round == 0L) "all parameters" else
      sprintf("neighbours chosen anew (%d)", round), from_start = !.warm(fit),
      window = .regression_window(.warm(fit) || N > nsub))
    reports[[sprintf("run_%d", round)]] <- fit$optim
    .shards_checkpoint(fit, fit$params)
    if (isTRUE(fit$optim$interrupted) || round == rounds) break
    if (!.nb_stale(fit$neighbours, fit$kernel, fit$params, ncol(fit$x))) break
    old <- fit
    before <- .nb_fitted_value(fit)
    fit <- .shards_vif_choose(fit, fit$params)
    if (!.nb_worth_a_run(fit, before)) {
      # the workers choose the former sets again (the same order and
      # parameters give the same sets)
      fit <- .shards_vif_choose(old, old$neighbours$at)
      break
    }
  }
  fit$fixed <- .fixed_from_spec(fit)
  fit$optim <- .stage_report(fit$optim, reports, schedule = "neighbours")
  fit$optim$neighbour_rounds <- round
  if (N > nsub) fit$optim$subsample <- nsub
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# The automatic M within the budget of one evaluation with K neighbours.
.vif_cap_spec <- function(spec, N, K) {
  if (isTRUE(spec$auto) && isTRUE(K > 0L)) spec$M <- min(spec$M, .vif_max_inducing(N, K))
  spec
}

# ---- neighbours = "auto" ----------------------------------------------------------

# The trial of neighbours = "auto" (.vif_auto(), R/vif.R) on rows gathered
# from the workers: all of them when there are at most the subsample's, `g`
# (then as in one process), else a random subsample of that many drawn
# here. The trial fits, like one process's, without prior weights. Then
# what sgpr.default() does with its answer: the kernel, noise, mean and
# inducing inputs of the model it keeps (with neighbours, the inducing
# inputs placed by the trial, or selected again at its parameters by
# select_at(spec, kernel, nz); without, an automatic M selected again there
# too). Returns list(K, kernel, nz, mn, spec, Z, report, and from_trial:
# TRUE when the fit starts from the trial's fitted parameters).
.shards_vif_auto <- function(h, g, N, colnames, user_kernel, noise, spec, Z, control, mean,
                             optimize, kernel, nz, mn, optimize_inducing, select_at) {
  out <- list(K = 0L, kernel = kernel, nz = nz, mn = mn, spec = spec, Z = Z)
  start0 <- list(kernel = kernel, noise = nz$params[["noise"]],
                 optimize_inducing = !isFALSE(optimize_inducing),
                 place = !isFALSE(optimize_inducing) && spec$method != "given")
  if (is.null(g)) {
    # (the answers of .vif_auto() that read no rows)
    if (!optimize) return(c(out, list(report = list(reason = "not optimised"))))
    if (.auto_max_inducing(N) >= N) return(c(out, list(report = list(reason = "small"))))
    n <- .shards_subsample_rows()
    g <- .shards_gather(h, .shards_draw_rows(N, n))
    colnames(g$x) <- colnames
  }
  auto <- .vif_auto(g$x, g$y, user_kernel, noise, spec, Z, control, mean, optimize, start0)
  out$K <- auto$K
  out$report <- auto$report
  if (is.null(auto$params)) return(out)
  out$from_trial <- TRUE
  out$kernel <- auto$kernel
  if (!is.null(nz$params[["noise"]])) out$nz$params[["noise"]] <- auto$params[["noise"]]
  if (!mn$fixed) out$mn$value <- auto$params$mean
  if (spec$method == "given") return(out)
  if (auto$K > 0L) {
    # (the budget of .vif_auto_K neighbours, whatever K the trial kept:
    # .vif_auto_max_inducing(), R/vif.R)
    out$spec <- .vif_cap_spec(spec, N, .vif_auto_K)
    out$Z <- if (!is.null(auto$Z) && (isTRUE(spec$auto) ||
                                      identical(nrow(auto$Z), as.integer(out$spec$M)))) auto$Z else
      select_at(out$spec, out$kernel, out$nz)
  } else if (isTRUE(spec$auto)) {
    # the automatic M chosen again at the trial's fitted parameters, as in
    # one process (sgpr.default())
    out$Z <- select_at(spec, out$kernel, out$nz)
  } else if (nrow(auto$params$Z) == nrow(Z)) {
    out$Z <- auto$params$Z
  }
  out
}

# ---- values at rows and at new points -----------------------------------------------

# A fit with neighbours on the rows (x, y, per-row noise factors lambda or
# NULL) of one shard or group: the global part of `fit` and the residual
# conditioned on those rows only (K at most their number).
.vif_local_fit <- function(fit, x, y, lambda = NULL) {
  loc <- fit
  loc$shards <- NULL
  loc$x <- x
  loc$y <- y
  if (!is.null(loc$noise_model)) loc$noise_model$lambda <- lambda
  loc$neighbours <- list(K = min(fit$neighbours$K, nrow(x)), predict = fit$neighbours$predict)
  loc
}

# The latent predictive at xnew from one shard or group (.vif_local_fit()),
# with the squared distance from each new point to its nearest row there
# in the inputs scaled by the lengthscales (Inf without rows).
.vif_local_predict <- function(loc, xnew) {
  n <- nrow(xnew)
  if (nrow(loc$x) == 0L) return(list(mean = rep(NA_real_, n), var = rep(NA_real_, n), d2 = rep(Inf, n)))
  ls <- .nb_lengthscales(.kernel_at(loc$kernel, loc$params), ncol(loc$x))
  xs <- .nb_scaled(loc$x, ls)
  xsn <- .nb_scaled(xnew, ls)
  near <- .ffi_nb_query(xs, xsn, 1L)
  d2 <- rowSums((xsn - xs[near[1L, ], , drop = FALSE])^2)
  p <- .vif_predict(loc, xnew, FALSE)
  list(mean = p$mean, var = p$var, d2 = d2)
}

# The predictions of the shards or groups `ps` (a list of
# .vif_local_predict() answers) combined: each point takes that of the
# one with the nearest row (the first on ties).
.vif_nearest <- function(ps) {
  d2 <- do.call(cbind, lapply(ps, `[[`, "d2"))
  w <- max.col(-d2, ties.method = "first")
  pick <- function(f) do.call(cbind, lapply(ps, `[[`, f))[cbind(seq_along(w), w)]
  list(mean = pick("mean"), var = pick("var"))
}

# One process with groups (the groups of .nb_new()): the predictions at
# xnew as a fit on shards gives them, each point from the group whose rows
# are nearest; with `gnew` (the group of each new point) from that group.
# For tests.
.vif_predict_groups <- function(fit, xnew, groups, gnew = NULL) {
  lam <- fit$noise_model$lambda
  ug <- sort(unique(groups))
  ps <- lapply(ug, function(g) {
    r <- which(groups == g)
    loc <- .vif_local_fit(fit, fit$x[r, , drop = FALSE], fit$y[r], if (!is.null(lam)) lam[r])
    .vif_local_predict(loc, xnew)
  })
  if (is.null(gnew)) return(.vif_nearest(ps))
  w <- match(gnew, ug)
  list(mean = vapply(seq_along(w), function(i) ps[[w[i]]]$mean[i], 0),
       var = vapply(seq_along(w), function(i) ps[[w[i]]]$var[i], 0))
}

# What the workers need of a fit with neighbours to predict from their rows.
.shards_vif_args <- function(fit) {
  a <- unclass(fit)[intersect(c("kernel", "params", "posterior", "noise_model", "neighbours",
                                "call", "model"), names(fit))]
  # (a worker predicts from its own rows with .vif_predict_K() of them)
  a$neighbours <- list(K = fit$neighbours$K, predict = fit$neighbours$predict)
  a$x <- matrix(0, 0L, ncol(fit$x), dimnames = list(NULL, colnames(fit$x)))
  class(a) <- class(fit)
  a
}

# The error of predict() at new points of a fit on shards with neighbours
# without the shards.
.shards_vif_refuse_predict <- function() {
  stop("the predictions of a fit with neighbours on shards condition on the training rows near each point, which are on the workers: predict(fit, newdata, cluster = sh) computes them there, with sh the shards() the fit was made on",
       call. = FALSE)
}

# predict() at new points of a fit on shards with neighbours, on the
# workers of the shards `sh`: each predicts every point from its own rows,
# and each point takes the prediction of the nearest shard.
.shards_vif_predict <- function(object, xnew, full_cov, sh) {
  if (!inherits(sh, "sparsevgp_shards")) .shards_vif_refuse_predict()
  if (full_cov) {
    stop("full_cov = TRUE is not available for a fit with neighbours on shards: predict the variances",
         call. = FALSE)
  }
  r <- .shards_predict_rows(object, sh, newx = xnew)
  .vif_nearest(r[vapply(r, function(p) any(is.finite(p$d2)), TRUE)])
}

# On a worker: the fit with neighbours on its rows x (model frame mf).
.shard_vif_local <- function(a, x, mf) {
  # the target and the rows' factors of the noise variances as the worker
  # fitted them (.shard_design()): y minus an offset, s2 / w
  y <- as.double(stats::model.response(mf))
  off <- stats::model.offset(mf)
  if (!is.null(off)) y <- y - as.double(off)
  w <- stats::model.weights(mf)
  s2 <- mf[["(noise)"]]
  .vif_local_fit(a$fit, x, y, .rows_rel(if (!is.null(w)) as.double(w), if (!is.null(s2)) as.double(s2)))
}
