# S3 methods shared by every model of class "sparsevgp". Model-specific
# behaviour comes from the internal generics of protocol.R (.predict_latent,
# .noise_at, .noise_label).

#' Predictions from a sparsevgp model
#'
#' The predictive distribution of the latent function \eqn{f} or of a new
#' observation \eqn{y} at new inputs, as means and variances, standard
#' errors, or intervals. Sparse models follow the Titsias/GPflow
#' convention: the variance is that of the variational posterior, without a
#' FITC-style diagonal correction.
#'
#' \strong{Two distributions.} The latent function \eqn{f(x)} is the
#' regression function: its predictive variance shrinks where there are
#' data. A new observation is \eqn{y = f(x) + \epsilon}{y = f(x) + epsilon}, so its variance adds
#' the noise variance. \code{interval = "confidence"} gives an interval for
#' \eqn{f(x)} (where the curve is), \code{interval = "prediction"} one for a
#' new \eqn{y} (where a new observation will fall), as in
#' \code{\link[stats]{predict.lm}}: the bounds are
#' \eqn{\mu \pm z_{(1+level)/2}\, s}{mu +/- qnorm((1 + level) / 2) * s} with
#' \eqn{s} the standard deviation of \eqn{f} or of \eqn{y}. They are
#' pointwise intervals of the approximate posterior at the fitted
#' hyperparameters, which are not integrated over.
#'
#' \strong{Missing values and offsets.} Rows of \code{newdata} with missing
#' inputs give \code{NA} (\code{na.action = na.pass}, the default), or are
#' dropped (\code{na.omit}). Without \code{newdata}, predictions are at the
#' training inputs, padded with \code{NA} for the rows that
#' \code{na.exclude} dropped when fitting. An offset of a formula fit
#' (\code{offset()} terms or the \code{offset} argument) is evaluated in
#' \code{newdata} and added to the mean.
#'
#' \strong{Prior weights.} For a fit with \code{weights}, the noise variance
#' of observation \eqn{n} is \eqn{\sigma^2 / w_n}{sigma^2 / w_n}. At the
#' training inputs the fit's weights are used; at new inputs the noise is
#' that of an observation of weight 1 unless \code{weights} are given.
#'
#' @param object a fitted model.
#' @param newdata new inputs: a data frame for models fitted with a formula,
#'   otherwise a matrix (or vector) with the columns of the training inputs.
#'   By default the training inputs.
#' @param type \code{"latent"} for \eqn{f} (with the constant mean and any
#'   offset added), \code{"response"} for a new observation \eqn{y}: the
#'   same mean, with the noise variance added.
#' @param interval \code{"none"}, \code{"confidence"} (for \eqn{f}) or
#'   \code{"prediction"} (for a new \eqn{y}).
#' @param level the coverage of the intervals.
#' @param se.fit if \code{TRUE}, also return the standard deviation of
#'   \eqn{f} (\code{type = "latent"}) or \eqn{y} (\code{type = "response"}).
#' @param full_cov if \code{TRUE}, return the full covariance matrix instead
#'   of the variances (not with \code{interval} or \code{se.fit}).
#' @param na.action what to do with rows of \code{newdata} that have missing
#'   inputs: \code{na.pass} (predict \code{NA} for them), \code{na.omit} or
#'   \code{na.exclude}.
#' @param weights prior weights of the new observations (one number or one
#'   per row of \code{newdata}); they divide the noise variance of
#'   \code{type = "response"} and of prediction intervals.
#' @param cluster a cluster from \code{parallel::makeCluster()}: the rows of
#'   \code{newdata} are split over its workers (see \code{\link{scaling}});
#'   by default \code{NULL}, one process. \code{fitted()} takes it too.
#' @param neighbours for a fit with neighbours (\code{\link{sgpr}}): the
#'   number of training observations the residual at each new input is
#'   conditioned on, a whole number from 0 to \eqn{N}; by default
#'   \code{NULL}, twice the fit's \eqn{K} (at most \eqn{N}). More
#'   neighbours bring the predictions nearer those of the exact GP at the
#'   fitted parameters, at a cost of \eqn{O(K^3)} per new input; \eqn{K}
#'   gives the predictive of the fitted approximation itself.
#' @param ... not used: any argument here is an error, so that a misspelt
#'   argument (\code{tpye = "response"}) is not silently ignored.
#' @return With the defaults, a list with \code{mean} and \code{var} (or
#'   \code{cov} when \code{full_cov = TRUE}), named by the rows of
#'   \code{newdata}. With \code{interval}, a matrix with columns \code{fit},
#'   \code{lwr} and \code{upr}, as \code{predict.lm()} gives. With
#'   \code{se.fit = TRUE}, a list with \code{fit} (the mean, or that matrix)
#'   and \code{se.fit}. Variances that round-off makes slightly negative are
#'   set to zero; clearly negative ones give a warning.
#' @seealso \code{\link{simulate.sparsevgp}} for draws from the posterior,
#'   \code{\link{predict.pgpr}} for classifiers.
#' @examples
#' fit <- gpr(y ~ x, data = snelson[1:80, ])
#' nd <- data.frame(x = seq(0, 6, by = 2))
#' p <- predict(fit, nd, type = "response")
#' cbind(mean = p$mean, sd = sqrt(p$var))
#'
#' # 95% intervals for the curve and for new observations
#' predict(fit, nd, interval = "confidence")
#' predict(fit, nd, interval = "prediction", level = 0.9)
#' predict(fit, nd, se.fit = TRUE)$se.fit
#'
#' # missing inputs give NA
#' predict(fit, data.frame(x = c(1, NA, 3)), interval = "prediction")
#' @export
predict.sparsevgp <- function(object, newdata, type = c("latent", "response"),
                              interval = c("none", "confidence", "prediction"), level = 0.95,
                              se.fit = FALSE, full_cov = FALSE, na.action = stats::na.pass,
                              weights = NULL, cluster = NULL, neighbours = NULL, ...) {
  .check_dots("predict", ...)
  object <- .predict_neighbours(object, neighbours)
  type <- match.arg(type)
  interval <- match.arg(interval)
  level <- .check_level(level)
  se.fit <- .check_flag(se.fit, "se.fit")
  full_cov <- .check_flag(full_cov, "full_cov")
  if (full_cov && (interval != "none" || se.fit)) {
    stop("'full_cov = TRUE' gives the covariance matrix: it cannot be combined with 'interval' or 'se.fit'",
         call. = FALSE)
  }
  inp <- .prediction_inputs(object, if (missing(newdata)) NULL else newdata, na.action)
  noise <- type == "response" || interval == "prediction"
  p <- .predict_moments(object, inp, full_cov, noise = noise, weights = weights,
                        cluster = cluster)
  if (full_cov) {
    if (type == "response") diag(p$cov) <- diag(p$cov) + p$noise
    return(list(mean = .pad(inp, p$mean), cov = .pad(inp, p$cov, cov = TRUE)))
  }
  var <- if (type == "response") p$var + p$noise else p$var
  if (interval == "none" && !se.fit) return(list(mean = .pad(inp, p$mean), var = .pad(inp, var)))
  fit <- p$mean
  if (interval != "none") {
    s <- sqrt(if (interval == "prediction") p$var + p$noise else p$var)
    fit <- .interval_matrix(p$mean, p$mean - stats::qnorm((1 + level) / 2) * s,
                            p$mean + stats::qnorm((1 + level) / 2) * s)
  }
  fit <- .pad(inp, fit)
  if (!se.fit) return(fit)
  list(fit = fit, se.fit = .pad(inp, sqrt(var)))
}

