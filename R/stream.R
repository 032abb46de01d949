# The collapsed Gaussian bound at scale: over row chunks of the data, so
# that no N x M matrix is held (memory O(M^2 + chunk M)), in OpenMP threads
# within a chunk, and sharded over the workers of an R `parallel` cluster
# that keep their share of the data between evaluations. The bound is a sum
# over points of M x M and M-vector statistics followed by M x M algebra
# (src/bound_stream.c):
#   pass 1  each chunk: Kuf, A = L^-1 Kuf Lambda^-1/2, and the sums A A',
#           A Lambda^-1/2 ytil, sum ytil^2 / lambda, sum k_nn / lambda,
#           the residual variances and sum log lambda;
#   value   B = I + A A', the bound and the M x M adjoint pieces;
#   pass 2  each chunk again: its columns of dF/dKuf and the per-point
#           adjoints, contracted at once with the kernel derivatives
#           (.contract()) and added up.
# Pass 2 recomputes Kuf and A (one more kernel evaluation and triangular
# solve per chunk) instead of holding them.

# ---- settings -------------------------------------------------------------

# The default budget for the N x M working memory of one evaluation: below
# it (N M <= 8.4e6 doubles per matrix, four matrices) a bound is computed
# in one piece as before.
.stream_default_memory <- 256 * 2^20

# control$memory: a number of bytes or a string such as "512MB" or "2GB"
# (powers of 1024). Returns bytes. `name` is the argument in messages.
.check_memory <- function(memory, name = "control$memory") {
  if (is.null(memory)) return(.stream_default_memory)
  units <- c(B = 1, KB = 2^10, MB = 2^20, GB = 2^30, TB = 2^40)
  bytes <- NA_real_
  if (is.numeric(memory) && length(memory) == 1L) {
    bytes <- memory
  } else if (is.character(memory) && length(memory) == 1L) {
    up <- toupper(memory)
    m <- regmatches(up, regexec("^\\s*([0-9.E+]+)\\s*([KMGT]?B)?\\s*$", up))[[1L]]
    if (length(m)) {
      bytes <- suppressWarnings(as.numeric(m[2L])) * units[[if (nzchar(m[3L])) m[3L] else "B"]]
    }
  }
  if (!isTRUE(is.finite(bytes) && bytes > 0)) {
    stop(sprintf("'%s' must be a positive number of bytes or a string such as \"512MB\" or \"2GB\"",
                 name), call. = FALSE)
  }
  bytes
}

# Rows per chunk for M inducing inputs within `memory` bytes: a chunk holds
# about four chunk x M double matrices at once (Kuf, A, dF/dKuf and the
# contraction's workspace).
.stream_rows <- function(memory, M) {
  max(1, floor(.check_memory(memory) / (32 * max(1, M))))
}

