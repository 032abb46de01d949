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
#           (.contract(), over the chunk's points in threads) and added up.
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
#' The collapsed bounds of \code{\link{sgpr}()}, \code{\link{pgpr}()} and
#' \code{\link{osgpr}()} are sums over the observations of \eqn{M \times M}{M x M} statistics
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
#'   \item \strong{in threads}: within a chunk, the kernel matrix, the
#'     triangular solves, products, per-observation adjoints and their
#'     contraction into the gradient run on
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
#'   \item \strong{on a cluster}: \code{sgpr(..., cluster = cl)},
#'     \code{pgpr(..., cluster = cl)} and \code{svgp(..., cluster = cl)} with
#'     a cluster from \code{parallel::makeCluster()} (PSOCK, which can span
#'     machines, or FORK) split the data once into one share per worker,
#'     which stays there while the model is fitted; each evaluation sends the
#'     parameters and the \eqn{M \times M}{M x M} factors to the workers and
#'     receives their statistics and gradient pieces, and the master does the
#'     \eqn{M \times M}{M x M} algebra. For \code{pgpr()} the workers also
#'     hold the local parameters \eqn{c} of their rows and compute their
#'     closed-form updates; the master receives the \eqn{N} values of
#'     \eqn{c} once per selection pass of the double loop (for the
#'     \eqn{\theta}{theta}-weighted re-selection, which runs on the master,
#'     and for the fit). For \code{svgp()} the workers return their expected
#'     log-likelihood with its gradient and the master adds the KL
#'     divergence; with \code{batch_size} the master draws each minibatch as
#'     in one process (so \code{set.seed()} reproduces the fit) and sends each
#'     worker the rows of the minibatch in its share. Natural-gradient steps
#'     (\code{control$optimizer = "natgrad"}) do not run on a cluster. The
#'     workers load the package from the library the master loaded it from.
#'     A worker that fails or dies stops the fit with an error of class
#'     \code{sparsevgp_cluster_error}, never a wrong value; the cluster is
#'     not stopped by the fit, and the shares are removed from the workers
#'     when the fit ends. Results equal those of one process to rounding
#'     (sums are added in another order), so an optimiser can end at
#'     slightly different parameters along directions where the bound is
#'     flat.
#'   \item \strong{predictions on a cluster}: \code{predict(fit, newdata,
#'     cluster = cl)} and \code{fitted(fit, cluster = cl)} split the rows
#'     over the workers, which receive the fitted posterior (not the training
#'     data; for \code{\link{gpr}()} the training inputs too). The full
#'     covariance (\code{full_cov = TRUE}) is computed on the master.
#' }
#' \code{sgpr(neighbours = K)} (the Vecchia residual, see
#' \code{\link{sgpr}}) is a sum over observations too, of terms that read
#' each observation's \eqn{K} neighbours: its chunks are runs of
#' observations in a spatial order (the leaf order of a kd-tree) that hold
#' their neighbours besides, of \code{floor(memory / (8 (8 M + 2 (K+1)^2)))}
#' rows, and on a cluster each worker holds one such run with its
#' neighbours (its share changes when the neighbours are chosen anew). The
#' per-observation work of its likelihood runs in one thread.
#'
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
#' statistics are those above). The cluster serves \code{sgpr()},
#' \code{pgpr()}, \code{svgp()} and prediction, not \code{gpr()},
#' \code{osgpr()} or \code{\link{odvgp}()}.
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
#' p <- predict(fit, x[1:5, , drop = FALSE], cluster = cl)
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
                   want_W = want_W, threads = threads)
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

