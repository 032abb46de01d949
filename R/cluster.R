# Sharding over the workers of an R `parallel` cluster (PSOCK, which spans
# machines, or FORK). The data of a fit are split once into one contiguous
# share per worker, which stays there while the model is fitted; each
# evaluation sends the parameters (and M x M factors) and receives sums over
# the worker's rows: M x M and M-vector statistics and gradient pieces. The
# master does the M x M algebra. One path serves every model:
#   .share(fit)         what each worker holds of the rows (a generic)
#   .cluster_setup()    load the package on the workers, send the shares
#   .cluster_call()     run one function of this package on every worker's
#                       share (.shard_run()), restating a worker's error
#   .cluster_release()  drop the shares
#   .cluster_fit()      the shared tail of a model constructor on a cluster
# and the models supply what their workers compute:
#   sgpr, pgpr, osgpr   .shard_collapsed(): the two passes of the collapsed
#                       bound (R/stream.R) on the worker's rows, with the
#                       model's .targets() there; pgpr's per-point c live on
#                       the workers (.shard_pg_update(), .shard_pg_c());
#   sgpr with neighbours
#                       .shard_vif() (R/vif.R): the two passes of the VIF
#                       likelihood on the worker's run of rows and its halo;
#   svgp                .shard_uncollapsed() (R/uncollapsed.R) through
#                       .cluster_rows(): the data term of the ELBO and its
#                       adjoints on the worker's rows (or its rows of a
#                       minibatch);
#   predict()           .shard_predict(): the latent predictive at the
#                       worker's rows of new data (no share: the fit's
#                       posterior is sent along).
# Every exchange with the workers runs with interrupts suspended
# (suspendInterrupts()): a Ctrl-C then takes effect once the workers have
# answered, so that no answer is left unread on a connection, where the
# next call on the cluster would take it for its own.

# The shares of the data held by this process as a worker, by key; each share
# is an environment, so that per-point state (pgpr's c) can change in place.
.shards <- new.env(parent = emptyenv())

# A key for one fit's shares that no other fit from this or another master
# process uses (no random numbers: the user's stream stays untouched).
.shard_key <- function() {
  .shards$.count <- (if (is.null(.shards$.count)) 0L else .shards$.count) + 1L
  sprintf("%s-%d-%s-%d", Sys.info()[["nodename"]], Sys.getpid(),
          format(as.numeric(Sys.time()), digits = 16L), .shards$.count)
}

# On a worker: keep a share; drop it.
.shard_store <- function(share, key) {
  assign(key, list2env(share, parent = emptyenv()), envir = .shards)
  TRUE
}

.shard_drop <- function(key) {
  if (exists(key, envir = .shards, inherits = FALSE)) rm(list = key, envir = .shards)
  TRUE
}

# On a worker: `fun`, the name of one of this package's .shard_* functions,
# called as fun(share, a, each) on the share under `key` (NULL: no share),
# with the arguments `a` common to all workers and `each`, this worker's own.
# Errors of the computation come back as a value (the master restates them,
# so that the optimiser can step back from a bad trial point as without a
# cluster); a worker without its share says so.
.shard_run <- function(each, key, fun, a) {
  s <- NULL
  if (!is.null(key)) {
    s <- .shards[[key]]
    if (is.null(s)) {
      return(structure(list(message = "a worker holds no share of the data (was it restarted?)",
                            fatal = TRUE), class = "sparsevgp_shard_error"))
    }
  }
  if (!grepl("^\\.shard_", fun)) stop("not a worker function: ", fun)
  f <- get(fun, envir = environment(.shard_run), mode = "function")
  tryCatch(f(s, a, each), error = function(e) {
    structure(list(message = conditionMessage(e), fatal = FALSE), class = "sparsevgp_shard_error")
  })
}

# The error of a cluster that cannot compute the bound: never caught by the
# fitting loops (R/objective.R), since without a worker's share any value
# would be wrong. `shares`: whether the workers hold the data (a fit) or
# not (predictions).
.cluster_fail <- function(why, shares = TRUE) {
  advice <- if (shares) {
    "Each worker holds a share of the data, so the bound cannot be computed without all of them: start a new cluster (parallel::makeCluster()) and fit again"
  } else {
    "Start a new cluster (parallel::makeCluster()), or predict without one"
  }
  stop(structure(class = c("sparsevgp_cluster_error", "error", "condition"),
                 list(message = sprintf("the cluster failed: %s. %s", why, advice), call = NULL)))
}