#' Threads and memory of the collapsed bounds
#'
#' The collapsed bounds of \code{\link{sgpr}()} and \code{\link{pgpr}()} are
#' sums over the observations of \eqn{M \times M}{M x M} statistics
#' (Titsias 2009), and are computed accordingly:
#' \itemize{
#'   \item \strong{in chunks of rows}: with more than
#'     \code{control$memory} bytes for the \eqn{N \times M}{N x M} work of
#'     one evaluation (four matrices of that size; by default 256 MB, that
#'     is up to \eqn{N M = 8.4 \times 10^6}{N M = 8.4e6}), the bound and its
#'     gradient are accumulated over chunks of
#'     \code{floor(memory / (32 M))} rows, so that memory grows as
#'     \eqn{O(M^2 + \mathrm{chunk} \cdot M)}{O(M^2 + chunk M)} plus the data.
#'     Each evaluation then computes the kernel matrix of a chunk twice (once
#'     for the bound and once for its gradient), about a third more
#'     arithmetic than in one piece. The results agree with the unchunked
#'     computation to rounding.
#'   \item \strong{in threads}: within a chunk, the triangular solves,
#'     products and per-observation adjoints run on
#'     \code{getOption("sparsevgp.threads")} OpenMP threads (when the package
#'     was built with OpenMP). The default is half the processors OpenMP
#'     reports (so 1 on a two-core machine), within \code{OMP_THREAD_LIMIT}
#'     and \code{OMP_NUM_THREADS}. Each thread calls the BLAS on its own
#'     columns: with a multi-threaded BLAS such as OpenBLAS, set its threads
#'     to 1 (\code{OPENBLAS_NUM_THREADS=1}) when using more than one here,
#'     or the two will oversubscribe the processors. With more than one
#'     thread the bound is computed in chunks even for small data; the sums
#'     are then added in a different order, which changes results at the
#'     level of rounding only.
#'   \item \strong{on a cluster}: \code{sgpr(..., cluster = cl)} with a
#'     cluster from \code{parallel::makeCluster()} (PSOCK, which can span
#'     machines, or FORK) splits the data once into one share per worker,
#'     which stays there while the model is fitted; each evaluation sends the
#'     parameters and the \eqn{M \times M}{M x M} factors to the workers and
#'     receives their statistics and gradient pieces, and the master does the
#'     \eqn{M \times M}{M x M} algebra. The workers load the package from the
#'     library the master loaded it from. A worker that fails or dies stops
#'     the fit with an error; the cluster is not stopped by the fit, and the
#'     shares are removed from the workers when the fit ends.
#' }
#' The prediction methods and \code{fitted()} work in blocks of rows in any
#' case. Greedy selection of inducing inputs
#' (\code{\link{select_inducing}()}, the default of \code{sgpr()} and
#' \code{pgpr()}) holds an \eqn{N \times M}{N x M} factor; when that (with
#' its workspace) exceeds \code{control$memory}, it runs on a random
#' subsample of rows that fits, at least \eqn{10 M} of them: the inducing
#' inputs are then chosen from the subsample only, and a \code{threshold}
#' on the trace (a sum over the rows) is scaled by the subsample's share
#' \eqn{n / N}{n / N} (the models without \code{control$memory} use the
#' default budget). Give the inducing inputs to choose them otherwise.
#' \code{\link{osgpr}()} computes its bounds in chunks and threads in the
#' same way (with the block Cholesky factor of its two inducing sets the
#' statistics are those above); the cluster serves \code{sgpr()} only.
#'
#' @name scaling
#' @aliases sparsevgp.threads
#' @references Titsias, M. (2009). Variational learning of inducing
#'   variables in sparse Gaussian processes. AISTATS.
#' @examples
#' set.seed(1)
#' x <- matrix(runif(2000, -3, 3))
#' y <- sin(2 * x[, 1]) + rnorm(2000, sd = 0.2)
#' # one piece, and chunks of 100 rows (memory = 32 * 100 * M bytes)
#' a <- sgpr(x, y, inducing = 20, optimize = FALSE)
#' b <- sgpr(x, y, inducing = a$params$Z, optimize = FALSE,
#'           kernel = a$kernel, noise = a$params$noise,
#'           control = list(memory = 32 * 100 * 20))
#' c(a$bound, b$bound)
#' \donttest{
#' # two workers, each holding half of the data
#' cl <- parallel::makeCluster(2)
#' fit <- sgpr(x, y, inducing = 20, cluster = cl)
#' parallel::stopCluster(cl)
#' fit
#' }
NULL

# The threads of one chunk: the option sparsevgp.threads, by default half
# of what OpenMP reports (at least 1).
.stream_threads <- function() {
  n <- getOption("sparsevgp.threads")
  if (is.null(n)) return(max(1L, .ffi_threads(0L) %/% 2L))
  if (!is.numeric(n) || length(n) != 1L || !is.finite(n) || n < 1 || n != round(n)) {
    stop("the option 'sparsevgp.threads' must be one whole number >= 1", call. = FALSE)
  }
  as.integer(n)
}

# Whether a collapsed bound on M inducing inputs over N points goes through
# the chunked path: more than one chunk, or more than one thread.
.stream_wanted <- function(control, M, N) {
  .stream_rows(control$memory, M) < N || .stream_threads() > 1L
}

# ---- one process ----------------------------------------------------------

# L = chol(Kww + jitter) as in the unchunked bound (its messages).
.stream_chol <- function(Kww, control) {
  tryCatch(.ffi_chol(Kww, control$jitter, control$jitter_cap), error = function(e) {
    msg <- conditionMessage(e)
    if (grepl("not positive definite", msg)) {
      msg <- sprintf("Kuu is not positive definite even with jitter %g times its mean diagonal: are inducing inputs duplicated?",
                     control$jitter_cap)
    }
    stop(msg, call. = FALSE)
  })
}

# Pass 1 over the rows of x in chunks of `rows`: the summed statistics.
.stream_pass1 <- function(x, k, W, L, lambda, ytil, rows, threads) {
  s <- NULL
  for (b in .row_blocks(nrow(x), rows)) {
    xb <- x[b, , drop = FALSE]
    sb <- .ffi_stream_stats(L, .stream_kern(k, W, xb, threads), .ffi_kern_diag(k, xb), lambda[b],
                            ytil[b], threads)
    s <- if (is.null(s)) sb else .stream_add(s, sb)
  }
  s
}

# K(W, x) of a chunk: in threads when there are several.
.stream_kern <- function(k, W, x, threads) {
  if (threads > 1L) .ffi_stream_kern(k, W, x, threads) else .ffi_kern_matrix(k, W, x)
}

