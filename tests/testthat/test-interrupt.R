# Every stop keeps the fit (R/interrupt.R): an interrupt (Ctrl-C, signalled
# here by the test hooks sparsevgp.interrupt_at and
# sparsevgp.interrupt_after) in any phase of any model gives a fit at the
# best point so far with one warning naming the phase; a time limit,
# exhausted memory and a failed cluster are never taken for a bad trial
# point and reach the caller.

int_data <- function(N = 120, seed = 2) {
  set.seed(seed)
  x <- matrix(runif(2 * N, -2, 2), N, 2)
  f <- sin(2 * x[, 1]) + 0.5 * x[, 2]
  list(x = x, y = f + rnorm(N, sd = 0.2), lab = factor(f + rnorm(N, sd = 0.3) > 0),
       cl3 = factor(c("a", "b", "c")[1L + (f > -0.5) + (f > 0.5)]))
}

# fit with the hook options `opts`; the fit, its one warning checked
interrupted <- function(expr, opts, phase) {
  old <- options(opts)
  on.exit(options(old), add = TRUE)
  w <- character()
  fit <- withCallingHandlers(expr, warning = function(w0) {
    w <<- c(w, conditionMessage(w0))
    invokeRestart("muffleWarning")
  })
  hit <- grep("interrupted", w, value = TRUE)
  expect_length(hit, 1L)
  expect_match(hit, phase, fixed = TRUE)
  expect_true(isTRUE(fit$optim$interrupted))
  expect_true(is.finite(fit$bound))
  expect_true(all(is.finite(unlist(predict(fit, fit$x[1:3, , drop = FALSE])))))
  expect_null(fit$.work)
  # nothing is left pending for the next fit
  expect_false(sparsevgp:::.interrupt_pending())
  fit
}

test_that("an interrupt in the start search or the selection gives a fit at the starting values", {
  d <- int_data()
  for (ph in c("start", "selection")) {
    f <- interrupted(sgpr(d$x, d$y, inducing = 12),
                     list(sparsevgp.interrupt_at = ph),
                     if (ph == "start") "the search for starting values" else
                       "the selection of inducing inputs")
    expect_equal(f$optim$counts[[1L]], 0L)
    expect_identical(nrow(f$params$Z), 12L)
    expect_identical(anyDuplicated(f$params$Z), 0L)
    # the fit is at its starting values: its bound is the bound there
    expect_equal(f$bound, sparsevgp:::.evaluate(f, f$params, FALSE)$value, tolerance = 1e-12)
  }
  # osgpr, pgpr, svgp and gpr in the same phases
  interrupted(osgpr(d$x, d$y, inducing = 4, orthogonal = 4),
              list(sparsevgp.interrupt_at = "selection"), "the selection of inducing inputs")
  interrupted(osgpr(d$x, d$y, inducing = 4, orthogonal = 4),
              list(sparsevgp.interrupt_at = "start"), "the search for starting values")
  interrupted(pgpr(d$x, d$lab, inducing = 8),
              list(sparsevgp.interrupt_at = "selection"), "the selection of inducing inputs")
  interrupted(svgp(d$x, d$lab, inducing = 8),
              list(sparsevgp.interrupt_at = "selection"), "the selection")
  interrupted(gpr(d$x[1:40, ], d$y[1:40]), list(sparsevgp.interrupt_at = "start"),
              "the search for starting values")
})

test_that("an interrupt in a re-selection or an optimiser run keeps the best fit so far", {
  d <- int_data()
  f <- interrupted(sgpr(d$x, d$y, inducing = 10, optimize_inducing = FALSE),
                   list(sparsevgp.interrupt_at = "reselection"),
                   "the selection of inducing inputs")
  # stage 1 ran; the re-selection did not change the inducing inputs
  expect_gt(f$optim$counts[[1L]], 0L)
  ref <- suppressWarnings(sgpr(d$x, d$y, inducing = 10, optimize_inducing = FALSE,
                               control = list(maxit = 1)))
  for (n in c(3L, 40L)) {
    f <- interrupted(sgpr(d$x, d$y, inducing = 10),
                     list(sparsevgp.interrupt_after = n), "the optimiser run")
    expect_lte(f$optim$counts[[1L]], n)
  }
  interrupted(osgpr(d$x, d$y, inducing = 4, orthogonal = 4),
              list(sparsevgp.interrupt_after = 5L), "the optimiser run")
  interrupted(gpr(d$x[1:40, ], d$y[1:40]), list(sparsevgp.interrupt_after = 5L),
              "the optimiser run")
})

