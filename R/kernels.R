# Kernels: constructors, evaluation and the one adjoint contraction that
# turns a bound's adjoints into gradients. The numerical work is in
# src/kernels.c, reached through R/ffi.R.

.kernel_labels <- c(rbf = "RBF (squared exponential)", matern12 = "Matern 1/2",
                    matern32 = "Matern 3/2", matern52 = "Matern 5/2")

.new_kernel <- function(family, lengthscale, variance, ard) {
  if (!is.null(lengthscale)) lengthscale <- .check_positive(lengthscale, "lengthscale")
  if (!is.null(variance)) variance <- .check_positive(variance, "variance", 1L)
  if (!is.null(ard)) ard <- .check_flag(ard, "ard")
  if (isFALSE(ard) && length(lengthscale) > 1L) {
    stop(sprintf("'lengthscale' has %d values, but ard = FALSE asks for one lengthscale shared by all input columns: give one value, or leave out 'ard' for one per column",
                 length(lengthscale)), call. = FALSE)
  }
  if (!is.null(lengthscale)) ard <- length(lengthscale) > 1L
  structure(list(family = family, lengthscale = lengthscale,
                 variance = variance, ard = ard),
            class = "sparsevgp_kernel")
}

#' Stationary kernels
#'
#' Covariance functions \eqn{k(x, x') = \sigma_f^2 g(r)}{k(x, x') = sigma_f^2 g(r)} of the scaled
#' distance \eqn{r^2 = \sum_d (x_d - x'_d)^2 / l_d^2}{r^2 = sum_d (x_d - x'_d)^2 / l_d^2}:
#' \describe{
#'   \item{RBF}{\eqn{g(r) = \exp(-r^2/2)}{g(r) = exp(-r^2/2)};}
#'   \item{Matern 1/2}{\eqn{g(r) = \exp(-r)}{g(r) = exp(-r)};}
#'   \item{Matern 3/2}{\eqn{g(r) = (1 + \sqrt3 r)\exp(-\sqrt3 r)}{g(r) = (1 + sqrt(3) r)exp(-sqrt(3) r)};}
#'   \item{Matern 5/2}{\eqn{g(r) = (1 + \sqrt5 r + 5r^2/3)\exp(-\sqrt5 r)}{g(r) = (1 + sqrt(5) r + 5r^2/3)exp(-sqrt(5) r)}.}
#' }
#' One lengthscale is shared by all input columns, or each column has its
#' own (automatic relevance determination, ARD).
#'
#' Parameters left \code{NULL} are chosen from the data when a model is
#' fitted. The regression models (\code{gpr}, \code{sgpr}, \code{osgpr},
#' \code{svgp} with a Gaussian likelihood) start from the best point of a
#' small grid: lengthscales \eqn{c \cdot sd(x_d)}{c sd(x_d)} for \eqn{c}
#' from 1/32 to 8 (and, when the best is at 1/32, halving on while the
#' score rises, as for a long series with structure on a few thousandths
#' of its span) and the signal variance a share of \eqn{var(y)} (the rest
#' being the starting noise), scored by the collapsed bound on a subsample of
#' at most 1000 rows (with neighbours, \code{sgpr(neighbours = K)}, by that
#' model's likelihood, which sees structure shorter than the spacing of its
#' inducing inputs). With neighbours on dense data, whose median distance
#' from a point to its nearest other point (in units of the inputs'
#' standard deviations) is at most 1/128, the subsample is four disjoint
#' compact windows of the data instead, where the neighbours are as close
#' as in the full fit, and \eqn{c} starts at the power of two at or above
#' twice that distance: rows spread over a long series with one observation
#' per time unit are far apart and see a daily cycle as noise. The grid finds a signal that varies on a small part of
#' the input range, where a single start at a typical distance would settle
#' on a flat fit. The classifiers start at variance 1 and the median distance
#' between inputs. Models optimise kernel parameters on the log scale.
#'
#' @section Sums and products:
#' Kernels combine with \code{+} and \code{*}, nested as in
#' \code{(k1 + k2) * k3}; every model accepts such a combination. Its parts
#' are named \code{k1}, \code{k2}, ... from left to right, and so are the
#' fitted parameters (\code{variance[k2]}, \code{lengthscale[k1,3]}). In a
#' product the variance of every later single factor is held fixed, at 1
#' unless given, because only the product of the variances is identified.
#' See \code{\link{kernel-combinations}} for the rules and starting values.
#'
#' @param lengthscale positive lengthscale: one number, one per input column
#'   (ARD), or \code{NULL} to choose it from the data.
#' @param variance positive signal variance \eqn{\sigma_f^2}{sigma_f^2}, or \code{NULL}.
#' @param ard whether a lengthscale left \code{NULL} becomes one lengthscale
#'   per input column (\code{TRUE}) or one shared by all (\code{FALSE}). By
#'   default (\code{NULL}), one per column when the inputs have more than
#'   one column. A \code{lengthscale} of length > 1 implies ARD.
#' @return An object of class \code{"sparsevgp_kernel"}.
#' @seealso \code{\link{kernel_matrix}}
#' @examples
#' k <- kernel_rbf(lengthscale = 0.5, variance = 2)
#' k
#' kernel_matrix(k, matrix(c(0, 0.5, 1), ncol = 1))
#' kernel_matern32(lengthscale = c(1, 10))
#' # a sum: a short- and a long-range part (Salimbeni et al. 2018's default)
#' k2 <- kernel_matern52(lengthscale = 0.1, variance = 1) + kernel_rbf(lengthscale = 1, variance = 1)
#' k2
#' kernel_matrix(k2, matrix(c(0, 0.5, 1), ncol = 1))
#' @name kernels
NULL