# predict(neighbours =): the number of training neighbours of each new
# input, kept in the fit's neighbour structure (.vif_predict_K(), R/vif.R).
.predict_neighbours <- function(object, neighbours) {
  if (is.null(neighbours)) return(object)
  if (is.null(object$neighbours)) {
    stop("'neighbours' is for fits with neighbours (sgpr(neighbours = K) with K > 0): this fit has none",
         call. = FALSE)
  }
  N <- .nobs(object)
  if (!is.numeric(neighbours) || length(neighbours) != 1L || !is.finite(neighbours) ||
      neighbours < 0 || neighbours != round(neighbours) || neighbours > N) {
    stop(sprintf("'neighbours' must be one whole number from 0 to N = %d (the training observations)", N),
         call. = FALSE)
  }
  object$neighbours$predict <- as.integer(neighbours)
  object
}

# The predictive moments at the inputs of .prediction_inputs(): the latent
# mean (with the offset) and variances (or covariance), and with noise =
# TRUE the noise variances, computed at the complete rows and NA at the
# others; rows named. Variances within -1e-10 of the kernel variance are
# set to zero; below that a warning says the model is poorly conditioned.
.predict_moments <- function(object, inp, full_cov = FALSE, noise = FALSE, weights = NULL,
                             cluster = NULL) {
  n <- nrow(inp$x)
  ok <- inp$ok
  rn <- rownames(inp$x)
  if (!full_cov && n > 0L && all(ok)) {
    # every row complete: no copies of the inputs or of the moments (the
    # training inputs of a large fit)
    p <- .predict_latent_on(object, inp$x, FALSE, cluster)
    mean <- p$mean
    if (!is.null(inp$offset)) mean <- mean + inp$offset
    var <- p$var
    lo <- min(var)
    if (lo < -1e-10 * .signal_variance(object)) {
      warning("some predictive variances are negative and were set to 0: the model is poorly conditioned",
              call. = FALSE)
    }
    if (lo < 0) var <- pmax(var, 0)
    if (!is.null(rn)) names(mean) <- names(var) <- rn
    out <- list(mean = mean, var = var, cov = NULL)
    if (noise) out$noise <- .noise_vector(object, inp, weights)
    return(out)
  }
  mean <- rep(NA_real_, n)
  var <- rep(NA_real_, n)
  cov <- if (full_cov) matrix(NA_real_, n, n, dimnames = list(rn, rn))
  if (any(ok)) {
    xo <- inp$x[ok, , drop = FALSE]
    p <- .predict_latent_on(object, xo, full_cov, cluster)
    mean[ok] <- p$mean + if (is.null(inp$offset)) 0 else inp$offset[ok]
    scale <- .signal_variance(object)
    v <- if (full_cov) diag(p$cov) else p$var
    if (any(v < -1e-10 * scale)) {
      warning("some predictive variances are negative and were set to 0: the model is poorly conditioned",
              call. = FALSE)
    }
    if (full_cov) {
      cov[ok, ok] <- p$cov
      var[ok] <- diag(p$cov)
    } else {
      var[ok] <- pmax(p$var, 0)
    }
  }
  names(mean) <- names(var) <- rn
  out <- list(mean = mean, var = var, cov = cov)
  if (noise) out$noise <- .noise_vector(object, inp, weights)
  out
}