test_that("pgpr stops in its updates, its runs and its re-selections with the best state", {
  d <- int_data()
  for (ph in c("c_update", "reselection")) {
    f <- interrupted(pgpr(d$x, d$lab, inducing = 8, control = list(outer_max = 3)),
                     list(sparsevgp.interrupt_at = ph),
                     if (ph == "c_update") "the updates of the local parameters c" else
                       "the selection of inducing inputs")
    expect_s3_class(f, "pgpr")
    expect_length(f$c, nrow(d$x))
  }
  f <- interrupted(pgpr(d$x, d$lab, inducing = 8), list(sparsevgp.interrupt_after = 4L),
                   "the optimiser run")
  # one L-BFGS-B run of at most 4 evaluations, no further rounds
  expect_lte(f$optim$counts[[1L]], 4L)
})

test_that("Adam, natural gradients and multiclass fits stop with the iterations done", {
  d <- int_data()
  f <- interrupted(svgp(d$x, d$y, likelihood = "gaussian", inducing = 8, batch_size = 40,
                        control = list(maxit = 50)),
                   list(sparsevgp.interrupt_after = 6L), "the Adam iterations")
  expect_equal(f$optim$counts[[1L]], 6L)
  f <- interrupted(svgp(d$x, d$lab, inducing = 8, control = list(optimizer = "natgrad",
                                                                  maxit = 50)),
                   list(sparsevgp.interrupt_after = 4L), "the natural-gradient iterations")
  expect_lt(f$optim$counts[[1L]], 100L)
  interrupted(odvgp(d$x, d$cl3, inducing = 4, orthogonal = 4, control = list(maxit = 50)),
              list(sparsevgp.interrupt_after = 3L), "interrupted")
})

test_that("reinit_inducing() stops with the best pass so far", {
  d <- int_data()
  fit <- suppressWarnings(sgpr(d$x, d$y, inducing = 10, control = list(maxit = 30)))
  old <- options(sparsevgp.interrupt_after = 2L)
  on.exit(options(old))
  w <- character()
  r <- withCallingHandlers(reinit_inducing(fit, max_passes = 3L), warning = function(w0) {
    w <<- c(w, conditionMessage(w0))
    invokeRestart("muffleWarning")
  })
  expect_true(any(grepl("re-initialisation was interrupted", w)))
  expect_identical(r$reinit$stop, "interrupted")
  expect_gte(r$bound, fit$bound - 1e-8)
})

test_that("a time limit, exhausted memory and a failed cluster are never a bad trial point", {
  d <- int_data()
  fatal <- list("reached elapsed time limit", "reached CPU time limit",
                "cannot allocate vector of size 12.3 Gb")
  for (msg in fatal) {
    old <- options(sparsevgp.evaluation_hook = function(n) if (n > 3L) stop(msg))
    # L-BFGS-B would step back from an ordinary failure and run on; these
    # reach the caller
    expect_error(sgpr(d$x, d$y, inducing = 8, control = list(schedule = "joint")), msg,
                 fixed = TRUE)
    expect_error(svgp(d$x, d$y, likelihood = "gaussian", inducing = 6, batch_size = 30,
                      control = list(maxit = 20)), msg, fixed = TRUE)
    options(old)
  }
  # an ordinary failure is stepped back from: the fit ends
  old <- options(sparsevgp.evaluation_hook = function(n) if (n == 4L) stop("not finite here"))
  on.exit(options(old))
  f <- suppressWarnings(sgpr(d$x, d$y, inducing = 8, control = list(schedule = "joint")))
  expect_gte(f$optim$failed_evaluations, 1L)
  options(sparsevgp.evaluation_hook = NULL)
  expect_true(sparsevgp:::.is_fatal(simpleError("reached elapsed time limit")))
  expect_false(sparsevgp:::.is_fatal(simpleError("the bound is not finite")))
})

test_that("setTimeLimit() stops a fit: the error reaches the caller", {
  skip_on_cran()
  set.seed(3)
  x <- matrix(runif(6000, -3, 3), 3000, 2)
  y <- sin(3 * x[, 1]) * cos(2 * x[, 2]) + rnorm(3000, sd = 0.1)
  limited <- function() {
    setTimeLimit(elapsed = 0.5, transient = TRUE)
    on.exit(setTimeLimit(elapsed = Inf), add = TRUE)
    sgpr(x, y, inducing = 150, control = list(min_gain = 0, factr = 1, maxit = 5000))
  }
  expect_error(limited(), "time limit")
})