#' @rdname kernels
#' @export
kernel_rbf <- function(lengthscale = NULL, variance = NULL, ard = NULL) {
  .new_kernel("rbf", lengthscale, variance, ard)
}

#' @rdname kernels
#' @export
kernel_matern12 <- function(lengthscale = NULL, variance = NULL, ard = NULL) {
  .new_kernel("matern12", lengthscale, variance, ard)
}

#' @rdname kernels
#' @export
kernel_matern32 <- function(lengthscale = NULL, variance = NULL, ard = NULL) {
  .new_kernel("matern32", lengthscale, variance, ard)
}

#' @rdname kernels
#' @export
kernel_matern52 <- function(lengthscale = NULL, variance = NULL, ard = NULL) {
  .new_kernel("matern52", lengthscale, variance, ard)
}

#' @export
print.sparsevgp_kernel <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat(.kernel_labels[[x$family]], "kernel\n")
  v <- if (is.null(x$variance)) "(from data)" else format(x$variance, digits = digits)
  ls <- if (is.null(x$lengthscale)) {
    if (is.null(x$ard)) "(from data, one per input column when there are several)" else
      if (x$ard) "(from data, one per input column)" else "(from data, one for all columns)"
  } else {
    paste(format(x$lengthscale, digits = digits), collapse = " ")
  }
  cat("  variance:   ", v, "\n", sep = "")
  cat("  lengthscale:", if (isTRUE(x$ard) && !is.null(x$lengthscale)) " (ARD) " else " ",
      ls, "\n", sep = "")
  invisible(x)
}

.check_kernel <- function(kernel, name = "kernel") {
  if (!inherits(kernel, "sparsevgp_kernel")) {
    stop(sprintf("'%s' must be a kernel such as kernel_rbf()", name), call. = FALSE)
  }
  if (.is_combo(kernel)) .kern_check_depth(kernel, name)
  kernel
}

# The deepest nesting of sums and products a kernel may have (levels of
# operators from the root to a single kernel); KC_MAX_DEPTH in
# src/kernel_combo.h is the same. Deeper trees are refused when they are
# built (Ops.sparsevgp_kernel()) and checked without recursion here (a tree
# built by hand could be deep enough to overflow the C stack of any
# recursive walk).
.kern_max_depth <- 32L

.kern_check_depth <- function(kernel, name = "kernel") {
  level <- list(kernel)
  depth <- 0L
  while (length(level)) {
    combos <- Filter(function(k) inherits(k, "sparsevgp_kernel_combo"), level)
    if (!length(combos)) break
    depth <- depth + 1L
    if (depth > .kern_max_depth) {
      stop(sprintf("'%s' nests sums and products more than %d levels deep: flatten it (k1 + k2 + k3 is one level, however many parts)",
                   name, .kern_max_depth), call. = FALSE)
    }
    level <- unlist(lapply(combos, function(k) {
      if (!is.list(k$parts) || length(k$parts) < 2L ||
          !all(vapply(k$parts, inherits, TRUE, "sparsevgp_kernel"))) {
        stop(sprintf("'%s' is a malformed kernel combination: combine kernels with + and *",
                     name), call. = FALSE)
      }
      k$parts
    }), recursive = FALSE)
  }
  invisible(depth)
}

