# Parameters, the optimisation objective and the fitting loop shared by all
# models.
#
# A fit keeps its parameters on the natural scale in `fit$params`, a named
# list of blocks (for example variance, lengthscale, noise, mean, Z), with
# `fit$transforms` saying which blocks are positive and optimised on the log
# scale. The optimiser sees one unconstrained vector of the free entries.
# Every model supplies `fit$eval_fun(fit, params, grad)`, returning the bound
# (`value`) and, when `grad` is TRUE, its gradient on the unconstrained scale
# as a list of blocks shaped like `params`.

.par_names <- function(params, transforms) {
  unlist(lapply(names(params), function(b) {
    v <- params[[b]]
    nm <- if (transforms[[b]] == "log") paste0("log_", b) else b
    if (is.matrix(v)) {
      sprintf("%s[%d,%d]", nm, row(v), col(v))
    } else if (!is.null(names(v))) {
      sprintf("%s[%s]", nm, names(v))
    } else if (length(v) > 1L) {
      sprintf("%s[%d]", nm, seq_along(v))
    } else if (length(v) == 1L) {
      nm
    } else {
      character()
    }
  }), use.names = FALSE)
}

.pack <- function(params, transforms) {
  out <- unlist(lapply(names(params), function(b) {
    v <- as.vector(params[[b]])
    if (transforms[[b]] == "log") log(v) else v
  }), use.names = FALSE)
  names(out) <- .par_names(params, transforms)
  out
}

.unpack <- function(vec, template, transforms) {
  pos <- 0L
  out <- template
  for (b in names(template)) {
    n <- length(template[[b]])
    v <- unname(vec[pos + seq_len(n)])
    if (transforms[[b]] == "log") v <- exp(v)
    names(v) <- names(template[[b]])
    if (is.matrix(template[[b]])) {
      v <- matrix(v, nrow(template[[b]]), ncol(template[[b]]),
                  dimnames = dimnames(template[[b]]))
    }
    out[[b]] <- v
    pos <- pos + n
  }
  out
}

# Which unconstrained entries are held fixed. `fixed` names whole blocks
# ("lengthscale", "Z") or single entries, on either scale
# ("lengthscale[2]" or "log_lengthscale[2]", "Z[3,1]").
.fixed_mask <- function(fixed, params, transforms, always = character()) {
  nm <- .par_names(params, transforms)
  block <- rep(names(params), vapply(params, length, 1L))
  natural <- sub("^log_", "", nm)
  fixed <- c(always, fixed)
  if (is.null(fixed) || length(fixed) == 0L) return(setNames(rep(FALSE, length(nm)), nm))
  if (!is.character(fixed)) {
    stop("'fixed' must be a character vector of parameter names", call. = FALSE)
  }
  known <- c(names(params), nm, natural)
  bad <- setdiff(fixed, known)
  if (length(bad)) {
    stop(sprintf("'fixed' names unknown parameters: %s (known: %s)",
                 paste(bad, collapse = ", "),
                 paste(names(params), collapse = ", ")), call. = FALSE)
  }
  setNames(block %in% fixed | nm %in% fixed | natural %in% fixed, nm)
}

#' Optimisation objective of a model
#'
#' Returns the negative bound of a model and its analytic gradient as
#' functions of the free parameters on an unconstrained scale (log for
#' positive parameters), ready for \code{\link[stats]{optim}}. This is what
#' the model functions call when \code{optimize = TRUE}; use it to run your
#' own optimiser, to check gradients, or to profile the bound.
#'
#' The functions \code{fn} and \code{gr} share one evaluation: calling
#' \code{gr} at the parameters of the last \code{fn} call costs nothing.
#'
#' @param fit a model fit, for example from \code{\link{gpr}()} or
#'   \code{\link{sgpr}()}, possibly built with \code{optimize = FALSE}.
#' @param ... unused.
#' @return A list with \code{par} (the current free parameters, named),
#'   \code{fn} (the negative bound), \code{gr} (its gradient) and
#'   \code{unpack} (turns a parameter vector into the named list of
#'   natural-scale parameters).
#' @examples
#' fit <- gpr(y ~ x, data = snelson[1:50, ], optimize = FALSE)
#' o <- objective(fit)
#' o$fn(o$par)
#' o$gr(o$par)
#' res <- optim(o$par, o$fn, o$gr, method = "L-BFGS-B")
#' -res$value
#' @export
objective <- function(fit, ...) UseMethod("objective")

