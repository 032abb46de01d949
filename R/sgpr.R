# Sparse GP regression with the collapsed bound of Titsias (2009), for
# homoscedastic noise, known per-point noise variances, or a learned
# log-linear noise model (heteroscedastic SGPR, seed004 chapter 3).
# The bound and its adjoints are computed by src/bound_gaussian.c.

#' Sparse Gaussian process regression (SGPR)
#'
#' Fits a sparse variational Gaussian process with \eqn{M} inducing inputs
#' by maximising the collapsed evidence lower bound of Titsias (2009),
#' \deqn{F = \log N(y; m, Q_{ff} + \Lambda) - \frac12 \mathrm{tr}(\Lambda^{-1}(K_{ff} - Q_{ff})),}
#' \eqn{Q_{ff} = K_{fu} K_{uu}^{-1} K_{uf}}, over the kernel parameters, the
#' noise, the constant mean and the inducing inputs. The cost is
#' \eqn{O(N M^2)} time and \eqn{O(N M)} memory. With the inducing inputs at
#' the training inputs the bound equals the exact log marginal likelihood
#' of \code{\link{gpr}()}.
#'
#' The noise covariance \eqn{\Lambda} is diagonal:
#' \itemize{
#'   \item \code{noise} a number: one learned variance \eqn{\sigma^2}
#'     (homoscedastic; the number is the starting value);
#'   \item a numeric vector of length \eqn{N}: known per-point variances,
#'     held fixed;
#'   \item a one-sided formula such as \code{~ x + I(x^2)}: a log-linear
#'     model \eqn{\log\lambda_n = \phi(x_n)^\top\beta} with \eqn{\beta}
#'     learned. Its variables are looked up in \code{data} (formula
#'     interface) or among the columns of \code{x} (matrix interface; unnamed
#'     columns are called \code{x1}, \code{x2}, ...).
#' }
#'
#' Predictions follow the Titsias/GPflow convention (no diagonal
#' correction); see \code{\link{predict.sparsevgp}}. \code{summary()} reports
#' the bound's terms, the upper bound on \eqn{\log p(y)} of seed004
#' (section 3.4; Titsias 2014) and so a bracket on the KL divergence from
#' the approximation to the exact posterior.
#'
#' @inheritParams gpr
#' @param inducing the inducing inputs: a matrix with the columns of the
#'   inputs; a number \eqn{M}, for that many training inputs chosen by greedy
#'   conditional variance (\code{\link{select_inducing}()}; weighted by
#'   \eqn{1/\lambda_n} when the noise variances differ at the start, that
#'   is for known per-point variances); a method name, \code{"greedy"},
#'   \code{"kmeans"} or \code{"random"}, for \eqn{M = \min(N, 100)} inputs
#'   chosen that way; or the result of \code{select_inducing()}, for full
#'   control (threshold, weights). By default \eqn{M = \min(N, 100)} by
#'   greedy selection. Greedy selection uses R's random numbers only to
#'   break ties: \code{set.seed()} makes it reproducible. A learned noise
#'   model starts from a constant variance, so its first selection is
#'   unweighted; \code{\link{reinit_inducing}()} re-selects with the fitted
#'   variances. At most \eqn{N} inducing inputs are accepted: more cannot
#'   raise the bound above what \eqn{Z = X} gives (the exact GP), and a
#'   larger \eqn{M} is almost always a mistake in the call.
#' @param noise a number, a vector of \eqn{N} known variances, or a
#'   one-sided formula; see Details. By default one variance starting at a
#'   tenth of the variance of \code{y}.
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"},
#'   \code{"noise_coef"}, \code{"mean"}, \code{"Z"}, or single entries such
#'   as \code{"Z[3,1]"}.
#' @param start a previous fit of the same kind whose parameters are used as
#'   starting values (this is how \code{update()} warm-starts).
#' @return An object of class \code{c("sgpr", "sparsevgp")}.
#' @references Titsias, M. (2009). Variational learning of inducing
#'   variables in sparse Gaussian processes. AISTATS.
#' @seealso \code{\link{posterior_inducing}}, \code{\link{gpr}},
#'   \code{\link{objective}}
#' @examples
#' fit <- sgpr(y ~ x, data = snelson, inducing = 15)
#' fit
#' summary(fit)
#' plot(fit)
#'
#' # heteroscedastic: the log noise variance is quadratic in x
#' set.seed(1)
#' x <- runif(200, -5, 5)
#' y <- 2.5 * sin(6 * x / 5) + rnorm(200, sd = sqrt(0.05 + 0.05 * x^2))
#' het <- sgpr(x, y, inducing = 20, noise = ~ x + I(x^2))
#' coef(het)
#' @export
sgpr <- function(x, ...) UseMethod("sgpr")

