# Sharding over the workers of an R `parallel` cluster (PSOCK, which spans
# machines, or FORK). The data of a fit are split once into one contiguous
# share per worker, which stays there while the model is fitted; each
# evaluation sends the parameters (and M x M factors) and receives sums over
# the worker's rows: M x M and M-vector statistics and gradient pieces. The
# master does the M x M algebra. One path serves every model:
#   .cluster_setup()    load the package on the workers, send the shares
#   .cluster_call()     run one function of this package on every worker's
#                       share (.shard_run()), restating a worker's error
#   .cluster_release()  drop the shares
#   .cluster_fit()      the shared tail of a model constructor on a cluster
# and the models supply what their workers compute:
#   sgpr, pgpr  .shard_collapsed(): the two passes of the collapsed bound
#               (R/stream.R); pgpr's per-point c live on the workers
#               (.shard_pg_update(), .shard_pg_c());
#   svgp        .shard_svgp(): the expected log-likelihood and its adjoints
#               on the worker's rows (or its rows of a minibatch);
#   predict()   .shard_predict(): the latent predictive at the worker's rows
#               of new data (no share: the fit's posterior is sent along).

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
  tryCatch(parallel::clusterCall(cl, load, lib), error = function(e) {
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
# `share(rows)` is what the model's workers need of those rows (a list),
# stored under `key` (a new one by default).
# Returns the handle the evaluations use: list(cl, key, n (rows per worker)).
.cluster_setup <- function(cl, fit, share = .shard_gaussian(fit), key = .shard_key()) {
  N <- nrow(fit$x)
  cl <- .cluster_open(cl, N)
  parts <- .cluster_parts(N, length(cl))
  tryCatch(parallel::clusterApply(cl, lapply(parts, share), .shard_store, key = key),
           error = function(e) {
             .cluster_fail(sprintf("the data could not be sent to the workers (%s)",
                                   conditionMessage(e)))
           })
  list(cl = cl, key = key, n = lengths(parts))
}

# Remove the shares from the workers (ignoring workers that are gone).
.cluster_release <- function(h) {
  try(parallel::clusterCall(h$cl, .shard_drop, h$key), silent = TRUE)
  invisible()
}

# .shard_run(fun) on every worker of the handle h: the list of their
# results. `each` (a list, one element per worker) are per-worker arguments.
.cluster_call <- function(h, fun, a, each = NULL) {
  r <- tryCatch(if (is.null(each)) parallel::clusterCall(h$cl, .shard_run, NULL, h$key, fun, a)
                else parallel::clusterApply(h$cl, each, .shard_run, h$key, fun, a),
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
# workers once, the model is fitted (or built), and the shares are dropped;
# the fit does not keep the cluster.
.cluster_fit <- function(fit, optimize, cluster, share) {
  if (is.null(cluster)) return(.build_or_fit(fit, optimize))
  h <- .cluster_setup(cluster, fit, share)
  on.exit(.cluster_release(h), add = TRUE)
  fit$cluster <- h
  fit <- .build_or_fit(fit, optimize)
  fit$cluster <- NULL
  fit
}

# ---- the collapsed bounds (sgpr, pgpr) --------------------------------------

# What a worker of sgpr holds: the rows of the inputs, targets and noise
# model, and the memory budget of its chunks.
.shard_gaussian <- function(fit) {
  memory <- fit$control$memory
  function(rows) {
    s <- .subsample_fit(fit, rows)
    list(model = "sgpr", x = s$x, y = s$y, noise_model = s$noise_model, memory = memory)
  }
}

# The per-point noise and targets of the collapsed bound on a worker's share
# at `params`: sgpr's noise and y - m, or pgpr's lambda = 1 / theta(c) and
# pseudo-targets y / (2 theta) - m with the sums of the terms that depend on
# c only (see .evaluate.pgpr()).
.shard_targets <- function(s, params) {
  if (identical(s$model, "pgpr")) {
    theta <- .ffi_pg_theta(s$c)
    return(list(lambda = 1 / theta, ytil = s$ypm / (2 * theta) - params$mean,
                pg = c(inv_theta = sum(1 / theta), log_theta = sum(log(theta)),
                       kl = sum(.ffi_pg_kl(s$c)))))
  }
  list(lambda = .noise_lambda(s, params), ytil = s$y - params$mean)
}

# On a worker: one pass of the collapsed bound over its share at the
# parameters in `a` (R/stream.R). Pass 1 returns the statistics (with pgpr's
# sums); pass 2 the contracted gradient pieces, with the per-point adjoints
# reduced here: sum(gytil) and sgpr's noise gradient.
.shard_collapsed <- function(s, a, each = NULL) {
  t <- .shard_targets(s, a$params)
  rows <- .stream_rows(s$memory, nrow(a$W))
  threads <- .stream_threads()
  if (a$pass == 1L) {
    st <- .stream_pass1(s$x, a$k, a$W, a$L, t$lambda, t$ytil, rows, threads)
    if (!is.null(t$pg)) st$pg <- t$pg
    return(st)
  }
  p <- .stream_pass2(s$x, a$k, a$W, a$L, a$v, t$lambda, t$ytil, rows, threads, a$want_W)
  list(gk = p$gk, gytil = sum(p$gytil),
       noise = if (!identical(s$model, "pgpr")) .noise_grad(s, a$params, p$glambda, t$lambda))
}

# The collapsed bound of an sgpr or pgpr fit on the cluster of fit$cluster:
# as .stream_bound(), with the per-point adjoints already reduced on the
# workers to the noise gradient (`noise_grad`) and sum(gytil) (`gytil`);
# pgpr's sums over the points are in `pg`.
.cluster_bound <- function(fit, params, grad) {
  h <- fit$cluster
  k <- .kernel_at(fit$kernel, params)
  W <- params$Z
  Kww <- .ffi_kern_matrix(k, W)
  ch <- .stream_chol(Kww, fit$control)
  a <- list(k = k, W = W, L = ch$L, params = params, pass = 1L)
  s <- Reduce(.stream_add, .cluster_call(h, ".shard_collapsed", a))
  N <- sum(h$n)
  if (!isTRUE(all.equal(s$n, N)) || N != nrow(fit$x)) {
    .cluster_fail(sprintf("the workers hold %g observations, not %d", s$n, nrow(fit$x)))
  }
  v <- .ffi_stream_value(ch$L, s, N, grad)
  b <- list(bound = v$bound, logdet = v$logdet, fit = v$fit, trace = v$trace,
            jitter = ch$jitter, L = ch$L, LB = v$LB, v = v$v, Kww = Kww, pg = s$pg)
  if (grad) {
    a$v <- v[c("E", "alpha", "vt")]
    a$want_W <- .any_free(fit, "Z")
    a$pass <- 2L
    r <- Reduce(.stream_add, .cluster_call(h, ".shard_collapsed", a))
    b$gk <- .stream_add(.stream_contract_uu(k, fit$x, W, v$Guu, ch$jitter, a$want_W), r$gk)
    b$noise_grad <- r$noise
    b$gytil <- r$gytil
  }
  b
}

# What a worker of pgpr holds: the rows of the inputs, the labels (+-1) and
# the local parameters c, which the workers update (.shard_pg_update()).
.shard_pg <- function(fit) {
  memory <- fit$control$memory
  function(rows) {
    list(model = "pgpr", x = fit$x[rows, , drop = FALSE], ypm = fit$ypm[rows], c = fit$c[rows],
         memory = memory)
  }
}

# On a worker: the closed-form update c_n = sqrt(mu_n^2 + s_n^2) of pgpr
# (.pgpr_update_c()) at its rows, from the posterior in `a`; returns the
# largest change and the largest new c.
.shard_pg_update <- function(s, a, each = NULL) {
  q <- .collapsed_predict(a, a$params$Z, s$x, FALSE)
  cnew <- sqrt(q$mean^2 + pmax(q$var, 0))
  out <- c(change = max(abs(cnew - s$c)), largest = max(cnew))
  s$c <- cnew
  out
}

# On a worker: its c (each = NULL), or set them to `each`.
.shard_pg_c <- function(s, a, each = NULL) {
  if (!is.null(each)) s$c <- each
  s$c
}

# ---- the uncollapsed SVGP -----------------------------------------------------

# What a worker of svgp holds: the rows of the inputs and targets, with the
# likelihood's settings.
.shard_svgp_data <- function(fit) {
  keep <- fit[c("likelihood", "quadrature", "whiten", "control", "kernel")]
  function(rows) {
    c(keep, list(x = fit$x[rows, , drop = FALSE], target = fit$target[rows]))
  }
}

# On a worker: src/svgp.c on its rows `each` (NULL: all) with the minibatch
# factor of the whole batch, and the contraction of the adjoints of its
# Kuf and diag Kff. The q(u) gradient and Guu it returns include the KL
# divergence's share (.svgp_cluster_call() takes it out).
.shard_svgp <- function(s, a, each = NULL) {
  r <- .svgp_call(s, a$params, a$grad, each, scale = a$scale)
  out <- list(ell = r$ell, n = length(r$mu))
  if (a$grad) {
    out[c("gq_mu", "gq_sqrt", "Guu", "gmean", "gnoise")] <-
      r[c("gq_mu", "gq_sqrt", "Guu", "gmean", "gnoise")]
    out$gk <- .contract(r$kernel, r$x, a$params$Z, Gww = NULL, Gwf = r$Guf, gdiag = r$gdiag,
                        Kwf = r$Kuf, want_W = a$want_W)
  }
  out
}

# The svgp evaluation on the cluster of fit$cluster, on the rows `batch` of
# the data (NULL: all; the expected log-likelihood is then scaled by
# N / |batch|, as in one process): each worker gets its rows of the batch.
# The master computes the KL divergence and its gradient (src/svgp.c on no
# rows) and the contraction of the adjoint of Kuu; the workers' q(u)
# gradients and Guu each include the KL share once, so that
# sum_w r_w - (w - 1) r_0 is the gradient of the whole ELBO. Returns what
# .evaluate.svgp() reads of .svgp_call(), with `gk_data` the workers'
# contraction of Kuf and diag Kff.
.svgp_cluster_call <- function(fit, params, grad, batch = NULL) {
  h <- fit$cluster
  N <- sum(h$n)
  scale <- 1
  each <- NULL
  if (!is.null(batch)) {
    scale <- N / length(batch)
    ends <- cumsum(h$n)
    starts <- ends - h$n
    each <- lapply(seq_along(h$n), function(w) {
      b <- batch[batch > starts[w] & batch <= ends[w]] - starts[w]
      as.integer(b)
    })
  }
  a <- list(params = params, grad = grad, scale = scale, want_W = .any_free(fit, "Z"))
  r <- .cluster_call(h, ".shard_svgp", a, each)
  r0 <- .svgp_call(fit, params, grad, integer(0), scale = scale)
  out <- r0[c("kl", "jitter", "L", "kernel", "Kuu")]
  out$ell <- sum(vapply(r, `[[`, 0, "ell"))
  out$elbo <- out$ell - r0$kl
  if (grad) {
    w <- length(r)
    sum_of <- function(nm) Reduce(`+`, lapply(r, `[[`, nm))
    for (nm in c("gq_mu", "gq_sqrt", "Guu")) out[[nm]] <- sum_of(nm) - (w - 1) * r0[[nm]]
    out$gmean <- sum_of("gmean")
    out$gnoise <- sum_of("gnoise")
    out$gk_data <- Reduce(.stream_add, lapply(r, `[[`, "gk"))
  }
  out
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
    a$neighbours <- list(K = object$neighbours$K)
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
  if (is.null(cluster) || full_cov) return(.predict_latent(object, xnew, full_cov))
  .cluster_predict(object, xnew, cluster)
}
