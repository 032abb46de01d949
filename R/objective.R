# The optimisation objective and the one fitting path of every model:
# L-BFGS-B on the analytic gradient (one run, or staged runs that hold some
# blocks first), Adam on minibatch estimates, and the shared tail that
# evaluates the bound at the final parameters. Models reach it through the
# generics of protocol.R (.evaluate, .train, .report, .optim_upper).

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
# number of such evaluations is kept. `evaluate(par, ...)` passes its extra
# arguments (a minibatch) to .evaluate(). `arm`, for a run from the model's
# starting values, holds the optimiser's scales of the parameters: the
# stopping rule then waits until the best point has moved from the start by
# .stop_move in those units (see .stop_move).
.objective <- function(fit, safe, progress = NULL, arm = NULL) {
  template <- fit$params
  trans <- fit$transforms
  full <- .pack(template, trans)
  free <- !fit$fixed
  cache <- new.env(parent = emptyenv())
  cache$failures <- 0L
  cache$best <- -Inf
  cache$count <- 0L
  cache$calls <- 0L
  # the stopping rule: the best bound after each evaluation, and the gain
  # over the last `window` evaluations below which the run stops
  cache$trail <- numeric(0)
  window <- .stop_window
  stop_gain <- if (is.null(fit$control$min_gain)) 0 else
    fit$control$min_gain * max(1, length(fit$y))
  # armed: the rule may stop the run (at once, unless the run starts from the
  # model's starting values)
  cache$armed <- is.null(arm)
  # a test hook: signal an interrupt, as Ctrl-C does, after this many
  # evaluations (tests of the interrupt handling)
  interrupt_after <- getOption("sparsevgp.interrupt_after")
  unpack <- function(par) {
    p <- full
    p[free] <- par
    .unpack(p, template, trans)
  }
  # the bound and its gradient in the free parameters, or NULL on failure
  value_grad <- function(par, ...) {
    cache$calls <- cache$calls + 1L
    if (!is.null(interrupt_after) && cache$calls > interrupt_after) {
      signalCondition(structure(class = c("interrupt", "condition"),
                                list(message = "interrupt (test hook)", call = NULL)))
    }
    r <- tryCatch(.evaluate(fit, unpack(par), grad = TRUE, ...), error = function(e) {
      # a failed cluster is never a bad trial point to step back from
      if (inherits(e, "sparsevgp_cluster_error")) stop(e)
      if (!safe) stop(conditionMessage(e), call. = FALSE)
      NULL
    })
    if (is.null(r) || !is.finite(r$value)) {
      if (!safe) stop("the bound is not finite at these parameters", call. = FALSE)
      return(NULL)
    }
    list(value = r$value,
         grad = setNames(.flatten_grad(r$grad, template)[free], names(full)[free]))
  }
  evaluate <- function(par) {
    if (!is.null(cache$par) && identical(cache$par, par)) return(invisible())
    r <- value_grad(par)
    cache$par <- par
    cache$count <- cache$count + 1L
    .progress_tick(progress, cache$count, max(cache$best, if (!is.null(r)) r$value))
    if (is.null(r)) {
      cache$failures <- cache$failures + 1L
      cache$value <- -max(1e10, 1e3 * abs(if (is.finite(cache$best)) cache$best else 0))
      cache$grad <- setNames(numeric(sum(free)), names(full)[free])
      cache$trail[cache$count] <- cache$best
      return(invisible())
    }
    cache$value <- r$value
    if (r$value > cache$best) {
      cache$best_par <- par
      if (!cache$armed) {
        cache$armed <- max(abs(par - arm$par0) / arm$scale) >= .stop_move
      }
    }
    cache$best <- max(cache$best, r$value)
    cache$grad <- r$grad
    cache$trail[cache$count] <- cache$best
    if (stop_gain > 0 && cache$armed && cache$count > window &&
        isTRUE(cache$best - cache$trail[cache$count - window] < stop_gain)) {
      signalCondition(structure(class = c("sparsevgp_stopped", "condition"),
                                list(message = "stopped: gain below control$min_gain",
                                     call = NULL)))
    }
    invisible()
  }
  list(par = full[free],
       fn = function(par) { evaluate(par); -cache$value },
       gr = function(par) { evaluate(par); -cache$grad },
       unpack = unpack,
       value_grad = value_grad,
       failures = function() cache$failures,
       count = function() cache$count,
       trail = function() cache$trail,
       best = function() list(value = cache$best, par = cache$best_par))
}