#' @rdname sgpr
#' @export
sgpr.formula <- function(x, data = NULL, ...) {
  md <- .formula_data(x, data)
  fit <- sgpr.default(md$x, md$y, ..., .noise_data = if (is.null(data)) NULL else data)
  fit$terms <- md$terms
  fit$xlevels <- md$xlevels
  fit$call <- .formula_call(match.call(), "sgpr")
  fit
}

#' @rdname sgpr
#' @export
sgpr.default <- function(x, y, kernel = kernel_rbf(), inducing = NULL,
                         noise = NULL, mean = "constant", optimize = TRUE,
                         fixed = NULL, control = list(), start = NULL, ...) {
  call <- match.call()
  call[[1L]] <- as.name("sgpr")
  call$start <- NULL
  dots <- list(...)
  noise_data <- dots$.noise_data
  dots$.noise_data <- NULL
  if (length(dots)) do.call(.no_dots, dots)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  y <- .as_response(y, nrow(x))
  kernel <- .check_kernel(kernel)
  if (!is.null(start)) {
    if (!inherits(start, "sgpr")) stop("'start' must be an sgpr fit", call. = FALSE)
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (is.null(inducing)) inducing <- start$params$Z
  }
  kernel <- .kern_init(kernel, x, y)
  nz <- .noise_setup(noise, x, y, noise_data)
  # heteroscedastic greedy variance: weights 1/lambda at the starting noise
  Z <- .inducing_inputs(inducing, x, kernel,
                        weights = if (nz$model$kind == "constant") NULL else
                          1 / .sgpr_lambda(list(noise_model = nz$model, x = x), nz$params))
  mn <- .mean_start(mean, y)
  params <- list(variance = kernel$variance, lengthscale = kernel$lengthscale)
  params <- c(params, nz$params, list(mean = mn$value, Z = Z))
  transforms <- c(variance = "log", lengthscale = "log", nz$transforms,
                  mean = "identity", Z = "identity")
  if (!is.null(start)) {
    params <- .warm_params(params, start$params, skip = c("Z", if (mn$fixed) "mean"))
  }
  fit <- structure(list(
    call = call, x = x, y = y, kernel = kernel, noise_model = nz$model,
    params = params, transforms = transforms,
    fixed = .fixed_mask(fixed, params, transforms, if (mn$fixed) "mean"),
    control = .check_control(control), eval_fun = .sgpr_eval,
    predict_fun = .sgpr_predict_latent, noise_fun = .sgpr_noise_at,
    noise_label = .sgpr_noise_label,
    model = sprintf("Sparse GP regression (SGPR), %s noise", nz$label)),
    class = c("sgpr", "sparsevgp"))
  fit <- .build_or_fit(fit, optimize)
  .sgpr_report(fit)
}

# Copy the parameters of a previous fit whose shapes match.
.warm_params <- function(params, old, skip = character()) {
  for (b in setdiff(names(params), skip)) {
    if (!is.null(old[[b]]) && identical(dim(old[[b]]), dim(params[[b]])) &&
        length(old[[b]]) == length(params[[b]])) {
      params[[b]] <- old[[b]]
    }
  }
  params
}

