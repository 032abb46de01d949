# Inducing point selection: greedy conditional variance (plain, Burt et al.
# 2020, and weighted, Passerello 2022, sections 3.3.2 and 4.3.2), k-means and
# uniform random subsets, the choice of M from a KL target (Passerello 2022,
# section 3.2.2, eq. 3.7), and the re-initialisation loop that alternates
# selection and hyperparameter fitting (Passerello 2022, sections 4.3.2, 5.4;
# reinit_Z in robustgp, the public code of Burt et al. 2020). The
# factorisation is in src/select.c.

.select_methods <- c("greedy", "kmeans", "random")

# ---- what the models accept as `inducing` -----------------------------------------

# The method names every model accepts for `inducing`: "greedy" (greedy
# conditional variance, weighted by the model's weights when it has them:
# 1 / lambda for regression with unequal noise variances, theta for
# Polya-Gamma classification), "hgv" (the same, named after Passerello's
# heteroscedastic greedy variance), "gv" (greedy variance without weights,
# Burt et al. 2020), "kmeans" and "random". "uniform" is the former name of
# "random" in pgpr().
.inducing_methods <- c("greedy", "hgv", "gv", "kmeans", "random")

# The selection methods that are greedy conditional variance (plain or
# heteroscedastic): they re-select in staged fits (R/training.R, R/pgpr.R).
.greedy_methods <- c("greedy", "hgv", "gv")

# What `inducing`, `M` and `threshold` ask for: list(method, M, threshold, Z)
# with method "given" and Z for a matrix or a select_inducing() result, or a
# selection method with Z = NULL. A number for `inducing` is M for the
# default method. M is NA when a threshold alone decides it.
.inducing_spec <- function(inducing, M, threshold, x, name = "inducing",
                           default = "greedy", auto_kl = NULL) {
  N <- nrow(x)
  # automatic M (sgpr): greedy selection until the expected KL divergence
  # from the exact posterior is below auto_kl nats per observation
  if (!is.null(auto_kl) && is.null(M) && is.null(threshold) &&
      (is.null(inducing) || identical(inducing, "greedy"))) {
    return(list(method = "greedy", M = .auto_max_inducing(N), threshold = auto_kl * N,
                Z = NULL, auto = TRUE))
  }
  if (!is.null(threshold)) {
    if (!is.numeric(threshold) || length(threshold) != 1L || !is.finite(threshold) ||
        threshold < 0) {
      stop("'threshold' must be one number >= 0", call. = FALSE)
    }
    threshold <- as.double(threshold)
  }
  if (is.null(inducing)) inducing <- default
  if (is.numeric(inducing) && is.null(dim(inducing)) && length(inducing) == 1L) {
    if (!is.null(M)) {
      stop(sprintf("give the number of inducing inputs once: '%s' or 'M'", name), call. = FALSE)
    }
    M <- .check_M(inducing, N, NA_integer_, name)
    inducing <- default
  }
  if (is.character(inducing)) {
    if (identical(inducing, "uniform")) {
      .Deprecated(msg = sprintf("%s = \"uniform\" is now called \"random\"", name))
      inducing <- "random"
    }
    if (length(inducing) != 1L || !(inducing %in% .inducing_methods)) {
      stop(sprintf("'%s' must be one of %s, a number M, a matrix of inducing inputs or a select_inducing() result",
                   name, paste0("\"", .inducing_methods, "\"", collapse = ", ")), call. = FALSE)
    }
    if (!is.null(threshold) && !(inducing %in% c("greedy", "hgv", "gv"))) {
      stop("'threshold' applies to the greedy selections (\"greedy\", \"hgv\", \"gv\") only",
           call. = FALSE)
    }
    # with a threshold, M is only a cap (none by default)
    M <- .check_M(M, N, if (is.null(threshold)) min(N, 100L) else NA_integer_)
    return(list(method = inducing, M = M, threshold = threshold, Z = NULL))
  }
  if (!is.null(threshold)) {
    stop("'threshold' applies to the greedy selections (\"greedy\", \"hgv\", \"gv\") only",
         call. = FALSE)
  }
  if (!is.null(M)) {
    stop(sprintf("'M' applies to the selection methods; the given inducing inputs fix M (%s)",
                 name), call. = FALSE)
  }
  Z <- .given_inducing(inducing, x, name)
  list(method = "given", M = nrow(Z), threshold = NULL, Z = Z)
}

# The most inducing inputs an automatic choice takes: all N for small data,
# then as many as keep N M^2 (the cost of one evaluation) near 3e8 (about
# 200 at N = 8000, where test accuracy on kin8nm and power still improves
# with M), and at least 100.
.auto_max_inducing <- function(N) {
  as.integer(min(N, max(100, floor(sqrt(3e8 / N)))))
}

# Inducing inputs given as a matrix (or data frame, or a vector for one
# input column) or a select_inducing() result, checked against the inputs.
.given_inducing <- function(inducing, x, name = "inducing") {
  N <- nrow(x)
  D <- ncol(x)
  if (inherits(inducing, "sparsevgp_inducing")) inducing <- inducing$Z
  if (is.data.frame(inducing)) inducing <- as.matrix(inducing)
  if (is.null(dim(inducing)) && D == 1L && is.numeric(inducing)) {
    inducing <- matrix(inducing, ncol = 1L)
  }
  if (!is.matrix(inducing) || !is.numeric(inducing)) {
    stop(sprintf("'%s' must be one of %s, a number M, a matrix of inducing inputs or a select_inducing() result",
                 name, paste0("\"", .inducing_methods, "\"", collapse = ", ")), call. = FALSE)
  }
  if (ncol(inducing) != D) {
    stop(sprintf("'%s' must have %d columns like the inputs, not %d", name, D,
                 ncol(inducing)), call. = FALSE)
  }
  if (any(!is.finite(inducing))) {
    stop(sprintf("'%s' contains NA, NaN or infinite values", name), call. = FALSE)
  }
  if (nrow(inducing) < 1L) stop(sprintf("'%s' has no rows", name), call. = FALSE)
  if (nrow(inducing) > N) {
    stop(sprintf("'%s' has M = %d rows but there are only N = %d observations",
                 name, nrow(inducing), N), call. = FALSE)
  }
  if (anyDuplicated(inducing)) {
    stop(sprintf("'%s' contains duplicated rows (row %d): inducing inputs must be distinct",
                 name, anyDuplicated(inducing)), call. = FALSE)
  }
  Z <- inducing
  storage.mode(Z) <- "double"
  dimnames(Z) <- list(NULL, colnames(x))
  Z
}

