# pgpr() and svgp() on data held by the workers of a cluster (shards(),
# R/shards.R). The formula is applied on the workers as for sgpr(), with a
# response that may be labels (a factor, logical, text, or numbers), and
# then:
#   - with at most .shards_subsample_rows() rows in all, this process
#     gathers them (no more than the subsample of larger data), chooses the
#     starts and inducing inputs and runs the model's schedule as one
#     process does on the rows concatenated in worker order, while every
#     evaluation on all rows runs on the workers' own rows
#     (.shards_adopt(): each worker turns its rows into its share of the
#     fit with the fit's coding of the labels): the fit of one process;
#   - with more rows, the model is fitted in this process on a random
#     subsample of that many rows (global row numbers drawn from R's
#     random numbers here, so set.seed() reproduces it; the workers send
#     those rows), which gives the starts, the selection and the
#     schedule; then on all rows on the workers what one process does on
#     all rows after its own subsample: pgpr the closed-form updates of
#     the local parameters c from the subsample's q(f) (as
#     .pgpr_train_large()), svgp q(u) at its conditional optimum
#     (.uc_train_large()), or for minibatch svgp Adam on all rows from the
#     subsample's starts (the minibatch row numbers drawn here, O(batch)).
# Several classes (svgp's softmax) up to that many rows are fitted in this
# process on the gathered rows (svgp(cluster =) takes no several classes);
# beyond, like two classes (the labels coded on the workers as the index
# of their class, .shards_code(); the softmax's Monte Carlo draws travel
# with the likelihood, so the workers' sums are those of one process).
# The fit keeps no rows and no per-row state: pgpr's c live on the workers
# while it is fitted, and objective(fit, cluster = sh) recomputes them from
# the fit's q(f) (one closed-form update).

# The formula interface of pgpr() and svgp() with data = shards().
.shards_model <- function(model, formula, sh, ..., .call = NULL, .extra = NULL) {
  args <- list(...)
  optimize <- .check_flag(if (is.null(args$optimize)) TRUE else args$optimize, "optimize")
  if (!is.null(.extra$noise)) {
    .shards_stop(sprintf("%s() takes no known noise variances ('noise' names columns of the workers' data)",
                         model))
  }
  # (subset = an expression in the workers' columns, .shards_extra())
  dz <- .shards_design(sh, formula, labels = TRUE, extra = .extra)
  dz$extra <- .extra
  h <- dz$h
  on.exit(.cluster_release(h), add = TRUE)
  # a failed worker: the fit on the subsample (more rows than it) to resume
  # from, kept without its rows
  cp <- new.env(parent = emptyenv())
  tryCatch(.shards_model_run(model, args, dz, h, optimize, cp, .call),
           sparsevgp_cluster_error = function(e) {
             if (is.null(cp$fit)) {
               e$message <- paste0(e$message, sprintf(". Once the cluster is restored, %s(..., cluster = new_cluster) with the same data = shards() loads the rows there with the same load function",
                                                      model))
             } else {
               e$fit <- cp$fit
               e$message <- paste0(e$message, ". The fit on the subsample is in this error's $fit: after restoring the cluster, update(e$fit, cluster = new_cluster) loads the rows there with the same load function and starts from it")
             }
             stop(e)
           })
}

.shards_model_run <- function(model, args, dz, h, optimize, cp, .call) {
  N <- dz$N
  n_sub <- .shards_subsample_rows()
  fun <- get(paste0(model, ".default"), mode = "function")
  held <- structure(h, class = "sparsevgp_held")
  if (N <= n_sub) {
    g <- .shards_gather(h, seq_len(N))
    colnames(g$x) <- dz$colnames
    # svgp's several classes (svgp(cluster =) refuses them) and
    # natural-gradient steps: the gathered rows are fitted here
    here <- identical(model, "svgp") &&
      (.shards_multiclass(g$y, args$likelihood) || identical(args$control$optimizer, "natgrad"))
    fit <- do.call(fun, c(list(g$x, g$y), args, list(cluster = if (!here) held)), quote = TRUE)
    xs <- .col_stats(g$x)
  } else {
    rows <- .shards_draw_rows(N, n_sub)
    g <- .shards_gather(h, rows)
    colnames(g$x) <- dz$colnames
    if (identical(model, "svgp") && identical(args$control$optimizer, "natgrad")) {
      stop("natural-gradient steps (control$optimizer = \"natgrad\") need the whole N x M cross-covariance and do not run on the workers of shards: use \"lbfgsb\" or \"adam\"",
           call. = FALSE)
    }
    fit <- .shards_large(model, fun, g, args, held, dz, optimize, cp, .call)
    xs <- dz$x
  }
  .shards_strip(fit, dz, xs, .call)
}

