# The model protocol: internal S3 generics for what differs between models.
# A fit is plain data (a list with class c("<model>", "sparsevgp")); the
# shared code in objective.R, methods.R, inducing.R and plot.R calls these
# generics, and each model file (gpr.R, sgpr.R, osgpr.R, pgpr.R, svgp.R)
# defines the methods it needs. The methods are registered in NAMESPACE, so
# they dispatch wherever the generic is called from.
#
#   .evaluate(fit, params, grad)   the bound at `params` with its gradient
#                                  (list of blocks shaped like params)
#   .predict_latent(fit, xnew, full_cov)
#                                  the latent predictive distribution
#   .noise_at(fit, xnew, newdata)  the noise variance at new inputs
#   .noise_label(fit, digits)      one line describing the noise, or NULL
#   .select_weights(fit)           weights of greedy selection (NULL: none)
#   .train(fit)                    fit the free parameters
#   .refit_inducing(fit, Z)        refit with inducing inputs Z held fixed
#   .report(fit)                   what summary() reports beyond the bound
#   .optim_upper(fit, par)         model-specific upper boxes for L-BFGS-B
#   .edf(fit)                      effective number of parameters of a
#                                  linear smoother (NULL: none)

# The bound at `params`: list(value, terms, jitter, jitter_scale, posterior)
# and, with grad = TRUE, `grad`, its gradient with respect to every
# parameter block on the unconstrained scale (blocks shaped like params).
.evaluate <- function(fit, params, grad = TRUE, ...) UseMethod(".evaluate")

# The predictive distribution of the latent function at the rows of xnew:
# list(mean, var) or, with full_cov = TRUE, list(mean, cov). The constant
# prior mean is included.
.predict_latent <- function(fit, xnew, full_cov) UseMethod(".predict_latent")

# The noise variance at new inputs xnew (from `newdata`, when the noise
# model needs variables other than the inputs); NULL newdata means the
# training inputs.
.noise_at <- function(fit, xnew, newdata = NULL) UseMethod(".noise_at")

#' @export
.noise_at.default <- function(fit, xnew, newdata = NULL) {
  if (is.null(fit$params$noise)) {
    stop("this model has no observation noise: use type = \"latent\"", call. = FALSE)
  }
  rep(fit$params$noise, nrow(xnew))
}

# One line describing the fitted noise, for print().
.noise_label <- function(fit, digits) UseMethod(".noise_label")

#' @export
.noise_label.default <- function(fit, digits) {
  if (length(fit$params$noise) == 1L) {
    return(sprintf("variance %s", format(fit$params$noise, digits = digits)))
  }
  NULL
}

# The weights of weighted greedy selection at the current parameters
# (1 / lambda for Gaussian regression, theta for Polya-Gamma
# classification); NULL for plain greedy variance.
.select_weights <- function(fit) UseMethod(".select_weights")

#' @export
.select_weights.default <- function(fit) NULL

# Fit the free parameters (fit$fixed marks the held ones) from their current
# values; the default is one L-BFGS-B run (objective.R).
.train <- function(fit) UseMethod(".train")

#' @export
.train.default <- function(fit) .fit_lbfgsb(fit)

# Refit with the inducing inputs Z held fixed and the other parameters
# optimised from their current values (reinit_inducing()).
.refit_inducing <- function(fit, Z) UseMethod(".refit_inducing")

#' @export
.refit_inducing.default <- function(fit, Z) {
  fit <- .set_inducing(fit, Z)
  .build_or_fit(fit, TRUE)
}

# What summary() reports beyond the bound, set once the final parameters
# are known: the fit with `summary_extra` (a named list of lines).
.report <- function(fit) UseMethod(".report")

#' @export
.report.default <- function(fit) fit

# Upper boxes for L-BFGS-B beyond those of .optim_setup() (objective.R): a
# vector like `par` (Inf for none), or NULL.
.optim_upper <- function(fit, par) UseMethod(".optim_upper")

#' @export
.optim_upper.default <- function(fit, par) NULL

# The effective number of parameters, the trace of the hat matrix H with
# fitted values H y, for models whose fitted values are a linear smoother
# of y at the fitted hyperparameters (df.residual()); NULL for the others.
.edf <- function(fit) UseMethod(".edf")

#' @export
.edf.default <- function(fit) NULL
