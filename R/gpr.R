# Exact Gaussian process regression (Rasmussen and Williams 2006, Algorithm
# 2.1): the reference that every sparse model is tested against. O(N^3)
# time, O(N^2) memory.

#' Exact Gaussian process regression
#'
#' Fits a Gaussian process regression model \eqn{y = m + f(x) + \epsilon}{y = m + f(x) + epsilon},
#' \eqn{f \sim GP(0, k)}{f ~ GP(0, k)}, \eqn{\epsilon \sim N(0, \sigma^2)}{epsilon ~ N(0, sigma^2)}, by maximising
#' the log marginal likelihood over the kernel parameters, the noise variance
#' and the constant mean with L-BFGS-B on the analytic gradient.
#'
#' The cost is \eqn{O(N^3)}{O(N^3)}: use it for a few thousand points at most, and as
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
#' @param noise starting value of the noise variance \eqn{\sigma^2}{sigma^2}; by
#'   default a tenth of the variance of \code{y}. Hold it fixed with
#'   \code{fixed = "noise"}.
#' @param mean \code{"constant"} (a learned constant mean, starting at
#'   \code{mean(y)}) or a number, the fixed mean.
#' @param optimize if \code{FALSE}, build the model at the given parameters
#'   without fitting (parameters left unset take simple data-driven values:
#'   the median distance between inputs, \eqn{var(y)} and \eqn{var(y)/10});
#'   with \code{TRUE} they start at the best point of a small grid (see
#'   \code{\link{kernels}}) and are fitted.
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"}, \code{"mean"},
#'   or single entries such as \code{"lengthscale[2]"}.
#' @param control a list of settings:
#'   \code{maxit} (L-BFGS-B iterations per run, 1000; an iteration
#'   evaluates the bound once or more, and \code{print()} reports the
#'   evaluations), \code{factr} and
#'   \code{pgtol} (L-BFGS-B's own tests, see \code{\link[stats]{optim}});
#'   \code{min_gain} (a run stops when the bound has risen by less than
#'   \code{min_gain} nats per observation over its last 25 evaluations, or
#'   its last 10 for a run of \code{sgpr()} that continues from fitted
#'   parameters (re-selected inducing inputs or neighbours, the fit after
#'   the trial of \code{neighbours = "auto"}, all rows after a subsample),
#'   keeping the best point: default \eqn{10^{-3}}{10^-3}, 0 turns the rule off and
#'   runs to L-BFGS-B's convergence; a run from the starting values is not
#'   stopped this way before some parameter has moved by a tenth of its
#'   scale, about 10\% for a kernel parameter; such a stop is reported in
#'   \code{fit$optim} as \code{convergence = 3} with a message beginning
#'   "stopped: gain below control$min_gain", so that \code{convergence = 0}
#'   always means that L-BFGS-B's own tests were met); \code{trace} (\code{NULL}, the
#'   default, prints a progress line every 5 seconds in interactive sessions
#'   once a run takes that long; 0 never, 1 every second, 2 and more also
#'   \code{optim()}'s own trace); \code{jitter} and \code{jitter_cap}
#'   (Cholesky jitter relative to the mean diagonal).
#'   The optimiser works on the parameters of the standardised problem (each
#'   input column by its standard deviation, \eqn{y} by its mean and standard
#'   deviation) and its tests see the bound plus \eqn{N \log sd(y)}{N log sd(y)}, so that
#'   a fit does not depend on the units of \eqn{x} or \eqn{y}; parameters,
#'   the bound and predictions are reported on the data's own scale. A fit
#'   stopped by Ctrl-C returns the best parameters found so far with a
#'   warning; a fit that stops at \code{maxit}, or whose signal variance is
#'   below 1\% of the noise, gives a warning in plain words. A fit stopped by a
#'   time limit (\code{setTimeLimit()}, \code{R.utils::withTimeout()}), by
#'   memory that cannot be allocated or by a failed cluster stops with that
#'   error (see \code{\link{objective}}). \strong{Jitter:} every
#'   model tries its matrices as they are (\eqn{K_{uu}}{Kuu}, or
#'   \eqn{K + \sigma^2 I}{K + sigma^2 I} for \code{gpr()}) and adds jitter only when the
#'   Cholesky factorisation fails or a pivot falls below \eqn{10^{-12}}{1e-12} of its
#'   diagonal entry (below it, solves with the factor lose accuracy beyond
#'   \eqn{10^{-10}}{1e-10}: nearly coinciding inducing inputs); it then grows tenfold
#'   from \eqn{10^{-10}}{1e-10} of the mean diagonal up to \code{jitter_cap} (default
#'   \eqn{10^{-2}}{10^-2}). So where the matrix factorises, the bound and
#'   predictions are the jitter-free ones. \code{jitter} (default 0) is a
#'   jitter always added, relative to the mean diagonal. The jitter used,
#'   its size relative to the mean diagonal and the change it makes in the
#'   bound are in the fit and in \code{summary()}; beyond \eqn{10^{-8}}{1e-8} of the
#'   mean diagonal a warning says so; past the cap the fit stops with an
#'   error.
#' @param start a previous \code{gpr} fit whose parameters are the starting
#'   values (this is how \code{update()} warm-starts).
#' @param subset an expression selecting the rows of \code{data} to use,
#'   as in \code{\link[stats]{lm}} (\code{subset = Month > 5}).
#' @param weights prior weights for the Gaussian models, as in \code{lm()}:
#'   observation \eqn{n} has noise variance \eqn{\sigma^2 / w_n}{sigma^2 / w_n}, so
#'   an observation of weight 2 counts as the mean of two replicates.
#'   Positive numbers, one per observation (or a variable of \code{data}).
#'   Not for classifiers.
#' @param na.action what to do with rows that have missing values, as in
#'   \code{lm()}: by default \code{getOption("na.action")}
#'   (\code{na.omit}); \code{na.exclude} also drops them but pads
#'   \code{fitted()}, \code{residuals()} and \code{predict()} without
#'   \code{newdata} with \code{NA}.
#' @param offset a known component of the mean, one number per observation
#'   (or \code{offset()} terms in the formula), added to the constant mean;
#'   \code{predict()} evaluates it in \code{newdata}. For the Gaussian
#'   models only.
#' @param ... further arguments passed to the default method.
#' @return An object of class \code{c("gpr", "sparsevgp")}.
#' @templateVar model gpr
#' @templateVar classifier no
#' @template fit-value
#' @template practice
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
gpr.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("gpr", match.call(), parent.frame(), x, data, ...)
}