# Inducing inputs from a matrix, a count M (greedy selection with `weights`,
# src/select.c), a select_inducing() result, or a method name ("greedy",
# "kmeans", "random") with M = min(N, 100).
.inducing_inputs <- function(inducing, x, kernel, name = "inducing", weights = NULL) {
  N <- nrow(x)
  D <- ncol(x)
  if (is.null(inducing)) inducing <- min(N, 100L)
  if (inherits(inducing, "sparsevgp_inducing")) inducing <- inducing$Z
  if (is.character(inducing)) {
    if (length(inducing) != 1L || !(inducing %in% .select_methods)) {
      stop(sprintf("'%s' must be a numeric matrix of inducing inputs, a number M, a select_inducing() result or one of %s",
                   name, paste0("\"", .select_methods, "\"", collapse = ", ")), call. = FALSE)
    }
    args <- list(x, kernel, M = min(N, 100L), method = inducing)
    if (inducing == "greedy") args$weights <- weights else args$trace <- FALSE
    Z <- do.call(select_inducing, args)$Z
  } else if (is.numeric(inducing) && is.null(dim(inducing)) && length(inducing) == 1L) {
    M <- .check_M(inducing, N, NA_integer_, name)
    Z <- select_inducing(x, kernel, M = M, method = "greedy", weights = weights)$Z
    if (nrow(Z) < M) {
      warning(sprintf("'%s' asked for M = %d inducing points, but greedy selection stopped at %d: the kernel has no more residual variance at the other inputs (repeated or nearly repeated inputs)",
                      name, as.integer(M), nrow(Z)), call. = FALSE)
    }
  } else {
    if (is.data.frame(inducing)) inducing <- as.matrix(inducing)
    if (is.null(dim(inducing)) && D == 1L) inducing <- matrix(inducing, ncol = 1L)
    if (!is.matrix(inducing) || !is.numeric(inducing)) {
      stop(sprintf("'%s' must be a numeric matrix of inducing inputs, a number M, or a select_inducing() result",
                   name), call. = FALSE)
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
  }
  dimnames(Z) <- list(NULL, colnames(x))
  Z
}

# M inducing inputs by one k-means run on the distinct training inputs (the
# "K-means" arm of inst/bench/reproduce_pgpr.R, kept as it made the cached
# runs); when that run fails (an empty cluster), the fallback of
# select_inducing(method = "kmeans"), which pads as seed004 section 7.2 says.
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

# ---- noise ---------------------------------------------------------------

# list(params, transforms, model, label) for the three kinds of noise.
.noise_setup <- function(noise, x, y, noise_data = NULL) {
  N <- nrow(x)
  if (is.null(noise)) noise <- .noise_start(y)
  if (inherits(noise, "formula")) {
    if (length(noise) != 2L) {
      stop("'noise' as a formula must be one-sided, such as ~ x1 + I(x1^2)", call. = FALSE)
    }
    nd <- .noise_frame(noise_data, x)
    tt <- stats::terms(noise, data = nd)
    mf <- stats::model.frame(tt, nd, na.action = stats::na.fail)
    Phi <- stats::model.matrix(tt, mf)
    if (nrow(Phi) != N) {
      stop("the variables of the 'noise' formula must have one value per observation",
           call. = FALSE)
    }
    if (any(!is.finite(Phi))) stop("the 'noise' formula gives NA or infinite values", call. = FALSE)
    beta <- setNames(numeric(ncol(Phi)), colnames(Phi))
    # start at a constant variance: the intercept carries log(var(y) / 10)
    if ("(Intercept)" %in% names(beta)) beta[["(Intercept)"]] <- log(.noise_start(y))
    model <- list(kind = "model", formula = noise, terms = tt, Phi = Phi,
                  xlevels = stats::.getXlevels(tt, mf))
    return(list(params = list(noise_coef = beta), transforms = c(noise_coef = "identity"),
                model = model, label = "log-linear"))
  }
  if (!is.numeric(noise) || any(!is.finite(noise)) || any(noise <= 0)) {
    stop("'noise' must be a positive number, a vector of positive variances or a one-sided formula",
         call. = FALSE)
  }
  if (length(noise) == 1L) {
    return(list(params = list(noise = as.double(noise)), transforms = c(noise = "log"),
                model = list(kind = "constant"), label = "homoscedastic"))
  }
  if (length(noise) != N) {
    stop(sprintf("'noise' has length %d: give one variance or one per observation (N = %d)",
                 length(noise), N), call. = FALSE)
  }
  list(params = list(), transforms = character(),
       model = list(kind = "known", lambda = as.double(noise)),
       label = "known per-point")
}

# The data the noise formula's variables come from.
.noise_frame <- function(noise_data, x) {
  if (!is.null(noise_data)) return(noise_data)
  d <- as.data.frame(x)
  if (is.null(colnames(x))) names(d) <- paste0("x", seq_len(ncol(x)))
  d
}

# Noise variances at the training inputs.
.sgpr_lambda <- function(fit, params) {
  nm <- fit$noise_model
  switch(nm$kind,
         constant = rep(params$noise, nrow(fit$x)),
         known = nm$lambda,
         model = exp(drop(nm$Phi %*% params$noise_coef)))
}

# Noise variances at new inputs (for type = "response").
.sgpr_noise_at <- function(object, xnew, newdata = NULL) {
  nm <- object$noise_model
  switch(nm$kind,
         constant = rep(object$params$noise, nrow(xnew)),
         known = {
           if (!is.null(newdata)) {
             stop("the noise variances at new inputs are unknown for a model fitted with known per-point noise: use type = \"latent\"",
                  call. = FALSE)
           }
           nm$lambda
         },
         model = {
           nd <- if (is.null(newdata)) NULL else
             if (is.data.frame(newdata)) newdata else .noise_frame(NULL, xnew)
           Phi <- if (is.null(nd)) nm$Phi else {
             tt <- stats::delete.response(nm$terms)
             mf <- tryCatch(stats::model.frame(tt, nd, na.action = stats::na.fail,
                                               xlev = nm$xlevels),
                            error = function(e) {
               stop(sprintf("the noise formula needs its variables (%s) in 'newdata': %s",
                            paste(all.vars(tt), collapse = ", "), conditionMessage(e)),
                    call. = FALSE)
             })
             stats::model.matrix(tt, mf)
           }
           exp(drop(Phi %*% object$params$noise_coef))
         })
}

.sgpr_noise_label <- function(x, digits) {
  lam <- .sgpr_lambda(x, x$params)
  switch(x$noise_model$kind,
         constant = sprintf("variance %s", format(x$params$noise, digits = digits)),
         sprintf("variances from %s to %s (%s)", format(min(lam), digits = digits),
                 format(max(lam), digits = digits),
                 if (x$noise_model$kind == "known") "known" else
                   paste("log-linear in", paste(deparse(x$noise_model$formula), collapse = ""))))
}

# ---- bound, gradient, prediction ----------------------------------------

# The collapsed bound at `params` and, with grad = TRUE, its gradient with
# respect to every parameter block on the unconstrained scale.
.sgpr_eval <- function(fit, params, grad = TRUE) {
  x <- fit$x
  kern <- .kernel_at(fit$kernel, params)
  kc <- .kern_c(kern)
  Z <- params$Z
  Kuu <- .Call(ffi_kern_matrix, kc, Z, NULL)
  Kuf <- .Call(ffi_kern_matrix, kc, Z, x)
  kdiag <- .Call(ffi_kern_diag, kc, x)
  lambda <- .sgpr_lambda(fit, params)
  ytil <- fit$y - params$mean
  b <- .Call(ffi_bg_bound, Kuu, Kuf, kdiag, lambda, ytil, fit$control$jitter,
             fit$control$jitter_cap, grad)
  out <- list(value = b$bound,
              terms = c(fit = b$fit, logdet = b$logdet, trace = -0.5 * b$trace,
                        constant = -0.5 * length(ytil) * log(2 * pi)),
              jitter = b$jitter, jitter_scale = mean(diag(Kuu)),
              posterior = list(L = b$L, LB = b$LB, v = b$v))
  if (!grad) return(out)
  wantZ <- !all(fit$fixed[grepl("^Z\\[", names(fit$fixed))])
  g_uu <- .Call(ffi_kern_grad, kc, Z, NULL, b$Guu, wantZ)
  g_uf <- .Call(ffi_kern_grad_given, kc, Z, x, b$Guf, Kuf, wantZ)
  theta <- g_uu$theta + g_uf$theta + .Call(ffi_kern_grad_diag, kc, x, b$gdiag)
  # the jitter is proportional to the kernel variance (relative jitter)
  theta[1L] <- theta[1L] + sum(diag(b$Guu)) * b$jitter
  g <- list(variance = theta[1L], lengthscale = theta[-1L])
  switch(fit$noise_model$kind,
         constant = g$noise <- sum(b$glambda) * params$noise,
         model = g$noise_coef <- drop(crossprod(fit$noise_model$Phi, b$glambda * lambda)),
         known = NULL)
  g$mean <- -sum(b$gytil)
  g$Z <- if (wantZ) g_uu$x + g_uf$x else matrix(0, nrow(Z), ncol(Z))
  out$grad <- g[names(params)]
  out
}

.sgpr_predict_latent <- function(object, xnew, full_cov) {
  .collapsed_predict_latent(object, object$params$Z, xnew, full_cov)
}

# The predictive distribution of a collapsed model from its cached factors
# (L, LB, v) and inducing inputs W (src/predict.c), in blocks of rows for the
# diagonal path; the constant mean is added.
.collapsed_predict_latent <- function(object, W, xnew, full_cov) {
  kc <- .kern_c(.kernel_at(object$kernel, object$params))
  post <- object$posterior
  if (full_cov) {
    p <- .Call(ffi_pred_gaussian, post$L, post$LB, post$v,
               .Call(ffi_kern_matrix, kc, W, xnew),
               .Call(ffi_kern_matrix, kc, xnew, NULL), TRUE)
    p$mean <- p$mean + object$params$mean
    return(p)
  }
  mean <- var <- numeric(nrow(xnew))
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    p <- .Call(ffi_pred_gaussian, post$L, post$LB, post$v,
               .Call(ffi_kern_matrix, kc, W, xb), .Call(ffi_kern_diag, kc, xb), FALSE)
    mean[b] <- p$mean + object$params$mean
    var[b] <- p$var
  }
  list(mean = mean, var = var)
}