# The noise variances at the rows of a prediction (NA at incomplete rows):
# the fit's own at its training inputs, else those of the noise model
# divided by `weights`.
.noise_vector <- function(object, inp, weights = NULL) {
  n <- nrow(inp$x)
  nv <- rep(NA_real_, n)
  if (is.null(inp$data)) {
    if (!is.null(weights)) {
      stop("'weights' are for new observations: at the training inputs the fit's own prior weights are used",
           call. = FALSE)
    }
    nv[inp$ok] <- .noise_at(object, object$x, NULL)[inp$ok]
  } else if (any(inp$ok)) {
    if (!is.null(weights)) {
      if (!is.numeric(weights) || !(length(weights) %in% c(1L, n)) ||
          any(!is.finite(weights)) || any(weights <= 0)) {
        stop(sprintf("'weights' must be one positive number or %d, one per row of 'newdata'", n),
             call. = FALSE)
      }
      weights <- rep_len(weights, n)[inp$ok]
    }
    data <- inp$data
    data <- if (is.data.frame(data)) data[inp$ok, , drop = FALSE] else data[inp$ok, , drop = FALSE]
    v <- .noise_at(object, inp$x[inp$ok, , drop = FALSE], data)
    nv[inp$ok] <- if (is.null(weights)) v else v / weights
  }
  names(nv) <- rownames(inp$x)
  nv
}

# Pad a result (a vector, a matrix by rows, or with cov = TRUE a square
# covariance) for the rows that na.exclude dropped (stats::napredict());
# other na.actions leave it as is.
.pad <- function(inp, v, cov = FALSE) {
  na <- inp$na
  if (is.null(na) || !inherits(na, "exclude")) return(v)
  if (!cov) return(stats::napredict(na, v))
  rows <- stats::napredict(na, seq_len(nrow(v)))
  out <- matrix(NA_real_, length(rows), length(rows),
                dimnames = list(names(rows), names(rows)))
  keep <- !is.na(rows)
  out[keep, keep] <- v
  out
}

# The columns fit, lwr, upr of an interval, as predict.lm() gives them.
.interval_matrix <- function(fit, lwr, upr) {
  m <- cbind(fit = fit, lwr = lwr, upr = upr)
  rownames(m) <- names(fit)
  m
}

.check_level <- function(level) {
  if (!is.numeric(level) || length(level) != 1L || !is.finite(level) || level <= 0 ||
      level >= 1) {
    stop("'level' must be one number between 0 and 1, such as 0.95", call. = FALSE)
  }
  level
}