# The inducing inputs of a spec from .inducing_spec(): the given ones, or a
# selection from the training inputs x with the kernel at its current
# parameters. `weights` are the model's greedy weights (NULL: none; "gv"
# never uses them), `perm` the greedy tie-breaking order (NULL: a fresh
# one). `warn_short`: warn when greedy selection returns fewer than M.
# `memory`: the model's control$memory, beyond which greedy selection runs
# on a subsample (NULL: the default budget).
.select_by_spec <- function(spec, x, kernel, weights = NULL, perm = NULL, warn_short = FALSE,
                            name = "inducing", memory = NULL, hook = "selection") {
  if (spec$method == "given") return(spec$Z)
  # Ctrl-C here, or earlier in the fit, gives a quick choice instead
  # (R/interrupt.R): callers that have inducing inputs already keep them
  if (.interrupt_pending()) return(.quick_inducing(spec, x))
  .stage_mark(hook, x)
  Z <- .interruptible({
    .interrupt_point(hook)
    .select_by_spec_run(spec, x, kernel, weights, perm, warn_short, name, memory)
  }, "the selection of inducing inputs", function() .quick_inducing(spec, x))
  # its factor goes before the next stage, which may work on a subsample
  # (and so not collect by itself, R/interrupt.R)
  if (length(x) >= .stage_gc_cells) .collect()
  Z
}

# M distinct training inputs drawn at random from a subsample of 10 M rows
# (at most M = 100 for an automatic M): the inducing inputs of a fit
# whose selection was interrupted.
.quick_inducing <- function(spec, x) {
  N <- nrow(x)
  M <- if (is.na(spec$M)) min(N, 100L) else min(N, spec$M)
  cand <- x[sort(sample.int(N, min(N, 10L * M))), , drop = FALSE]
  cand <- cand[!duplicated(cand), , drop = FALSE]
  Z <- cand[seq_len(min(M, nrow(cand))), , drop = FALSE]
  dimnames(Z) <- list(NULL, colnames(x))
  Z
}

.select_by_spec_run <- function(spec, x, kernel, weights, perm, warn_short, name, memory) {
  M <- if (is.na(spec$M)) NULL else spec$M
  threshold <- spec$threshold
  if (length(weights) == 1L) {
    # one weight for all points (one noise variance): the unweighted
    # selection, whose trace is the weighted one divided by that weight
    if (!is.null(threshold)) threshold <- threshold / weights
    weights <- NULL
  }
  sel <- switch(spec$method,
    greedy = , hgv = select_inducing(x, kernel, M = M, method = "greedy", weights = weights,
                                     threshold = threshold, memory = memory,
                                     perm = perm),
    gv = select_inducing(x, kernel, M = M, method = "greedy", threshold = spec$threshold,
                         memory = memory, perm = perm),
    kmeans = select_inducing(x, kernel, M = M, method = "kmeans", trace = FALSE),
    random = select_inducing(x, kernel, M = M, method = "random", trace = FALSE))
  Z <- sel$Z
  # (a selection that reached its threshold stopped as asked)
  if (warn_short && !is.null(M) && nrow(Z) < M && !identical(sel$stop, "threshold")) {
    .warn_short_selection(x, kernel, M, nrow(Z), name)
  }
  dimnames(Z) <- list(NULL, colnames(x))
  Z
}

# The warning of a greedy selection that stopped at m < M points, with its
# cause: fewer distinct inputs than M, or (with enough distinct inputs) a
# kernel matrix that is numerically low-rank at these inputs: every other
# input is, to double precision, a combination of the selected ones, which
# happens when the lengthscale is long next to the inputs' spread.
.warn_short_selection <- function(x, kernel, M, m, name) {
  nd <- nrow(unique(x))
  why <- if (nd < M) {
    sprintf("there are only %d distinct inputs", nd)
  } else {
    span <- max(.col_span(x))
    sprintf("the kernel matrix is numerically low-rank at these inputs (%d distinct): with lengthscale %s against inputs spanning %s, every other input is to double precision a combination of the selected ones, and more inducing points would only make K_uu singular",
            nd, paste(format(unlist(lapply(.kern_leaves(kernel), `[[`, "lengthscale")),
                             digits = 3L), collapse = ", "),
            format(span, digits = 3L))
  }
  warning(sprintf("'%s' asked for M = %d inducing points, but greedy selection stopped at %d: %s",
                  name, as.integer(M), as.integer(m), why), call. = FALSE)
}