# Whether svgp() would fit several latent functions to the labels y.
.shards_multiclass <- function(y, likelihood) {
  if (is.null(likelihood)) likelihood <- .lik_choose(y, numeric = NULL)
  isTRUE(tryCatch(inherits(.as_likelihood(likelihood, 20L, NULL), "lik_multiclass"),
                  error = function(e) FALSE))
}

# More rows than the subsample: the model fitted here on the subsample `g`
# (the starts, the selection and the schedule), then on all N rows on the
# workers of `held` (see the top of this file); `dz` is the design of
# .shards_design(), and `cp` keeps the subsample's fit (to resume from).
.shards_large <- function(model, fun, g, args, held, dz, optimize, cp, .call) {
  N <- dz$N
  batch <- identical(model, "svgp") && !is.null(args$batch_size)
  sub_args <- args
  # minibatch svgp: the starts of the subsample, Adam on all rows
  if (batch) sub_args$optimize <- FALSE
  sub <- do.call(fun, c(list(g$x, g$y), sub_args), quote = TRUE)
  cp$fit <- .shards_strip(sub, dz, dz$x, .call)
  n <- nrow(g$x)
  fit <- sub
  # what the shared fitting code reads of the rows (.nobs(), .x_stats())
  fit$shards <- list(N = N, x = dz$x, y = dz$y)
  if (inherits(fit, "pgpr")) {
    # the loops' tolerance is per observation: 1e-4 nats each by default
    if (is.null(args$control$tol)) fit$control$tol <- fit$control$tol * N / n
    fit$c <- NULL
  }
  if (batch) fit$batch_size <- as.integer(min(args$batch_size, N))
  fit$cluster <- .shards_adopt(held, fit)
  fit <- .shards_drop_rows(fit, c("ypm", "target"))
  if (batch) {
    fit$classifier_start <- NULL
    fit <- .build_or_fit(fit, optimize)
    fit$optim$subsample <- n
    fit$cluster <- NULL
    return(fit)
  }
  if (inherits(fit, "pgpr")) {
    if (optimize) {
      # c at every row from the subsample's q(f), then updated on all rows
      .cluster_call(fit$cluster, ".shard_pg_update",
                    list(kernel = sub$kernel, params = sub$params, posterior = sub$posterior,
                         control = sub$control))
      fit <- .pgpr_update_c(fit, max(fit$control$ci_iters, 30L), .pgpr_tol(fit) / 10)
      fit$history <- data.frame(pass = 1L,
                                stage = "all data: c updated, kernel and Z of the subsample",
                                M = nrow(fit$params$Z), bound = fit$bound, inner_rounds = 0L,
                                evaluations = 0L)
      fit$subsample <- list(rows = n, history = sub$history)
    }
    # the smallest and largest c, for the report (.report.pgpr())
    fit$c <- range(unlist(.cluster_call(fit$cluster, ".shard_pg_range", list())))
  } else if (optimize) {
    fit$params <- .uc_q_optimum(fit, fit$params, tol = 1e-4 * N)$params
  }
  out <- .build_or_fit(fit, FALSE)
  if (optimize) {
    out$optim <- sub$optim
    out$optim$subsample <- n
    out$time <- sub$time + out$time
    if (inherits(out, "pgpr")) {
      out$converged <- sub$converged
    } else {
      out$optim$stages <- c(setNames(sub$optim$stages,
                                     paste0("subsample_", names(sub$optim$stages))),
                            all_data_q = out$bound)
    }
  }
  out$cluster <- NULL
  out
}

# The fit of a model on shards as the master keeps it: no rows, no per-row
# state, the formula's terms and levels, and the summary statistics.
.shards_strip <- function(fit, dz, xs, .call) {
  fit <- .shards_drop_rows(fit, c("ypm", "target", "c", "theta"))
  if (!is.null(fit$selection$perm)) fit$selection$perm <- NULL
  fit$cluster <- NULL
  fit$shards <- list(N = dz$N, n = dz$h$n, x = xs, y = dz$y, extra = dz$extra)
  fit$terms <- dz$terms
  fit$xlevels <- dz$xlevels
  fit$call <- .call
  fit
}

