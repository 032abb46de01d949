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
#' They take a vector like \code{par}: one finite number per free parameter
#' (anything else is an error naming \code{par}). The work space of the
#' evaluations is allocated once and reused (see \code{\link{scaling}}).
#'
#' With \code{cluster}, a cluster from \code{parallel::makeCluster()}, the
#' data of an \code{\link{sgpr}()}, \code{\link{pgpr}()},
#' \code{\link{osgpr}()} or \code{\link{svgp}()} fit are sent to its
#' workers once, and every call of \code{fn} and \code{gr} is evaluated
#' there as in a fit with \code{cluster =} (see \code{\link{scaling}});
#' \code{release()} drops the data from the workers (stopping the cluster
#' does too).
#'
#' @param fit a model fit, for example from \code{\link{gpr}()} or
#'   \code{\link{sgpr}()}, possibly built with \code{optimize = FALSE}.
#' @param cluster a cluster from \code{parallel::makeCluster()} to evaluate
#'   on, or \code{NULL} (the default) for this process.
#' @param ... unused.
#' @return A list with \code{par} (the current free parameters, named),
#'   \code{fn} (the negative bound), \code{gr} (its gradient) and
#'   \code{unpack} (turns a parameter vector into the named list of
#'   natural-scale parameters); with a cluster also \code{release}.
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
objective.default <- function(fit, ...) {
  stop("'fit' must be a model fit of this package, for example from sgpr() (with optimize = FALSE to build it without fitting)",
       call. = FALSE)
}