# Arguments that reached `...` of a method that takes none: an error that
# names them and suggests the argument meant, instead of silently ignoring
# a misspelt one.
.check_dots <- function(fun, ..., .known = NULL) {
  if (!...length()) return(invisible())
  nm <- names(list(...))
  if (is.null(nm)) nm <- rep("", ...length())
  if (is.null(.known)) {
    caller <- sys.function(-1L)
    .known <- setdiff(names(formals(caller)), "...")
  }
  what <- vapply(nm, function(a) {
    if (!nzchar(a)) return("an unnamed argument")
    near <- .known[utils::adist(a, .known) <= 2]
    sprintf("'%s'%s", a, if (length(near)) sprintf(" (did you mean '%s'?)", near[1L]) else "")
  }, "")
  stop(sprintf("%s(): unknown argument%s %s", fun, if (length(what) > 1L) "s" else "",
               paste(what, collapse = ", ")), call. = FALSE)
}

.n_inducing <- function(object) {
  if (is.null(object$params$Z)) NA_integer_ else
    nrow(object$params$Z) + NROW(object$params$O)
}

#' @export
print.sparsevgp <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("Call: ", paste(deparse(x$call, width.cutoff = 70L), collapse = "\n  "),
      "\n", sep = "")
  cat(x$model, "\n", sep = "")
  M <- .n_inducing(x)
  cat(sprintf("  N = %.0f, D = %d%s\n", .nobs(x), ncol(x$x),
              if (is.na(M)) "" else sprintf(", M = %d inducing points", M)))
  if (length(x$na.action)) cat("  (", stats::naprint(x$na.action), ")\n", sep = "")
  cat(paste0("  ", .kernel_lines(.kernel_at(x$kernel, x$params), digits), "\n"), sep = "")
  nz <- .noise_label(x, digits)
  if (!is.null(nz)) cat("  noise: ", nz, "\n", sep = "")
  cat(sprintf("  %s: %s\n", .bound_label(x), format(x$bound, digits = digits + 3L)))
  if (!is.null(x$optim)) {
    cat(sprintf("  optimiser: %s%s (%d evaluations)\n",
                if (identical(x$optim$method, "Adam")) "Adam " else "", .optim_status(x$optim),
                x$optim$counts[[1L]]))
  } else {
    cat("  not optimised (optimize = FALSE)\n")
  }
  invisible(x)
}

.bound_label <- function(x) {
  if (inherits(x, "gpr")) return("log marginal likelihood")
  if (identical(.loglik_kind(x), "likelihood")) {
    return("log likelihood of the VIF approximation (not a bound)")
  }
  "ELBO (lower bound on log p(y))"
}

.optim_status <- function(o) {
  if (isTRUE(o$interrupted)) {
    return(if (nzchar(o$message)) o$message else "interrupted by the user")
  }
  if (isTRUE(o$convergence == 0L)) return("converged")
  # the min_gain rule (R/objective.R): its own outcome, not a failure
  if (isTRUE(o$convergence == .stop_code)) return("stopped: gain below control$min_gain")
  # Adam runs a fixed number of iterations: there is nothing to converge
  if (identical(o$method, "Adam")) return(sprintf("ran %s", o$message))
  # L-BFGS-B's message for its iteration limit ("NEW_X") says nothing
  if (isTRUE(o$convergence == 1L) && !length(o$method)) {
    return("did not converge (stopped at the iteration limit, control$maxit)")
  }
  msg <- if (nzchar(o$message)) paste0(": ", o$message) else ""
  sprintf("did not converge (code %d%s)", o$convergence, msg)
}

# The hyperparameters on the natural scale (blocks whose role is in
# .hyper_roles: not the inducing inputs or variational parameters), named as
# in `fixed`.
.param_table <- function(object) {
  role <- .fit_roles(object)$role
  keep <- names(object$params)[role[names(object$params)] %in% .hyper_roles]
  p <- object$params[keep]
  tr <- object$transforms[keep]
  nm <- .par_names(p, tr, natural = TRUE)
  est <- unlist(lapply(p, as.vector), use.names = FALSE)
  fixed <- object$fixed[.par_names(p, tr)]
  data.frame(estimate = est, fixed = unname(fixed), row.names = nm)
}

#' @export
coef.sparsevgp <- function(object, ...) {
  tab <- .param_table(object)
  setNames(tab$estimate, rownames(tab))
}