#' @rdname gpr
#' @export
gpr.default <- function(x, y, kernel = kernel_rbf(), noise = NULL,
                        mean = "constant", optimize = TRUE, fixed = NULL,
                        control = list(), start = NULL, weights = NULL, offset = NULL, ...) {
  call <- .model_call(match.call(), "gpr")
  .dots_data(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  y <- .as_response(y, nrow(x), model = "gpr")
  wo <- .check_weights_offset(weights, offset, nrow(x))
  if (!is.null(wo$offset)) y <- y - wo$offset
  kernel <- .check_kernel(kernel)
  if (!is.null(.check_start(start, "gpr", x))) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (is.null(noise)) noise <- start$params$noise
  }
  # with optimize = TRUE, unset parameters start at the best point of a grid
  # (R/start.R); the collapsed bound with Z = X is the exact likelihood
  if (.check_flag(optimize, "optimize") && is.null(start)) {
    st <- .start_regression(kernel, x, y, M = Inf, noise_free = is.null(noise))
    kernel <- st$kernel
    if (is.null(noise)) noise <- st$noise
  }
  kernel <- .kern_init(kernel, x, y)
  mn <- .mean_start(mean, mean(y))
  if (is.null(noise)) noise <- .noise_start(y)
  noise <- .check_positive(noise, "noise", 1L)
  params <- c(.kern_params(kernel), list(noise = noise, mean = mn$value))
  if (!is.null(start) && !mn$fixed) params$mean <- start$params$mean
  transforms <- c(variance = "log", lengthscale = "log", noise = "log",
                  mean = "identity")
  fit <- .new_fit("gpr", call, x, y, kernel, params, transforms, fixed,
                  always = if (mn$fixed) "mean", control = .check_control(control),
                  label = "Exact GP regression",
                  extra = c(list(noise_model = list(kind = "constant",
                                                    lambda = if (!is.null(wo$weights)) 1 / wo$weights)),
                            wo))
  .build_or_fit(fit, optimize)
}