#' Kernel matrices
#'
#' Evaluates a kernel between the rows of two input matrices.
#'
#' @param kernel a kernel such as \code{\link{kernel_rbf}()} with its
#'   parameters set.
#' @param x a numeric matrix (or vector, for one input column) of inputs.
#' @param y a second input matrix with the same number of columns; by default
#'   \code{x}.
#' @param diag if \code{TRUE}, return only the diagonal of \eqn{K(x, x)}.
#' @return The \code{nrow(x)} by \code{nrow(y)} matrix \eqn{K(x, y)}, or a
#'   vector for \code{diag = TRUE}.
#' @examples
#' x <- matrix(seq(0, 1, length.out = 5))
#' K <- kernel_matrix(kernel_matern52(lengthscale = 0.3, variance = 1), x)
#' round(K, 3)
#' @export
kernel_matrix <- function(kernel, x, y = x, diag = FALSE) {
  .check_kernel(kernel)
  x <- .as_input_matrix(x, "x")
  .ffi_kernel(kernel)
  for (k in .kern_leaves(kernel)) {
    if (length(k$lengthscale) > 1L && length(k$lengthscale) != ncol(x)) {
      stop(sprintf("the kernel has %d lengthscales but 'x' has %d columns",
                   length(k$lengthscale), ncol(x)), call. = FALSE)
    }
  }
  if (.check_flag(diag, "diag")) return(.ffi_kern_diag(kernel, x))
  if (missing(y)) return(.ffi_kern_matrix(kernel, x))
  y <- .as_input_matrix(y, "y")
  if (ncol(y) != ncol(x)) {
    stop(sprintf("'y' must have %d columns like 'x', not %d", ncol(x), ncol(y)),
         call. = FALSE)
  }
  .ffi_kern_matrix(kernel, x, y)
}

# The one adjoint contraction of every model. A bound computed from
# K(W, W), K(W, X) and diag K(X, X) returns their adjoints Gww, Gwf and
# gdiag (dF/dK); the gradient with respect to the kernel parameters and the
# inducing inputs W is their contraction with the kernel derivatives (as in
# GPy's sparse GP). `Kwf` is K(W, X) when the caller holds it (its
# exponentials are then not recomputed); `jitter` is the jitter added to the
# diagonal of K(W, W), one number or one per row: it is relative to the mean
# diagonal, that is proportional to the kernel variance, so it adds
# sum_i Gww_ii jitter_i to dF/d log variance. Gww = NULL leaves out the
# K(W, W) block and Gwf = NULL the K(W, X) block with diag K(X, X) (for
# sums over chunks of X, which contract the W-W block once). Returns
# list(variance, lengthscale, W) with W = dF/dW (zeros unless want_W).
# The K(W, X) block is contracted in `threads` OpenMP threads (over the
# points of X).
.contract <- function(kernel, x, W, Gww, Gwf, gdiag, Kwf = NULL, jitter = 0, want_W = TRUE,
                      threads = 1L) {
  blocks <- list(
    if (!is.null(Gww)) .kern_grad(kernel, W, NULL, Gww, want_W),
    if (!is.null(Gwf)) .kern_grad(kernel, W, x, Gwf, want_W, K = Kwf, threads = threads))
  blocks <- blocks[!vapply(blocks, is.null, TRUE)]
  th <- Reduce(`+`, lapply(blocks, `[[`, "theta"))
  if (!is.null(Gwf)) th <- th + .kern_grad_diag(kernel, x, gdiag)
  theta <- .kern_split_theta(kernel, th)
  if (!is.null(Gww)) {
    theta$variance <- theta$variance + sum(diag(Gww) * jitter) * .jitter_variance_grad(kernel)
  }
  list(variance = theta$variance, lengthscale = theta$lengthscale,
       W = if (want_W) Reduce(`+`, lapply(blocks, `[[`, "x")) else matrix(0, nrow(W), ncol(W)))
}

# d log k(x, x) / d log(variance of each part): the share of each part's
# variance in a jitter relative to k(x, x) (1 for a single kernel).
.jitter_variance_grad <- function(kernel) {
  if (!.is_combo(kernel)) return(1)
  sc <- .kern_scale_grad(kernel)
  sc$ds / sc$s
}

# Kernel parameters on the unconstrained (log) scale, and back.
.kern_theta <- function(kernel) {
  th <- log(c(kernel$variance, kernel$lengthscale))
  nl <- length(kernel$lengthscale)
  names(th) <- c("log_variance",
                 if (nl == 1L) "log_lengthscale" else sprintf("log_lengthscale[%d]", seq_len(nl)))
  th
}

.kern_set_theta <- function(kernel, theta) {
  kernel$variance <- exp(theta[[1L]])
  kernel$lengthscale <- exp(unname(theta[-1L]))
  kernel
}

