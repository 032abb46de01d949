# Exact Gaussian process regression (seed000 Algorithm 1): the reference
# that every sparse model is tested against. O(N^3) time, O(N^2) memory.

#' Exact Gaussian process regression
#'
#' Fits a Gaussian process regression model \eqn{y = m + f(x) + \epsilon},
#' \eqn{f \sim GP(0, k)}, \eqn{\epsilon \sim N(0, \sigma^2)}, by maximising
#' the log marginal likelihood over the kernel parameters, the noise variance
#' and the constant mean with L-BFGS-B on the analytic gradient.
#'
#' The cost is \eqn{O(N^3)}: use it for a few thousand points at most, and as
#' the reference for the sparse models, which it equals when their inducing
#' inputs are the training inputs.
#'
#' @param x a numeric matrix (or vector, or data frame of numeric columns) of
#'   inputs, one row per observation; or a formula such as \code{y ~ x1 + x2}
#'   whose variables are in \code{data}.
#' @param y the numeric response (matrix interface).
#' @param data a data frame for the formula interface.
#' @param kernel a kernel, such as \code{\link{kernel_rbf}()}; parameters
#'   left \code{NULL} are chosen from the data.
#' @param noise starting value of the noise variance \eqn{\sigma^2}; by
#'   default a tenth of the variance of \code{y}. Hold it fixed with
#'   \code{fixed = "noise"}.
#' @param mean \code{"constant"} (a learned constant mean, starting at
#'   \code{mean(y)}) or a number, the fixed mean.
#' @param optimize if \code{FALSE}, build the model at the given parameters
#'   without fitting.
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"}, \code{"mean"},
#'   or single entries such as \code{"lengthscale[2]"}.
#' @param control a list of settings: \code{maxit}, \code{factr},
#'   \code{pgtol}, \code{trace} (passed to \code{\link[stats]{optim}}),
#'   \code{jitter} and \code{jitter_cap} (Cholesky jitter relative to the mean
#'   diagonal). The sparse models always add \code{jitter} (default
#'   \eqn{10^{-8}}) to \eqn{K_{uu}}: inducing inputs that drift close
#'   together during optimisation make \eqn{K_{uu}} numerically singular
#'   while its Cholesky factorisation still succeeds, and the bound and
#'   gradients are then inaccurate without any error. The jitter lowers the
#'   bound by about \eqn{10^{-5}} nats in typical fits; \code{jitter = 0}
#'   tries the matrix as it is first. \code{gpr()} always tries
#'   \eqn{K + \sigma^2 I} as it is first. On failure the jitter grows tenfold
#'   up to \code{jitter_cap} (default \eqn{10^{-2}}), is recorded in the fit
#'   and gives a warning; past the cap the fit stops with an error.
#' @param start a previous \code{gpr} fit whose parameters are the starting
#'   values (this is how \code{update()} warm-starts).
#' @param ... further arguments passed to the default method.
#' @return An object of class \code{c("gpr", "sparsevgp")} with methods
#'   \code{print}, \code{summary}, \code{predict}, \code{plot},
#'   \code{logLik}, \code{coef}, \code{fitted}, \code{residuals},
#'   \code{nobs}, \code{update} and \code{\link{objective}}.
#' @references Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian
#'   Processes for Machine Learning. MIT Press. Algorithm 2.1.
#' @seealso \code{\link{sgpr}} for the sparse approximation.
#' @examples
#' fit <- gpr(y ~ x, data = snelson)
#' fit
#' p <- predict(fit, data.frame(x = c(0, 3, 6)))
#' p$mean
#' @export
gpr <- function(x, ...) UseMethod("gpr")

#' @rdname gpr
#' @export
gpr.formula <- function(x, data = NULL, ...) {
  md <- .formula_data(x, data)
  fit <- gpr.default(md$x, md$y, ...)
  fit$terms <- md$terms
  fit$xlevels <- md$xlevels
  fit$call <- .formula_call(match.call(), "gpr")
  fit
}