#' Select inducing inputs
#'
#' Chooses \eqn{M} inducing inputs for a sparse Gaussian process from the
#' training inputs: by greedy conditional variance (the default), by k-means,
#' or uniformly at random.
#'
#' \strong{Greedy conditional variance} (Burt, Rasmussen and van der Wilk
#' 2020) adds, one at a time, the training input whose conditional prior
#' variance given the points chosen so far, \eqn{d_n = [K_{ff} - Q_{ff}]_{nn}}{d_n = [Kff - Qff]_nn},
#' is largest. With \code{weights} \eqn{w_n}{w_n} it maximises \eqn{w_n d_n}{w_n d_n}
#' instead (heteroscedastic greedy variance, Passerello 2022): \eqn{w =
#' 1/\lambda}{w = 1/lambda} for regression with noise variances \eqn{\lambda_n}{lambda_n}, \eqn{w =
#' \theta}{w = theta} for Polya-Gamma classification, so that low-noise, informative
#' points come first. This is a pivoted partial Cholesky factorisation of
#' \eqn{K_{ff}}{Kff} whose kernel columns are computed when needed, so the cost is
#' \eqn{O(N M^2)}{O(N M^2)} time and \eqn{O(N M)} memory; the \eqn{N \times N}{N x N} matrix is
#' never formed. The selections for different \eqn{M} are nested: the first
#' 20 points of a selection of 30 are the selection of 20.
#'
#' The weighted trace \eqn{t_m = \sum_n w_n [K_{ff} - Q_{ff}]_{nn}}{t_m = sum_n w_n [Kff - Qff]_nn} after each
#' addition is returned in \code{trace}; it never increases. With \eqn{w =
#' 1/\lambda}{w = 1/lambda} it is twice the gap that the trace term opens in the collapsed
#' bound, and it brackets the expected KL divergence from the sparse to the
#' exact posterior, \eqn{t/2 \le E[KL] \le t}{t/2 <= E[KL] <= t} (Passerello 2022, eq. 3.7; see
#' \code{\link{kl_threshold}}).
#'
#' \strong{Stopping.} Greedy selection stops at the first of:
#' \itemize{
#'   \item the weighted trace falls below \code{threshold}: the selection is
#'     the shortest one whose weighted trace is \eqn{< } \code{threshold},
#'     that is, it includes exactly the points up to and including the one
#'     whose addition brought the trace below the threshold (the public code
#'     of Burt et al. 2020 drops that point, that of Passerello 2022 keeps
#'     one more; both are off by one). At
#'     least one point is always returned.
#'   \item \eqn{M} points are chosen (\code{M = NULL} with a threshold: no
#'     limit but \eqn{N}; the factor takes \eqn{N \times M}{N x M} doubles, so
#'     give \code{M} as a cap when memory matters, and see Large data);
#'   \item every input is explained: its residual is zero (at most
#'     \code{tol} times its prior variance), or it is an exact copy of a
#'     chosen input. Then fewer than \eqn{M} points are returned. A point,
#'     or a copy of a point, is never chosen twice, so \eqn{K_{uu}}{Kuu} is never
#'     exactly singular. With the default \code{tol = 0}, points whose
#'     residual is only rounding noise can still be chosen when \eqn{M} asks
#'     for them (useful when the inducing inputs are optimised afterwards,
#'     as \code{sgpr()} does); \code{tol = 1e-10}, say, stops once the rest
#'     is negligible, which suits inducing inputs that stay fixed.
#' }
#' Ties (for instance the first pick when all weights are equal) are broken
#' in the order of a random permutation drawn with \code{sample.int()}, so
#' \code{set.seed()} reproduces a selection. Give that permutation as the
#' option \code{perm} to break ties the same way in several selections:
#' \code{\link{reinit_inducing}()} and \code{\link{pgpr}()} draw it once
#' and reuse it in every pass, so that the unweighted selection, whose first
#' pick is a tie among all inputs of a stationary kernel, does not change
#' from pass to pass by the tie-break alone.
#'
#' \strong{Large data.} The greedy factor takes \eqn{8 (M + 2 b)}{8 (M + 2 b)}
#' bytes per input (\eqn{b} the \code{block}; \eqn{M} the cap
#' \code{max_threshold_points} with a threshold and no \code{M}), 4 GB at
#' \eqn{N = 10^6}{N = 1e6}, \eqn{M = 500}. When \eqn{N} times that exceeds
#' \code{memory}, greedy selection runs on a random subsample of \eqn{n}
#' rows, as many as fit in \code{memory} but at least \eqn{10 M}: the
#' first \eqn{n} rows of the tie-breaking order \code{perm}, so that a given
#' \code{perm} fixes the subsample too. This changes the selection in two
#' ways: the inducing inputs are drawn from the subsample only (rows outside
#' it are never candidates, and their residual variances are not looked
#' at), and the \code{threshold}, a bound on a sum over the rows, is scaled
#' by \eqn{n / N}{n / N} (as the training schedule does for its subsample;
#' see \code{\link{sgpr}}). The result is the greedy selection of those
#' \eqn{n} rows with the threshold scaled; its \code{subsample} gives the
#' rows, its \code{trace} and \code{trace0} are the subsample's times
#' \eqn{N / n}{N / n} (estimates of the sums over all rows) and
#' \code{residual} and \code{factor} belong to the subsample's rows. The
#' cost falls from \eqn{O(N M^2)}{O(N M^2)} to \eqn{O(n M^2)}{O(n M^2)}.
#' For k-means and random subsets, which choose from all rows anyway, only
#' their \code{trace} is computed on the subsample (its factor takes
#' \eqn{8 M} bytes per row). The models pass their \code{control$memory}
#' (see \code{\link{scaling}}).
#'
#' \strong{k-means} runs \code{\link[stats]{kmeans}} on the distinct inputs
#' (on a random subset of \code{max_points} of them when there are more) and
#' returns the centres, which are not training inputs (\code{index} is
#' \code{NULL}). When a cluster empties (R's default Hartigan-Wong algorithm
#' then stops with an error), Lloyd's algorithm is run from the same start,
#' the empty clusters are dropped, and the centres are padded to \eqn{M} with
#' distinct inputs drawn at random, as the code of Passerello's experiments
#' does.
#' With \eqn{M} or fewer distinct inputs, all of them are returned (with a
#' warning when that is fewer than \eqn{M}; padding would repeat an input).
#' \strong{random} draws \eqn{M} distinct inputs uniformly
#' without replacement. Both ignore \code{weights} when choosing, but their
#' \code{trace} is the weighted trace of the nested prefixes of the
#' returned points, in their order, for comparison with the greedy curve;
#' only its last value belongs to the method at this \eqn{M}.
#'
#' @param x the training inputs: a numeric matrix, vector (one input) or data
#'   frame of numeric columns, as the models accept them.
#' @param kernel a kernel such as \code{\link{kernel_rbf}()}. Parameters left
#'   \code{NULL} are chosen from \code{x} as the models do (variance 1).
#'   Only greedy selection uses it.
#' @param M the number of inducing inputs (the maximum for greedy selection
#'   with a threshold). By default \eqn{\min(N, 100)}{min(N, 100)}, or, when a
#'   \code{threshold} is given, as many as the threshold needs up to
#'   \code{max_threshold_points} (see \code{...}).
#' @param method \code{"greedy"}, \code{"kmeans"} or \code{"random"}.
#' @param weights positive weights \eqn{w_n}{w_n}, one per row of \code{x};
#'   \code{NULL} means 1.
#' @param threshold greedy only: stop when the weighted trace falls below
#'   this value (see \code{\link{kl_threshold}} to set it from a target on
#'   the KL divergence).
#' @param memory the most memory for the selection's factor: a number of
#'   bytes or a string such as \code{"512MB"} or \code{"2GB"}; beyond it
#'   the selection works on a random subsample of rows (see Large data). By
#'   default the default of the models' \code{control$memory} (from the
#'   machine's memory, see \code{\link{scaling}}).
#' @param ... options of the method:
#'   \describe{
#'     \item{\code{tol}}{greedy: relative residual at or below which an
#'       input counts as explained (default 0; see Stopping);}
#'     \item{\code{block}}{greedy: how many pivots are planned ahead, so that
#'       the factor is updated by one matrix-matrix product per block (default
#'       16; at most 1024). It changes only the speed: \code{block = 1} adds
#'       one column at a time, and the choices are the same up to rounding;}
#'     \item{\code{factor}}{greedy: if \code{TRUE}, also return the
#'       \eqn{N \times M}{N x M} partial Cholesky factor \eqn{C}, \eqn{C C^\top =
#'       Q_{ff}}{C C' = Qff} (default \code{FALSE});}
#'     \item{\code{perm}}{greedy: the tie-breaking order, a permutation of
#'       \code{1:N} (the first in \code{perm} wins a tie); by default drawn
#'       with \code{sample.int(N)};}
#'     \item{\code{max_threshold_points}}{greedy with a \code{threshold} and
#'       no \code{M}: the most points to select (default 2000, with a
#'       warning when the threshold is not reached by then);}
#'     \item{\code{iter.max}, \code{nstart}}{k-means: passed to
#'       \code{\link[stats]{kmeans}} (defaults 50 and 1);}
#'     \item{\code{max_points}}{k-means: run on at most this many distinct
#'       inputs (default 20000, as in the code of Passerello's
#'       experiments);}
#'     \item{\code{trace}}{k-means and random: compute the weighted trace
#'       (default \code{TRUE}; it costs \eqn{O(N M^2)}{O(N M^2)}).}
#'   }
#' @return An object of class \code{"sparsevgp_inducing"}: a list with
#'   \item{Z}{the \eqn{M \times D}{M x D} matrix of inducing inputs;}
#'   \item{index}{their rows in \code{x} (integer; \code{NULL} for k-means);}
#'   \item{trace}{the weighted trace after each addition (length \eqn{M});}
#'   \item{trace0}{the weighted trace with no inducing points,
#'     \eqn{\sum_n w_n k(x_n, x_n)}{sum_n w_n k(x_n, x_n)};}
#'   \item{residual}{the conditional variances \eqn{[K_{ff} - Q_{ff}]_{nn}}{[Kff - Qff]_nn}
#'     given all of \code{Z};}
#'   \item{method, M, N, weighted, threshold, stop, kernel}{the settings and
#'     why greedy selection stopped: \code{"M"}, \code{"threshold"} or
#'     \code{"exhausted"};}
#'   \item{factor}{the partial Cholesky factor, when asked for;}
#'   \item{subsample}{the rows of \code{x} the selection (greedy) or the
#'     trace (k-means, random) was computed on, when the memory budget
#'     called for a subsample; otherwise \code{NULL}.}
#'   It has \code{print} and \code{plot} methods; \code{plot} draws the
#'   sparsity curve, the weighted trace against \eqn{M}.
#' @references Burt, D. R., Rasmussen, C. E. and van der Wilk, M. (2020).
#'   Convergence of sparse variational inference in Gaussian processes
#'   regression. JMLR 21.
#'
#'   Passerello, G. (2022). Heteroscedastic inducing point selection for
#'   sparse Gaussian process classification. MEng thesis, Imperial College
#'   London.
#' @seealso \code{\link{kl_threshold}}, \code{\link{reinit_inducing}},
#'   \code{\link{sgpr}}
#' @examples
#' set.seed(1)
#' k <- kernel_rbf(lengthscale = 0.5, variance = 1)
#' sel <- select_inducing(snelson$x, k, M = 15)
#' sel
#' plot(sel)
#'
#' # automatic M: stop when the trace is below 1e-3
#' auto <- select_inducing(snelson$x, k, threshold = 1e-3)
#' auto$M
#'
#' # heteroscedastic weights favour low-noise inputs
#' lambda <- 0.01 + 0.5 * (snelson$x > 3)
#' hgv <- select_inducing(snelson$x, k, M = 15, weights = 1 / lambda)
#' table(hgv$Z > 3)
#'
#' fit <- sgpr(snelson$x, snelson$y, kernel = k, inducing = sel)
#'
#' # a memory budget too small for all 200 rows: greedy selection on a subsample
#' sub <- select_inducing(snelson$x, k, M = 15, memory = "50KB")
#' length(sub$subsample)
#' @export
select_inducing <- function(x, kernel = kernel_rbf(), M = NULL,
                            method = c("greedy", "kmeans", "random"),
                            weights = NULL, threshold = NULL, ..., memory = NULL) {
  x <- .as_input_matrix(x, "x")
  N <- nrow(x)
  method <- match.arg(method)
  opts <- .select_options(method, list(...))
  w <- .check_weights(weights, N)
  if (!is.null(threshold)) {
    if (method != "greedy") {
      stop("'threshold' is only used by method = \"greedy\"", call. = FALSE)
    }
    if (!is.numeric(threshold) || length(threshold) != 1L || !is.finite(threshold) ||
        threshold < 0) {
      stop("'threshold' must be one non-negative number", call. = FALSE)
    }
    threshold <- as.double(threshold)
  }
  M <- .check_M(M, N, default = if (is.null(threshold)) min(N, 100L) else NA_integer_)
  memory <- .check_memory(memory, "memory")
  kernel <- .kern_init(.check_kernel(kernel), x, check_variance = FALSE)
  n <- .select_rows(N, M, method, opts, memory, ncol(x))
  out <- if (n < N) {
    .select_subsample(x, kernel, M, w, threshold, opts, method, n)
  } else {
    switch(method,
      greedy = .select_greedy(x, kernel, M, w, threshold, opts),
      kmeans = .select_kmeans(x, kernel, M, w, opts),
      random = .select_random(x, kernel, M, w, opts))
  }
  Z <- out$Z
  dimnames(Z) <- list(NULL, colnames(x))
  structure(list(Z = Z, index = out$index, trace = out$trace, trace0 = out$trace0,
                 residual = out$residual, method = method, M = nrow(Z), N = N,
                 weighted = !is.null(weights), threshold = threshold,
                 stop = out$stop, kernel = kernel, factor = out$factor,
                 subsample = out$subsample),
            class = "sparsevgp_inducing")
}