# The sum of two lists of statistics or gradient pieces (same structure).
.stream_add <- function(a, b) {
  if (is.list(a)) return(stats::setNames(.mapply(.stream_add, list(a, b), NULL), names(a)))
  a + b
}

# Pass 2 over the rows of x: the contraction of each chunk's dF/dKuf and
# dF/dkdiag (list(variance, lengthscale, W)), and the per-point adjoints
# glambda, gytil.
.stream_pass2 <- function(x, k, W, L, v, lambda, ytil, rows, threads, want_W) {
  N <- nrow(x)
  glambda <- gytil <- numeric(N)
  gk <- NULL
  for (b in .row_blocks(N, rows)) {
    xb <- x[b, , drop = FALSE]
    Kb <- .stream_kern(k, W, xb, threads)
    a <- .ffi_stream_adjoints(L, v, Kb, .ffi_kern_diag(k, xb), lambda[b], ytil[b], threads)
    g <- .contract(k, xb, W, Gww = NULL, Gwf = a$Guf, gdiag = a$gdiag, Kwf = Kb,
                   want_W = want_W)
    gk <- if (is.null(gk)) g else .stream_add(gk, g)
    glambda[b] <- a$glambda
    gytil[b] <- a$gytil
  }
  list(gk = gk, glambda = glambda, gytil = gytil)
}

# The contraction of the adjoint of K(W, W) with its jitter (once per
# evaluation, on the master).
.stream_contract_uu <- function(k, x, W, Guu, jitter, want_W) {
  .contract(k, x, W, Gww = Guu, Gwf = NULL, gdiag = NULL, jitter = jitter, want_W = want_W)
}

# The collapsed Gaussian bound over row chunks: the result of
# .collapsed_bound() without the N x M matrix Kwf (NULL) or kdiag.
.stream_bound <- function(fit, params, W, lambda, ytil, grad) {
  k <- .kernel_at(fit$kernel, params)
  x <- fit$x
  ctl <- fit$control
  rows <- .stream_rows(ctl$memory, nrow(W))
  threads <- .stream_threads()
  Kww <- .ffi_kern_matrix(k, W)
  ch <- .stream_chol(Kww, ctl)
  s <- .stream_pass1(x, k, W, ch$L, lambda, ytil, rows, threads)
  v <- .ffi_stream_value(ch$L, s, nrow(x), grad)
  b <- list(bound = v$bound, logdet = v$logdet, fit = v$fit, trace = v$trace,
            jitter = ch$jitter, L = ch$L, LB = v$LB, v = v$v, Kww = Kww)
  if (grad) {
    want_W <- .any_free(fit, c("Z", "O"))
    p <- .stream_pass2(x, k, W, ch$L, v, lambda, ytil, rows, threads, want_W)
    b$Guu <- v$Guu
    b$gk <- .stream_add(.stream_contract_uu(k, x, W, v$Guu, ch$jitter, want_W), p$gk)
    b$glambda <- p$glambda
    b$gytil <- p$gytil
  }
  b
}

# ---- a cluster --------------------------------------------------------------

# The shares of the data held by this process as a worker, by key.
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
  assign(key, share, envir = .shards)
  TRUE
}

.shard_drop <- function(key) {
  if (exists(key, envir = .shards, inherits = FALSE)) rm(list = key, envir = .shards)
  TRUE
}

# On a worker: one pass over its share at the parameters in `a`. Errors of
# the computation come back as a value (the master restates them, so that
# the optimiser can step back from a bad trial point as without a cluster);
# a worker without its share says so.
.shard_pass <- function(key, pass, a) {
  s <- .shards[[key]]
  if (is.null(s)) {
    return(structure(list(message = "a worker holds no share of the data (was it restarted?)",
                          fatal = TRUE), class = "sparsevgp_shard_error"))
  }
  tryCatch({
    lambda <- .noise_lambda(s, a$params)
    ytil <- s$y - a$params$mean
    rows <- .stream_rows(s$memory, nrow(a$W))
    threads <- .stream_threads()
    if (pass == 1L) {
      .stream_pass1(s$x, a$k, a$W, a$L, lambda, ytil, rows, threads)
    } else {
      p <- .stream_pass2(s$x, a$k, a$W, a$L, a$v, lambda, ytil, rows, threads, a$want_W)
      list(gk = p$gk, noise = .noise_grad(s, a$params, p$glambda, lambda), gytil = sum(p$gytil))
    }
  }, error = function(e) {
    structure(list(message = conditionMessage(e), fatal = FALSE), class = "sparsevgp_shard_error")
  })
}