# log p(y) and its gradient (Rasmussen and Williams 2006, eqs. 2.30 and
# 5.9): dF/dK_y = (alpha alpha' - K_y^-1) / 2, alpha = K_y^-1 (y - m). The
# gradient with respect to the noise variance is tr(dF/dK_y), with respect
# to the mean sum(alpha).
#' @export
.evaluate.gpr <- function(fit, params, grad = TRUE, ...) {
  x <- fit$x
  n <- nrow(x)
  kern <- .kernel_at(fit$kernel, params)
  Ky <- .ffi_kern_matrix(kern, x)
  lambda <- .noise_lambda(fit, params)
  diag(Ky) <- diag(Ky) + lambda
  ch <- .ffi_chol(Ky, 0, fit$control$jitter_cap)
  L <- ch$L
  r <- fit$y - params$mean
  z <- forwardsolve(L, r)
  alpha <- forwardsolve(L, z, transpose = TRUE)
  fit_term <- -0.5 * sum(z^2)
  logdet <- -sum(log(diag(L)))
  value <- fit_term + logdet - 0.5 * n * log(2 * pi)
  out <- list(value = value,
              terms = c(fit = fit_term, logdet = logdet),
              jitter = ch$jitter, jitter_scale = mean(diag(Ky)), jitter_base = 0,
              posterior = list(L = L, alpha = alpha))
  if (grad) {
    Kinv <- chol2inv(t(L))
    G <- 0.5 * (tcrossprod(alpha) - Kinv)
    gk <- .kern_split_theta(kern, .kern_grad(kern, x, NULL, G, FALSE)$theta)
    out$grad <- list(variance = gk$variance, lengthscale = gk$lengthscale,
                     noise = .noise_grad(fit, params, diag(G), lambda)$noise,
                     mean = sum(alpha))
  }
  out
}

# Predictive distribution of f at new inputs: mean, and variances or the
# full covariance.
#' @export
.predict_latent.gpr <- function(fit, xnew, full_cov) {
  kern <- .kernel_at(fit$kernel, fit$params)
  L <- fit$posterior$L
  alpha <- fit$posterior$alpha
  if (full_cov) {
    Ks <- .ffi_kern_matrix(kern, fit$x, xnew)
    V <- forwardsolve(L, Ks)
    return(list(mean = drop(crossprod(Ks, alpha)) + fit$params$mean,
                cov = .ffi_kern_matrix(kern, xnew) - crossprod(V)))
  }
  mean <- var <- numeric(nrow(xnew))
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    Ks <- .ffi_kern_matrix(kern, fit$x, xb)
    V <- forwardsolve(L, Ks)
    mean[b] <- drop(crossprod(Ks, alpha)) + fit$params$mean
    var[b] <- .ffi_kern_diag(kern, xb) - colSums(V^2)
  }
  list(mean = mean, var = var)
}

# The effective number of parameters of the exact GP: tr(S) with
# S = K (K + Lambda)^-1 = I - Lambda C^-1, plus the learned mean's share
# (see .collapsed_edf()). From the Cholesky factor of C = K + Lambda. O(N^3).
#' @export
.edf.gpr <- function(fit) {
  L <- fit$posterior$L
  lambda <- .noise_lambda(fit, fit$params)
  Ci <- chol2inv(t(L))
  tr_s <- length(lambda) - sum(lambda * diag(Ci))
  .edf_mean(fit, tr_s, lambda, function(u) sqrt(lambda) * (Ci %*% (sqrt(lambda) * u)))
}