# ---- what summary() reports beyond the bound ------------------------------

# The upper bound on log p(y) (seed004 eq. 3.4; Titsias 2014):
#   U = -N/2 log 2 pi - 1/2 log|Q + Lambda| - 1/2 y'(Q + t I + Lambda)^-1 y,
# t = tr(Kff - Qff). Its quadratic term is the `fit` term of the Gaussian
# bound with noise Lambda + t I, so the same C routine computes it.
.sgpr_upper_bound <- function(fit) {
  params <- fit$params
  kc <- .kern_c(.kernel_at(fit$kernel, params))
  Z <- params$Z
  x <- fit$x
  Kuu <- .Call(ffi_kern_matrix, kc, Z, NULL)
  Kuf <- .Call(ffi_kern_matrix, kc, Z, x)
  kdiag <- .Call(ffi_kern_diag, kc, x)
  ytil <- fit$y - params$mean
  lambda <- .sgpr_lambda(fit, params)
  # unweighted trace: the Gaussian bound with unit noise reports it
  t <- .Call(ffi_bg_bound, Kuu, Kuf, kdiag, rep(1, length(ytil)), ytil,
             fit$control$jitter, fit$control$jitter_cap, FALSE)$trace
  t <- max(t, 0)
  up <- .Call(ffi_bg_bound, Kuu, Kuf, kdiag, lambda + t, ytil,
              fit$control$jitter, fit$control$jitter_cap, FALSE)
  -0.5 * length(ytil) * log(2 * pi) + fit$bound_terms[["logdet"]] + up$fit
}