#' Likelihood, deviance, residuals and other statistics of a fit
#'
#' The methods of the generics of \pkg{stats} for every model, defined as
#' for \code{\link[stats]{lm}} and \code{\link[stats]{glm}} where a Gaussian
#' process has the same quantity, and with an informative error where it
#' has none.
#'
#' \strong{logLik, AIC, BIC.} \code{logLik()} is the bound the fit
#' maximised: the exact log marginal likelihood for \code{gpr()}, a lower
#' bound on it (the ELBO) for the sparse models, and for
#' \code{\link{sgpr}(neighbours = K)} with \eqn{K > 0} the exact log
#' likelihood of its approximate model (inducing points plus a Vecchia
#' residual), not a bound. Its \code{df} counts the
#' hyperparameters that were optimised: the kernel variance and
#' lengthscales, the noise variance or noise coefficients, and the constant
#' mean when it is learned. Inducing inputs, \eqn{q(u)} and the local
#' parameters of \code{pgpr()} are variational parameters: they make the
#' bound tighter, not the model more flexible (more of them can only bring
#' the bound closer to the exact log marginal likelihood), so they are not
#' counted, and AIC and BIC are comparable across models and numbers of
#' inducing points. Parameters held by \code{fixed} are not counted. Its
#' attribute \code{kind} is \code{"bound"} (a lower bound on
#' \eqn{\log p(y)}{log p(y)}) or \code{"likelihood"} (\code{gpr()}, and
#' \code{sgpr()} with neighbours);
#' \code{\link{anova.sparsevgp}} tabulates fits of one model with what their
#' differences mean.
#' \code{nobs()} is the number of observations used, after
#' \code{na.action} and \code{subset}.
#'
#' \strong{deviance} is \eqn{-2} times the bound, so that
#' \code{AIC(fit) = deviance(fit) + 2 df}.
#'
#' \strong{Residual degrees of freedom.} For the Gaussian models whose
#' fitted values are linear in \eqn{y} at the fitted hyperparameters
#' (\code{gpr()}, \code{sgpr()}, \code{osgpr()}), \code{df.residual()} is
#' \eqn{N} minus the effective number of parameters, the trace of the
#' smoother ("hat") matrix \eqn{H} with \eqn{\hat y = H y}{y_hat = H y}, as
#' for smoothing splines and \code{mgcv::gam()}: \eqn{H = S + (I - S)1c^\top}{H = S + (I - S) 1 c'} with \eqn{S = Q_{ff}(Q_{ff} + \Lambda)^{-1}}{S = Qff (Qff + Lambda)^-1} (\eqn{K_{ff}}{Kff} for \code{gpr()}) and
#' \eqn{c} the weights of the generalised least-squares estimate of the
#' constant mean (when it is learned). It is computed in \eqn{O(NM^2)}{O(N M^2)}.
#' \code{svgp()} optimises \eqn{q(u)} numerically and classifiers have no
#' such smoother: \code{df.residual()} is an error for them.
#'
#' \strong{Residuals.} \code{type = "response"} gives \eqn{y - \hat y}{y - fitted}; \code{type = "pearson"} divides them by the predictive
#' standard deviation of \eqn{y} at the training inputs (the square root of
#' the latent variance plus the noise variance; \eqn{\sqrt{p(1-p)}}{sqrt(p (1 - p))} for classifiers), so that they are roughly standard
#' normal when the model is right. With \code{na.action = na.exclude} the
#' fitted values and residuals are padded with \code{NA}.
#'
#' \strong{confint() and vcov()} are errors: the hyperparameters are point estimates
#' that maximise a bound on the marginal likelihood (type-II maximum
#' likelihood). For the sparse models the bound is not a likelihood, and
#' even for \code{gpr()} the lengthscales and variances are often weakly
#' identified, so Wald or profile intervals would suggest a precision they
#' do not have; the curvature of a bound at its maximum is not the inverse
#' covariance of the estimates. Intervals for the function and for new
#' observations come from \code{predict(fit, interval = )} (and
#' \code{se.fit}, \code{full_cov}, \code{simulate()}, and for \code{sgpr()}
#' and \code{pgpr()} \code{posterior_inducing()}, the posterior of the
#' function at the inducing inputs); a fully Bayesian treatment of the
#' hyperparameters is outside this package.
#'
#' @param object a fitted model.
#' @param type for \code{residuals()}: \code{"response"} or
#'   \code{"pearson"}.
#' @param parm,level arguments of \code{\link[stats]{confint}}; not used.
#' @param cluster for \code{fitted()}: a cluster from
#'   \code{parallel::makeCluster()} over whose workers the training inputs
#'   are split (see \code{\link{scaling}}); by default \code{NULL}. For a
#'   fit on \code{\link{shards}()} (of any model), the shards of its data:
#'   \code{fitted()} and \code{residuals()} are computed on the workers and
#'   their \eqn{N} values returned in worker order.
#' @param ... not used.
#' @return \code{logLik()}: an object of class \code{"logLik"} with
#'   attributes \code{df}, \code{nobs} and \code{kind}. \code{deviance()},
#'   \code{df.residual()}, \code{nobs()}: one number. \code{fitted()},
#'   \code{residuals()}, \code{weights()}: vectors named by observation.
#'   \code{formula()}, \code{terms()}, \code{model.frame()}: as for
#'   \code{lm()} (for fits of the formula interface only).
#' @examples
#' fit <- sgpr(Ozone ~ Temp + Wind, data = airquality)   # 37 rows with NA dropped
#' nobs(fit)
#' c(logLik = logLik(fit), AIC = AIC(fit), BIC = BIC(fit), deviance = deviance(fit))
#' df.residual(fit)
#' summary(residuals(fit, type = "pearson"))
#' formula(fit)
#' head(model.frame(fit))
#'
#' # na.exclude pads fitted values and residuals to the rows of the data
#' ex <- update(fit, na.action = na.exclude)
#' length(residuals(ex)) == nrow(airquality)
#' @name sparsevgp-methods
#' @aliases logLik.sparsevgp
NULL

