# Training with defaults: starting values that find the signal, the staged
# schedule, fits that do not depend on units, honest reports (warnings for
# capped and flat fits, progress, interrupts).

# These tests are about the schedules of the collapsed bound: sgpr() here
# has no neighbours (the default "auto" may add them; test-vif.R tests
# that).
sgpr <- function(...) sparsevgp::sgpr(..., neighbours = 0)

# A response that varies on a tenth of the input range, with noise that
# grows with |x| (the getting-started vignette's example).
het_toy <- function() {
  set.seed(3)
  n <- 300
  x <- sort(runif(n, -5, 5))
  y <- 2.5 * sin(6 * x) + cos(3 * x) + rnorm(n, sd = sqrt(abs(0.25 * x^2 + 0.1 * x)))
  data.frame(x = x, y = y)
}

test_that("default starts find a signal that a single start at a typical distance misses", {
  d <- het_toy()
  # the good optima, from a start at lengthscale 0.5 (found by hand)
  good <- sgpr(y ~ x, data = d, inducing = 50, kernel = kernel_rbf(0.5))
  good_het <- sgpr(y ~ x, data = d, inducing = 50, kernel = kernel_rbf(0.5),
                   noise = ~ x + I(x^2))
  def <- sgpr(y ~ x, data = d, inducing = 50)
  def_het <- sgpr(y ~ x, data = d, inducing = 50, noise = ~ x + I(x^2))
  expect_gt(as.numeric(logLik(def)), as.numeric(logLik(good)) - 1)
  expect_gt(as.numeric(logLik(def_het)), as.numeric(logLik(good_het)) - 1)
  # the former path from the median distance ends flat, and says so
  # (greedy selection at the median distance also stops short of M = 50)
  w <- collect_warnings(old <- sgpr(y ~ x, data = d, inducing = 50,
                                    control = list(schedule = "joint")))
  expect_true(any(grepl("no signal", w)))
  expect_lt(as.numeric(logLik(old)), as.numeric(logLik(def)) - 50)
  # the exact GP starts from the same grid
  ex <- gpr(y ~ x, data = d)
  expect_gt(as.numeric(logLik(ex)), -594.5)
  expect_lt(ex$params$lengthscale, 0.5)
})

test_that("the grid's bounds at every noise share from one pass equal the bound at each", {
  d <- toy_data(120, 2)
  Z <- d$x[seq(1, 120, by = 6), ]
  vy <- var(d$y)
  r <- sparsevgp:::.start_noise_ratios
  one_by_one <- function(kls, need_var) vapply(r, function(ri) {
    k <- if (need_var) sparsevgp:::.kern_fill_variance(kls, (1 - ri) * vy) else kls
    sparsevgp:::.start_score(k, d$x, d$y, Z, rep(ri * vy, 120))
  }, 0)
  kernels <- list(kernel_matern52(lengthscale = c(0.7, 1.3)), kernel_rbf(lengthscale = 0.4),
                  kernel_rbf(lengthscale = 0.4) + kernel_matern12(lengthscale = 2),
                  kernel_rbf(lengthscale = 0.4) * kernel_matern32(lengthscale = 2, variance = 3))
  shares <- function(k, need_var) {
    sh <- sparsevgp:::.start_share_scales(k, need_var, vy, r)
    sparsevgp:::.start_shares(sh$kernel, sh$scale, sh$noise, d$x, d$y, Z)
  }
  for (k in kernels) {
    expect_equal(shares(k, TRUE), one_by_one(k, TRUE), tolerance = 1e-10)
  }
  # with the variance given only the noise moves
  k <- kernel_matern32(lengthscale = 0.5, variance = 2)
  expect_equal(sparsevgp:::.start_share_scales(k, FALSE, vy, r)$scale, rep(1, length(r)))
  expect_equal(shares(k, FALSE), one_by_one(k, FALSE), tolerance = 1e-10)
  # a sum with one variance given does not scale with the filled one: the
  # bounds are evaluated one by one
  k <- kernel_rbf(lengthscale = 0.4, variance = 0.5) + kernel_matern12(lengthscale = 2)
  expect_false(sparsevgp:::.kern_variance_linear(k))
  expect_null(sparsevgp:::.start_share_scales(k, TRUE, vy, r))
  expect_true(sparsevgp:::.kern_variance_linear(kernel_rbf() * kernel_matern12(variance = 2)))
  expect_false(sparsevgp:::.kern_variance_linear(kernel_rbf(variance = 2) * kernel_matern12()))
})