# The workers of `cl` that a task of n rows uses (at most n), with this
# package loaded from the library this process loaded it from.
.cluster_open <- function(cl, n, name = "cluster", shares = TRUE) {
  if (!inherits(cl, "cluster")) {
    stop(sprintf("'%s' must be a cluster from parallel::makeCluster()", name), call. = FALSE)
  }
  nw <- min(length(cl), n)
  if (nw < 1L) stop(sprintf("'%s' has no workers", name), call. = FALSE)
  cl <- cl[seq_len(nw)]
  # a function of the global environment, so that sending it does not
  # require the package on the worker already
  lib <- dirname(getNamespaceInfo("sparsevgp", "path"))
  load <- function(lib) {
    .libPaths(c(lib, .libPaths()))
    loadNamespace("sparsevgp")
    TRUE
  }
  environment(load) <- globalenv()
  tryCatch(suspendInterrupts(parallel::clusterCall(cl, load, lib)), error = function(e) {
    .cluster_fail(sprintf("a worker did not answer or could not load sparsevgp (%s)",
                          conditionMessage(e)), shares)
  })
  cl
}

# n rows in `parts` contiguous parts of (nearly) equal size.
.cluster_parts <- function(n, parts) {
  unname(split(seq_len(n), rep(seq_len(parts), diff(c(0L, round(n * seq_len(parts) / parts))))))
}

# Send the fit's data to the workers of `cl`, one contiguous share each:
# `share(rows)` is what the model's workers need of those rows (a list;
# .share()), stored under `key` (a new one by default; a fit whose shares
# change between runs, sgpr with neighbours, sends the new ones under its
# key). Returns the handle the evaluations use: list(cl, key, n (rows per
# worker)).
.cluster_setup <- function(cl, fit, share = .share(fit), key = .shard_key()) {
  N <- nrow(fit$x)
  cl <- .cluster_open(cl, N)
  parts <- .cluster_parts(N, length(cl))
  tryCatch(suspendInterrupts(parallel::clusterApply(cl, lapply(parts, share), .shard_store,
                                                    key = key)),
           error = function(e) {
             .cluster_fail(sprintf("the data could not be sent to the workers (%s)",
                                   conditionMessage(e)))
           })
  list(cl = cl, key = key, n = lengths(parts))
}

# Remove the shares from the workers (ignoring workers that are gone).
.cluster_release <- function(h) {
  try(suspendInterrupts(parallel::clusterCall(h$cl, .shard_drop, h$key)), silent = TRUE)
  invisible()
}

# .shard_run(fun) on every worker of the handle h: the list of their
# results. `each` (a list, one element per worker) are per-worker arguments.
.cluster_call <- function(h, fun, a, each = NULL) {
  r <- tryCatch(suspendInterrupts(
                  if (is.null(each)) parallel::clusterCall(h$cl, .shard_run, NULL, h$key, fun, a)
                  else parallel::clusterApply(h$cl, each, .shard_run, h$key, fun, a)),
                error = function(e) .cluster_fail(sprintf("a worker did not answer (%s)",
                                                          conditionMessage(e)), !is.null(h$key)))
  bad <- vapply(r, inherits, TRUE, "sparsevgp_shard_error")
  if (any(bad)) {
    e <- r[[which(bad)[1L]]]
    if (isTRUE(e$fatal)) .cluster_fail(e$message)
    stop(e$message, call. = FALSE)
  }
  r
}

# The shared tail of a model constructor with a `cluster`: the data go to the
# workers once, the model is fitted, and the shares are dropped; the fit
# does not keep the cluster. With optimize = FALSE nothing is sent: the
# model is built in this process (objective(fit, cluster = cl) evaluates it
# on a cluster when asked).
.cluster_fit <- function(fit, optimize, cluster, share = NULL) {
  # the workers of shards() already hold the rows (R/shards_models.R):
  # they make their shares from them, and the caller releases them
  if (inherits(cluster, "sparsevgp_held")) {
    fit$cluster <- .shards_adopt(cluster, fit)
    fit <- .build_or_fit(fit, optimize)
    fit$cluster <- NULL
    return(fit)
  }
  if (is.null(cluster) || !isTRUE(optimize)) {
    if (!is.null(cluster)) .cluster_check(cluster)
    return(.build_or_fit(fit, optimize))
  }
  h <- .cluster_setup(cluster, fit, if (is.null(share)) .share(fit) else share)
  on.exit(.cluster_release(h), add = TRUE)
  fit$cluster <- h
  fit <- .build_or_fit(fit, optimize)
  fit$cluster <- NULL
  fit
}