#' @rdname gpr
#' @export
gpr.default <- function(x, y, kernel = kernel_rbf(), noise = NULL,
                        mean = "constant", optimize = TRUE, fixed = NULL,
                        control = list(), start = NULL, ...) {
  call <- match.call()
  call[[1L]] <- as.name("gpr")
  call$start <- NULL
  .no_dots(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  y <- .as_response(y, nrow(x))
  kernel <- .check_kernel(kernel)
  if (!is.null(start)) {
    if (!inherits(start, "gpr")) stop("'start' must be a gpr fit", call. = FALSE)
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (is.null(noise)) noise <- start$params$noise
  }
  kernel <- .kern_init(kernel, x, y)
  mn <- .mean_start(mean, y)
  if (is.null(noise)) noise <- .noise_start(y)
  noise <- .check_positive(noise, "noise", 1L)
  params <- list(variance = kernel$variance, lengthscale = kernel$lengthscale,
                 noise = noise, mean = mn$value)
  if (!is.null(start) && !mn$fixed) params$mean <- start$params$mean
  transforms <- c(variance = "log", lengthscale = "log", noise = "log",
                  mean = "identity")
  fit <- structure(list(
    call = call, x = x, y = y, kernel = kernel, params = params,
    transforms = transforms,
    fixed = .fixed_mask(fixed, params, transforms, if (mn$fixed) "mean"),
    control = .check_control(control), eval_fun = .gpr_eval,
    predict_fun = .gpr_predict_latent, noise_fun = .noise_constant,
    model = "Exact GP regression"),
    class = c("gpr", "sparsevgp"))
  .build_or_fit(fit, optimize)
}

.no_dots <- function(...) {
  if (...length()) {
    nm <- names(list(...))
    stop(sprintf("unused arguments: %s",
                 paste(if (is.null(nm)) "(unnamed)" else nm, collapse = ", ")),
         call. = FALSE)
  }
}

.mean_start <- function(mean, y) {
  if (identical(mean, "constant")) return(list(value = mean(y), fixed = FALSE))
  if (is.numeric(mean) && length(mean) == 1L && is.finite(mean)) {
    return(list(value = as.double(mean), fixed = TRUE))
  }
  stop("'mean' must be \"constant\" or one finite number", call. = FALSE)
}

.noise_start <- function(y) {
  v <- if (length(y) > 1L) stats::var(y) / 10 else 0.1
  if (is.finite(v) && v > 0) v else 0.1
}

# Homoscedastic noise at new inputs.
.noise_constant <- function(object, xnew, newdata = NULL) {
  rep(object$params$noise, nrow(xnew))
}

# The kernel of a previous fit, for a warm start, when its lengthscales still
# fit D input columns (an update() may change the inputs).
.warm_kernel <- function(kernel, params, D) {
  if (length(params$lengthscale) > 1L && length(params$lengthscale) != D) {
    return(kernel)
  }
  .kernel_at(kernel, params)
}

# The kernel at the parameters `params`.
.kernel_at <- function(kernel, params) {
  kernel$variance <- params$variance
  kernel$lengthscale <- params$lengthscale
  kernel
}

# log p(y) and its gradient (seed000 Algorithm 1 and erratum E3):
#   dF/dK_y = (alpha alpha' - K_y^-1) / 2, alpha = K_y^-1 (y - m).
.gpr_eval <- function(fit, params, grad = TRUE) {
  x <- fit$x
  n <- nrow(x)
  kern <- .kernel_at(fit$kernel, params)
  Ky <- .Call(ffi_kern_matrix, .kern_c(kern), x, NULL)
  diag(Ky) <- diag(Ky) + params$noise
  ch <- .chol_jitter(Ky, 0, fit$control$jitter_cap)
  L <- ch$L
  r <- fit$y - params$mean
  z <- forwardsolve(L, r)
  alpha <- forwardsolve(L, z, transpose = TRUE)
  fit_term <- -0.5 * sum(z^2)
  logdet <- -sum(log(diag(L)))
  value <- fit_term + logdet - 0.5 * n * log(2 * pi)
  out <- list(value = value,
              terms = c(fit = fit_term, logdet = logdet),
              jitter = ch$jitter, jitter_scale = mean(diag(Ky)),
              posterior = list(L = L, alpha = alpha))
  if (grad) {
    Kinv <- chol2inv(t(L))
    G <- 0.5 * (tcrossprod(alpha) - Kinv)
    gk <- .kern_grad(kern, x, NULL, G)$theta
    out$grad <- list(variance = gk[1L], lengthscale = gk[-1L],
                     noise = sum(diag(G)) * params$noise,
                     mean = sum(alpha))
  }
  out
}

# Predictive distribution of f at new inputs: mean, and variances or the
# full covariance.
.gpr_predict_latent <- function(object, xnew, full_cov) {
  kern <- .kernel_at(object$kernel, object$params)
  kc <- .kern_c(kern)
  L <- object$posterior$L
  alpha <- object$posterior$alpha
  if (full_cov) {
    Ks <- .Call(ffi_kern_matrix, kc, object$x, xnew)
    V <- forwardsolve(L, Ks)
    return(list(mean = drop(crossprod(Ks, alpha)) + object$params$mean,
                cov = .Call(ffi_kern_matrix, kc, xnew, NULL) - crossprod(V)))
  }
  mean <- var <- numeric(nrow(xnew))
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    Ks <- .Call(ffi_kern_matrix, kc, object$x, xb)
    V <- forwardsolve(L, Ks)
    mean[b] <- drop(crossprod(Ks, alpha)) + object$params$mean
    var[b] <- .Call(ffi_kern_diag, kc, xb) - colSums(V^2)
  }
  list(mean = mean, var = var)
}
