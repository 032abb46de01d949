# The default training schedule of the collapsed regression models (sgpr,
# osgpr). Optimising the kernel, the noise and all M x D inducing
# coordinates at once from a poor start takes L-BFGS-B hundreds to
# thousands of evaluations and often ends in a flat fit. From the grid start
# of R/start.R, one run over all parameters usually converges in a few
# hundred evaluations to the optimum the stages below reach, at about half
# their cost (kin8nm and power, M = 120 and 200: the same test NLPD within
# 0.006, 55-65% of the CPU time; inst/bench/bench_peers.R). The stages
# remain for what that run cannot do:
#
#   1. the kernel, noise and mean with the inducing inputs held where greedy
#      selection put them (few parameters: tens of evaluations);
#   2. for inducing inputs chosen by greedy selection, re-selection at the
#      fitted parameters and a refit, while that raises the bound (Burt,
#      Rasmussen and van der Wilk 2020, who re-select in this way); with a
#      `threshold`, M is chosen anew in each pass;
#   3. when the inducing inputs are optimised (optimize_inducing = TRUE),
#      all parameters together, from there.
#
# control$schedule:
#   "auto" (the default): for sgpr with free inducing inputs, one run over
#          all parameters from the grid start, and the stages from the
#          start when that run ends flat (signal below 1% of the noise);
#          the stages when the inducing inputs are held (re-selection is
#          what places them) and for osgpr (two sets to place);
#   "staged": always the stages;
#   "joint": the former path, one run from the plain defaults (no grid).
#
# With more than 20 000 observations, the schedule runs on a random
# subsample of 20 000, and then the kernel, noise and mean on all the data
# with the inducing inputs held (.train_large()).

.schedules <- c("auto", "staged", "joint")

# Largest number of observations fitted in stage 1 before the full data.
.train_subsample <- 20000L

# Re-selection passes of stage 2 at most, and the smallest gain in the bound
# (relative to the standardised bound, see .objective_offset()) that keeps
# a re-selection.
.train_reselect_passes <- 3L
.train_reselect_gain <- 1e-5

# The window of the stopping rule for a run of a regression fit: the
# shorter .stop_window_warm for a run that continues from a fitted point
# (re-selected inducing inputs or neighbour sets at the fitted kernel and
# noise, the automatic M's rounds, all rows after a subsample), where the
# change is small and L-BFGS-B gains in its first steps.
.regression_window <- function(warm) if (isTRUE(warm)) .stop_window_warm else .stop_window

# Whether the fit's next run continues from a fitted point: it has been
# optimised, or it starts from the fitted parameters of the trial of
# neighbours = "auto" on a subsample of its rows (R/vif.R), where the
# parameters are near their optimum on all rows.
.warm <- function(fit) !is.null(fit$optim) || isTRUE(fit$from_trial)

.train.sgpr <- function(fit) {
  if (.has_neighbours(fit)) return(.train_vif(fit))
  if (identical(fit$control$schedule, "joint")) return(.fit_lbfgsb(fit))
  .train_staged(fit, sets = "Z", reselect = fit$selection$method %in% .greedy_methods,
                joint_first = identical(fit$control$schedule, "auto"))
}

.train.osgpr <- function(fit) {
  if (identical(fit$control$schedule, "joint")) return(.fit_lbfgsb(fit))
  .train_staged(fit, sets = c("Z", "O"), reselect = FALSE)
}