# How many rows of x the selection may work on within `memory` bytes: all N
# when they fit, else as many as fit, but at least 10 M (fewer would leave
# greedy selection too few candidates to choose from). Greedy selection
# holds an N x M factor and two N x block workspaces (src/select.c); the
# weighted trace of k-means and random subsets an N x M factor.
.select_rows <- function(N, M, method, opts, memory, D = 1L) {
  if (method != "greedy" && !isTRUE(opts$trace)) return(N)
  m <- if (is.na(M)) min(N, opts$max_threshold_points) else M
  # per row: the factor (m columns), the two block workspaces of greedy
  # selection, the scaled and the subsampled copy of the point (2 D) and
  # its weight, order, residual and flags (4)
  per_row <- 8 * (m + 2 * D + 4 + if (method == "greedy") 2 * min(opts$block, 1024L, N) else 0)
  # and, whatever the subsample, an order and a weight of every row (12 N)
  as.integer(.budget_rows(memory, per_row, fixed = 12 * N, n = N, at_least = min(N, 10 * m)))
}

# A selection on n < N random rows of x, for data whose factor would not fit
# in memory. Greedy selection chooses among the subsample only, with the
# threshold scaled by n / N as the trace (a sum over the rows) is, and the
# subsample is the first n rows of the tie-breaking order, so that a given
# `perm` fixes the subsample as well (reinit_inducing() and the double loop
# of pgpr() re-select on the same rows in every pass). k-means and random
# subsets choose from all rows and compute their trace on the subsample.
# The traces are returned scaled by N / n, as estimates of the full sums.
.select_subsample <- function(x, kernel, M, w, threshold, opts, method, n) {
  N <- nrow(x)
  if (method == "greedy") {
    perm <- if (is.null(opts$perm)) sample.int(N) else .check_perm(opts$perm, N)
    rows <- sort(perm[seq_len(n)])
    opts$perm <- match(perm[seq_len(n)], rows)
    thr <- if (!is.null(threshold)) threshold * n / N
    out <- .select_greedy(x[rows, , drop = FALSE], kernel, M, if (length(w) > 1L) w[rows] else w,
                          thr, opts, N / n)
    out$index <- rows[out$index]
    out$Z <- x[out$index, , drop = FALSE]
  } else {
    rows <- sort(sample.int(N, n))
    out <- switch(method,
      kmeans = .select_kmeans(x, kernel, M, w, opts, rows),
      random = .select_random(x, kernel, M, w, opts, rows))
  }
  out$trace <- out$trace * (N / n)
  out$trace0 <- out$trace0 * (N / n)
  out$subsample <- rows
  out
}

