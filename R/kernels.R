# Kernels: constructors, evaluation and the one adjoint contraction that
# turns a bound's adjoints into gradients. The numerical work is in
# src/kernels.c, reached through R/ffi.R.

.kernel_labels <- c(rbf = "RBF (squared exponential)", matern12 = "Matern 1/2",
                    matern32 = "Matern 3/2", matern52 = "Matern 5/2")

.new_kernel <- function(family, lengthscale, variance, ard) {
  if (!is.null(lengthscale)) lengthscale <- .check_positive(lengthscale, "lengthscale")
  if (!is.null(variance)) variance <- .check_positive(variance, "variance", 1L)
  if (!is.null(ard)) ard <- .check_flag(ard, "ard")
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
#' from 1/32 to 8 and the signal variance a share of \eqn{var(y)} (the rest
#' being the starting noise), scored by the collapsed bound on a subsample of
#' at most 1000 rows; the grid finds a signal that varies on a small part of
#' the input range, where a single start at a typical distance would settle
#' on a flat fit. The classifiers start at variance 1 and the median distance
#' between inputs. Models optimise kernel parameters on the log scale.
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
  kernel
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
  if (length(kernel$lengthscale) > 1L && length(kernel$lengthscale) != ncol(x)) {
    stop(sprintf("the kernel has %d lengthscales but 'x' has %d columns",
                 length(kernel$lengthscale), ncol(x)), call. = FALSE)
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
# sum_i Gww_ii jitter_i to dF/d log variance. Returns list(variance,
# lengthscale, W) with W = dF/dW (zeros unless want_W).
.contract <- function(kernel, x, W, Gww, Gwf, gdiag, Kwf = NULL, jitter = 0, want_W = TRUE) {
  g_ww <- .ffi_kern_grad(kernel, W, NULL, Gww, want_W)
  g_wf <- .ffi_kern_grad(kernel, W, x, Gwf, want_W, K = Kwf)
  theta <- g_ww$theta + g_wf$theta + .ffi_kern_grad_diag(kernel, x, gdiag)
  theta[1L] <- theta[1L] + sum(diag(Gww) * jitter)
  list(variance = theta[1L], lengthscale = theta[-1L],
       W = if (want_W) g_ww$x + g_wf$x else matrix(0, nrow(W), ncol(W)))
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
  if (!is.null(kernel$lengthscale) && length(kernel$lengthscale) > 1L &&
      length(kernel$lengthscale) != D) {
    stop(sprintf("the kernel has %d lengthscales but the inputs have %d columns",
                 length(kernel$lengthscale), D), call. = FALSE)
  }
  if (is.null(kernel$lengthscale)) {
    # a deterministic subsample keeps this O(N) and free of RNG side effects
    idx <- unique(round(seq(1, nrow(x), length.out = min(nrow(x), 400L))))
    xs <- x[idx, , drop = FALSE]
    med <- function(m) {
      d <- as.vector(stats::dist(m))
      d <- d[d > 0]
      if (length(d) == 0L) 1 else stats::median(d)
    }
    kernel$lengthscale <- if (isTRUE(kernel$ard)) {
      vapply(seq_len(D), function(d) med(xs[, d, drop = FALSE]), 1) * sqrt(D)
    } else {
      med(xs)
    }
  }
  if (is.null(kernel$variance)) {
    v <- if (is.null(y) || length(y) < 2L) 1 else stats::var(y)
    kernel$variance <- if (is.finite(v) && v > 0) v else 1
  }
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
  span <- apply(x, 2L, function(v) max(v) - min(v))
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
  if (!check_variance) return(kernel)
  vy <- if (length(y) < 2L) 1 else stats::var(y)
  if (!(is.finite(vy) && vy > 0)) vy <- 1
  ratio <- kernel$variance / vy
  if (!(ratio <= .var_ratio && ratio >= 1 / .var_ratio)) {
    stop(sprintf("the kernel variance %s is %s times %s: outside a factor 1e100 either way, the bound %s double precision. Give a variance on the scale of %s, or leave it NULL to choose it from the data",
                 format(kernel$variance, digits = 3L), format(ratio, digits = 3L),
                 if (is.null(y)) "the latent scale of a classifier (1)" else
                   sprintf("the variance of y (%s)", format(vy, digits = 3L)),
                 if (ratio > 1) "overflows" else "underflows, and the optimiser cannot move it, in",
                 if (is.null(y)) "1" else "var(y)"),
         call. = FALSE)
  }
  kernel
}

# The kernel at the parameters `params`.
.kernel_at <- function(kernel, params) {
  kernel$variance <- params$variance
  kernel$lengthscale <- params$lengthscale
  kernel
}

# The kernel of a previous fit, for a warm start, when its lengthscales still
# fit D input columns (an update() may change the inputs).
.warm_kernel <- function(kernel, params, D) {
  if (length(params$lengthscale) > 1L && length(params$lengthscale) != D) {
    return(kernel)
  }
  .kernel_at(kernel, params)
}