#' @export
objective.sparsevgp <- function(fit, ...) {
  .objective(fit, safe = FALSE)
}

# The objective of objective.sparsevgp(). With safe = TRUE (the fitting
# loop), an evaluation that fails (a factorisation past the jitter cap at an
# extreme trial point of the line search, say) returns a large finite value
# and a zero gradient instead of an error, so L-BFGS-B backtracks; the
# number of such evaluations is kept.
.objective <- function(fit, safe) {
  template <- fit$params
  trans <- fit$transforms
  full <- .pack(template, trans)
  free <- !fit$fixed
  cache <- new.env(parent = emptyenv())
  cache$failures <- 0L
  cache$best <- -Inf
  unpack <- function(par) {
    p <- full
    p[free] <- par
    .unpack(p, template, trans)
  }
  evaluate <- function(par) {
    if (!is.null(cache$par) && identical(cache$par, par)) return(invisible())
    r <- tryCatch(fit$eval_fun(fit, unpack(par), grad = TRUE), error = function(e) {
      if (!safe) stop(conditionMessage(e), call. = FALSE)
      NULL
    })
    cache$par <- par
    if (is.null(r) || !is.finite(r$value)) {
      if (!safe) stop("the bound is not finite at these parameters", call. = FALSE)
      cache$failures <- cache$failures + 1L
      cache$value <- -max(1e10, 1e3 * abs(cache$best))
      cache$grad <- setNames(numeric(sum(free)), names(full)[free])
      return(invisible())
    }
    g <- unlist(lapply(names(template), function(b) as.vector(r$grad[[b]])),
                use.names = FALSE)
    if (length(g) != length(full)) {
      stop("internal error: gradient length does not match the parameters")
    }
    cache$value <- r$value
    cache$best <- max(cache$best, r$value)
    cache$grad <- setNames(g[free], names(full)[free])
    invisible()
  }
  list(par = full[free],
       fn = function(par) { evaluate(par); -cache$value },
       gr = function(par) { evaluate(par); -cache$grad },
       unpack = unpack,
       failures = function() cache$failures)
}

# Box constraints and scales for L-BFGS-B on the free parameters `par`:
# - log-scale kernel parameters stay below e^20 times their starting values,
#   and the noise variance above 1e-6 var(y) (GPflow's floor, for
#   standardised y):
#   without these a line search on noise-free or constant data steps to
#   variances where nothing can be factorised;
# - the mean and the inducing inputs are scaled by sd(y) and the columns'
#   sd(x) (optim's parscale), so that a fit does not depend on the units.
.optim_setup <- function(fit, par) {
  nm <- names(par)
  n <- length(par)
  lower <- rep(-Inf, n)
  upper <- rep(Inf, n)
  scale <- rep(1, n)
  # one-sided boxes only: when every variable has two bounds, L-BFGS-B's
  # first step is a full step to the Cauchy point (its lnsrlb), which can
  # land on a bound far from the optimum
  is_log <- grepl("^log_", nm)
  noise <- nm == "log_noise"
  upper[is_log & !noise] <- par[is_log & !noise] + 20
  regression <- is.null(fit$labels) && is.numeric(fit$y) && length(fit$y) > 1L
  vy <- if (regression) stats::var(fit$y) else 1
  if (!is.finite(vy) || vy <= 0) vy <- 1
  lower[noise] <- pmin(par[noise], log(1e-6 * vy))
  if (regression) scale[nm == "mean"] <- sqrt(vy)
  io <- grepl("^[ZO]\\[[0-9]+,[0-9]+\\]$", nm)
  if (any(io) && !is.null(fit$x)) {
    sx <- apply(fit$x, 2L, stats::sd)
    sx[!is.finite(sx) | sx <= 0] <- 1
    scale[io] <- sx[as.integer(sub("^[ZO]\\[[0-9]+,([0-9]+)\\]$", "\\1", nm[io]))]
  }
  list(lower = lower, upper = upper, parscale = scale)
}

.default_control <- list(maxit = 1000L, factr = 1e7, pgtol = 0, trace = 0L,
                         jitter = 1e-8, jitter_cap = 1e-2)