# The fit without its rows: x, y and the per-row fields named in `per_row`
# emptied (kept as zero-length vectors of their types).
.shards_drop_rows <- function(fit, per_row) {
  fit$x <- fit$x[0L, , drop = FALSE]
  fit$y <- fit$y[0L]
  for (f in per_row) if (!is.null(fit[[f]])) fit[[f]] <- fit[[f]][0L]
  fit
}

# The workers of the handle h (each holding its rows of the design,
# .shard_design()) turn them into their shares of `fit` (a fit of pgpr or
# svgp, with or without rows here): their labels coded as the fit codes
# them, pgpr's c at the fit's values (its rows in this process) or at
# control$c_init. Returns the handle for the evaluations.
.shards_adopt <- function(h, fit) {
  h <- unclass(h)
  template <- fit
  template[c("x", "y", "ypm", "target", "c", "cluster", "shards", ".work")] <- NULL
  template$selection$perm <- NULL
  each <- NULL
  if (inherits(fit, "pgpr") && length(fit$c) == sum(h$n)) {
    each <- unname(split(fit$c, rep(seq_along(h$n), h$n)))
  }
  .cluster_call(h, ".shard_adopt", list(template = template), each)
  h
}

# On a worker: its share of the fit in a$template from its rows (see
# .shards_adopt()).
.shard_adopt <- function(s, a, each = NULL) {
  local <- a$template
  x <- s$fit$x
  n <- nrow(x)
  coded <- .shards_code(local, s$fit$y)
  local$x <- x
  for (f in names(coded)) local[[f]] <- coded[[f]]
  # (its share of the memory budget of its host)
  local$control$memory <- .host_memory(local$control$memory, s$fit$per_host)
  if (inherits(local, "pgpr")) local$c <- if (is.null(each)) rep(local$control$c_init, n) else each
  share <- .share(local)(seq_len(n))
  rm(list = ls(s, all.names = TRUE), envir = s)
  list2env(share, envir = s)
  TRUE
}

# The response of a worker's rows in the coding of `fit`: pgpr's labels
# (y in 0/1, ypm in -1/+1), svgp's targets (labels as ypm for two classes,
# numbers as they are).
.shards_code <- function(fit, y) {
  lab <- fit$labels
  if (is.null(lab)) {
    if (!is.numeric(y)) stop("the response must be numeric for this likelihood", call. = FALSE)
    return(list(y = y, target = y))
  }
  # several classes: the index of each label among the fit's classes
  if (identical(lab$type, "multiclass")) {
    k <- match(as.character(y), lab$levels)
    if (anyNA(k)) {
      stop(sprintf("a worker holds labels other than the classes of the fit (%s)",
                   paste(lab$levels, collapse = ", ")), call. = FALSE)
    }
    return(list(y = k, target = as.double(k)))
  }
  v <- if (identical(lab$type, "numeric")) as.character(as.numeric(y)) else as.character(y)
  known <- if (identical(lab$type, "numeric")) as.character(lab$values) else lab$levels
  if (anyNA(y) || !all(v %in% known)) {
    stop(sprintf("a worker holds labels other than the two classes of the fit (%s)",
                 paste(known, collapse = ", ")), call. = FALSE)
  }
  y01 <- as.numeric(if (identical(lab$type, "numeric")) as.numeric(y) == 1 else v == lab$levels[2L])
  ypm <- 2 * y01 - 1
  if (inherits(fit, "pgpr")) list(y = y01, ypm = ypm) else list(y = y01, target = ypm)
}

# objective(fit, cluster = sh) of a pgpr or svgp fit: the workers of the
# handle h make their shares of the fit (.shards_adopt()); pgpr's local
# parameters c, which the fit does not keep, are the closed-form update
# c_n = sqrt(mu_n^2 + s_n^2) under the fit's q(f) (.pgpr_update_c()).
.shards_attach_model <- function(fit, h) {
  h <- tryCatch(.shards_adopt(structure(h, class = "sparsevgp_held"), fit), error = function(e) {
    .cluster_release(h)
    stop(e)
  })
  if (inherits(fit, "pgpr") && length(fit$c) != sum(h$n) && !is.null(fit$posterior)) {
    .cluster_call(h, ".shard_pg_update",
                  list(kernel = fit$kernel, params = fit$params, posterior = fit$posterior,
                       control = fit$control))
  }
  h
}

# On a worker: the range of its local parameters c (none without rows).
.shard_pg_range <- function(s, a, each = NULL) {
  if (length(s$fit$c)) range(s$fit$c) else numeric(0)
}