# The options a method takes in `...`, with their defaults.
.select_defaults <- list(
  greedy = list(tol = 0, factor = FALSE, block = 16L, max_threshold_points = 2000L,
                perm = NULL),
  kmeans = list(iter.max = 50L, nstart = 1L, max_points = 20000L, trace = TRUE),
  random = list(trace = TRUE))

.select_options <- function(method, opts) {
  def <- .select_defaults[[method]]
  opts <- opts[!vapply(opts, is.null, TRUE)]   # NULL means "the default"
  if (length(opts) && (is.null(names(opts)) || any(!nzchar(names(opts))))) {
    stop("the options in '...' must be named", call. = FALSE)
  }
  bad <- setdiff(names(opts), names(def))
  if (length(bad)) {
    stop(sprintf("unknown options for method = \"%s\": %s (known: %s)", method,
                 paste(bad, collapse = ", "), paste(names(def), collapse = ", ")),
         call. = FALSE)
  }
  opts <- utils::modifyList(def, opts)
  for (nm in intersect(names(opts), c("factor", "trace"))) .check_flag(opts[[nm]], nm)
  if (!is.null(opts$tol) && (!is.numeric(opts$tol) || length(opts$tol) != 1L ||
                             !(opts$tol >= 0 && opts$tol < 1))) {
    stop("'tol' must be one number in [0, 1)", call. = FALSE)
  }
  for (nm in intersect(names(opts), c("iter.max", "nstart", "max_points", "block",
                                      "max_threshold_points"))) {
    v <- opts[[nm]]
    if (!is.numeric(v) || length(v) != 1L || !is.finite(v) || v < 1 || v != round(v)) {
      stop(sprintf("'%s' must be a whole number >= 1", nm), call. = FALSE)
    }
  }
  opts
}

.check_weights <- function(weights, N, name = "weights") {
  # no weights: one weight for all (expanded to the rows a selection uses)
  if (is.null(weights)) return(1)
  if (!is.numeric(weights)) {
    stop(sprintf("'%s' must be a numeric vector", name), call. = FALSE)
  }
  weights <- as.double(weights)
  if (length(weights) != N) {
    stop(sprintf("'%s' has length %d but there are N = %d inputs", name,
                 length(weights), N), call. = FALSE)
  }
  if (any(!is.finite(weights)) || any(weights <= 0)) {
    stop(sprintf("'%s' must be positive and finite", name), call. = FALSE)
  }
  weights
}

# M as an integer in 1..N; NULL gives `default` (NA: no limit).
.check_M <- function(M, N, default, name = "M") {
  if (is.null(M)) return(default)
  if (!is.numeric(M) || length(M) != 1L || !is.finite(M) || M < 1 || M != round(M)) {
    stop(sprintf("'%s' must be a whole number of inducing points >= 1", name),
         call. = FALSE)
  }
  if (M > N) {
    stop(sprintf("'%s' asks for M = %s inducing points but there are only N = %d inputs",
                 name, format(M, scientific = M >= 1e15, big.mark = ""), N), call. = FALSE)
  }
  as.integer(M)
}

# Greedy selection in C. With a threshold and no M, the factor's capacity
# doubles until the threshold (or N) is reached: the selections are nested,
# so a larger run repeats the smaller one exactly (same permutation), and
# the repeated work is at most a third of the total.
# `scale`: the subsample's N / n, to state the trace and the threshold on
# the caller's scale in the warning.
.select_greedy <- function(x, kernel, M, w, threshold, opts, scale = 1) {
  N <- nrow(x)
  perm <- if (is.null(opts$perm)) sample.int(N) else .check_perm(opts$perm, N)
  thr <- if (is.null(threshold)) 0 else threshold
  cap <- if (is.na(M)) min(N, 128L) else M
  # with a threshold and no M, stop growing at max_threshold_points: past a
  # few thousand points the O(N M^2) selection costs as much as an exact GP
  limit <- min(N, opts$max_threshold_points)
  if (length(w) == 1L) w <- rep(w, N)
  repeat {
    r <- .ffi_select_greedy(kernel, x, w, cap, thr, perm, opts$tol, min(opts$block, 1024L),
                            opts$factor)
    if (!is.na(M) || r$stop != "M" || cap >= limit) break
    cap <- min(limit, 2L * cap)
  }
  if (is.na(M) && r$stop == "M" && cap < N) {
    warning(sprintf("the weighted trace is still %.3g after %d points, above 'threshold' = %.3g: stopped at max_threshold_points = %d (pass M to choose another cap)",
                    r$trace[length(r$trace)] * scale, cap, thr * scale, cap), call. = FALSE)
  }
  list(Z = x[r$index, , drop = FALSE], index = r$index, trace = r$trace,
       trace0 = r$trace0, residual = r$d, stop = r$stop, factor = r$factor)
}

# A tie-breaking order for greedy selection: a permutation of 1..N.
.check_perm <- function(perm, N) {
  if (!is.numeric(perm) || length(perm) != N || anyNA(perm) ||
      !identical(sort(as.integer(perm)), seq_len(N)) || any(perm != round(perm))) {
    stop(sprintf("'perm' must be a permutation of 1:%d (one entry per input)", N),
         call. = FALSE)
  }
  as.integer(perm)
}

# The weighted trace of the prefixes of Z, over the given rows of x (all by
# default).
.select_trace <- function(x, kernel, Z, w, opts, rows = NULL) {
  if (!isTRUE(opts$trace)) return(list(trace = NULL, trace0 = NULL, d = NULL))
  if (!is.null(rows)) {
    x <- x[rows, , drop = FALSE]
    if (length(w) > 1L) w <- w[rows]
  }
  if (length(w) == 1L) w <- rep(w, nrow(x))
  .ffi_select_trace(kernel, x, w, Z, 1e-10, FALSE)
}

.select_kmeans <- function(x, kernel, M, w, opts, rows = NULL) {
  ux <- unique(x)
  stop_reason <- NULL
  if (nrow(ux) <= M) {
    # every distinct input is its own cluster; padding with data points would
    # repeat an input and make K_uu exactly singular, so return fewer
    if (nrow(ux) < M) {
      warning(sprintf("there are only %d distinct inputs, fewer than M = %d: all of them are returned",
                      nrow(ux), M), call. = FALSE)
      stop_reason <- "exhausted"
    }
    Z <- ux
  } else {
    keep <- max(opts$max_points, M + 1L)       # k-means needs more points than centres
    if (nrow(ux) > keep) ux <- ux[sort(sample.int(nrow(ux), keep)), , drop = FALSE]
    Z <- .kmeans_centres(ux, M, opts)
  }
  Z <- unname(as.matrix(Z))
  tr <- .select_trace(x, kernel, Z, w, opts, rows)
  list(Z = Z, index = NULL, trace = tr$trace, trace0 = tr$trace0, residual = tr$d,
       stop = stop_reason, factor = NULL)
}