# The error of a cluster that cannot compute the bound: never caught by the
# fitting loop (R/objective.R), since without a worker's share any value
# would be wrong.
.cluster_fail <- function(why) {
  stop(structure(class = c("sparsevgp_cluster_error", "error", "condition"),
                 list(message = sprintf("the cluster failed: %s. Each worker holds a share of the data, so the bound cannot be computed without all of them: start a new cluster (parallel::makeCluster()) and fit again",
                                        why), call = NULL)))
}

# Send the fit's data to the workers of `cl`, one contiguous share each;
# returns the handle the evaluations use: list(cl, key, n).
.cluster_setup <- function(cl, fit) {
  if (!inherits(cl, "cluster")) {
    stop("'cluster' must be a cluster from parallel::makeCluster()", call. = FALSE)
  }
  N <- nrow(fit$x)
  nw <- min(length(cl), N)
  if (nw < 1L) stop("'cluster' has no workers", call. = FALSE)
  cl <- cl[seq_len(nw)]
  # the workers load the package from the library this process loaded it
  # from (a function of the global environment, so that sending it does not
  # require the package on the worker already)
  lib <- dirname(getNamespaceInfo("sparsevgp", "path"))
  load <- function(lib) {
    .libPaths(c(lib, .libPaths()))
    loadNamespace("sparsevgp")
    TRUE
  }
  environment(load) <- globalenv()
  tryCatch(parallel::clusterCall(cl, load, lib), error = function(e) {
    .cluster_fail(sprintf("the workers could not load sparsevgp (%s)", conditionMessage(e)))
  })
  key <- .shard_key()
  parts <- split(seq_len(N), rep(seq_len(nw), diff(c(0L, round(N * seq_len(nw) / nw)))))
  memory <- fit$control$memory
  shares <- lapply(parts, function(rows) {
    s <- .subsample_fit(fit, rows)
    list(x = s$x, y = s$y, noise_model = s$noise_model, memory = memory)
  })
  tryCatch(parallel::clusterApply(cl, unname(shares), .shard_store, key = key), error = function(e) {
    .cluster_fail(sprintf("the data could not be sent to the workers (%s)", conditionMessage(e)))
  })
  list(cl = cl, key = key, n = lengths(parts, use.names = FALSE))
}

# Remove the shares from the workers (ignoring workers that are gone).
.cluster_release <- function(h) {
  try(parallel::clusterCall(h$cl, .shard_drop, h$key), silent = TRUE)
  invisible()
}

# One pass on every worker: the list of their results.
.cluster_pass <- function(h, pass, a) {
  r <- tryCatch(parallel::clusterCall(h$cl, .shard_pass, h$key, pass, a),
                error = function(e) .cluster_fail(sprintf("a worker did not answer (%s)",
                                                          conditionMessage(e))))
  bad <- vapply(r, inherits, TRUE, "sparsevgp_shard_error")
  if (any(bad)) {
    e <- r[[which(bad)[1L]]]
    if (isTRUE(e$fatal)) .cluster_fail(e$message)
    stop(e$message, call. = FALSE)
  }
  r
}

# The collapsed bound of an sgpr fit on the cluster of fit$cluster: as
# .stream_bound(), with the per-point adjoints already reduced on the
# workers to the noise gradient (`noise_grad`) and sum(gytil) (`gytil`).
.cluster_bound <- function(fit, params, grad) {
  h <- fit$cluster
  k <- .kernel_at(fit$kernel, params)
  W <- params$Z
  Kww <- .ffi_kern_matrix(k, W)
  ch <- .stream_chol(Kww, fit$control)
  a <- list(k = k, W = W, L = ch$L, params = params)
  s <- Reduce(.stream_add, .cluster_pass(h, 1L, a))
  N <- sum(h$n)
  if (!isTRUE(all.equal(s$n, N)) || N != nrow(fit$x)) {
    .cluster_fail(sprintf("the workers hold %g observations, not %d", s$n, nrow(fit$x)))
  }
  v <- .ffi_stream_value(ch$L, s, N, grad)
  b <- list(bound = v$bound, logdet = v$logdet, fit = v$fit, trace = v$trace,
            jitter = ch$jitter, L = ch$L, LB = v$LB, v = v$v, Kww = Kww)
  if (grad) {
    a$v <- v[c("E", "alpha", "vt")]
    a$want_W <- .any_free(fit, "Z")
    r <- Reduce(.stream_add, .cluster_pass(h, 2L, a))
    b$gk <- .stream_add(.stream_contract_uu(k, fit$x, W, v$Guu, ch$jitter, a$want_W), r$gk)
    b$noise_grad <- r$noise
    b$gytil <- r$gytil
  }
  b
}