# Fill the parameters a user left NULL from the data: the lengthscale so that
# typical scaled distances are about 1, the variance from var(y).
.kern_init <- function(kernel, x, y = NULL, check_variance = TRUE) {
  D <- ncol(x)
  kernel <- .kern_ard(kernel, D)
  for (k in .kern_leaves(kernel)) {
    if (!is.null(k$lengthscale) && length(k$lengthscale) > 1L &&
        length(k$lengthscale) != D) {
      stop(sprintf("the kernel has %d lengthscales but the inputs have %d columns",
                   length(k$lengthscale), D), call. = FALSE)
    }
  }
  if (any(vapply(.kern_leaves(kernel), function(k) is.null(k$lengthscale), TRUE))) {
    # a deterministic subsample keeps this O(N) and free of RNG side effects
    idx <- unique(round(seq(1, nrow(x), length.out = min(nrow(x), 400L))))
    xs <- x[idx, , drop = FALSE]
    med <- function(m) {
      d <- as.vector(stats::dist(m))
      d <- d[d > 0]
      if (length(d) == 0L) 1 else stats::median(d)
    }
    kernel <- .kern_fill_lengthscale(kernel, function(k) {
      if (isTRUE(k$ard)) {
        vapply(seq_len(D), function(d) med(xs[, d, drop = FALSE]), 1) * sqrt(D)
      } else {
        med(xs)
      }
    }, .kern_part_spread(kernel, xs))
  }
  v <- if (is.null(y) || length(y) < 2L) 1 else stats::var(y)
  kernel <- .kern_fill_variance(kernel, if (is.finite(v) && v > 0) v else 1)
  .check_kernel_scale(kernel, x, y, check_variance)
}

# The range of scales in which the bounds, their gradients and the
# optimiser's standardisation stay within double precision: input columns
# span from 1 / .scale_limit to .scale_limit, or 0 (the standardisation
# squares the spread: sd(x)^2 under- or overflows beyond); the lengthscales are at least 1 / .ls_ratio
# of the span of their inputs (below, no two distinct inputs are
# correlated and the gradient in the lengthscale is exactly 0); with
# check_variance, the kernel variance is within a factor .var_ratio of
# var(y) (of 1, the latent scale of a classifier, when y is NULL), beyond
# which the bound over- or underflows or the optimiser cannot move it.
# Every message says what is out of range, on which scale, and what to do.
.scale_limit <- 1e100
.ls_ratio <- 1e15
.var_ratio <- 1e100

.check_kernel_scale <- function(kernel, x, y = NULL, check_variance = TRUE) {
  if (.is_combo(kernel)) {
    for (k in .kern_leaves(kernel)) .check_kernel_scale(k, x, NULL, FALSE)
    s <- .kern_scale(kernel)
    if (!is.finite(s) || s <= 0) {
      v <- vapply(.kern_leaves(kernel), function(k) as.double(k$variance), 1)
      stop(sprintf("the variances of the kernel's parts (%s) combine to k(x, x) = %s, %s double precision: give variances on the scale of %s, or leave them NULL to choose them from the data",
                   paste(format(v, digits = 3L, trim = TRUE), collapse = ", "),
                   format(s, digits = 3L), if (s > 1) "beyond" else "below what",
                   if (is.null(y)) "1 (a classifier's latent scale)" else "var(y)"),
           call. = FALSE)
    }
    if (check_variance) .check_variance_scale(s, y, "variance k(x, x) of the kernel combination")
    return(kernel)
  }
  span <- .col_span(x)
  bad <- which(!(span <= .scale_limit) | (span > 0 & span < 1 / .scale_limit))
  if (length(bad)) {
    stop(sprintf("input column %d spans %s, outside what the kernels and the optimiser's standardisation compute in double precision (spans from %g to %g, or 0): rescale the inputs, for example with scale()",
                 bad[1L], format(span[bad[1L]], digits = 3L), 1 / .scale_limit, .scale_limit),
         call. = FALSE)
  }
  ls <- rep_len(kernel$lengthscale, ncol(x))
  lspan <- if (length(kernel$lengthscale) == 1L) rep(max(span), ncol(x)) else span
  small <- which(lspan > 0 & ls * .ls_ratio < lspan)
  if (length(small)) {
    d <- small[1L]
    stop(sprintf("the kernel lengthscale %s is below 1e-15 times the span of %s (%s): at that scale no two distinct inputs are correlated and the lengthscale cannot be fitted (its gradient is 0). Give a lengthscale on the scale of the inputs' spacing, or leave it NULL to choose it from the data",
                 format(ls[d], digits = 3L),
                 if (length(kernel$lengthscale) == 1L) "the inputs" else sprintf("input column %d", d),
                 format(lspan[d], digits = 3L)), call. = FALSE)
  }
  if (check_variance) .check_variance_scale(kernel$variance, y, "kernel variance")
  kernel
}

.check_variance_scale <- function(variance, y, what) {
  vy <- if (length(y) < 2L) 1 else stats::var(y)
  if (!(is.finite(vy) && vy > 0)) vy <- 1
  ratio <- variance / vy
  if (!(ratio <= .var_ratio && ratio >= 1 / .var_ratio)) {
    stop(sprintf("the %s %s is %s times %s: outside a factor 1e100 either way, the bound %s double precision. Give a variance on the scale of %s, or leave it NULL to choose it from the data",
                 what, format(variance, digits = 3L), format(ratio, digits = 3L),
                 if (is.null(y)) "the latent scale of a classifier (1)" else
                   sprintf("the variance of y (%s)", format(vy, digits = 3L)),
                 if (ratio > 1) "overflows" else "underflows, and the optimiser cannot move it, in",
                 if (is.null(y)) "1" else "var(y)"),
         call. = FALSE)
  }
  invisible()
}