#' @rdname sparsevgp-methods
#' @export
logLik.sparsevgp <- function(object, ...) {
  structure(object$bound, df = .df_hyper(object), nobs = .nobs(object),
            kind = .loglik_kind(object), class = "logLik")
}

# The number of free hyperparameters (see ?"sparsevgp-methods"): every
# free parameter whose role is a hyperparameter's (not the inducing inputs
# or the variational parameters), the same count in every model; pgpr's one
# lengthscale in units of each input's sd counts once.
.df_hyper <- function(object) {
  tied <- if (isTRUE(object$lengthscale_tied)) length(object$params$lengthscale) - 1L else 0L
  sum(!object$fixed & .role_mask(object, .hyper_roles)) - tied
}

#' @rdname sparsevgp-methods
#' @export
nobs.sparsevgp <- function(object, ...) .nobs(object)

#' @rdname sparsevgp-methods
#' @export
deviance.sparsevgp <- function(object, ...) -2 * object$bound

#' @rdname sparsevgp-methods
#' @export
df.residual.sparsevgp <- function(object, ...) {
  edf <- .edf(object)
  if (is.null(edf)) {
    stop(sprintf("df.residual() is not defined for %s fits: %s", class(object)[1L],
                 if (!is.null(object$labels)) "the fitted probabilities of a classifier are not a linear smoother of the labels" else
                   if (!is.null(object$neighbours)) "the trace of the smoother matrix of a model with neighbours (the Vecchia residual) is not computed" else
                   "q(u) is optimised numerically, so the fitted values are not a linear smoother of y (sgpr() fits the same model with the optimal q(u) and has one)"),
         call. = FALSE)
  }
  .nobs(object) - edf
}

#' @rdname sparsevgp-methods
#' @export
fitted.sparsevgp <- function(object, cluster = NULL, ...) {
  .check_dots("fitted", ...)
  if (!is.null(object$shards)) return(.shards_values(object, cluster, "fitted"))
  .fitted_values(object, cluster)
}

# The fitted mean at the training inputs (with the offset), unpadded.
.fitted_values <- function(object, cluster = NULL) {
  m <- .predict_latent_on(object, object$x, FALSE, cluster)$mean
  if (!is.null(object$offset)) m <- m + object$offset
  names(m) <- rownames(object$x)
  stats::napredict(object$na.action, m)
}

#' @rdname sparsevgp-methods
#' @export
residuals.sparsevgp <- function(object, type = c("response", "pearson"), cluster = NULL, ...) {
  .check_dots("residuals", ...)
  type <- match.arg(type)
  if (!is.null(object$shards)) {
    if (type != "response") stop("the residuals of a fit on shards are of type \"response\"", call. = FALSE)
    return(.shards_values(object, cluster, "residuals"))
  }
  .no_cluster_residuals(cluster)
  inp <- .prediction_inputs(object)
  pm <- .predict_moments(object, inp, noise = type == "pearson")
  r <- object$y - (pm$mean - if (is.null(object$offset)) 0 else object$offset)
  if (type == "pearson") r <- r / sqrt(pm$var + pm$noise)
  names(r) <- rownames(object$x)
  stats::naresid(object$na.action, r)
}