# Box constraints and scales for L-BFGS-B on the free parameters `par`:
# - log-scale kernel parameters stay below e^20 times their starting values,
#   and the noise variance above 1e-6 var(y) (GPflow's floor, for
#   standardised y):
#   without these a line search on noise-free or constant data steps to
#   variances where nothing can be factorised;
# - the mean and the inducing inputs are scaled by sd(y) and the columns'
#   sd(x) (optim's parscale), so that a fit does not depend on the units;
# - a model may tighten the upper boxes (.optim_upper()).
.optim_setup <- function(fit, par) {
  info <- .par_info(fit)[names(par), , drop = FALSE]
  n <- length(par)
  lower <- rep(-Inf, n)
  upper <- rep(Inf, n)
  scale <- rep(1, n)
  # one-sided boxes only: when every variable has two bounds, L-BFGS-B's
  # first step is a full step to the Cauchy point (its lnsrlb), which can
  # land on a bound far from the optimum
  is_log <- info$transform == "log"
  noise <- is_log & info$role == "noise"
  upper[is_log & !noise] <- par[is_log & !noise] + 20
  regression <- .standardised(fit)
  vy <- if (regression) stats::var(fit$y) else 1
  if (!is.finite(vy) || vy <= 0) vy <- 1
  lower[noise] <- pmin(par[noise], log(1e-6 * vy))
  # the optimiser works on (par - shift) / scale: the parameters of the
  # standardised problem (inputs by their sd, y by its mean and sd), so that
  # it sees the same numbers whatever the units
  shift <- rep(0, n)
  if (regression) {
    scale[info$scale == "y"] <- sqrt(vy)
    shift[info$scale == "y"] <- mean(fit$y)
    shift[info$scale == "log_var_y"] <- log(vy)
    shift[info$scale == "log_sd_y"] <- 0.5 * log(vy)
  }
  if (!is.null(fit$x)) {
    sx <- apply(fit$x, 2L, stats::sd)
    sx[!is.finite(sx) | sx <= 0] <- 1
    mx <- colMeans(fit$x)
    io <- info$scale == "x"
    scale[io] <- sx[info$column[io]]
    shift[io] <- mx[info$column[io]]
    # lengthscales: by their input column's sd, a shared one by the
    # root-mean-square sd of all columns
    ls <- info$scale == "log_sd_x"
    col <- info$column[ls]
    shift[ls] <- ifelse(is.na(col), log(sqrt(mean(sx^2))), log(sx[pmax(1L, col, na.rm = TRUE)]))
  }
  extra <- .optim_upper(fit, par)
  if (!is.null(extra)) upper <- pmin(upper, extra)
  list(lower = lower, upper = upper, parscale = scale, shift = shift)
}

# Whether the optimiser standardises by the response (its mean and spread):
# for likelihoods whose y is on the scale of f (Gaussian), see
# .optim_setup().
.standardised <- function(fit) {
  .lik_of(fit)$location && is.numeric(fit$y) && length(fit$y) > 1L
}

# trace: NULL shows progress lines in interactive sessions for fits that
# take more than a few seconds; 0 never; 1 always; 2 and more add optim()'s
# own trace (level trace - 1).
# min_gain: a run stops when the bound has risen by less than min_gain per
# observation over the last .stop_window evaluations (0: L-BFGS-B's own
# tests only). Such a run reports convergence code .stop_code, not 0.
.default_control <- list(maxit = 1000L, factr = 1e7, pgtol = 0, trace = NULL,
                         min_gain = 1e-3, jitter = 1e-8, jitter_cap = 1e-2)

# The window of the stopping rule (evaluations).
.stop_window <- 25L

