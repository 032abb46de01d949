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
  template <- fit$params
  trans <- fit$transforms
  full <- .pack(template, trans)
  free <- !fit$fixed
  cache <- new.env(parent = emptyenv())
  unpack <- function(par) {
    p <- full
    p[free] <- par
    .unpack(p, template, trans)
  }
  evaluate <- function(par) {
    if (!is.null(cache$par) && identical(cache$par, par)) return(invisible())
    r <- fit$eval_fun(fit, unpack(par), grad = TRUE)
    g <- unlist(lapply(names(template), function(b) as.vector(r$grad[[b]])),
                use.names = FALSE)
    if (length(g) != length(full)) {
      stop("internal error: gradient length does not match the parameters")
    }
    cache$par <- par
    cache$value <- r$value
    cache$grad <- setNames(g[free], names(full)[free])
    invisible()
  }
  list(par = full[free],
       fn = function(par) { evaluate(par); -cache$value },
       gr = function(par) { evaluate(par); -cache$grad },
       unpack = unpack)
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
  o <- objective(fit)
  start <- proc.time()[["elapsed"]]
  if (length(o$par) > 0L) {
    ctrl <- fit$control[c("maxit", "factr", "pgtol", "trace")]
    res <- stats::optim(o$par, o$fn, o$gr, method = "L-BFGS-B", control = ctrl)
    fit$params <- o$unpack(res$par)
    fit$optim <- list(convergence = res$convergence,
                      message = if (is.null(res$message)) "" else res$message,
                      counts = res$counts, value = -res$value)
  } else {
    fit$optim <- list(convergence = 0L, message = "no free parameters",
                      counts = c("function" = 0L, gradient = 0L), value = NA_real_)
  }
  fit$time <- proc.time()[["elapsed"]] - start
  fit
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
