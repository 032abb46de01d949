# S3 methods shared by every model of class "sparsevgp". Model-specific
# behaviour comes from the internal generics of protocol.R (.predict_latent,
# .noise_at, .noise_label).

#' Predictions from a sparsevgp model
#'
#' The predictive distribution of the latent function \eqn{f} or of a new
#' observation \eqn{y} at new inputs. Sparse models follow the
#' Titsias/GPflow convention: the variance is that of the variational
#' posterior, without a FITC-style diagonal correction.
#'
#' @param object a fitted model.
#' @param newdata new inputs: a data frame for models fitted with a formula,
#'   otherwise a matrix (or vector) with the columns of the training inputs.
#'   By default the training inputs.
#' @param type \code{"latent"} for \eqn{f} (with the constant mean added),
#'   \code{"response"} to add the noise variance.
#' @param full_cov if \code{TRUE}, return the full covariance matrix instead
#'   of the variances.
#' @param ... unused.
#' @return A list with \code{mean} and \code{var} (or \code{cov} when
#'   \code{full_cov = TRUE}). Variances that round-off makes slightly
#'   negative are set to zero; clearly negative ones give a warning.
#' @examples
#' fit <- gpr(y ~ x, data = snelson[1:80, ])
#' p <- predict(fit, data.frame(x = seq(0, 6, by = 2)), type = "response")
#' cbind(mean = p$mean, sd = sqrt(p$var))
#' @export
predict.sparsevgp <- function(object, newdata, type = c("latent", "response"),
                              full_cov = FALSE, ...) {
  type <- match.arg(type)
  full_cov <- .check_flag(full_cov, "full_cov")
  xnew <- .newdata_matrix(object, if (missing(newdata)) NULL else newdata)
  p <- .predict_latent(object, xnew, full_cov)
  if (type == "response") {
    nv <- .noise_at(object, xnew, if (missing(newdata)) NULL else newdata)
    if (full_cov) diag(p$cov) <- diag(p$cov) + nv else p$var <- p$var + nv
  }
  scale <- .signal_variance(object)
  if (full_cov) {
    d <- diag(p$cov)
    if (any(d < -1e-10 * scale)) {
      warning("some predictive variances are negative: the model is poorly conditioned",
              call. = FALSE)
    }
    rn <- rownames(xnew)
    dimnames(p$cov) <- list(rn, rn)
  } else {
    if (any(p$var < -1e-10 * scale)) {
      warning("some predictive variances are negative and were set to 0: the model is poorly conditioned",
              call. = FALSE)
    }
    p$var <- pmax(p$var, 0)
    names(p$var) <- rownames(xnew)
  }
  names(p$mean) <- rownames(xnew)
  p
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
  cat(sprintf("  N = %d, D = %d%s\n", nrow(x$x), ncol(x$x),
              if (is.na(M)) "" else sprintf(", M = %d inducing points", M)))
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
  if (inherits(x, "gpr")) "log marginal likelihood" else "ELBO (lower bound on log p(y))"
}

.optim_status <- function(o) {
  if (o$convergence == 0L) return("converged")
  # Adam runs a fixed number of iterations: there is nothing to converge
  if (identical(o$method, "Adam")) return(sprintf("ran %s", o$message))
  msg <- if (nzchar(o$message)) paste0(": ", o$message) else ""
  sprintf("did not converge (code %d%s)", o$convergence, msg)
}

# Natural-scale parameters except inducing inputs, named as in `fixed`.
.param_table <- function(object) {
  keep <- names(object$params)[!vapply(object$params, is.matrix, TRUE)]
  p <- object$params[keep]
  tr <- object$transforms[keep]
  nm <- sub("^log_", "", .par_names(p, tr))
  est <- unlist(lapply(p, as.vector), use.names = FALSE)
  fixed <- object$fixed[.par_names(p, tr)]
  data.frame(estimate = est, fixed = unname(fixed), row.names = nm)
}

#' @export
coef.sparsevgp <- function(object, ...) {
  tab <- .param_table(object)
  setNames(tab$estimate, rownames(tab))
}

#' @export
logLik.sparsevgp <- function(object, ...) {
  structure(object$bound, df = sum(!object$fixed), nobs = length(object$y),
            class = "logLik")
}

#' @export
nobs.sparsevgp <- function(object, ...) length(object$y)

#' @export
fitted.sparsevgp <- function(object, ...) {
  m <- .predict_latent(object, object$x, FALSE)$mean
  names(m) <- rownames(object$x)
  m
}

#' @export
residuals.sparsevgp <- function(object, ...) {
  object$y - fitted(object)
}

#' @export
summary.sparsevgp <- function(object, ...) {
  structure(list(
    call = object$call, model = object$model, N = length(object$y),
    D = ncol(object$x), M = .n_inducing(object),
    kernel = .kern_expr(object$kernel, labels = TRUE),
    parameters = .param_table(object),
    inducing_fixed = if (is.null(object$params$Z)) NA else
      all(object$fixed[grepl("^[ZO]\\[", names(object$fixed))]),
    bound = object$bound, bound_label = .bound_label(object),
    bound_terms = object$bound_terms, extra = object$summary_extra,
    jitter = object$jitter, optim = object$optim, time = object$time),
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
  cat(sprintf("Jitter added to the Cholesky factorisation: %s\n",
              format(x$jitter, digits = 3L)))
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
#'   keeps its selection method.
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
  if (.check_flag(warm_start, "warm_start")) {
    # the old fit goes into the call as a value: evaluated in a new
    # environment holding it, the call would make that environment the
    # formulas' environment, and every new fit would carry all old ones
    run$start <- object
    run <- .warm_inducing_args(run, object, nms)
  }
  fit <- eval(run, parent.frame())
  # the record is the user's call with the changes, not the warm-start plumbing
  fit$call <- call
  fit$call$start <- NULL
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
    if (!(a %in% changed) && !is.null(object$params[[sets[[a]]]])) {
      run[[a]] <- object$params[[sets[[a]]]]
    }
  }
  # svgp: the starting q(u) of the original call gives way to the fitted one
  if (inherits(object, "svgp") && !("q_u" %in% changed)) run$q_u <- NULL
  run
}