# The kernel at the parameters `params` (blocks variance and lengthscale as
# built by .kern_params()).
.kernel_at <- function(kernel, params) {
  if (.is_combo(kernel)) {
    part <- .lengthscale_parts(names(params$lengthscale))
    return(.kern_map(kernel, function(k, i) {
      k$variance <- unname(params$variance[[i]])
      k$lengthscale <- unname(params$lengthscale[part == paste0("k", i)])
      k
    }))
  }
  kernel$variance <- params$variance
  kernel$lengthscale <- params$lengthscale
  kernel
}

# The kernel of a previous fit, for a warm start, when its lengthscales still
# fit D input columns (an update() may change the inputs) and, for a
# combination, it has the same parts.
.warm_kernel <- function(kernel, params, D) {
  if (.is_combo(kernel)) {
    P <- length(.kern_leaves(kernel))
    nm <- names(params$lengthscale)
    if (length(params$variance) != P || is.null(nm)) return(kernel)
    n <- table(factor(.lengthscale_parts(nm), levels = paste0("k", seq_len(P))))
    if (any(n == 0L | (n > 1L & n != D))) return(kernel)
    return(.kernel_at(kernel, params))
  }
  if ((length(params$lengthscale) > 1L && length(params$lengthscale) != D) ||
      length(params$variance) != 1L) {
    return(kernel)                      # also: the previous fit had a combination
  }
  .kernel_at(kernel, params)
}

# ---- sums and products of kernels ------------------------------------------

#' Sums and products of kernels
#'
#' Kernels combine with \code{+} and \code{*}: \code{k1 + k2} is the kernel
#' \eqn{k_1(x, x') + k_2(x, x')} and \code{k1 * k2} is
#' \eqn{k_1(x, x') k_2(x, x')}; both are positive definite when the parts
#' are (Rasmussen and Williams 2006, sec. 4.2.4), and they nest, as in
#' \code{(k1 + k2) * k3}. A sum models a function as the sum of independent
#' functions (a short- and a long-range part, say); a product makes the
#' parts' correlations multiply. Every model, \code{\link{select_inducing}()}
#' and \code{\link{kernel_matrix}()} accept combinations.
#'
#' \strong{Parts and names.} The single kernels in a combination are its
#' parts, numbered \code{k1}, \code{k2}, ... from left to right (for
#' \code{(k1 + k2) * k3} in that order). Fits name their parameters by part:
#' \code{variance[k2]} is the variance of part 2, \code{lengthscale[k1]} the
#' lengthscale of part 1 and \code{lengthscale[k1,3]} its lengthscale of
#' input column 3 when part 1 has one lengthscale per column (ARD). These
#' names work in \code{coef()}, \code{summary()} and the \code{fixed}
#' argument of the models.
#'
#' \strong{The scale of a product.} In a product only the overall scale
#' \eqn{\prod_i \sigma_i^2} is identified, so the variance of every factor
#' after the first that is a single kernel is held fixed: at 1 when it is
#' not given, else at the value given. It is reported as fixed and not
#' optimised; the first factor carries the scale. (A later factor that is
#' itself a sum keeps its parts' variances free, since their ratio matters;
#' the product's overall scale is then redundant, which the optimiser
#' tolerates.)
#'
#' \strong{Starting values.} A part's variance left \code{NULL} starts at an
#' equal share of the signal variance among the parts of a sum (the first
#' factor of a product takes the product's share). Parts whose lengthscales
#' are \code{NULL} start apart, each from the data: the \eqn{j}-th of
#' \eqn{n} such parts at a common scale times the ratio of the
#' \eqn{p_j}-quantile of the distances between the standardised inputs to
#' their median, with \eqn{p_j} from 1\% (the first part) to 50\% (the
#' last) spaced geometrically. So a sum's parts start from short to long
#' range (as in the Matern 5/2 + RBF kernel of Salimbeni et al. 2018)
#' rather than equal, which would keep them equal under any optimiser, and
#' however many parts there are, every start lies within the distances the
#' data have. The regression models' grid search scans the common scale,
#' all parts jointly; lengthscales and variances you give are kept.
#'
#' @param e1,e2 kernels, such as \code{\link{kernel_rbf}()} or combinations.
#' @return A kernel of class \code{"sparsevgp_kernel"}.
#' @references Rasmussen, C. E. and Williams, C. K. I. (2006). \emph{Gaussian
#'   Processes for Machine Learning}. MIT Press.
#'
#'   Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M. (2018).
#'   Orthogonally decoupled variational Gaussian processes. \emph{Advances in
#'   Neural Information Processing Systems 31}.
#' @seealso \code{\link{kernels}}, \code{\link{kernel_matrix}}
#' @examples
#' # the default kernel of Salimbeni et al. (2018) for D input columns
#' D <- 1
#' k <- kernel_matern52(lengthscale = 0.1 * sqrt(D), variance = 0.5) +
#'   kernel_rbf(lengthscale = sqrt(D), variance = 0.5)
#' k
#' x <- matrix(seq(0, 1, length.out = 4))
#' all.equal(kernel_matrix(k, x),
#'           kernel_matrix(k$parts[[1]], x) + kernel_matrix(k$parts[[2]], x))
#' # a product: the second factor's variance is held at 1
#' (kernel_rbf(0.5) + kernel_matern12(2)) * kernel_rbf(3)
#' fit <- sgpr(y ~ x, data = snelson, inducing = 15,
#'             kernel = kernel_rbf(lengthscale = 0.5) + kernel_rbf(lengthscale = 3))
#' coef(fit)
#' @name kernel-combinations
#' @aliases Ops.sparsevgp_kernel
NULL

