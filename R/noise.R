# The observation noise of the Gaussian models with a noise model (gpr,
# sgpr, osgpr): one learned variance, known per-point variances, or a
# learned log-linear model log lambda_n = phi(x_n)' beta (heteroscedastic
# SGPR, Passerello 2022, ch. 3), each optionally divided by prior weights
# w_n (as in lm(): the variance of observation n is sigma^2 / w_n). A fit
# holds `noise_model` (list(kind, ...)); the generics .noise_at(),
# .noise_label() and .select_weights() read it.
#
# noise_model$lambda is a per-point factor of the variances: the known
# variances divided by the weights (kind "known"), 1 / w for a learned
# variance or noise model with prior weights, NULL for none. It is the one
# per-observation field, so a fit restricted to a subsample of rows keeps it
# right (.subsample_fit() in training.R subsets it).

# list(params, transforms, model, label) for the three kinds of noise.
# `noise_data` is the design of a noise formula from the formula front end
# (class "sparsevgp_noise_design": Phi, terms, xlevels, for the rows of the
# model frame), or NULL for the columns of x; `weights` are prior weights.
.noise_setup <- function(noise, x, y, noise_data = NULL, start = NULL, weights = NULL) {
  N <- nrow(x)
  if (is.null(start)) start <- .noise_start(y)
  if (is.null(noise)) noise <- start
  rel <- if (is.null(weights)) NULL else 1 / weights
  wlab <- if (is.null(weights)) "" else ", divided by the prior weights"
  if (inherits(noise, "formula")) {
    if (length(noise) != 2L) {
      stop("'noise' as a formula must be one-sided, such as ~ x1 + I(x1^2)", call. = FALSE)
    }
    if (inherits(noise_data, "sparsevgp_noise_design")) {
      tt <- noise_data$terms
      Phi <- noise_data$Phi
      xlev <- noise_data$xlevels
    } else {
      nd <- .noise_frame(if (is.data.frame(noise_data)) noise_data, x)
      .check_formula_vars(stats::terms(noise, data = nd), nd,
                          "the data of the 'noise' formula", "the 'noise' formula")
      mf <- stats::model.frame(noise, nd, na.action = stats::na.fail)
      tt <- attr(mf, "terms")
      Phi <- stats::model.matrix(tt, mf)
      xlev <- stats::.getXlevels(tt, mf)
    }
    attr(Phi, "assign") <- attr(Phi, "contrasts") <- NULL
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
    model <- list(kind = "model", formula = noise, terms = tt, Phi = Phi, xlevels = xlev,
                  lambda = rel)
    return(list(params = list(noise_coef = beta), transforms = c(noise_coef = "identity"),
                model = model, label = paste0("log-linear", wlab)))
  }
  if (!is.numeric(noise) || any(!is.finite(noise)) || any(noise <= 0)) {
    stop("'noise' must be a positive number, a vector of positive variances or a one-sided formula",
         call. = FALSE)
  }
  .check_noise_scale(noise, y)
  if (length(noise) == 1L) {
    return(list(params = list(noise = as.double(noise)), transforms = c(noise = "log"),
                model = list(kind = "constant", lambda = rel),
                label = if (is.null(weights)) "homoscedastic" else "weighted"))
  }
  if (length(noise) != N) {
    stop(sprintf("'noise' has length %d: give one variance or one per observation (N = %d)",
                 length(noise), N), call. = FALSE)
  }
  lam <- as.double(noise)
  if (!is.null(rel)) lam <- lam * rel
  list(params = list(), transforms = character(),
       model = list(kind = "known", lambda = lam),
       label = paste0("known per-point", wlab))
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

# Noise variances at the training inputs: the variance of the kind times
# the per-point factor (weights, or the known variances themselves). A fit
# without a noise model (an old gpr fit) has one variance. With compact =
# TRUE one variance shared by all points is returned as one number (no
# vector of length N is formed: the passes of R/stream.R take either).
.noise_lambda <- function(fit, params, compact = FALSE) {
  nm <- fit$noise_model
  N <- nrow(fit$x)
  if (is.null(nm)) return(if (compact) params$noise else rep(params$noise, N))
  base <- switch(nm$kind,
                 constant = params$noise,
                 known = 1,
                 model = exp(drop(nm$Phi %*% params$noise_coef)))
  if (!is.null(nm$lambda)) return(base * nm$lambda)
  # a fit on shards() keeps the minimum, mean and maximum of its rows'
  # factors (prior weights, known variances), which stay on the workers
  if (compact && !is.null(nm$rows)) return(base * nm$rows[c("min", "max")])
  if (compact && length(base) == 1L) base else rep_len(base, N)
}

# The mean noise variance at the training inputs (no vector of length N for
# one shared variance).
.noise_mean <- function(fit, params) {
  rows <- fit$noise_model$rows
  if (!is.null(rows) && is.null(fit$noise_model$lambda) && fit$noise_model$kind != "model") {
    return(rows[["mean"]] * (if (fit$noise_model$kind == "constant") params$noise else 1))
  }
  mean(.noise_lambda(fit, params, compact = TRUE))
}

# The chain rule from the adjoint glambda = dF/dlambda to the noise
# parameters: list(noise) or list(noise_coef), or nothing for known noise.
# Every lambda_n is proportional to its kind's variance, so
# d lambda_n / d log sigma^2 = lambda_n and d lambda_n / d beta = lambda_n phi_n.
.noise_grad <- function(fit, params, glambda, lambda) {
  nm <- fit$noise_model
  kind <- if (is.null(nm)) "constant" else nm$kind
  switch(kind,
         constant = list(noise = if (is.null(nm$lambda)) sum(glambda) * params$noise else
           sum(glambda * lambda)),
         model = list(noise_coef = drop(crossprod(nm$Phi, glambda * lambda))),
         known = list())
}

# Noise variances at new inputs (for type = "response" and prediction
# intervals), or at the training inputs when `newdata` is NULL (then with
# the fit's prior weights). At new inputs they are those of an observation
# of weight 1 (predict() divides by its own `weights`). Rows of `newdata`
# with missing noise variables give NA.
.noise_model_at <- function(fit, xnew, newdata = NULL) {
  if (is.null(newdata)) return(.noise_lambda(fit, fit$params))
  nm <- fit$noise_model
  kind <- if (is.null(nm)) "constant" else nm$kind
  switch(kind,
         constant = rep(fit$params$noise, nrow(xnew)),
         known = stop("the noise variances at new inputs are unknown for a model fitted with known per-point noise: use type = \"latent\" (or interval = \"confidence\")",
                      call. = FALSE),
         model = {
           nd <- if (is.data.frame(newdata)) newdata else .noise_frame(NULL, xnew)
           tt <- stats::delete.response(nm$terms)
           mf <- tryCatch(stats::model.frame(tt, nd, na.action = stats::na.pass,
                                             xlev = nm$xlevels),
                          error = function(e) {
             stop(sprintf("the noise formula needs its variables (%s) in 'newdata': %s",
                          paste(all.vars(tt), collapse = ", "), conditionMessage(e)),
                  call. = FALSE)
           })
           Phi <- stats::model.matrix(tt, mf)
           exp(drop(Phi %*% fit$params$noise_coef))
         })
}

.noise_model_label <- function(fit, digits) {
  lam <- .noise_lambda(fit, fit$params, compact = TRUE)
  nm <- fit$noise_model
  if (is.null(nm) || nm$kind == "constant") {
    return(sprintf("variance %s%s", format(fit$params$noise, digits = digits),
                   if (is.null(nm$lambda)) "" else " divided by the prior weights"))
  }
  sprintf("variances from %s to %s (%s)", format(min(lam), digits = digits),
          format(max(lam), digits = digits),
          if (nm$kind == "known") "known" else
            paste("log-linear in", paste(deparse(nm$formula), collapse = ""),
                  if (is.null(nm$lambda)) "" else "and divided by the prior weights"))
}

# The generics for fits with a noise model (gpr, sgpr, osgpr). Greedy
# selection is weighted by 1 / lambda, so that a threshold on the weighted
# trace is on the KL scale (see kl_threshold()).
#' @export
.noise_at.sgpr <- function(fit, xnew, newdata = NULL) .noise_model_at(fit, xnew, newdata)
#' @export
.noise_at.osgpr <- .noise_at.sgpr
#' @export
.noise_at.gpr <- .noise_at.sgpr
#' @export
.noise_label.sgpr <- function(fit, digits) .noise_model_label(fit, digits)
#' @export
.noise_label.osgpr <- .noise_label.sgpr
#' @export
.noise_label.gpr <- .noise_label.sgpr
#' @export
.select_weights.sgpr <- function(fit) 1 / .noise_lambda(fit, fit$params, compact = TRUE)

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