.sgpr_report <- function(fit) {
  U <- .sgpr_upper_bound(fit)
  fit$upper_bound <- U
  fit$summary_extra <- list(
    "Upper bound on log p(y) (seed004 eq. 3.4)" = format(U, digits = 8L),
    "KL(q || exact posterior) <= U - ELBO" = format(U - fit$bound, digits = 4L))
  fit
}

#' The optimal distribution of the inducing variables
#'
#' For a collapsed sparse model the optimal \eqn{q(u) = N(\mu, S)} of the
#' function values at the inducing inputs is available in closed form
#' (Titsias 2009; seed004 eq. 3.3):
#' \deqn{\mu = K_{uu}\Sigma^{-1}K_{uf}\Lambda^{-1}(y - m), \quad
#'       S = K_{uu}\Sigma^{-1}K_{uu}, \quad \Sigma = K_{uu} + K_{uf}\Lambda^{-1}K_{fu}.}
#' The constant mean \eqn{m} is added to \eqn{\mu}, so that \eqn{q(u)} equals
#' \code{predict(fit, Z, full_cov = TRUE)} up to the jitter.
#'
#' For a \code{\link{pgpr}} fit it is the optimal \eqn{q(u)} of the collapsed
#' Polya-Gamma bound at the fit's local parameters \eqn{c} (seed004 eq. 4.5),
#' the same expression with \eqn{\Lambda = \Theta^{-1}},
#' \eqn{\theta_n = \tanh(c_n/2)/(2c_n)}, and the pseudo-targets
#' \eqn{y_n/(2\theta_n)} in place of \eqn{y} (labels \eqn{y_n = \pm 1}):
#' \eqn{\mu = m + K_{uu}\Sigma^{-1}K_{uf}(y/2 - \Theta m)},
#' \eqn{\Sigma = K_{uu} + K_{uf}\Theta K_{fu}} (seed004 section 5.6).
#'
#' @param fit an \code{\link{sgpr}} or \code{\link{pgpr}} fit.
#' @return A list with \code{Z} (the inducing inputs), \code{mean} and
#'   \code{cov}.
#' @examples
#' fit <- sgpr(y ~ x, data = snelson, inducing = 10)
#' qu <- posterior_inducing(fit)
#' cbind(Z = qu$Z[, 1], mean = qu$mean, sd = sqrt(diag(qu$cov)))
#'
#' # a classifier's latent function at its inducing inputs
#' d <- classification_data("banana")
#' set.seed(1)
#' pf <- pgpr(y ~ x1 + x2, data = d, inducing = "kmeans", M = 10,
#'            control = list(inner_max = 2))
#' str(posterior_inducing(pf))
#' @export
posterior_inducing <- function(fit) {
  if (!inherits(fit, c("sgpr", "pgpr"))) {
    stop("'fit' must be an sgpr or pgpr fit", call. = FALSE)
  }
  # mean = L LB^-T v + m; cov = L B^-1 L' (whitened forms of the expressions
  # above; for pgpr, v holds the pseudo-targets' projection)
  .collapsed_qu(fit)
}