#' @rdname kernel-combinations
#' @export
Ops.sparsevgp_kernel <- function(e1, e2) {
  if (!(.Generic %in% c("+", "*"))) {
    stop(sprintf("kernels combine only by '+' and '*', not by '%s'", .Generic), call. = FALSE)
  }
  if (missing(e2) || !inherits(e1, "sparsevgp_kernel") || !inherits(e2, "sparsevgp_kernel")) {
    stop(sprintf("both sides of '%s' must be kernels such as kernel_rbf()", .Generic),
         call. = FALSE)
  }
  op <- if (.Generic == "+") "sum" else "product"
  flat <- function(k) if (.is_combo(k) && k$op == op) k$parts else list(k)
  parts <- c(flat(e1), flat(e2))
  # the nesting of the result: one level above its deepest part
  depth <- 1L + max(vapply(parts, function(k) if (.is_combo(k)) .kern_check_depth(k, "kernel") else 0L, 1L))
  if (depth > .kern_max_depth) {
    stop(sprintf("this '%s' would nest sums and products %d levels deep, more than the %d allowed: flatten the expression (k1 + k2 + k3 is one level, however many parts)",
                 .Generic, depth, .kern_max_depth), call. = FALSE)
  }
  if (op == "product") {
    parts[-1L] <- lapply(parts[-1L], function(k) {
      if (.is_combo(k)) return(k)
      if (is.null(k$variance)) k$variance <- 1
      k$fixed_variance <- TRUE
      k
    })
  }
  structure(list(op = op, parts = parts),
            class = c("sparsevgp_kernel_combo", "sparsevgp_kernel"))
}

# The single kernels of a kernel, left to right (depth first).
.kern_leaves <- function(kernel) {
  if (!.is_combo(kernel)) return(list(kernel))
  unlist(lapply(kernel$parts, .kern_leaves), recursive = FALSE)
}

# The kernel with each single kernel k (the i-th, left to right) replaced by
# f(k, i).
.kern_map <- function(kernel, f) {
  i <- 0L
  rec <- function(k) {
    if (!.is_combo(k)) {
      i <<- i + 1L
      return(f(k, i))
    }
    k$parts <- lapply(k$parts, rec)
    k
  }
  rec(kernel)
}

.kern_ard <- function(kernel, D) {
  # a kernel whose `ard` is NULL (the default) gets one lengthscale per
  # input column when there is more than one
  .kern_map(kernel, function(k, i) {
    if (is.null(k$ard)) k$ard <- D > 1L && is.null(k$lengthscale)
    k
  })
}

# The lengthscales left NULL: f(k) times spread[i] for the i-th single
# kernel (left to right); `spread` from .kern_part_spread().
.kern_fill_lengthscale <- function(kernel, f, spread) {
  .kern_map(kernel, function(k, i) {
    if (is.null(k$lengthscale)) {
      k$lengthscale <- if (spread[i] == 1) f(k) else spread[i] * f(k)
    }
    k
  })
}

# Where the parts of a combination whose lengthscales are unset start,
# relative to a common scale, from the inputs x: part j of the n such
# parts (left to right) at the p_j-quantile of the distances between the
# (standardised) inputs, divided by their median, with p_j from 1% (the
# first) to 50% (the last) spaced geometrically: short-range parts first,
# long-range last (as in the Matern 5/2 + RBF sum of Salimbeni et al.
# 2018), apart (equal parts would stay equal under any optimiser) and,
# however many parts there are, within the range of distances the data
# have. Ties (few distinct distances) fall back to factors of 2 apart. 1 for
# a single part, and for the parts whose lengthscales are given.
.kern_part_spread <- function(kernel, x) {
  need <- vapply(.kern_leaves(kernel), function(k) is.null(k$lengthscale), TRUE)
  out <- rep(1, length(need))
  n <- sum(need)
  if (n <= 1L) return(out)
  j <- seq_len(n)
  idx <- unique(round(seq(1, nrow(x), length.out = min(nrow(x), 400L))))
  xs <- x[idx, , drop = FALSE]
  sx <- .sd_or_one(.col_sd(xs))
  d <- as.vector(stats::dist(sweep(xs, 2L, sx, "/")))
  d <- d[d > 0]
  q <- if (length(d)) {
    stats::quantile(d, 0.5 * 0.02^((n - j) / (n - 1)), names = FALSE, type = 7) /
      stats::median(d)
  }
  if (is.null(q) || any(!is.finite(q)) || any(diff(q) <= 0)) q <- 2^(j - n)
  out[need] <- q
  out
}

