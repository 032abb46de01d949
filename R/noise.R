# The observation noise of the Gaussian collapsed models (sgpr, osgpr): one
# learned variance, known per-point variances, or a learned log-linear model
# log lambda_n = phi(x_n)' beta (heteroscedastic SGPR, Passerello 2022,
# ch. 3). A fit with such noise holds `noise_model` (list(kind, ...)); the
# generics .noise_at(), .noise_label() and .select_weights() read it.

# list(params, transforms, model, label) for the three kinds of noise.
.noise_setup <- function(noise, x, y, noise_data = NULL, start = NULL) {
  N <- nrow(x)
  if (is.null(start)) start <- .noise_start(y)
  if (is.null(noise)) noise <- start
  if (inherits(noise, "formula")) {
    if (length(noise) != 2L) {
      stop("'noise' as a formula must be one-sided, such as ~ x1 + I(x1^2)", call. = FALSE)
    }
    nd <- .noise_frame(noise_data, x)
    tt <- stats::terms(noise, data = nd)
    .check_formula_vars(tt, nd, "the data of the 'noise' formula", "the 'noise' formula")
    mf <- stats::model.frame(tt, nd, na.action = stats::na.fail)
    Phi <- stats::model.matrix(tt, mf)
    rownames(Phi) <- NULL
    if (nrow(Phi) != N) {
      stop("the variables of the 'noise' formula must have one value per observation",
           call. = FALSE)
    }
    if (any(!is.finite(Phi))) stop("the 'noise' formula gives NA or infinite values", call. = FALSE)
    beta <- setNames(numeric(ncol(Phi)), colnames(Phi))
    # start at a constant variance (by default var(y) / 10): the intercept
    # carries its log
    if ("(Intercept)" %in% names(beta)) beta[["(Intercept)"]] <- log(start)
    model <- list(kind = "model", formula = noise, terms = tt, Phi = Phi,
                  xlevels = stats::.getXlevels(tt, mf))
    return(list(params = list(noise_coef = beta), transforms = c(noise_coef = "identity"),
                model = model, label = "log-linear"))
  }
  if (!is.numeric(noise) || any(!is.finite(noise)) || any(noise <= 0)) {
    stop("'noise' must be a positive number, a vector of positive variances or a one-sided formula",
         call. = FALSE)
  }
  .check_noise_scale(noise, y)
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

# The starting noise variance: a tenth of the variance of y.
.noise_start <- function(y) {
  v <- if (length(y) > 1L) stats::var(y) / 10 else 0.1
  if (is.finite(v) && v > 0) v else 0.1
}

# The data the noise formula's variables come from.
.noise_frame <- function(noise_data, x) {
  if (!is.null(noise_data)) return(noise_data)
  d <- as.data.frame(x)
  if (is.null(colnames(x))) names(d) <- paste0("x", seq_len(ncol(x)))
  d
}

# Noise variances at the training inputs.
.noise_lambda <- function(fit, params) {
  nm <- fit$noise_model
  switch(nm$kind,
         constant = rep(params$noise, nrow(fit$x)),
         known = nm$lambda,
         model = exp(drop(nm$Phi %*% params$noise_coef)))
}

# The chain rule from the adjoint glambda = dF/dlambda to the noise
# parameters: list(noise) or list(noise_coef), or nothing for known noise.
.noise_grad <- function(fit, params, glambda, lambda) {
  nm <- fit$noise_model
  switch(nm$kind,
         constant = list(noise = sum(glambda) * params$noise),
         model = list(noise_coef = drop(crossprod(nm$Phi, glambda * lambda))),
         known = list())
}

# Noise variances at new inputs (for type = "response").
.noise_model_at <- function(fit, xnew, newdata = NULL) {
  nm <- fit$noise_model
  switch(nm$kind,
         constant = rep(fit$params$noise, nrow(xnew)),
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
           exp(drop(Phi %*% fit$params$noise_coef))
         })
}

.noise_model_label <- function(fit, digits) {
  lam <- .noise_lambda(fit, fit$params)
  switch(fit$noise_model$kind,
         constant = sprintf("variance %s", format(fit$params$noise, digits = digits)),
         sprintf("variances from %s to %s (%s)", format(min(lam), digits = digits),
                 format(max(lam), digits = digits),
                 if (fit$noise_model$kind == "known") "known" else
                   paste("log-linear in", paste(deparse(fit$noise_model$formula), collapse = ""))))
}

# The generics for fits with a noise model (sgpr, osgpr). Greedy selection
# is weighted by 1 / lambda, so that a threshold on the weighted trace is on
# the KL scale (see kl_threshold()).
#' @export
.noise_at.sgpr <- function(fit, xnew, newdata = NULL) .noise_model_at(fit, xnew, newdata)
#' @export
.noise_at.osgpr <- .noise_at.sgpr
#' @export
.noise_label.sgpr <- function(fit, digits) .noise_model_label(fit, digits)
#' @export
.noise_label.osgpr <- .noise_label.sgpr
#' @export
.select_weights.sgpr <- function(fit) 1 / .noise_lambda(fit, fit$params)

# Noise variances within a factor 1e100 of var(y) (of 1 for a constant y):
# beyond, Kuf Lambda^-1/2 and the bound over- or underflow double precision.
.check_noise_scale <- function(noise, y) {
  vy <- if (length(y) > 1L) stats::var(y) else 1
  if (!(is.finite(vy) && vy > 0)) vy <- 1
  r <- range(noise) / vy
  if (r[1L] < 1e-100 || r[2L] > 1e100) {
    bad <- if (r[1L] < 1e-100) min(noise) else max(noise)
    stop(sprintf("the noise variance %s is %s times the variance of y (%s): outside a factor 1e100 either way, the bound %s double precision. Give noise variances on the scale of var(y)",
                 format(bad, digits = 3L), format(bad / vy, digits = 3L), format(vy, digits = 3L),
                 if (bad > vy) "overflows" else "underflows"), call. = FALSE)
  }
  invisible(noise)
}