.select_random <- function(x, kernel, M, w, opts, rows = NULL) {
  cand <- which(!duplicated(x))
  if (length(cand) < M) {
    stop(sprintf("there are only %d distinct inputs, fewer than M = %d",
                 length(cand), M), call. = FALSE)
  }
  index <- cand[sample.int(length(cand), M)]
  Z <- x[index, , drop = FALSE]
  tr <- .select_trace(x, kernel, Z, w, opts, rows)
  list(Z = Z, index = index, trace = tr$trace, trace0 = tr$trace0, residual = tr$d,
       stop = NULL, factor = NULL)
}

# k-means centres of the distinct inputs ux (more than M of them), from
# `centers` (M, or a matrix of starting centres). stats::kmeans's default
# Hartigan-Wong algorithm stops with an error when a cluster empties; then
# Lloyd's algorithm is run from the same start, which returns NaN for an
# empty cluster. Centres that are not finite or repeat are dropped and the
# set is padded with distinct inputs drawn at random, as the code of
# Passerello's experiments pads scipy's kmeans when fewer than M centroids
# come back.
.kmeans_centres <- function(ux, centers, opts) {
  M <- if (length(centers) == 1L) as.integer(centers) else nrow(centers)
  run <- function(algorithm) {
    suppressWarnings(stats::kmeans(ux, centers = centers, iter.max = opts$iter.max,
                                   nstart = opts$nstart, algorithm = algorithm)$centers)
  }
  Z <- tryCatch(run("Hartigan-Wong"), error = function(e) {
    tryCatch(run("Lloyd"), error = function(e) NULL)
  })
  .kmeans_pad(ux, Z, M)
}

# Keep the finite, distinct rows of Z and pad to M rows with distinct rows of
# ux that are not among them, drawn without replacement (needs nrow(ux) > M).
.kmeans_pad <- function(ux, Z, M) {
  Z <- if (is.null(Z)) ux[0L, , drop = FALSE] else unname(as.matrix(Z))
  Z <- unique(Z[rowSums(!is.finite(Z)) == 0L, , drop = FALSE])
  if (nrow(Z) > M) Z <- Z[seq_len(M), , drop = FALSE]
  short <- M - nrow(Z)
  if (short > 0L) {
    dup <- duplicated(rbind(Z, unname(ux)))[nrow(Z) + seq_len(nrow(ux))]
    cand <- which(!dup)
    pick <- cand[sample.int(length(cand), short)]
    Z <- rbind(Z, unname(ux[pick, , drop = FALSE]))
  }
  Z
}

.select_labels <- c(greedy = "greedy conditional variance", kmeans = "k-means centres",
                    random = "uniform random subset")

#' @export
print.sparsevgp_inducing <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  lab <- .select_labels[[x$method]]
  if (x$method == "greedy" && x$weighted) lab <- "weighted greedy conditional variance"
  cat(sprintf("Inducing inputs: %s, M = %d of N = %d inputs\n", lab, x$M, x$N))
  cat(paste0("  ", .kernel_lines(x$kernel, digits), "\n"), sep = "")
  if (!is.null(x$subsample)) {
    cat(sprintf("  %s on a random subsample of %d rows (the memory budget); traces scaled by N / %d\n",
                if (x$method == "greedy") "chosen" else "trace", length(x$subsample),
                length(x$subsample)))
  }
  if (length(x$trace)) {
    cat(sprintf("  %s: %s with no inducing points, %s with all M\n",
                if (x$weighted) "weighted trace sum w_n [Kff - Qff]_nn" else
                  "trace of Kff - Qff",
                format(x$trace0, digits = digits),
                format(x$trace[length(x$trace)], digits = digits)))
  }
  if (!is.null(x$stop)) {
    cat("  stopped: ", switch(x$stop,
      M = "M points chosen",
      threshold = sprintf("the trace fell below the threshold %s",
                          format(x$threshold, digits = digits)),
      exhausted = "every input is explained (no residual variance left)"), "\n", sep = "")
  }
  invisible(x)
}

#' @rdname select_inducing
#' @param log passed to \code{plot()}: the trace is drawn on a log scale by
#'   default.
#' @param xlab,ylab,main axis labels and title.
#' @export
plot.sparsevgp_inducing <- function(x, log = "y", xlab = "number of inducing points M",
                                    ylab = NULL, main = NULL, ...) {
  if (!length(x$trace)) stop("this selection has no trace (trace = FALSE)", call. = FALSE)
  d <- data.frame(M = 0:length(x$trace), trace = c(x$trace0, x$trace))
  if (is.null(ylab)) {
    ylab <- if (x$weighted) "weighted trace sum w[Kff - Qff]" else "trace of Kff - Qff"
  }
  if (is.null(main)) main <- paste("Sparsity curve:", .select_labels[[x$method]])
  y <- d$trace
  if (grepl("y", log)) y[y <= 0] <- NA
  graphics::plot(d$M, y, type = "o", pch = 16, cex = 0.5, log = log, xlab = xlab,
                 ylab = ylab, main = main, ...)
  if (!is.null(x$threshold) && x$threshold > 0) {
    graphics::abline(h = x$threshold, lty = 2, col = "firebrick")
  }
  invisible(d)
}