#' @rdname objective
#' @export
objective.sparsevgp <- function(fit, cluster = NULL, ...) {
  # a fit on rows held by workers is evaluated there (R/shards.R)
  if (!is.null(fit$shards)) cluster <- .shards_objective_cluster(fit, cluster)
  if (is.null(cluster)) return(.objective(fit, safe = FALSE))
  if (inherits(cluster, "sparsevgp_shards")) {
    h <- .shards_attach(fit, cluster)
  } else {
    share <- .share(fit)
    h <- .cluster_setup(cluster, fit, share)
  }
  fit$cluster <- h
  o <- .objective(fit, safe = FALSE)
  held <- TRUE
  o$release <- function() {
    if (held) .cluster_release(h)
    held <<- FALSE
    invisible()
  }
  o
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
.objective <- function(fit, safe, progress = NULL, arm = NULL, window = .stop_window) {
  template <- fit$params
  trans <- fit$transforms
  full <- .pack(template, trans)
  free <- !fit$fixed
  # the work space of the evaluations, kept between them (R/stream.R)
  if (is.null(fit$.work)) fit$.work <- .work_new()
  nfree <- sum(free)
  cache <- new.env(parent = emptyenv())
  cache$failures <- 0L
  cache$best <- -Inf
  cache$count <- 0L
  cache$calls <- 0L
  # the stopping rule: the best bound after each evaluation, and the gain
  # over the last `window` evaluations below which the run stops
  cache$trail <- numeric(0)
  stop_gain <- if (is.null(fit$control$min_gain)) 0 else
    fit$control$min_gain * max(1, .nobs(fit))
  # armed: the rule may stop the run (at once, unless the run starts from the
  # model's starting values)
  cache$armed <- is.null(arm)
  # a test hook: a function of the evaluation count called where the
  # evaluation runs, so that its errors are what .evaluate() would raise
  # (a time limit, exhausted memory)
  eval_hook <- getOption("sparsevgp.evaluation_hook")
  unpack <- function(par) {
    p <- full
    p[free] <- par
    .unpack(p, template, trans)
  }
  # what fn and gr are given: one finite number per free parameter
  check_par <- function(par) {
    if (!is.numeric(par) || length(par) != nfree || any(!is.finite(par))) {
      stop(sprintf("'par' must be %d finite number%s, one per free parameter (as objective(fit)$par), not %s",
                   nfree, if (nfree == 1L) "" else "s", .describe_value(par)), call. = FALSE)
    }
    par
  }
  # the bound and its gradient in the free parameters, or NULL on failure
  value_grad <- function(par, ...) {
    cache$calls <- cache$calls + 1L
    # a test hook: an interrupt, as Ctrl-C gives, after this many
    # evaluations (R/interrupt.R)
    .interrupt_count_hook(cache$calls)
    r <- tryCatch({
      if (!is.null(eval_hook)) eval_hook(cache$calls)
      .evaluate(fit, unpack(par), grad = TRUE, ...)
    }, error = function(e) {
      # a failed cluster, a time limit or exhausted memory is never a bad
      # trial point to step back from (R/interrupt.R)
      .rethrow_fatal(e)
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
       fn = function(par) {
         if (!safe) check_par(par)
         evaluate(par)
         -cache$value
       },
       gr = function(par) {
         if (!safe) check_par(par)
         evaluate(par)
         -cache$grad
       },
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
  vy <- if (regression) .y_var(fit) else 1
  if (!is.finite(vy) || vy <= 0) vy <- 1
  lower[noise] <- pmin(par[noise], log(1e-6 * vy))
  # the optimiser works on (par - shift) / scale: the parameters of the
  # standardised problem (inputs by their sd, y by its mean and sd), so that
  # it sees the same numbers whatever the units
  shift <- rep(0, n)
  if (regression) {
    scale[info$scale == "y"] <- sqrt(vy)
    shift[info$scale == "y"] <- .y_mean(fit)
    shift[info$scale == "log_var_y"] <- log(vy)
    shift[info$scale == "log_sd_y"] <- 0.5 * log(vy)
  }
  if (!is.null(fit$x)) {
    cs <- .x_stats(fit)
    sx <- cs["sd", ]
    sx[!is.finite(sx) | sx <= 0] <- 1
    mx <- cs["mean", ]
    io <- info$scale == "x"
    scale[io] <- sx[info$column[io]]
    shift[io] <- mx[info$column[io]]
    # lengthscales: by their input column's sd, a shared one by the
    # root-mean-square sd of all columns
    ls <- info$scale == "log_sd_x"
    col <- info$column[ls]
    # (the root-mean-square in logs: sd^2 overflows for inputs near 1e200)
    log_rms <- log(max(sx)) + 0.5 * log(mean((sx / max(sx))^2))
    shift[ls] <- ifelse(is.na(col), log_rms, log(sx[pmax(1L, col, na.rm = TRUE)]))
  }
  extra <- .optim_upper(fit, par)
  if (!is.null(extra)) upper <- pmin(upper, extra)
  list(lower = lower, upper = upper, parscale = scale, shift = shift)
}

# Whether the optimiser standardises by the response (its mean and spread):
# for likelihoods whose y is on the scale of f (Gaussian), see
# .optim_setup().
.standardised <- function(fit) {
  .lik_of(fit)$location && is.numeric(fit$y) && .nobs(fit) > 1L
}

# trace: NULL shows progress lines in interactive sessions for fits that
# take more than a few seconds; 0 never; 1 always; 2 and more add optim()'s
# own trace (level trace - 1).
# min_gain: a run stops when the bound has risen by less than min_gain per
# observation over the last .stop_window evaluations (0: L-BFGS-B's own
# tests only). Such a run reports convergence code .stop_code, not 0.
# jitter: the jitter always added to K_uu (relative to its mean diagonal);
# 0, the default, tries the matrix as it is and adds jitter only when the
# factorisation fails or is unusable (src/linalg.c), escalating tenfold from
# 1e-10 up to jitter_cap.
.default_control <- list(maxit = 1000L, factr = 1e7, pgtol = 0, trace = NULL,
                         min_gain = 1e-3, jitter = 0, jitter_cap = 1e-2)

# `control` is a list whose entries all have names (list(10) would
# otherwise be ignored without a word).
.check_control_list <- function(control) {
  if (!is.list(control)) stop("'control' must be a list", call. = FALSE)
  nm <- names(control)
  if (length(control) && (is.null(nm) || any(is.na(nm) | !nzchar(nm)))) {
    stop("every entry of 'control' must be named, as in control = list(maxit = 100)",
         call. = FALSE)
  }
  invisible(control)
}

# The window of the stopping rule (evaluations).
.stop_window <- 25L

# The window for a regression run that continues from a fitted point with
# a small change (new inducing inputs or neighbour sets at the fitted
# kernel and noise, or the same parameters on all rows after a subsample):
# L-BFGS-B gains there in its first steps, and over 25 evaluations each
# such run cost at least 26 (concrete: 102 of a fit's evaluations went to
# five of them, with gains of 0.01-2 nats; inst/bench/results/
# bench_warm_window.txt).
.stop_window_warm <- 10L

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
  .check_control_list(control)
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
  if (!whole(ctrl$maxit, 1) || ctrl$maxit > .Machine$integer.max) {
    stop(sprintf("'control$maxit' must be a whole number from 1 to %d", .Machine$integer.max),
         call. = FALSE)
  }
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
  ctrl[c("jitter", "jitter_cap")] <- .check_jitter(ctrl$jitter, ctrl$jitter_cap)
  ctrl
}

# control$jitter (finite, >= 0) and control$jitter_cap (finite, >= jitter,
# > 0), each relative to the mean diagonal of the matrix factorised.
.check_jitter <- function(jitter, cap) {
  if (!is.numeric(jitter) || length(jitter) != 1L || !is.finite(jitter) || jitter < 0) {
    stop("'control$jitter' must be one finite number >= 0 (the jitter always added, relative to the mean diagonal; 0 adds it only when the factorisation needs it)",
         call. = FALSE)
  }
  if (!is.numeric(cap) || length(cap) != 1L || !is.finite(cap) || cap <= 0) {
    stop("'control$jitter_cap' must be one finite number > 0 (the largest jitter tried, relative to the mean diagonal)",
         call. = FALSE)
  }
  if (cap < jitter) {
    stop(sprintf("'control$jitter_cap' (%g) must be at least 'control$jitter' (%g)", cap, jitter),
         call. = FALSE)
  }
  list(as.double(jitter), as.double(cap))
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
.fit_lbfgsb <- function(fit, stage = NULL, from_start = is.null(fit$optim),
                        window = .stop_window) {
  .stage_mark(paste0("optimiser run", if (!is.null(stage)) paste0(" (", stage, ")"),
                     if (nrow(fit$x) > 0L) sprintf(", N = %d", nrow(fit$x))), fit$x)
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
  o <- .objective(fit, safe = TRUE, progress = .progress_new(fit, stage), arm = arm,
                  window = window)
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
                                    format(fit$control$min_gain * max(1, .nobs(fit)),
                                           digits = 3L), window))
    } else if (!is.null(res)) {
      res$par <- setNames(to_par(res$par), names(o$par))
    }
    if (is.null(res)) {
      best <- o$best()
      par <- if (is.null(best$par)) par0 else best$par
      n <- o$count()
      phase <- if (is.null(stage)) "the optimiser run" else sprintf("the optimiser run (%s)", stage)
      .interrupt_note(phase)
      fit$optim <- list(convergence = NA_integer_, message = "interrupted by the user",
                        counts = c("function" = n, gradient = n), value = best$value,
                        par = par, failed_evaluations = o$failures(), interrupted = TRUE,
                        interrupted_in = phase)
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
  s <- sqrt(.y_var(fit))
  if (is.finite(s) && s > 0) .nobs(fit) * log(s) else 0
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
  N <- .nobs(fit)
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
        .rethrow_fatal(e)
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
  if (interrupted) {
    fit$optim$interrupted <- TRUE
    fit$optim$interrupted_in <- "the Adam iterations"
    .interrupt_note("the Adam iterations")
  }
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
  # (the model's name, not that of a class it takes while it trains)
  model <- setdiff(class(fit), c("uc_abandon", "svgp_inner"))[1L]
  p$label <- paste(c(model, stage), collapse = ", ")
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
# record the jitter and warn once if a factorisation needed more than the
# user asked for, and add the model's report.
.finish <- function(fit) {
  .stage_mark("final evaluation and report", fit$x)
  r <- .evaluate(fit, fit$params, grad = FALSE)
  fit$bound <- r$value
  fit$bound_terms <- r$terms
  fit$posterior <- r$posterior
  fit$jitter <- r$jitter
  fit$jitter_relative <- if (!is.null(r$jitter) && isTRUE(r$jitter_scale > 0)) {
    r$jitter / r$jitter_scale
  }
  fit$jitter_cost <- NULL
  # the jitter the user asked for: control$jitter times the scale, or the
  # model's own base (gpr tries K + noise as it is first: base 0)
  base <- if (is.null(r$jitter_base)) fit$control$jitter else r$jitter_base
  if (!is.null(r$jitter) && max(r$jitter) > base * r$jitter_scale * (1 + 1e-8)) {
    fit$jitter_cost <- .jitter_cost(fit, r)
  }
  # a warning beyond .jitter_warn of the scale: smaller jitters (inducing
  # inputs that optimisation moved close together) change the bound in its
  # last digits; summary() reports them
  if (!is.null(r$jitter) &&
      max(r$jitter) > max(base, .jitter_warn) * r$jitter_scale * (1 + 1e-8)) {
    warning(sprintf("the Cholesky factorisation needed jitter %.3g (%.3g times the mean diagonal)%s; the fit may be poorly conditioned (nearly coinciding inducing inputs, or a kernel numerically low-rank at them)",
                    max(r$jitter), max(r$jitter) / r$jitter_scale,
                    if (is.null(fit$jitter_cost)) "" else
                      sprintf(", which changes the bound by about %s", format(fit$jitter_cost, digits = 3L))),
            call. = FALSE)
  }
  .report(fit)
}

# The relative jitter above which a fit warns (the jitter the sparse
# models added to every factorisation before they tried the matrix as it
# is first).
.jitter_warn <- 1e-8

# What the jitter of the evaluation r costs: the bound with the jitter
# doubled, subtracted from the bound with it (to first order, the bound
# without jitter minus the bound with it: the bound is linear in a small
# jitter). NULL when that evaluation fails.
.jitter_cost <- function(fit, r) {
  rel <- 2 * max(r$jitter) / r$jitter_scale
  fit$control$jitter <- rel
  fit$control$jitter_cap <- max(fit$control$jitter_cap, rel)
  r2 <- tryCatch(.evaluate(fit, fit$params, grad = FALSE), error = function(e) {
    .rethrow_fatal(e)
    NULL
  })
  if (is.null(r2) || !is.finite(r2$value)) return(NULL)
  r$value - r2$value
}

# Build or optimise a model: the shared tail of every model constructor.
# The fit carries the work space of its evaluations while it is fitted
# (.work, R/stream.R), never after. A phase stopped by Ctrl-C (R/interrupt.R)
# ends the training there: the fit is evaluated where it is and marked.
.build_or_fit <- function(fit, optimize) {
  work <- .work_new()
  fit$.work <- work
  on.exit(rm(list = ls(work), envir = work), add = TRUE)
  if (.check_flag(optimize, "optimize")) {
    phase <- .interrupt_take()
    if (is.null(phase)) {
      # an interrupt that no phase of the training caught leaves the fit
      # where it started
      start <- fit
      fit <- .interruptible(.train(fit), "the fit", function() start)
      phase <- .interrupt_take()
    }
    if (!is.null(phase)) fit$optim <- .interrupted_report(fit$optim, phase)
  } else {
    .interrupt_clear()
    fit$optim <- NULL
    fit$time <- 0
  }
  fit <- .finish(fit)
  fit$.work <- NULL
  # the work space goes, and with large data its memory too (R/interrupt.R)
  rm(list = ls(work), envir = work)
  if (length(fit$x) >= .stage_gc_cells) .collect()
  # Adam has no final full-batch value of its own
  if (!is.null(fit$optim) && identical(fit$optim$method, "Adam")) fit$optim$value <- fit$bound
  .fit_warnings(fit)
  fit
}

# The optimiser report of a fit stopped by an interrupt in `phase`: the
# report so far (NULL: no optimiser ran), marked.
.interrupted_report <- function(o, phase) {
  if (is.null(o)) {
    o <- list(convergence = NA_integer_, message = "", counts = c("function" = 0L, gradient = 0L),
              value = NA_real_, failed_evaluations = 0L)
  }
  o$interrupted <- TRUE
  if (is.null(o$interrupted_in)) o$interrupted_in <- phase
  o$message <- sprintf("interrupted by the user during %s", o$interrupted_in)
  o
}

# Warnings in plain words about a fit that may not be what the user wants:
# an interrupted fit, an optimiser stopped at its evaluation cap, and a
# regression fit that found no signal (a signal variance that is tiny next
# to the noise, or lengthscales that ran to their upper box).
.fit_warnings <- function(fit) {
  o <- fit$optim
  if (is.null(o)) return(invisible())
  if (isTRUE(o$interrupted)) {
    warning(sprintf("fitting was interrupted%s: the fit holds the best parameters found so far (bound %s after %d evaluations)",
                    if (is.null(o$interrupted_in)) "" else paste(" during", o$interrupted_in),
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
  noise <- if (!is.null(fit$noise_model)) min(.noise_lambda(fit, fit$params, compact = TRUE)) else
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
  noise <- if (!is.null(fit$noise_model)) .noise_mean(fit, fit$params) else
    fit$params$noise
  if (is.null(noise)) return(FALSE)
  cs <- .x_stats(fit)
  ranges <- cs["max", ] - cs["min", ]
  long <- vapply(.kern_leaves(.kernel_at(fit$kernel, fit$params)), function(k) {
    all(rep_len(k$lengthscale, ncol(fit$x)) > 1e3 * pmax(ranges, .Machine$double.eps))
  }, TRUE)
  .signal_variance(fit) < 1e-2 * noise || all(long)
}

.flat_fit_warning <- function(fit) {
  if (!.is_flat(fit)) return(invisible())
  noise <- if (!is.null(fit$noise_model)) .noise_mean(fit, fit$params) else
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