# The variances left NULL, so that k(x, x) is about v: equal shares among
# the parts of a sum, the first factor of a product takes the product's
# share (the later ones are held, at 1 unless given).
.kern_fill_variance <- function(kernel, v) {
  if (!.is_combo(kernel)) {
    if (is.null(kernel$variance)) kernel$variance <- v
    return(kernel)
  }
  n <- length(kernel$parts)
  kernel$parts <- lapply(seq_len(n), function(i) {
    .kern_fill_variance(kernel$parts[[i]], if (kernel$op == "sum") v / n else if (i == 1L) v else 1)
  })
  kernel
}

# Whether the kernel that .kern_fill_variance(kernel, v) gives is v times
# one kernel: every variance it fills scales the whole (a leaf without a
# variance; a sum whose parts all are so; a product whose first part is so,
# its other parts taking 1 or their own).
.kern_variance_linear <- function(kernel) {
  if (!.is_combo(kernel)) return(is.null(kernel$variance))
  if (kernel$op == "sum") return(all(vapply(kernel$parts, .kern_variance_linear, TRUE)))
  .kern_variance_linear(kernel$parts[[1L]])
}

# k(x, x) of a kernel with its variances set (s), and its derivatives with
# respect to the log variances of the parts (ds).
.kern_scale_grad <- function(kernel) {
  if (!.is_combo(kernel)) return(list(s = kernel$variance, ds = kernel$variance))
  g <- lapply(kernel$parts, .kern_scale_grad)
  s <- vapply(g, `[[`, 1, "s")
  if (kernel$op == "sum") {
    return(list(s = sum(s), ds = unlist(lapply(g, `[[`, "ds"))))
  }
  list(s = prod(s), ds = unlist(lapply(seq_along(g), function(i) g[[i]]$ds * prod(s[-i]))))
}

.kern_scale <- function(kernel) .kern_scale_grad(kernel)$s

# The signal variance k(x, x) of a fit at its parameters.
.signal_variance <- function(fit) {
  if (is.null(fit$params$variance)) return(NULL)
  .kern_scale(.kernel_at(fit$kernel, fit$params))
}

# The parameter blocks of a kernel: list(variance, lengthscale), named by
# part for a combination (variance[k2], lengthscale[k1] or, with ARD,
# lengthscale[k1,3]).
.kern_params <- function(kernel) {
  if (!.is_combo(kernel)) {
    return(list(variance = kernel$variance, lengthscale = kernel$lengthscale))
  }
  lv <- .kern_leaves(kernel)
  v <- vapply(lv, function(k) as.double(k$variance), 1)
  names(v) <- paste0("k", seq_along(lv))
  ls <- unlist(lapply(seq_along(lv), function(i) {
    l <- lv[[i]]$lengthscale
    stats::setNames(l, if (length(l) == 1L) paste0("k", i) else sprintf("k%d,%d", i, seq_along(l)))
  }))
  list(variance = v, lengthscale = ls)
}

# The parameters a combination holds fixed (the variances of later factors
# of a product), as names for .fixed_mask().
.kern_held <- function(kernel) {
  if (!.is_combo(kernel)) return(character())
  held <- vapply(.kern_leaves(kernel), function(k) isTRUE(k$fixed_variance), TRUE)
  sprintf("variance[k%d]", which(held))
}

# A gradient in the log parameters of the parts, in the order of the parts
# (log variance, then log lengthscales, per part), as the blocks of
# .kern_params().
.kern_split_theta <- function(kernel, theta) {
  if (!.is_combo(kernel)) return(list(variance = theta[1L], lengthscale = theta[-1L]))
  p <- .kern_params(kernel)
  nls <- vapply(.kern_leaves(kernel), function(k) length(k$lengthscale), 1L)
  first <- cumsum(c(1L, 1L + nls[-length(nls)]))
  iv <- first
  il <- unlist(lapply(seq_along(nls), function(i) first[i] + seq_len(nls[i])))
  list(variance = stats::setNames(theta[iv], names(p$variance)),
       lengthscale = stats::setNames(theta[il], names(p$lengthscale)))
}