#' Choose the number of inducing points from a KL target
#'
#' \code{kl_threshold()} turns a target on the KL divergence from the sparse
#' variational posterior to the exact one into a threshold on the weighted
#' trace for \code{\link{select_inducing}(threshold = )}; \code{n_inducing()}
#' reads off a greedy sparsity curve how many points reach a threshold.
#'
#' For regression with noise variances \eqn{\lambda_n}{lambda_n}, write \eqn{t =
#' \sum_n [K_{ff} - Q_{ff}]_{nn} / \lambda_n}{t = sum_n [Kff - Qff]_nn / lambda_n}. The collapsed bound contains
#' \eqn{-t/2}, and if the data follow the model, the expected KL divergence
#' satisfies \eqn{t/2 \le E[KL] \le t}{t/2 <= E[KL] <= t} (Passerello 2022, eq. 3.7, extending
#' Burt et al. 2020 to unequal noise variances).
#' So a selection whose trace is below \code{kl} keeps the expected KL below
#' \code{kl}. The trace that \code{select_inducing()} computes is
#' \eqn{\sum_n w_n [K_{ff} - Q_{ff}]_{nn}}{sum_n w_n [Kff - Qff]_nn}:
#' \itemize{
#'   \item without weights (homoscedastic noise \eqn{\sigma^2}{sigma^2}), \eqn{t} is
#'     that trace over \eqn{\sigma^2}{sigma^2}: give \code{noise = sigma^2};
#'   \item with \code{weights = 1 / lambda} (heteroscedastic regression) the
#'     trace is \eqn{t} itself: keep \code{noise = 1}; likewise with
#'     \code{weights = theta} for Polya-Gamma classification, where the trace
#'     is that of the equivalent Gaussian problem.
#' }
#'
#' \strong{Guidance.}
#' \itemize{
#'   \item The KL divergence is a sum over observations, so for the same
#'     accuracy per observation it grows with \eqn{N}, and a fixed threshold
#'     asks for ever more points as \eqn{N} grows (Passerello 2022, section
#'     7.1.3, remarks that the threshold "needs to increase" with \eqn{N}). Give a target per
#'     observation with \code{N}: \code{kl} of \code{1e-3} to \code{1e-2}
#'     nats per observation is a sensible range.
#'   \item A total of about one nat is negligible for comparing models
#'     (differences of the log marginal likelihood below 1 mean little);
#'     it is a strict target that suits small and moderate \eqn{N}.
#'   \item The trace is measured against the noise: the smaller the noise,
#'     the more inducing points the same target needs. Before fitting, use a
#'     guess (\code{sgpr()} starts at a tenth of the variance of \eqn{y});
#'     \code{\link{reinit_inducing}()} re-selects with the fitted noise.
#'   \item Passerello's example threshold, \code{1e-3} on the weighted trace,
#'     is strict and suits small data sets.
#'   \item After fitting, \code{summary()} of an \code{sgpr} fit reports the
#'     a posteriori bound \eqn{KL \le U - L}{KL <= U - L} for the actual data.
#' }
#'
#' @param kl the target on the KL divergence, in nats: the total, or per
#'   observation when \code{N} is given.
#' @param noise the noise variance that the trace is measured against: the
#'   homoscedastic \eqn{\sigma^2}{sigma^2} for an unweighted selection, 1 when the
#'   weights already are \eqn{1/\lambda}{1/lambda} (or \eqn{\theta}{theta}).
#' @param N the number of observations, when \code{kl} is per observation.
#' @return \code{kl_threshold()}: the threshold \code{kl * N * noise} (with
#'   \code{N = 1} when not given). \code{n_inducing()}: the smallest \eqn{M}
#'   whose trace is below \code{threshold}, or \code{NA} when the selection
#'   never reaches it.
#' @seealso \code{\link{select_inducing}}
#' @examples
#' set.seed(1)
#' k <- kernel_rbf(lengthscale = 0.6, variance = 0.8)
#' sigma2 <- 0.07
#' thr <- kl_threshold(kl = 1, noise = sigma2)     # 1 nat in total
#' sel <- select_inducing(snelson$x, k, threshold = thr)
#' sel$M
#' # the same M read off a longer greedy selection (the selections are nested)
#' long <- select_inducing(snelson$x, k, M = 60)
#' n_inducing(long, thr)
#' # a per-observation target
#' kl_threshold(kl = 1e-3, noise = sigma2, N = nrow(snelson))
#' @export
kl_threshold <- function(kl, noise = 1, N = NULL) {
  kl <- .check_positive(kl, "kl", 1L)
  noise <- .check_positive(noise, "noise", 1L)
  n <- if (is.null(N)) 1 else .check_positive(N, "N", 1L)
  kl * n * noise
}

#' @rdname kl_threshold
#' @param selection a \code{\link{select_inducing}()} result (greedy, so that
#'   its prefixes are the selections for smaller \eqn{M}).
#' @param threshold a threshold on the weighted trace, such as
#'   \code{kl_threshold()} gives.
#' @export
n_inducing <- function(selection, threshold) {
  if (!inherits(selection, "sparsevgp_inducing") || !length(selection$trace)) {
    stop("'selection' must be a select_inducing() result with a trace", call. = FALSE)
  }
  if (selection$method != "greedy") {
    warning("only greedy selections are nested; the count refers to prefixes of this selection",
            call. = FALSE)
  }
  if (!is.numeric(threshold) || length(threshold) != 1L || !is.finite(threshold) ||
      threshold < 0) {
    stop("'threshold' must be one non-negative number", call. = FALSE)
  }
  m <- which(selection$trace < threshold)
  if (length(m)) m[1L] else NA_integer_
}

