# Stops that keep the fit, and errors that are never taken for a bad trial
# point.
#
# Ctrl-C (an "interrupt" condition) may arrive in any phase of a fit: the
# search for starting values, the selection of inducing inputs, any
# optimiser run (L-BFGS-B, Adam, natural gradients), a re-selection, PGPR's
# closed-form updates, an evaluation on the workers of a cluster. Each phase
# catches it where it can still hand over what it has (the best starting
# values so far, a quick choice of inducing inputs, the best parameters of
# the run), notes it (.interrupt_note()), and every later phase then takes
# its cheapest way to a fit (.interrupt_pending()): no further optimiser
# run, re-selection or update. .build_or_fit() takes the note
# (.interrupt_take()), evaluates the bound at the parameters reached and
# warns once (.fit_warnings()). An interrupt during that final evaluation
# (or twice in a row) stops without a fit, as Ctrl-C usually does.
#
# Errors that mean "stop" rather than "this trial point is bad" are never
# swallowed by the loops that step back from a failed evaluation (the line
# search of L-BFGS-B, the grid of starting values, reinit_inducing()):
# a time limit (setTimeLimit(), and so R.utils::withTimeout()), memory
# that cannot be allocated, and a failed cluster (.is_fatal()). They reach
# the caller unchanged, and the fit in progress is not returned.

# The phase of the fit in progress that an interrupt stopped, kept from the
# interrupt to the end of the fit (.build_or_fit()). One model at a time is
# fitted in an R session, so one slot serves; each model constructor
# clears it (.model_call()).
.interrupts <- new.env(parent = emptyenv())

# Note that an interrupt stopped `phase` (the first one noted stays).
.interrupt_note <- function(phase) {
  if (is.null(.interrupts$phase)) .interrupts$phase <- phase
  invisible()
}

.interrupt_pending <- function() !is.null(.interrupts$phase)

# The noted phase, cleared (NULL: none).
.interrupt_take <- function() {
  p <- .interrupts$phase
  .interrupts$phase <- NULL
  p
}

.interrupt_clear <- function() {
  .interrupts$phase <- NULL
  invisible()
}

# `expr`, or, when an interrupt arrives during it, the note of `phase` and
# the value of fallback() (evaluated after the interrupt).
.interruptible <- function(expr, phase, fallback = function() NULL) {
  r <- tryCatch(list(value = expr), interrupt = function(e) NULL)
  if (!is.null(r)) return(r$value)
  .interrupt_note(phase)
  fallback()
}

# A test hook: signal an interrupt, as Ctrl-C does, on entering `phase`
# when the option sparsevgp.interrupt_at names it ("start", "selection",
# "reselection", "c_update"; the optimiser runs use
# sparsevgp.interrupt_after, R/objective.R).
.interrupt_point <- function(phase) {
  at <- getOption("sparsevgp.interrupt_at")
  if (!is.null(at) && phase %in% at) .interrupt_signal()
  invisible()
}

# A test hook: signal an interrupt when the count of evaluations (or
# iterations) n exceeds the option sparsevgp.interrupt_after.
.interrupt_count_hook <- function(n) {
  after <- getOption("sparsevgp.interrupt_after")
  if (!is.null(after) && n > after) .interrupt_signal()
  invisible()
}

.interrupt_signal <- function() {
  signalCondition(structure(class = c("interrupt", "condition"),
                            list(message = "interrupt (test hook)", call = NULL)))
}

# Errors that stop a fit instead of marking one trial point as bad: a time
# limit, memory that cannot be allocated, a failed cluster.
.is_fatal <- function(e) {
  if (inherits(e, "sparsevgp_cluster_error")) return(TRUE)
  msg <- conditionMessage(e)
  limits <- c(gettext("reached elapsed time limit", domain = "R"),
              gettext("reached CPU time limit", domain = "R"),
              "reached elapsed time limit", "reached CPU time limit")
  any(startsWith(msg, limits)) || grepl("cannot allocate (vector|memory|buffer)", msg)
}

# For the error handlers that turn an error into a value: fatal errors go
# on to the caller.
.rethrow_fatal <- function(e) {
  if (.is_fatal(e)) stop(e)
  invisible()
}

# The start of a stage of a fit on data x (the search for starting values,
# a selection, each optimiser run, PGPR's updates, the final evaluation).
# With large data the garbage of the stage before is collected first and
# its memory handed back to the system: R collects only when its heap has
# grown by a share of what it holds, and the C library keeps what R frees,
# so the large temporaries of one stage (a selection's factor, a workspace)
# would still be resident when the next allocates its own, and the peak
# would be their sum rather than the larger of the two (?scaling). This
# costs about 20 ms, nothing next to a stage at these sizes.
# The option sparsevgp.stage_hook, a function called with the name of each
# stage as it begins, lets inst/bench/bench_memory.R measure the peak
# memory of every stage.
.stage_mark <- function(stage, x = NULL) {
  if (length(x) >= .stage_gc_cells) .collect()
  h <- getOption("sparsevgp.stage_hook")
  if (is.function(h)) h(stage)
  invisible()
}

# A garbage collection, and the memory it freed handed back to the system
# (glibc keeps it otherwise: src/linalg.c, ffi_la_release).
.collect <- function() {
  invisible(gc(verbose = FALSE))
  invisible(.ffi_release())
}

# Data of at least this many numbers (8 MB) have their stages start with a
# garbage collection.
.stage_gc_cells <- 1e6