# A run from the model's starting values is stopped by the rule only once
# its best point has moved from the start by at least this much in the
# optimiser's units (.optim_setup(): log-scale parameters by 0.1, a change
# of about 10%; inducing inputs by a tenth of their input's standard
# deviation; the mean by a tenth of sd(y)) in some coordinate. On a plateau
# near the start (a classifier whose latent function is still flat, say) the
# bound rises slowly at first, and without this the rule ended such fits
# where they began and reported them converged. Later stages start from
# fitted values, where not moving is the expected outcome.
.stop_move <- 0.1

# fit$optim$convergence of a run that the min_gain rule stopped: distinct
# from L-BFGS-B's own codes (0 converged, 1 control$maxit reached, 51 and 52
# warnings and errors of its line search), so that 0 always means that the
# optimiser's own convergence tests were met.
.stop_code <- 3L

# The optimiser and jitter settings of `control` over `defaults` (a model's
# own defaults for the shared entries); entries in `own` are a model's own
# settings, passed through for it to check.
.check_control <- function(control, defaults = list(), own = character()) {
  if (!is.list(control)) stop("'control' must be a list", call. = FALSE)
  known <- c(names(.default_control), own)
  bad <- setdiff(names(control), known)
  if (length(bad)) {
    stop(sprintf("unknown 'control' entries: %s (known: %s)",
                 paste(bad, collapse = ", "),
                 paste(known, collapse = ", ")), call. = FALSE)
  }
  ctrl <- utils::modifyList(utils::modifyList(.default_control, defaults), control)
  if (!("trace" %in% names(ctrl))) ctrl["trace"] <- list(NULL)
  whole <- function(v, lo) is.numeric(v) && length(v) == 1L && is.finite(v) && v >= lo &&
    v == round(v)
  if (!whole(ctrl$maxit, 1)) stop("'control$maxit' must be a whole number >= 1", call. = FALSE)
  if (!is.null(ctrl$trace) && !whole(ctrl$trace, 0)) {
    stop("'control$trace' must be NULL or a whole number >= 0", call. = FALSE)
  }
  if (!is.numeric(ctrl$factr) || length(ctrl$factr) != 1L || !is.finite(ctrl$factr) ||
      ctrl$factr <= 0) {
    stop("'control$factr' must be one positive number", call. = FALSE)
  }
  if (!is.numeric(ctrl$min_gain) || length(ctrl$min_gain) != 1L || !is.finite(ctrl$min_gain) ||
      ctrl$min_gain < 0) {
    stop("'control$min_gain' must be one number >= 0", call. = FALSE)
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

# ---- L-BFGS-B ------------------------------------------------------------------

# One L-BFGS-B run on the free parameters, with the boxes and scales of
# .optim_setup(); sets the parameters, the optimiser report and the time.
# The optimiser sees the bound plus .objective_offset(), which makes its
# relative convergence test (factr) independent of the units of y. An
# interrupt (Ctrl-C) ends the run with the best parameters so far, marked
# in the report (`interrupted`); `stage` names the run in progress lines.
# `from_start`: the run starts from the model's starting values (by default
# when the fit has not been optimised yet), so that the min_gain rule waits
# until the parameters have moved (.stop_move).
.fit_lbfgsb <- function(fit, stage = NULL, from_start = is.null(fit$optim)) {
  start <- proc.time()[["elapsed"]]
  su <- NULL
  arm <- NULL
  par_free <- .pack(fit$params, fit$transforms)[!fit$fixed]
  if (length(par_free) > 0L) {
    su <- .optim_setup(fit, par_free)
    if (isTRUE(from_start)) {
      arm <- list(par0 = pmin(pmax(par_free, su$lower), su$upper), scale = su$parscale)
    }
  }
  o <- .objective(fit, safe = TRUE, progress = .progress_new(fit, stage), arm = arm)
  if (length(o$par) > 0L) {
    par0 <- pmin(pmax(o$par, su$lower), su$upper)
    offset <- .objective_offset(fit)
    # L-BFGS-B on u = (par - shift) / scale (see .optim_setup())
    to_par <- function(u) u * su$parscale + su$shift
    ctrl <- c(fit$control[c("maxit", "factr", "pgtol")],
              list(trace = max(0L, .trace_level(fit) - 1L)))
    res <- tryCatch(stats::optim((par0 - su$shift) / su$parscale,
                                 function(u) o$fn(to_par(u)) - offset,
                                 function(u) o$gr(to_par(u)) * su$parscale, method = "L-BFGS-B",
                                 lower = (su$lower - su$shift) / su$parscale,
                                 upper = (su$upper - su$shift) / su$parscale, control = ctrl),
                    interrupt = function(e) NULL,
                    sparsevgp_stopped = function(e) "stopped",
                    error = function(e) .optim_error(e))
    if (identical(res, "stopped")) {
      # the bound stopped rising (see .stop_window): the best point so far,
      # reported as its own outcome, not as the optimiser's convergence
      best <- o$best()
      n <- o$count()
      res <- list(par = best$par, value = -best$value - offset, convergence = .stop_code,
                  counts = c("function" = n, gradient = n),
                  message = sprintf("stopped: gain below control$min_gain (the bound rose by less than %s nats, control$min_gain per observation, over the last %d evaluations)",
                                    format(fit$control$min_gain * max(1, length(fit$y)),
                                           digits = 3L), .stop_window))
    } else if (!is.null(res)) {
      res$par <- setNames(to_par(res$par), names(o$par))
    }
    if (is.null(res)) {
      best <- o$best()
      par <- if (is.null(best$par)) par0 else best$par
      n <- o$count()
      fit$optim <- list(convergence = NA_integer_, message = "interrupted by the user",
                        counts = c("function" = n, gradient = n), value = best$value,
                        par = par, failed_evaluations = o$failures(), interrupted = TRUE)
      fit$params <- o$unpack(par)
    } else {
      fit$optim <- list(convergence = res$convergence,
                        message = if (is.null(res$message)) "" else res$message,
                        counts = res$counts, value = -res$value - offset, par = res$par,
                        failed_evaluations = o$failures())
      fit$params <- o$unpack(res$par)
    }
    # the best bound after each evaluation (for plots of convergence)
    fit$optim$trail <- o$trail()
  } else {
    fit$optim <- list(convergence = 0L, message = "no free parameters",
                      counts = c("function" = 0L, gradient = 0L),
                      value = .evaluate(fit, fit$params, grad = FALSE)$value,
                      failed_evaluations = 0L)
  }
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# optim()'s own errors in the user's terms: L-BFGS-B stepped to non-finite
# parameters, or saw a non-finite value, when the bound's gradient is too
# large for double precision at the starting values. Other errors pass
# through unchanged.
.optim_error <- function(e) {
  msg <- conditionMessage(e)
  if (grepl("non-finite value supplied by optim|needs finite values of 'fn'", msg)) {
    stop(sprintf("L-BFGS-B failed (%s): the gradient of the bound at the starting values is too large for double precision. Start from parameters on the scale of the data (or leave the kernel's parameters NULL to choose them from the data)",
                 msg), call. = FALSE)
  }
  stop(e)
}

# What the optimiser adds to the bound so that its tests do not depend on
# units: N log sd(y) for a Gaussian likelihood (the log Jacobian of
# standardising y, which the bound carries: scaling y by s lowers it by
# N log s), 0 for classifiers.
.objective_offset <- function(fit) {
  if (!.standardised(fit)) return(0)
  s <- stats::sd(fit$y)
  if (is.finite(s) && s > 0) length(fit$y) * log(s) else 0
}

# L-BFGS-B in two stages when the blocks `hold` (the inducing inputs) and
# something else are free: first with `hold` held at its start, then
# everything. Optimised jointly from a poor start, inducing inputs tend to
# collapse into clusters of near-duplicates while the kernel variance is
# still small, a poor local optimum; the first stage reaches the good basin
# and the second refines from there. The report adds the stages' bounds and
# sums the counts.
.fit_staged <- function(fit, hold = "Z") {
  is_held <- .block_mask(fit, hold)
  if (!any(is_held & !fit$fixed) || all(is_held | fit$fixed)) return(.fit_lbfgsb(fit))
  keep <- fit$fixed
  fit$fixed[is_held] <- TRUE
  fit <- .fit_lbfgsb(fit, sprintf("%s held", paste(hold, collapse = ", ")))
  fit$fixed <- keep
  if (isTRUE(fit$optim$interrupted)) return(fit)
  first <- fit$optim
  first_time <- fit$time
  fit <- .fit_lbfgsb(fit, "all parameters")
  fit$optim$counts <- fit$optim$counts + first$counts
  fit$optim$trail <- c(first$trail, fit$optim$trail)
  fit$optim$failed_evaluations <- fit$optim$failed_evaluations + first$failed_evaluations
  fit$optim$capped <- isTRUE(first$convergence == 1L) || isTRUE(first$capped)
  stage_names <- c(paste0("fixed_", paste(hold, collapse = "_")), "all")
  fit$optim$stages <- setNames(c(first$value, fit$optim$value), stage_names)
  fit$optim$stage_evals <- setNames(c(length(first$trail), length(fit$optim$trail) -
                                        length(first$trail)), stage_names)
  fit$time <- fit$time + first_time
  fit
}

# ---- Adam on minibatches -------------------------------------------------------

# Adam (Kingma and Ba 2015) on unbiased minibatch estimates of the bound and
# its gradient (Hensman et al. 2013), for data too large for full-batch
# L-BFGS-B: fit$control$maxit iterations, each on a batch of fit$batch_size
# points drawn uniformly without replacement (reproducible under
# set.seed()), with step size fit$control$lr. beta1 = 0.9, beta2 = 0.999
# and eps = 1e-8 are Kingma and Ba's defaults. The parameters are scaled as
# for L-BFGS-B (inducing inputs in units of sd(x), the mean in units of
# sd(y)) and kept in its boxes. The report's `trace` holds the minibatch
# estimate at each iteration (before its step); there is no convergence
# test.
.fit_adam <- function(fit) {
  o <- .objective(fit, safe = FALSE)
  progress <- .progress_new(fit, "Adam")
  free <- !fit$fixed
  N <- nrow(fit$x)
  # no batch size: full-batch Adam (svgp's control$optimizer = "adam")
  B <- if (is.null(fit$batch_size)) N else fit$batch_size
  iters <- fit$control$maxit
  lr <- fit$control$lr
  b1 <- 0.9
  b2 <- 0.999
  eps <- 1e-8
  start <- proc.time()[["elapsed"]]
  trace <- numeric(iters)
  snaps <- .snapshot_new(fit$control$snapshots)
  if (sum(free) > 0L) {
    su <- .optim_setup(fit, o$par)
    sc <- su$parscale
    sh <- su$shift
    s <- (o$par - sh) / sc
    lo <- (su$lower - sh) / sc
    hi <- (su$upper - sh) / sc
    m1 <- m2 <- numeric(length(s))
    done <- 0L
    interrupted <- identical(tryCatch(for (it in seq_len(iters)) {
      batch <- if (B < N) sort(sample.int(N, B)) else NULL
      r <- tryCatch(o$value_grad(s * sc + sh, batch = batch), error = function(e) {
        if (inherits(e, "sparsevgp_cluster_error")) stop(e)
        stop(sprintf("Adam iteration %d failed: %s (try a smaller control$lr)",
                     it, conditionMessage(e)), call. = FALSE)
      })
      g <- r$grad * sc
      if (!is.finite(r$value) || any(!is.finite(g))) {
        stop(sprintf("Adam iteration %d: the minibatch bound or its gradient is not finite (try a smaller control$lr)",
                     it), call. = FALSE)
      }
      trace[it] <- r$value
      # ascent step on the bias-corrected moments
      m1 <- b1 * m1 + (1 - b1) * g
      m2 <- b2 * m2 + (1 - b2) * g^2
      s <- s + lr * (m1 / (1 - b1^it)) / (sqrt(m2 / (1 - b2^it)) + eps)
      s <- pmin(pmax(s, lo), hi)
      done <- it
      if (length(snaps$at)) snaps <- .snapshot_take(snaps, it, o$unpack(s * sc + sh))
      .progress_tick(progress, it, r$value, "iterations, minibatch bound")
    }, interrupt = function(e) "interrupted"), "interrupted")
    iters <- done
    trace <- trace[seq_len(done)]
    par <- s * sc + sh
    names(par) <- names(o$par)
    fit$params <- o$unpack(par)
  } else {
    par <- o$par
    iters <- 0L
    trace <- numeric(0)
    interrupted <- FALSE
  }
  fit$optim <- list(method = "Adam", convergence = 1L,
                    message = sprintf("%d iterations on minibatches of %d points (no convergence test)",
                                      iters, B),
                    counts = c("function" = iters, gradient = iters), value = NA_real_,
                    par = par, trace = trace, failed_evaluations = 0L)
  if (length(snaps$list)) fit$optim$snapshots <- snaps$list
  if (interrupted) fit$optim$interrupted <- TRUE
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# Snapshots of the parameters during Adam and natural-gradient runs
# (control$snapshots: the iterations to keep), each with the CPU time
# (user + system) since the run started, for convergence studies.
.snapshot_new <- function(at) {
  list(at = if (is.null(at)) integer(0) else as.integer(at), start = .cpu_now(), list = list())
}

.snapshot_take <- function(snaps, it, params) {
  if (it %in% snaps$at) {
    snaps$list[[length(snaps$list) + 1L]] <- list(iteration = it,
                                                  cpu = .cpu_now() - snaps$start,
                                                  params = params)
  }
  snaps
}

.cpu_now <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}

# ---- progress ------------------------------------------------------------------

# The trace level of a fit: control$trace, or, when it is NULL, 1 in
# interactive sessions and 0 otherwise.
.trace_level <- function(fit) {
  t <- fit$control$trace
  if (is.null(t)) as.integer(interactive()) else as.integer(t)
}

# The progress state of one optimiser run, or NULL for none. With the
# automatic setting a line appears only once a run has taken 5 seconds, and
# then every 5 seconds; with trace >= 1, every second.
.progress_new <- function(fit, stage = NULL) {
  if (.trace_level(fit) < 1L) return(NULL)
  p <- new.env(parent = emptyenv())
  p$label <- paste(c(class(fit)[1L], stage), collapse = ", ")
  p$start <- p$last <- proc.time()[["elapsed"]]
  p$every <- if (is.null(fit$control$trace)) 5 else 1
  p
}

.progress_tick <- function(p, count, bound, what = "evaluations, bound") {
  if (is.null(p)) return(invisible())
  now <- proc.time()[["elapsed"]]
  if (now - p$last >= p$every) {
    p$last <- now
    message(sprintf("%s: %d %s %s, %.0f s", p$label, count, what,
                    format(bound, digits = 8L), now - p$start))
  }
  invisible()
}

# ---- the shared tail -----------------------------------------------------------

# Evaluate the bound and the posterior caches at the current parameters,
# warn once if the jitter had to grow, and add the model's report.
.finish <- function(fit) {
  r <- .evaluate(fit, fit$params, grad = FALSE)
  fit$bound <- r$value
  fit$bound_terms <- r$terms
  fit$posterior <- r$posterior
  fit$jitter <- r$jitter
  # the jitter the model adds anyway: control$jitter times the scale, or the
  # model's own base (gpr tries K + noise as it is first: base 0)
  base <- if (is.null(r$jitter_base)) fit$control$jitter else r$jitter_base
  if (!is.null(r$jitter) && max(r$jitter) > base * r$jitter_scale * (1 + 1e-8)) {
    warning(sprintf("the Cholesky factorisation needed jitter %.3g (%.3g times the mean diagonal); the fit may be poorly conditioned",
                    max(r$jitter), max(r$jitter) / r$jitter_scale), call. = FALSE)
  }
  .report(fit)
}

# Build or optimise a model: the shared tail of every model constructor.
.build_or_fit <- function(fit, optimize) {
  if (.check_flag(optimize, "optimize")) {
    fit <- .train(fit)
  } else {
    fit$optim <- NULL
    fit$time <- 0
  }
  fit <- .finish(fit)
  # Adam has no final full-batch value of its own
  if (!is.null(fit$optim) && identical(fit$optim$method, "Adam")) fit$optim$value <- fit$bound
  .fit_warnings(fit)
  fit
}

# Warnings in plain words about a fit that may not be what the user wants:
# an interrupted fit, an optimiser stopped at its evaluation cap, and a
# regression fit that found no signal (a signal variance that is tiny next
# to the noise, or lengthscales that ran to their upper box).
.fit_warnings <- function(fit) {
  o <- fit$optim
  if (is.null(o)) return(invisible())
  if (isTRUE(o$interrupted)) {
    warning(sprintf("fitting was interrupted: the fit holds the best parameters found so far (bound %s after %d evaluations)",
                    format(fit$bound, digits = 8L), as.integer(o$counts[[1L]])), call. = FALSE)
    return(invisible())
  }
  # the last run's cap only: a later stage that converged from a capped
  # earlier one did reach an optimum (o$capped keeps the record)
  # control$maxit counts L-BFGS-B's iterations, each of which evaluates the
  # bound once or more (line searches): the warning counts both
  if (!identical(o$method, "Adam") && isTRUE(o$convergence == 1L)) {
    warning(sprintf("the optimiser stopped at its limit of %d iterations (control$maxit) before the bound converged, after %d evaluations of the bound in all, so the parameters may not be at an optimum: continue with update(fit), or raise control$maxit",
                    as.integer(fit$control$maxit), as.integer(o$counts[[1L]])), call. = FALSE)
  }
  .line_search_warning(fit)
  .flat_fit_warning(fit)
  invisible()
}

# L-BFGS-B's codes 51 and 52 (a warning or an abnormal end of its line
# search): no step along the search direction raised the bound as the
# gradient promised, so the parameters may be short of an optimum. The
# usual cause is a bound that is not smooth at double precision, such as
# noise variances tiny next to the kernel variance: the warning says so
# when that is the case.
.line_search_warning <- function(fit) {
  o <- fit$optim
  if (identical(o$method, "Adam") || !isTRUE(o$convergence %in% c(51L, 52L))) return(invisible())
  noise <- if (!is.null(fit$noise_model)) min(.noise_lambda(fit, fit$params)) else
    fit$params$noise
  sv <- .signal_variance(fit)
  why <- if (!is.null(noise) && !is.null(sv) && min(noise) < 1e-8 * sv) {
    sprintf("the noise variance (down to %s) is below 1e-8 times the kernel variance %s, which leaves the bound too ill-conditioned for double precision there; larger noise variances (a noise floor) avoid this",
            format(min(noise), digits = 3L), format(sv, digits = 3L))
  } else {
    "the bound or its gradient is not smooth at double precision near these parameters (for example inducing inputs that nearly coincide)"
  }
  warning(sprintf("the optimiser stopped without converging (L-BFGS-B code %d: %s), so the parameters may not be at an optimum: %s",
                  as.integer(o$convergence), o$message, why), call. = FALSE)
  invisible()
}

# A Gaussian regression fit whose signal variance is below a hundredth of
# the noise variance, or whose every lengthscale is at least a thousand
# times the range of its input, explains (almost) nothing by the inputs.
.is_flat <- function(fit) {
  if (!.lik_of(fit)$location || is.null(fit$params$variance)) return(FALSE)
  noise <- if (!is.null(fit$noise_model)) mean(.noise_lambda(fit, fit$params)) else
    fit$params$noise
  if (is.null(noise)) return(FALSE)
  ranges <- apply(fit$x, 2L, function(v) diff(range(v)))
  long <- vapply(.kern_leaves(.kernel_at(fit$kernel, fit$params)), function(k) {
    all(rep_len(k$lengthscale, ncol(fit$x)) > 1e3 * pmax(ranges, .Machine$double.eps))
  }, TRUE)
  .signal_variance(fit) < 1e-2 * noise || all(long)
}

.flat_fit_warning <- function(fit) {
  if (!.is_flat(fit)) return(invisible())
  noise <- if (!is.null(fit$noise_model)) mean(.noise_lambda(fit, fit$params)) else
    fit$params$noise
  sv <- .signal_variance(fit)
  why <- if (sv < 1e-2 * noise) {
    sprintf("the signal variance %s is below 1%% of the noise variance %s",
            format(sv, digits = 3L), format(noise, digits = 3L))
  } else {
    "every lengthscale is far longer than the range of its input"
  }
  warning(sprintf("the fit found no signal: %s. The model explains the response as noise around a constant. If that is not plausible, try shorter starting lengthscales (kernel = kernel_rbf(lengthscale = ...)), a smaller starting noise, or more inducing points",
                  why), call. = FALSE)
  invisible()
}