#' Re-select inducing inputs while fitting
#'
#' Alternates greedy selection of the inducing inputs, with the kernel and
#' the weights of the current fit, and fitting of the other parameters with
#' the inducing inputs held fixed, until the bound changes by less than
#' \code{conv_tol}, or \code{patience} passes in a row fail to improve on
#' the best bound so far, or \code{max_passes} passes are done. This is the
#' "greedy variance reinitialisation" of Burt et al. (2020) and the outer
#' loop of the "double-layered variational EM" of Passerello (2022, sections
#' 4.3.2 and 5.4): selection adapts to
#' the learned lengthscales (and noise), and the fit adapts to the selection.
#'
#' Each pass selects afresh with \code{\link{select_inducing}()}, breaking
#' ties in one random order drawn once per call (option \code{perm}); for
#' \code{\link{sgpr}} fits the weights are \eqn{1/\lambda_n}{1/lambda_n} at the current
#' noise variances, so that heteroscedastic models favour low-noise inputs
#' and a \code{threshold} is on the KL scale of \code{\link{kl_threshold}}
#' (\code{noise = 1}). With \code{threshold}, \eqn{M} may change from pass to
#' pass. The bound does not have to increase from pass to pass: in several
#' dimensions, where many inputs have similar residual variances, the
#' selection can change a lot with small changes of the hyperparameters and
#' the bound wanders. So the fit with the highest bound among the starting
#' fit and all passes is returned, and \code{patience} ends a loop that no
#' longer improves (the public code of Burt et al. 2020 stops at the first
#' pass that does not improve, \code{patience = 1}; that of Passerello 2022
#' runs all passes, \code{patience = Inf}).
#'
#' @param fit a fitted sparse model with inducing inputs, such as an
#'   \code{\link{sgpr}()} fit.
#' @param M the number of inducing inputs; by default that of \code{fit}, or
#'   chosen by \code{threshold}.
#' @param threshold the threshold on the weighted trace for an automatic
#'   \eqn{M} (see \code{\link{kl_threshold}}).
#' @param weights \code{"model"} for the model's weights (\eqn{1/\lambda}{1/lambda} for
#'   \code{sgpr}), \code{"none"} for plain greedy variance.
#' @param conv_tol stop when the bound changes by less than this (absolute;
#'   the code of Passerello's experiments uses \code{1e-3}).
#' @param max_passes the maximum number of selection passes.
#' @param patience stop after this many passes in a row without a new best
#'   bound (\code{Inf}: never).
#' @param verbose print the bound after each pass.
#' @param ... options passed to \code{select_inducing()}, such as \code{tol},
#'   \code{perm} (the tie-breaking order; by default one drawn for this
#'   call and used in every pass) or \code{memory} (by default the fit's
#'   \code{control$memory}).
#' @return The fit with the highest bound (normally one of the passes, with
#'   the inducing inputs fixed; the starting fit when none beats it), with
#'   an element \code{reinit}: a list with \code{history} (a data frame
#'   of the pass, \eqn{M}, the bound and the final weighted trace of each
#'   selection; pass 0 is \code{fit}), \code{stop} (\code{"converged"},
#'   \code{"patience"}, \code{"max_passes"}, \code{"interrupted"} (Ctrl-C),
#'   or \code{"error"} when a
#'   refit failed, for instance a Cholesky factorisation past the jitter
#'   cap) and \code{best_pass}. A warning is given when the pass cap is
#'   reached first or a pass fails.
#' @seealso \code{\link{select_inducing}}, \code{\link{sgpr}}
#' @examples
#' set.seed(2)
#' fit <- sgpr(y ~ x, data = snelson, inducing = 10, fixed = "Z")
#' re <- reinit_inducing(fit)
#' re$reinit$history
#' c(logLik(fit), logLik(re))
#' @export
reinit_inducing <- function(fit, M = NULL, threshold = NULL,
                            weights = c("model", "none"), conv_tol = 1e-3,
                            max_passes = 10L, patience = 3L, verbose = FALSE, ...) {
  if (!inherits(fit, "sparsevgp") || is.null(fit$params$Z) || is.null(fit$x)) {
    stop("'fit' must be a fitted sparse model with inducing inputs, such as an sgpr() fit",
         call. = FALSE)
  }
  .shards_refuse(fit, "reinit_inducing()", "update(fit, inducing = M) selects anew on the workers")
  # svgp's whitened q(u) belongs to its Z, and osgpr has two sets: re-selecting
  # one set of inducing inputs under them would be wrong, not just suboptimal
  if (!inherits(fit, c("sgpr", "pgpr"))) {
    stop(sprintf("reinit_inducing() works on sgpr() and pgpr() fits, not on %s() fits",
                 class(fit)[1L]), call. = FALSE)
  }
  weights <- match.arg(weights)
  conv_tol <- .check_positive(conv_tol, "conv_tol", 1L)
  if (!is.numeric(max_passes) || length(max_passes) != 1L || !is.finite(max_passes) ||
      max_passes < 1 || max_passes != round(max_passes)) {
    stop("'max_passes' must be a whole number >= 1", call. = FALSE)
  }
  if (!is.numeric(patience) || length(patience) != 1L || is.na(patience) || patience < 1) {
    stop("'patience' must be a number >= 1 (Inf for none)", call. = FALSE)
  }
  verbose <- .check_flag(verbose, "verbose")
  if (is.null(M) && is.null(threshold)) M <- nrow(fit$params$Z)
  if (!is.null(M)) M <- .check_M(M, nrow(fit$x), NA_integer_)

  # one tie-breaking order for every pass: otherwise the unweighted first
  # pick (a tie among all inputs of a stationary kernel) is re-drawn in each
  # pass, the selection changes by chance alone and the loop cannot settle
  sel_opts <- list(...)
  if (is.null(sel_opts$perm)) sel_opts$perm <- sample.int(nrow(fit$x))
  if (is.null(sel_opts$memory)) sel_opts$memory <- fit$control$memory

  hist <- data.frame(pass = 0L, M = nrow(fit$params$Z), bound = fit$bound,
                     trace = NA_real_)
  best <- fit
  best_pass <- 0L
  cur <- fit
  stop_reason <- "max_passes"
  for (pass in seq_len(max_passes)) {
    kern <- .kernel_at(cur$kernel, cur$params)
    w <- if (weights == "none") NULL else .select_weights(cur)
    if (length(w) == 1L) w <- rep(w, nrow(cur$x))
    # Ctrl-C in a selection or a refit ends the passes with the best so far
    sel <- .interruptible(do.call(select_inducing, c(list(cur$x, kern, M = M, method = "greedy",
                                                          weights = w, threshold = threshold),
                                                     sel_opts)),
                          "a re-selection of inducing inputs")
    if (is.null(sel)) {
      stop_reason <- "interrupted"
      break
    }
    same <- identical(unname(sel$Z), unname(cur$params$Z))
    new <- if (same) cur else tryCatch(.refit_inducing(cur, sel$Z), error = function(e) {
      .rethrow_fatal(e)
      e
    })
    if (!inherits(new, "error") && isTRUE(new$optim$interrupted)) {
      if (new$bound > best$bound) best <- new
      stop_reason <- "interrupted"
      break
    }
    if (inherits(new, "error")) {
      warning(sprintf("pass %d failed (%s); returning the best pass so far", pass,
                      conditionMessage(new)), call. = FALSE)
      stop_reason <- "error"
      break
    }
    hist <- rbind(hist, data.frame(pass = pass, M = sel$M, bound = new$bound,
                                   trace = sel$trace[length(sel$trace)]))
    if (verbose) {
      message(sprintf("pass %d: M = %d, bound %.6g", pass, sel$M, new$bound))
    }
    if (new$bound > best$bound) {
      best <- new
      best_pass <- pass
    }
    if (same || abs(new$bound - cur$bound) < conv_tol) {
      stop_reason <- "converged"
      break
    }
    if (pass - best_pass >= patience) {
      stop_reason <- "patience"
      break
    }
    cur <- new
  }
  if (stop_reason == "max_passes") {
    warning(sprintf("the re-initialisation did not converge in %d passes (last change of the bound %.3g); returning the best pass",
                    as.integer(max_passes), abs(diff(utils::tail(hist$bound, 2L)))),
            call. = FALSE)
  }
  best$reinit <- list(history = hist, stop = stop_reason, best_pass = best_pass)
  best$summary_extra[["Inducing inputs re-selected (reinit_inducing)"]] <-
    sprintf("%d passes, stopped: %s, best pass %d", nrow(hist) - 1L,
            switch(stop_reason, converged = "converged", patience = "no improvement",
                   max_passes = "pass cap", error = "a pass failed",
                   interrupted = "interrupted by the user"), best_pass)
  if (stop_reason == "interrupted") {
    .interrupt_clear()
    warning(sprintf("the re-initialisation was interrupted after %d passes: returning the best pass (%d)",
                    nrow(hist) - 1L, best_pass), call. = FALSE)
  }
  best
}

# M inducing inputs by one k-means run on the distinct training inputs (the
# "K-means" arm of inst/bench/reproduce_pgpr.R, kept as it made the cached
# runs); when that run fails (an empty cluster), the fallback of
# select_inducing(method = "kmeans"), which pads as the code of Passerello
# (2022) does.
.kmeans_inducing <- function(x, M) {
  ux <- unique(x)
  if (nrow(ux) < M) {
    stop(sprintf("there are only %d distinct inputs, fewer than M = %d", nrow(ux), M),
         call. = FALSE)
  }
  if (nrow(ux) == M) return(ux)
  km <- tryCatch(suppressWarnings(stats::kmeans(ux, centers = M, iter.max = 50L))$centers,
                 error = function(e) NULL)
  if (is.null(km)) km <- select_inducing(x, M = M, method = "kmeans", trace = FALSE)$Z
  km
}