.check_control <- function(control) {
  if (!is.list(control)) stop("'control' must be a list", call. = FALSE)
  bad <- setdiff(names(control), names(.default_control))
  if (length(bad)) {
    stop(sprintf("unknown 'control' entries: %s (known: %s)",
                 paste(bad, collapse = ", "),
                 paste(names(.default_control), collapse = ", ")), call. = FALSE)
  }
  ctrl <- utils::modifyList(.default_control, control)
  whole <- function(v, lo) is.numeric(v) && length(v) == 1L && is.finite(v) && v >= lo &&
    v == round(v)
  if (!whole(ctrl$maxit, 1)) stop("'control$maxit' must be a whole number >= 1", call. = FALSE)
  if (!whole(ctrl$trace, 0)) stop("'control$trace' must be a whole number >= 0", call. = FALSE)
  if (!is.numeric(ctrl$factr) || length(ctrl$factr) != 1L || !is.finite(ctrl$factr) ||
      ctrl$factr <= 0) {
    stop("'control$factr' must be one positive number", call. = FALSE)
  }
  if (!is.numeric(ctrl$pgtol) || length(ctrl$pgtol) != 1L || !is.finite(ctrl$pgtol) ||
      ctrl$pgtol < 0) {
    stop("'control$pgtol' must be one number >= 0", call. = FALSE)
  }
  if (!is.numeric(ctrl$jitter) || length(ctrl$jitter) != 1L || !(ctrl$jitter >= 0)) {
    stop("'control$jitter' must be one non-negative number", call. = FALSE)
  }
  if (!is.numeric(ctrl$jitter_cap) || length(ctrl$jitter_cap) != 1L ||
      !(ctrl$jitter_cap >= ctrl$jitter)) {
    stop("'control$jitter_cap' must be one number >= control$jitter", call. = FALSE)
  }
  ctrl
}

# Fit by L-BFGS-B on the analytic gradient, then recompute the posterior.
.fit_optim <- function(fit) {
  o <- .objective(fit, safe = TRUE)
  start <- proc.time()[["elapsed"]]
  if (length(o$par) > 0L) {
    fit$optim <- .run_lbfgsb(fit, o)
    fit$params <- o$unpack(fit$optim$par)
  } else {
    fit$optim <- list(convergence = 0L, message = "no free parameters",
                      counts = c("function" = 0L, gradient = 0L), value = NA_real_,
                      failed_evaluations = 0L)
  }
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# L-BFGS-B with the box and scales of .optim_setup() (upper bounds may be
# tightened by the caller); sets nothing in the fit but its parameters'
# optimiser report, which it returns.
.run_lbfgsb <- function(fit, o, upper = NULL) {
  su <- .optim_setup(fit, o$par)
  if (!is.null(upper)) su$upper <- pmin(su$upper, upper)
  par0 <- pmin(pmax(o$par, su$lower), su$upper)
  ctrl <- c(fit$control[c("maxit", "factr", "pgtol", "trace")], list(parscale = su$parscale))
  res <- stats::optim(par0, o$fn, o$gr, method = "L-BFGS-B", lower = su$lower,
                      upper = su$upper, control = ctrl)
  list(convergence = res$convergence,
       message = if (is.null(res$message)) "" else res$message,
       counts = res$counts, value = -res$value, par = res$par,
       failed_evaluations = o$failures())
}

# Evaluate the bound and the posterior caches at the current parameters.
.finish <- function(fit) {
  r <- fit$eval_fun(fit, fit$params, grad = FALSE)
  fit$bound <- r$value
  fit$bound_terms <- r$terms
  fit$posterior <- r$posterior
  fit$jitter <- r$jitter
  if (!is.null(r$jitter) && r$jitter > fit$control$jitter * r$jitter_scale * (1 + 1e-8)) {
    warning(sprintf("the Cholesky factorisation needed jitter %.3g (%.3g times the mean diagonal); the fit may be poorly conditioned",
                    r$jitter, r$jitter / r$jitter_scale), call. = FALSE)
  }
  fit
}

# Build or optimise a model: the shared tail of every model constructor.
.build_or_fit <- function(fit, optimize) {
  if (.check_flag(optimize, "optimize")) {
    fit <- .fit_optim(fit)
  } else {
    fit$optim <- NULL
    fit$time <- 0
  }
  .finish(fit)
}

# Lower Cholesky factor with jitter escalation (src/linalg.c):
# list(L, jitter). `base` and `cap` are relative to the mean diagonal.
.chol_jitter <- function(S, base, cap) {
  .Call(ffi_la_chol, S, as.double(base), as.double(cap))
}