# The staged fit; `sets` are the blocks of inducing inputs. The report
# (fit$optim) is that of the last stage with the counts of all of them, the
# bound after each stage in `stages` and `capped` if any stage stopped at
# control$maxit.
.train_staged <- function(fit, sets, reselect, joint_first = FALSE) {
  start <- proc.time()[["elapsed"]]
  z_free <- any(.block_mask(fit, sets) & !fit$fixed)
  reports <- list()
  record <- function(f, name) {
    reports[[name]] <<- f$optim
    f
  }
  held <- function(f) {
    f$fixed[.block_mask(f, sets)] <- TRUE
    f
  }
  N <- .nobs(fit)
  # rows on the workers (R/shards.R) are fitted through the subsample
  if (N > .train_subsample || !is.null(fit$shards)) {
    return(.train_large(fit, sets, reselect, joint_first))
  }
  if (joint_first && z_free) {
    # one run over all parameters; the stages only when it ends flat
    joint <- .fit_lbfgsb(fit, "all parameters", from_start = !.warm(fit),
                         window = .regression_window(.warm(fit)))
    if (isTRUE(joint$optim$interrupted) || !.is_flat(joint)) {
      joint$optim <- .stage_report(joint$optim, list(all = joint$optim), "auto")
      joint$time <- proc.time()[["elapsed"]] - start
      return(joint)
    }
    reports$all_flat <- joint$optim
  }
  initial <- fit
  fit <- held(fit)
  # 1. hyperparameters with the inducing inputs held
  fit <- record(.fit_lbfgsb(fit, "inducing inputs held", from_start = !.warm(fit),
                            window = .regression_window(.warm(fit))),
                "inducing_held")
  # 2. re-selection while it pays
  if (reselect && !isTRUE(fit$optim$interrupted)) {
    gain <- .train_reselect_gain * max(1, abs(fit$optim$value + .objective_offset(fit)))
    for (pass in seq_len(.train_reselect_passes)) {
      .work_drop(fit)
      Z <- .select_by_spec(fit$selection, fit$x, .kernel_at(fit$kernel, fit$params),
                           weights = .select_weights(fit), perm = fit$selection$perm,
                           memory = fit$control$memory, hook = "reselection")
      # interrupted: the fit keeps the inducing inputs it has
      if (.interrupt_pending() || identical(unname(Z), unname(fit$params$Z))) break
      cand <- .fit_lbfgsb(.set_inducing(fit, Z), sprintf("re-selection %d", pass),
                          window = .regression_window(TRUE))
      reports[[sprintf("reselect_%d", pass)]] <- cand$optim
      if (isTRUE(cand$optim$interrupted) || !isTRUE(cand$optim$value > fit$optim$value + gain)) {
        if (isTRUE(cand$optim$interrupted) && cand$optim$value > fit$optim$value) fit <- cand
        break
      }
      fit <- cand
    }
  }
  # 3. everything, when the inducing inputs are free. When the held inputs
  # explain nothing (too few of them, at lengthscales where they cannot
  # cover the signal, collapse the fit onto the noise), the joint fit starts
  # from the starting values instead of that flat point.
  fit$fixed <- .fixed_from_spec(fit)
  if (z_free && !isTRUE(fit$optim$interrupted) && !.interrupt_pending()) {
    from <- fit
    if (.is_flat(fit) && !.is_flat(initial)) {
      from$params <- initial$params
      from$fixed <- .fixed_from_spec(from)
    }
    fit <- record(.fit_lbfgsb(from, "all parameters"), "all")
  }
  if (!is.null(reports$all_flat) && reports$all_flat$value > fit$optim$value) {
    fit <- joint
  }
  fit$optim <- .stage_report(fit$optim, reports, if (joint_first) "auto" else "staged")
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# Large N: the whole schedule on a random subsample of .train_subsample
# rows (re-selecting and optimising the inducing inputs there), then the
# kernel, noise and mean on all the data with those inducing inputs held, so
# that the full data see only the evaluations of one short run.
.train_large <- function(fit, sets, reselect, joint_first = FALSE) {
  start <- proc.time()[["elapsed"]]
  N <- .nobs(fit)
  if (is.null(fit$shards)) {
    sub <- .subsample_fit(fit, sort(sample.int(N, .train_subsample)))
    sub <- .train_staged(sub, sets, reselect, joint_first)
  } else {
    # rows on the workers (R/shards.R): all of them when they are few (the
    # fit is then the schedule on them, as in one process), else a subsample
    ss <- .shards_train_subsample(fit, sets, reselect, joint_first)
    if (ss$all_rows) return(ss$fit)
    sub <- ss$fit
  }
  fit$params <- sub$params
  # each subsample stage with its part of the subsample's trail, so that
  # plot(fit, which = "convergence") shows every stage
  ev <- sub$optim$stage_evals
  whole <- length(ev) == length(sub$optim$stages) && sum(ev) == length(sub$optim$trail)
  part <- if (whole) split(sub$optim$trail, rep(seq_along(ev), ev)) else list()
  reports <- lapply(seq_along(sub$optim$stages), function(k) {
    list(value = sub$optim$stages[[k]], counts = c("function" = 0L, gradient = 0L),
         failed_evaluations = 0L, convergence = 0L,
         trail = if (whole) part[[as.character(k)]] else numeric(0))
  })
  names(reports) <- paste0("subsample_", names(sub$optim$stages))
  # the subsample's evaluations cost n / N of a full one each
  reports[[1L]]$counts <- sub$optim$counts
  reports[[1L]]$failed_evaluations <- sub$optim$failed_evaluations
  if (isTRUE(sub$optim$capped)) reports[[1L]]$convergence <- 1L
  if (!isTRUE(sub$optim$interrupted) && !.interrupt_pending()) {
    fit$fixed[.block_mask(fit, sets)] <- TRUE
    fit <- .fit_lbfgsb(fit, "all data, inducing inputs held", from_start = FALSE,
                       window = .regression_window(TRUE))
    reports$all_data <- fit$optim
  } else {
    fit$optim <- sub$optim
    if (is.null(fit$optim)) fit$optim <- reports[[1L]]
    reports[[1L]]$interrupted <- TRUE
  }
  fit$fixed <- .fixed_from_spec(fit)
  fit$optim <- .stage_report(fit$optim, reports, if (joint_first) "auto" else "staged")
  fit$optim$subsample <- if (is.null(fit$shards)) .train_subsample else .shards_subsample_rows()
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# The report of a staged fit: the last run's, with every run's evaluations
# counted, the bound after each run and whether any stopped at its cap.
.stage_report <- function(last, reports, schedule = "staged") {
  out <- last
  out$counts <- Reduce(`+`, lapply(reports, function(r) r$counts))
  out$failed_evaluations <- sum(vapply(reports, function(r) as.integer(r$failed_evaluations), 0L))
  out$stages <- vapply(reports, function(r) as.double(r$value), 0)
  # the best bound after each evaluation, stage after stage, and how many
  # evaluations each stage has in it
  trails <- lapply(reports, function(r) r$trail)
  out$trail <- unlist(trails, use.names = FALSE)
  out$stage_evals <- lengths(trails)
  out$capped <- any(vapply(reports, function(r) isTRUE(r$convergence == 1L), TRUE))
  if (any(vapply(reports, function(r) isTRUE(r$interrupted), TRUE))) out$interrupted <- TRUE
  out$schedule <- schedule
  out
}

# The fit restricted to the rows `rows` of the data (for a first fit of the
# hyperparameters on a subsample): the data and everything stored per
# observation.
.subsample_fit <- function(fit, rows) {
  # a threshold on the trace (a sum over observations) shrinks with them
  if (!is.null(fit$selection$threshold)) {
    fit$selection$threshold <- fit$selection$threshold * length(rows) / nrow(fit$x)
  }
  fit$x <- fit$x[rows, , drop = FALSE]
  fit$y <- fit$y[rows]
  # the workers of a cluster hold all the rows: the subsample is fitted here
  fit$cluster <- NULL
  nm <- fit$noise_model
  if (!is.null(nm$lambda)) nm$lambda <- nm$lambda[rows]
  if (!is.null(nm$Phi)) nm$Phi <- nm$Phi[rows, , drop = FALSE]
  fit$noise_model <- nm
  fit
}

# The control of the collapsed regression models: the shared settings,
# `schedule` ("auto", the default, "staged" or "joint") and, for the models whose
# bound goes over row chunks (sgpr, osgpr), `memory` (R/stream.R), and for
# sgpr `neighbour_rounds` (R/neighbours.R).
.collapsed_control <- function(control, memory = TRUE, neighbours = FALSE) {
  ctrl <- .check_control(control,
                         defaults = c(list(schedule = "auto"),
                                      if (neighbours) list(neighbour_rounds = .nb_refresh_rounds)),
                         own = c("schedule", if (memory) "memory",
                                 if (neighbours) "neighbour_rounds"))
  if (memory) ctrl$memory <- .check_memory(ctrl$memory)
  if (neighbours) {
    r <- ctrl$neighbour_rounds
    if (!is.numeric(r) || length(r) != 1L || !is.finite(r) || r < 0 || r != round(r)) {
      stop("'control$neighbour_rounds' must be a whole number >= 0", call. = FALSE)
    }
    ctrl$neighbour_rounds <- as.integer(r)
  }
  if (!is.character(ctrl$schedule) || length(ctrl$schedule) != 1L ||
      !(ctrl$schedule %in% .schedules)) {
    stop(sprintf("'control$schedule' must be one of %s",
                 paste0("\"", .schedules, "\"", collapse = ", ")), call. = FALSE)
  }
  ctrl
}

# Starting kernel and noise of a collapsed regression model: the grid of
# R/start.R when `search` (a staged fit from scratch), else the plain
# data-driven defaults. `noise` is what the user gave (NULL, a number, a
# vector of known variances, a formula); the returned `noise` is the
# starting constant variance (NULL: the default).
.start_collapsed <- function(kernel, x, y, noise, spec, search, neighbours = 0L) {
  .stage_mark("start search", x)
  if (!search) return(list(kernel = .kern_init(kernel, x, y), noise = NULL))
  learned <- is.null(noise) || inherits(noise, "formula")
  known <- if (is.numeric(noise) && length(noise) == nrow(x) && nrow(x) > 1L) noise
  M <- if (is.na(spec$M)) 100L else spec$M
  st <- .start_regression(kernel, x, y, M = M, noise_free = learned, lambda = known,
                          neighbours = neighbours)
  st$kernel <- .kern_init(st$kernel, x, y)
  if (length(x) >= .stage_gc_cells) .collect()
  st
}