test_that("several inputs: ARD by default, and the signal is found", {
  aq <- na.omit(airquality)
  fit <- sgpr(Ozone ~ Temp + Wind + Solar.R, data = aq, inducing = 20)
  expect_length(fit$params$lengthscale, 3L)
  ex <- gpr(Ozone ~ Temp + Wind + Solar.R, data = aq)
  expect_gt(as.numeric(logLik(fit)), as.numeric(logLik(ex)) - 5)
  expect_gt(fit$params$variance, fit$params$noise)
  expect_length(sgpr(Ozone ~ Temp + Wind + Solar.R, data = aq, inducing = 20,
                     kernel = kernel_rbf(ard = FALSE), optimize = FALSE)$params$lengthscale, 1L)
})

test_that("fits do not depend on the units of x and y", {
  d <- het_toy()[seq(1, 300, by = 2), ]
  # the same tie-breaking order for greedy selection in both fits
  set.seed(1)
  a <- sgpr(d$x, d$y, inducing = 20)
  set.seed(1)
  b <- sgpr(d$x * 1000, d$y * 1e-5, inducing = 20)
  xs <- seq(-4, 4, length.out = 7)
  pa <- predict(a, xs, type = "response")
  pb <- predict(b, xs * 1000, type = "response")
  expect_equal(pb$mean * 1e5, pa$mean, tolerance = 1e-6)
  expect_equal(pb$var * 1e10, pa$var, tolerance = 1e-6)
  # logLik carries the Jacobian of the y scaling
  expect_equal(as.numeric(logLik(b)), as.numeric(logLik(a)) - nrow(d) * log(1e-5),
               tolerance = 1e-8)
  expect_equal(b$optim$counts[[1L]], a$optim$counts[[1L]])
})

test_that("the staged schedule ends at least as high as the former joint path", {
  # with enough inducing points for the signal (with too few, as with 10 for
  # this one, both paths end in poor optima and either can be higher)
  d <- het_toy()
  cases <- list(list(data = d, M = 30L), list(data = snelson, M = 12L))
  for (case in cases) {
    for (k in list(kernel_rbf(0.5), kernel_matern32(1))) {
      set.seed(1)
      st <- sgpr(y ~ x, data = case$data, inducing = case$M, kernel = k,
                 control = list(schedule = "staged"))
      set.seed(1)
      jo <- sgpr(y ~ x, data = case$data, inducing = case$M, kernel = k,
                 control = list(schedule = "joint"))
      set.seed(1)
      au <- sgpr(y ~ x, data = case$data, inducing = case$M, kernel = k)
      expect_gte(as.numeric(logLik(st)), as.numeric(logLik(jo)) - 0.5)
      expect_gte(as.numeric(logLik(au)), as.numeric(logLik(jo)) - 0.5)
      expect_gte(as.numeric(logLik(au)), as.numeric(logLik(st)) - 1)
      expect_true(all(c("inducing_held", "all") %in% names(st$optim$stages)))
      expect_equal(st$optim$schedule, "staged")
      expect_equal(au$optim$schedule, "auto")
    }
  }
  # the default with free inducing inputs: one run over everything when it
  # finds the signal; the stages from the start when it ends flat (here:
  # four inducing points cannot carry a signal that varies on a tenth of
  # the range, and every path ends flat), keeping the better of the two
  set.seed(1)
  au <- sgpr(y ~ x, data = d, inducing = 30)
  expect_named(au$optim$stages, "all")
  expect_equal(au$optim$counts[[1L]], length(au$optim$trail))
  set.seed(1)
  w <- collect_warnings(few <- sgpr(y ~ x, data = d, inducing = 4))
  expect_true(any(grepl("no signal", w)))
  expect_identical(names(few$optim$stages)[1:2], c("all_flat", "inducing_held"))
  expect_equal(as.numeric(logLik(few)), max(few$optim$stages), tolerance = 1e-10)
  expect_equal(few$optim$counts[[1L]], length(few$optim$trail))
  # with the inducing inputs held, greedy re-selection runs and M stays
  f <- sgpr(y ~ x, data = d, inducing = 20, optimize_inducing = FALSE)
  expect_equal(nrow(f$params$Z), 20L)
  expect_false("all" %in% names(f$optim$stages))
  expect_error(sgpr(y ~ x, data = d, control = list(schedule = "fast")), "'control\\$schedule'")
})