#' @rdname sparsevgp-methods
#' @export
weights.sparsevgp <- function(object, ...) {
  w <- object$weights
  if (is.null(w)) return(NULL)
  names(w) <- rownames(object$x)
  stats::naresid(object$na.action, w)
}

#' @rdname sparsevgp-methods
#' @param x a fitted model (the argument name of the generic).
#' @export
formula.sparsevgp <- function(x, ...) {
  if (is.null(x$terms)) {
    stop("this model was fitted with the matrix interface, which has no formula: its inputs are fit$x",
         call. = FALSE)
  }
  stats::formula(x$terms)
}

#' @rdname sparsevgp-methods
#' @param formula a fitted model (the argument name of the generic).
#' @export
model.frame.sparsevgp <- function(formula, ...) {
  if (is.null(formula$frame)) {
    stop("this model was fitted with the matrix interface, which has no model frame: its inputs are fit$x and its response fit$y",
         call. = FALSE)
  }
  formula$frame
}

#' @rdname sparsevgp-methods
#' @export
confint.sparsevgp <- function(object, parm, level = 0.95, ...) {
  stop("confint() is not available: the hyperparameters are point estimates that maximise a bound on the marginal likelihood (type-II maximum likelihood), which for the sparse models is not a likelihood, and lengthscales and variances are often weakly identified, so Wald or profile intervals would claim a precision they do not have. For intervals on the function or on new observations use predict(fit, newdata, interval = \"confidence\" or \"prediction\")",
       call. = FALSE)
}

#' @export
summary.sparsevgp <- function(object, ...) {
  structure(list(
    call = object$call, model = object$model, N = .nobs(object),
    D = ncol(object$x), M = .n_inducing(object),
    kernel = .kern_expr(object$kernel, labels = TRUE),
    parameters = .param_table(object),
    inducing_fixed = if (is.null(object$params$Z)) NA else
      all(object$fixed[.role_mask(object, "inducing")]),
    bound = object$bound, bound_label = .bound_label(object),
    bound_terms = object$bound_terms, extra = object$summary_extra,
    jitter = object$jitter, jitter_relative = object$jitter_relative,
    jitter_cost = object$jitter_cost, optim = object$optim, time = object$time,
    na.action = object$na.action),
    class = "summary.sparsevgp")
}

#' @export
print.summary.sparsevgp <- function(x, digits = max(3L, getOption("digits") - 3L), ...) {
  cat("Call: ", paste(deparse(x$call, width.cutoff = 70L), collapse = "\n  "),
      "\n\n", sep = "")
  cat(x$model, "\n", sep = "")
  cat(sprintf("N = %d observations, D = %d inputs%s\n", x$N, x$D,
              if (is.na(x$M)) "" else sprintf(", M = %d inducing points (%s)", x$M,
                                               if (isTRUE(x$inducing_fixed)) "fixed" else "optimised")))
  if (length(x$na.action)) cat("(", stats::naprint(x$na.action), ")\n", sep = "")
  cat("Kernel:", x$kernel, "\n\n")
  tab <- x$parameters
  tab$estimate <- format(tab$estimate, digits = digits)
  tab$fixed <- ifelse(tab$fixed, "fixed", "")
  names(tab) <- c("estimate", "")
  print(tab, quote = FALSE, right = TRUE)
  cat("\n", x$bound_label, ": ", format(x$bound, digits = digits + 4L), "\n", sep = "")
  if (length(x$bound_terms)) {
    bt <- x$bound_terms
    cat(paste0("  ", format(names(bt)), "  ", format(bt, digits = digits + 2L),
               collapse = "\n"), "\n", sep = "")
  }
  if (length(x$extra)) {
    for (nm in names(x$extra)) cat(nm, ": ", x$extra[[nm]], "\n", sep = "")
  }
  cat(sprintf("Jitter added to the Cholesky factorisation: %s\n", .jitter_line(x)))
  if (is.null(x$optim)) {
    cat("Not optimised (optimize = FALSE)\n")
  } else {
    cat(sprintf("Optimiser: %s %s; %d function and %d gradient evaluations, %.2f s\n",
                if (is.null(x$optim$method)) "L-BFGS-B" else x$optim$method,
                .optim_status(x$optim), x$optim$counts[[1L]], x$optim$counts[[2L]],
                x$time))
  }
  invisible(x)
}