# Contraction of an adjoint G = dF/dK(x, y) (dF/dK(x, x) when y is NULL):
# list(theta = dF/d log parameters of the parts, x = dF/dx or NULL). A sum
# passes G to each part; a product passes to each factor G times the other
# factors' kernel matrices (elementwise), which is the product rule for
# sum(G o K_1 o ... o K_n). Memory: one kernel matrix per factor. With
# `threads` > 1 the cross-covariances K(x, y) and their contractions are
# computed in that many OpenMP threads (over the rows of y).
.kern_grad <- function(kernel, x, y, G, want_x, K = NULL, threads = 1L) {
  if (!.is_combo(kernel)) {
    return(.ffi_kern_grad(kernel, x, y, G, want_x, K = K, threads = threads))
  }
  parts <- kernel$parts
  if (kernel$op == "sum") {
    g <- lapply(parts, function(k) .kern_grad(k, x, y, G, want_x, threads = threads))
  } else {
    Ks <- lapply(parts, function(k) {
      if (threads > 1L && !is.null(y)) .ffi_stream_kern(k, x, y, threads) else
        .ffi_kern_matrix(k, x, y)
    })
    g <- lapply(seq_along(parts), function(i) {
      Gi <- G
      for (j in seq_along(parts)[-i]) Gi <- Gi * Ks[[j]]
      .kern_grad(parts[[i]], x, y, Gi, want_x,
                 K = if (!is.null(y) && !.is_combo(parts[[i]])) Ks[[i]], threads = threads)
    })
  }
  list(theta = unlist(lapply(g, `[[`, "theta")),
       x = if (want_x) Reduce(`+`, lapply(g, `[[`, "x")))
}

# Contraction of an adjoint g of diag K(x, x), as .kern_grad().
.kern_grad_diag <- function(kernel, x, g) {
  if (!.is_combo(kernel)) return(.ffi_kern_grad_diag(kernel, x, g))
  parts <- kernel$parts
  if (kernel$op == "sum") {
    return(unlist(lapply(parts, function(k) .kern_grad_diag(k, x, g))))
  }
  ds <- lapply(parts, function(k) .ffi_kern_diag(k, x))
  unlist(lapply(seq_along(parts), function(i) {
    gi <- g
    for (j in seq_along(parts)[-i]) gi <- gi * ds[[j]]
    .kern_grad_diag(parts[[i]], x, gi)
  }))
}

.kernel_short <- c(rbf = "RBF", matern12 = "Matern 1/2", matern32 = "Matern 3/2",
                   matern52 = "Matern 5/2")

# The formula of a combination: "(k1 + k2) * k3", or with labels
# "(Matern 5/2 [k1] + RBF [k2]) * RBF [k3]"; for a single kernel its label.
.kern_expr <- function(kernel, labels = FALSE) {
  if (!.is_combo(kernel)) return(.kernel_labels[[kernel$family]])
  i <- 0L
  rec <- function(k, parent) {
    if (!.is_combo(k)) {
      i <<- i + 1L
      return(if (labels) sprintf("%s [k%d]", .kernel_short[[k$family]], i) else paste0("k", i))
    }
    e <- paste(vapply(k$parts, rec, "", parent = k$op),
               collapse = if (k$op == "sum") " + " else " * ")
    if (identical(parent, "product") && k$op == "sum") paste0("(", e, ")") else e
  }
  rec(kernel, NULL)
}

# One line per part: "k2: RBF, variance 1 (fixed), lengthscale 0.5".
.kern_part_lines <- function(kernel, digits) {
  lv <- .kern_leaves(kernel)
  vapply(seq_along(lv), function(i) {
    k <- lv[[i]]
    v <- if (is.null(k$variance)) "(from data)" else format(k$variance, digits = digits)
    if (isTRUE(k$fixed_variance)) v <- paste(v, "(fixed)")
    ls <- if (is.null(k$lengthscale)) "(from data)" else
      paste0(if (length(k$lengthscale) > 1L) "(ARD) ",
             paste(format(k$lengthscale, digits = digits), collapse = " "))
    sprintf("k%d: %s, variance %s, lengthscale %s", i, .kernel_short[[k$family]], v, ls)
  }, "")
}

# The kernel lines of the print methods of fits and selections.
.kernel_lines <- function(k, digits) {
  if (!.is_combo(k)) {
    return(sprintf("kernel: %s, variance %s, lengthscale %s", .kernel_labels[[k$family]],
                   format(k$variance, digits = digits),
                   paste(format(k$lengthscale, digits = digits), collapse = " ")))
  }
  c(sprintf("kernel: %s", .kern_expr(k)), paste0("  ", .kern_part_lines(k, digits)))
}

#' @export
print.sparsevgp_kernel_combo <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat(if (x$op == "sum") "Sum" else "Product", " of kernels: ", .kern_expr(x), "\n", sep = "")
  cat(paste0("  ", .kern_part_lines(x, digits), "\n"), sep = "")
  invisible(x)
}