test_that("a threshold chooses M anew at the fitted noise", {
  d <- het_toy()
  f <- sgpr(y ~ x, data = d, threshold = kl_threshold(0.05, N = 300), optimize_inducing = FALSE)
  sel <- select_inducing(d$x, kernel_rbf(f$params$lengthscale, f$params$variance),
                         threshold = kl_threshold(0.05, N = 300),
                         weights = rep(1 / f$params$noise, 300))
  expect_gt(nrow(f$params$Z), 5L)
  # the final Z meets the threshold at the final parameters up to one re-selection
  expect_lte(abs(nrow(f$params$Z) - sel$M), max(3, 0.3 * sel$M))
})

test_that("warnings: a capped fit and a flat fit say so in plain words", {
  d <- het_toy()
  # control$maxit counts L-BFGS-B iterations, and the warning says so, with
  # the evaluations that print() reports
  msgs <- character()
  capped <- withCallingHandlers(
    sgpr(y ~ x, data = d, inducing = 10, control = list(maxit = 2)),
    warning = function(w) {
      msgs <<- c(msgs, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  expect_match(msgs, "stopped at its limit of 2 iterations (control$maxit)", fixed = TRUE,
               all = FALSE)
  expect_match(msgs, sprintf("after %d evaluations of the bound", capped$optim$counts[[1L]]),
               fixed = TRUE, all = FALSE)
  expect_gt(capped$optim$counts[[1L]], 2L)
  expect_output(print(capped), sprintf("iteration limit, control\\$maxit\\) \\(%d evaluations\\)",
                                       capped$optim$counts[[1L]]))
  # a start far from the signal that the optimiser cannot leave (and at
  # that lengthscale greedy selection stops short of M = 10, and says so)
  w <- collect_warnings(sgpr(y ~ x, data = d, inducing = 10, kernel = kernel_rbf(lengthscale = 1e4)))
  expect_true(any(grepl("no signal", w)))
  expect_true(any(grepl("greedy selection stopped at", w)))
  # pure noise: the flat fit is right, and the warning says what it found
  set.seed(2)
  expect_warning(sgpr(x = runif(100), y = rnorm(100), inducing = 10), "no signal")
})

test_that("an interrupted fit returns the best parameters so far, with a warning", {
  d <- het_toy()
  full <- suppressWarnings(sgpr(y ~ x, data = d, inducing = 20,
                                control = list(schedule = "joint")))
  old <- options(sparsevgp.interrupt_after = 6)
  on.exit(options(old), add = TRUE)
  expect_warning(int <- sgpr(y ~ x, data = d, inducing = 20, control = list(schedule = "joint")),
                 "interrupted")
  expect_true(isTRUE(int$optim$interrupted))
  expect_lte(int$optim$counts[[1L]], 6L)
  expect_lt(as.numeric(logLik(int)), as.numeric(logLik(full)))
  # the bound reported is the best one seen, at the parameters kept
  expect_equal(int$bound, int$optim$value, tolerance = 1e-10)
  # the staged schedule stops at the interrupted stage
  expect_warning(st <- sgpr(y ~ x, data = d, inducing = 20), "interrupted")
  expect_length(st$optim$stages, 1L)
  # Adam keeps the iterations it ran
  expect_warning(ad <- svgp(y ~ x, data = d, inducing = 10, likelihood = "gaussian",
                            batch_size = 50, control = list(maxit = 50)), "interrupted")
  expect_equal(ad$optim$counts[[1L]], 6L)
})

test_that("progress lines appear with trace = 1 and never with trace = 0", {
  d <- het_toy()
  expect_silent(sgpr(y ~ x, data = d, inducing = 30, control = list(trace = 0)))
  old <- options(sparsevgp.interrupt_after = NULL)
  on.exit(options(old), add = TRUE)
  msgs <- character()
  withCallingHandlers(
    suppressWarnings(sgpr(y ~ x, data = d, inducing = 40,
                          control = list(trace = 1, schedule = "joint", factr = 1))),
    message = function(m) {
      msgs <<- c(msgs, conditionMessage(m))
      invokeRestart("muffleMessage")
    })
  # a line at most every second, each naming the model and the bound
  if (length(msgs)) expect_match(msgs[1L], "^sgpr.*evaluations, bound")
  expect_error(sgpr(y ~ x, data = d, control = list(trace = -1)), "'control\\$trace'")
})

test_that("the min_gain rule waits for the parameters to move in a first stage, and says when it stops", {
  d <- het_toy()
  fit <- sgpr(y ~ x, data = d, inducing = 10, optimize = FALSE, kernel = kernel_rbf(1, 1),
              noise = 0.5)
  o0 <- objective(fit)
  base <- o0$par
  i <- which(names(base) == "log_variance")
  # uphill along the log variance: 40 steps of 1e-5 (a gain far below
  # min_gain per observation over any 25 of them), a step of 0.2, 40 more
  up <- -sign(o0$gr(base)[[i]])
  at <- function(v) replace(base, i, v)
  path <- c(lapply(1:40, function(j) at(base[i] + up * j * 1e-5)),
            lapply(1:40, function(j) at(base[i] + up * (0.2 + j * 1e-5))))
  expect_gt(-o0$fn(path[[41]]), -o0$fn(path[[40]]))
  expect_lt(-o0$fn(path[[40]]) - (-o0$fn(path[[15]])), 1e-3 * 300)
  run <- function(arm, window = sparsevgp:::.stop_window) {
    o <- sparsevgp:::.objective(fit, safe = TRUE, arm = arm, window = window)
    for (j in seq_along(path)) {
      if (tryCatch({
        o$fn(path[[j]])
        FALSE
      }, sparsevgp_stopped = function(e) TRUE)) return(j)
    }
    NA_integer_
  }
  # a later stage (no arm): the rule ends the walk after 26 evaluations
  expect_equal(run(NULL), 26L)
  # over the window of a regression run that continues from a fitted point,
  # after 11
  expect_equal(sparsevgp:::.stop_window_warm, 10L)
  expect_equal(run(NULL, sparsevgp:::.stop_window_warm), 11L)
  # from the start: not before the best point has moved by .stop_move (0.1),
  # that is, not in the first 40 evaluations; then after 25 more
  expect_equal(sparsevgp:::.stop_move, 0.1)
  expect_equal(run(list(par0 = base, scale = rep(1, length(base)))), 66L)
  # a whole fit stopped by the rule reports its own outcome, not convergence
  set.seed(1)
  f <- sgpr(y ~ x, data = d, inducing = 30, control = list(min_gain = 0.05))
  expect_equal(f$optim$convergence, 3L)
  expect_match(f$optim$message, "^stopped: gain below control\\$min_gain")
  expect_output(print(f), "stopped: gain below control\\$min_gain")
  # without the rule the optimiser's own tests end the run, at least as high
  set.seed(1)
  g <- sgpr(y ~ x, data = d, inducing = 30, control = list(min_gain = 0))
  expect_true(g$optim$convergence %in% c(0L, 51L, 52L))
  expect_gte(as.numeric(logLik(g)), as.numeric(logLik(f)) - 1e-6)
})

test_that("regression runs that continue from a fitted point stop over the shorter window", {
  # min_gain far above any reachable gain and L-BFGS-B's own test made
  # unreachable (factr = 1): every run ends as soon as the rule's window
  # allows
  set.seed(3)
  N <- 300
  x <- matrix(runif(N), ncol = 1)
  y <- sin(12 * x[, 1]) + rnorm(N, sd = 0.1)
  ctl <- list(schedule = "staged", min_gain = 100, factr = 1)
  set.seed(1)
  f <- sgpr(x, y, M = 15, optimize_inducing = FALSE, control = ctl)
  ev <- f$optim$stage_evals
  # the first stage starts from the starting values: the full window
  expect_equal(ev[["inducing_held"]], sparsevgp:::.stop_window + 1L)
  # the re-selection passes start from the fitted kernel and noise
  pass <- grepl("^reselect_", names(ev))
  expect_true(any(pass))
  expect_true(all(ev[pass] == sparsevgp:::.stop_window_warm + 1L))
  # the stop message names the window of the run it stopped
  set.seed(1)
  g <- sgpr(x, y, M = 15, optimize_inducing = FALSE, optimize = FALSE, control = ctl)
  h <- sparsevgp:::.fit_lbfgsb(g, from_start = FALSE, window = sparsevgp:::.stop_window_warm)
  expect_equal(h$optim$counts[["function"]], 11L)
  expect_match(h$optim$message, "over the last 10 evaluations")
})