# `cluster` is a cluster (without contacting it).
.cluster_check <- function(cl, name = "cluster") {
  if (!inherits(cl, "cluster")) {
    stop(sprintf("'%s' must be a cluster from parallel::makeCluster()", name), call. = FALSE)
  }
  if (length(cl) < 1L) stop(sprintf("'%s' has no workers", name), call. = FALSE)
  invisible(cl)
}

# What the workers of a fit hold of the rows `rows`: a function of the rows
# returning a list (stored on the worker as an environment).
.share <- function(fit) UseMethod(".share")

#' @export
.share.default <- function(fit) {
  stop(sprintf("%s() fits do not run on a cluster: 'cluster' is for sgpr(), pgpr(), osgpr() and svgp() (see ?scaling)",
               class(fit)[1L]), call. = FALSE)
}

# ---- the collapsed bounds (sgpr, pgpr, osgpr) --------------------------------

# A collapsed model's worker holds the fit restricted to its rows (data
# only: the rows of the inputs, targets, noise model and pgpr's labels and
# local parameters c, with the kernel and the control, whose memory budget
# its chunks use) and, once it has evaluated, its workspace.
.share_collapsed <- function(fit) {
  function(rows) list(fit = .share_fit(fit, rows))
}

#' @export
.share.sgpr <- function(fit) {
  # with neighbours, a run of the spatial order with its halo (R/vif.R)
  if (.has_neighbours(fit)) .share_vif(fit) else .share_collapsed(fit)
}
#' @export
.share.osgpr <- function(fit) .share_collapsed(fit)
#' @export
.share.pgpr <- function(fit) .share_collapsed(fit)

# The fit restricted to the rows `rows`, with only what the workers read.
.share_fit <- function(fit, rows) {
  s <- list(x = fit$x[rows, , drop = FALSE], kernel = fit$kernel, control = fit$control)
  for (f in c("y", "ypm", "c")) if (!is.null(fit[[f]])) s[[f]] <- fit[[f]][rows]
  nm <- fit$noise_model
  if (!is.null(nm)) {
    if (!is.null(nm$lambda)) nm$lambda <- nm$lambda[rows]
    if (!is.null(nm$Phi)) nm$Phi <- nm$Phi[rows, , drop = FALSE]
    nm$terms <- nm$xlevels <- NULL
    s$noise_model <- nm
  }
  structure(s, class = class(fit))
}

# On a worker: one pass of the collapsed bound over its rows at the
# parameters in `a` (R/stream.R), with the model's targets there and its
# own plan (one piece or chunks within the fit's budget). Pass 1 returns
# the statistics with the model's sums; pass 2 the contracted gradient
# pieces with the model's own gradient blocks (sums over the rows).
.shard_collapsed <- function(s, a, each = NULL) {
  fit <- s$fit
  if (is.null(s$work)) s$work <- .work_new()
  t <- .targets(fit, a$params)
  if (!is.null(a$lambda)) t$lambda <- a$lambda
  if (!is.null(a$add_lambda)) t$lambda <- t$lambda + a$add_lambda
  a$plan <- .collapsed_plan(fit, nrow(a$W))
  if (a$pass == 1L) .pass1(fit, a, t, s$work) else .pass2(fit, a, t, s$work)
}

# One pass of a collapsed bound on the cluster of fit$cluster: the workers'
# results added up (pass 1: the statistics, checked to cover every row).
.cluster_pass <- function(fit, a, pass) {
  h <- fit$cluster
  a$pass <- pass
  a$plan <- NULL
  r <- Reduce(.stream_add, .cluster_call(h, ".shard_collapsed", a))
  if (pass == 1L) {
    N <- sum(h$n)
    if (!isTRUE(all.equal(r$n, N)) || N != .nobs(fit)) {
      .cluster_fail(sprintf("the workers hold %g observations, not %.0f", r$n, .nobs(fit)))
    }
  }
  r
}

# On a worker: the closed-form update c_n = sqrt(mu_n^2 + s_n^2) of pgpr
# (.pgpr_update_c()) at its rows, from the posterior in `a`; returns the
# largest change and the largest new c.
.shard_pg_update <- function(s, a, each = NULL) {
  q <- .collapsed_predict(a, a$params$Z, s$fit$x, FALSE)
  cnew <- sqrt(q$mean^2 + pmax(q$var, 0))
  out <- c(change = max(abs(cnew - s$fit$c)), largest = max(cnew))
  s$fit$c <- cnew
  out
}