#' Update and re-fit a model
#'
#' Re-evaluates the call of a fit with some arguments changed. By default the
#' new fit starts from the parameters of the old one (warm start), which is
#' much faster than starting afresh when the change is small.
#'
#' @param object a fitted model.
#' @param ... arguments of the model function to change, as in
#'   \code{\link[stats]{update}}.
#' @param warm_start if \code{TRUE}, start from the fitted parameters of
#'   \code{object} wherever their shapes still fit. The fitted inducing
#'   inputs (and, for \code{svgp()}, \eqn{q(u)}) are kept too, unless the
#'   update changes \code{inducing} (or \code{orthogonal}, \code{q_u}), the
#'   data or the formula; so \code{update(fit, optimize = FALSE)} reproduces
#'   the fit. \code{pgpr()} re-selects its inducing inputs in every pass and
#'   keeps its selection method. A \code{start} given to \code{update()}
#'   is used instead. The new fit's \code{call} is the old call with the
#'   changes, \code{start} included when the user gave one (the warm start
#'   from \code{object} itself is not written into it).
#' @param evaluate if \code{FALSE}, return the updated call.
#' @return The new fit, or its call.
#' @examples
#' fit <- sgpr(y ~ x, data = snelson, inducing = 8)
#' fit2 <- update(fit, inducing = fit$params$Z, fixed = "Z")
#' c(logLik(fit), logLik(fit2))
#' @export
update.sparsevgp <- function(object, ..., warm_start = TRUE, evaluate = TRUE) {
  call <- stats::getCall(object)
  extras <- match.call(expand.dots = FALSE)$...
  nms <- names(extras)
  if (is.null(nms)) nms <- rep("", length(extras))
  for (i in seq_along(extras)) {
    if (nzchar(nms[i])) {
      call[[nms[i]]] <- extras[[i]]
    } else if (!is.null(object$terms) && i == 1L) {
      # an unnamed first argument is a new formula, as in stats::update()
      old <- stats::formula(object$terms)
      call[[2L]] <- stats::update.formula(old, eval(extras[[i]], parent.frame()))
    } else {
      stop("the arguments to change must be named (except a new formula)", call. = FALSE)
    }
  }
  if (!evaluate) return(call)
  run <- call
  # a `start` given here is the user's choice, and wins over the warm start
  warm <- .check_flag(warm_start, "warm_start") && !("start" %in% nms)
  if (warm) {
    # the old fit goes into the call as a value: evaluated in a new
    # environment holding it, the call would make that environment the
    # formulas' environment, and every new fit would carry all old ones
    run$start <- object
    run <- .warm_inducing_args(run, object, nms)
  }
  fit <- eval(run, parent.frame())
  # the record is the user's call with the changes (a `start` the user gave
  # included), not the warm-start plumbing
  fit$call <- call
  if (warm) fit$call$start <- NULL
  fit
}

# A warm start keeps the fitted inducing inputs: re-evaluating the original
# `inducing` (a count, a method, the starting matrix) would place Z anew
# while the other parameters, and svgp's q(u) that belongs to Z, come from
# the fit. Kept unless the change names them or changes the data or the
# formula (then the old Z may mean something else). pgpr re-selects its
# inducing inputs in every pass, so its `inducing` (a method) stays.
.warm_inducing_args <- function(run, object, changed) {
  if (inherits(object, "pgpr") || any(changed %in% c("", "x", "data", "formula"))) return(run)
  sets <- c(inducing = "Z", orthogonal = "O")
  for (a in names(sets)) {
    # no mean-only inputs: the original argument says so (svgp's multiclass
    # fits have none and no such argument)
    if (!(a %in% changed) && NROW(object$params[[sets[[a]]]]) > 0L) {
      run[[a]] <- object$params[[sets[[a]]]]
    }
  }
  # svgp: the starting q(u) of the original call gives way to the fitted one
  if (inherits(object, "svgp") && !("q_u" %in% changed)) run$q_u <- NULL
  run
}

# The jitter of a fit (or its summary) in words: its size, relative to the
# mean diagonal, and what it changed in the bound (R/objective.R,
# .finish()).
.jitter_line <- function(x) {
  j <- x$jitter
  if (is.null(j) || all(j == 0)) return("none (the matrices were factorised as they are)")
  out <- paste(format(j, digits = 3L), collapse = ", ")
  if (!is.null(x$jitter_relative)) {
    out <- sprintf("%s (%s times the mean diagonal)", out,
                   paste(format(x$jitter_relative, digits = 3L), collapse = ", "))
  }
  if (!is.null(x$jitter_cost) && is.finite(x$jitter_cost)) {
    out <- sprintf("%s, which changes the bound by about %s", out,
                   format(x$jitter_cost, digits = 3L))
  }
  out
}