# On a worker: its c (each = NULL), or set them to `each`.
.shard_pg_c <- function(s, a, each = NULL) {
  if (!is.null(each)) s$fit$c <- each
  s$fit$c
}

# ---- the stage of one lengthscale (classifiers) --------------------------------

# The classifiers' first stage fits one lengthscale for all inputs in units
# of their sd as an isotropic kernel on the inputs divided by their sd
# (R/shared_lengthscale.R). On a cluster the workers
# divide their own rows (.shard_rescale()), so that the stage is the one
# fitted in one process, bit for bit; scale = NULL restores the inputs.
.cluster_rescale <- function(fit, scale) {
  if (!is.null(fit$cluster)) .cluster_call(fit$cluster, ".shard_rescale", list(scale = scale))
  invisible()
}

# On a worker: its inputs divided by a$scale, column by column, or (a$scale
# NULL) the inputs as they were sent. A collapsed model's share holds its
# rows in a fit (s$fit$x), an uncollapsed model's in s$x.
.shard_rescale <- function(s, a, each = NULL) {
  inside <- !is.null(s$fit)
  if (is.null(s$x_sent)) s$x_sent <- if (inside) s$fit$x else s$x
  x <- if (is.null(a$scale)) s$x_sent else sweep(s$x_sent, 2L, a$scale, "/")
  if (is.null(a$scale)) s$x_sent <- NULL
  if (inside) s$fit$x <- x else s$x <- x
  TRUE
}

# ---- row sums (the uncollapsed models) -----------------------------------------------

# What a worker of svgp holds: the rows of the inputs and targets
# (.shard_svgp_data(), R/uncollapsed.R).
#' @export
.share.svgp <- function(fit) .shard_svgp_data(fit)

# .shard_run(fun) on every worker, each on the rows of `batch` (indices
# into the whole data; NULL: all) that fall in its share: the list of their
# results (sums over those rows, which the caller adds up). A worker whose
# share holds none of a minibatch gets no rows.
.cluster_rows <- function(h, fun, a, batch = NULL) {
  each <- NULL
  if (!is.null(batch)) {
    ends <- cumsum(h$n)
    starts <- ends - h$n
    each <- lapply(seq_along(h$n), function(w) {
      as.integer(batch[batch > starts[w] & batch <= ends[w]] - starts[w])
    })
  }
  .cluster_call(h, fun, a, each)
}

# ---- prediction ---------------------------------------------------------------

# The latent predictive distribution at the rows of xnew (list(mean, var))
# on the workers of `cluster`, one contiguous block of rows each; the
# workers receive the fit's posterior without its training data (except
# gpr, whose predictive reads the training inputs).
.cluster_predict <- function(object, xnew, cluster) {
  cl <- .cluster_open(cluster, nrow(xnew), shares = FALSE)
  a <- unclass(object)[intersect(c("kernel", "params", "posterior", "whiten", "likelihood"),
                                 names(object))]
  if (inherits(object, "gpr")) a$x <- object$x
  # sgpr with neighbours conditions on the training data near each point
  if (!is.null(object$neighbours)) {
    a[c("x", "y", "noise_model")] <- unclass(object)[c("x", "y", "noise_model")]
    a$neighbours <- list(K = object$neighbours$K, predict = .vif_predict_K(object))
  }
  class(a) <- class(object)
  each <- lapply(.cluster_parts(nrow(xnew), length(cl)), function(r) xnew[r, , drop = FALSE])
  r <- .cluster_call(list(cl = cl, key = NULL), ".shard_predict", a, each)
  list(mean = unlist(lapply(r, `[[`, "mean"), use.names = FALSE),
       var = unlist(lapply(r, `[[`, "var"), use.names = FALSE))
}

# On a worker: the latent predictive at its rows of new data.
.shard_predict <- function(s, a, each) .predict_latent(a, each, FALSE)[c("mean", "var")]

# The latent predictive at xnew in this process, or split over the workers
# of `cluster` (the covariance, full_cov = TRUE, is computed here).
.predict_latent_on <- function(object, xnew, full_cov, cluster = NULL) {
  # a fit with neighbours on shards predicts on their workers (R/shards_vif.R)
  if (!is.null(object$shards) && .has_neighbours(object)) {
    return(.shards_vif_predict(object, xnew, full_cov, cluster))
  }
  if (is.null(cluster) || full_cov) return(.predict_latent(object, xnew, full_cov))
  .cluster_predict(object, xnew, cluster)
}
