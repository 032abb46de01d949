# Starting values, the number of inducing inputs and the training schedule
# of svgp() and odvgp() for classification (the Bernoulli likelihoods with
# the logit or probit link, robust-max and softmax), fitted from scratch.
#
# From the prior q(u) = p(u) and a kernel of variance 1 at the median
# distance between inputs, L-BFGS-B on a classifier's ELBO settles on poor
# optima. On 20 inputs that all matter, with classes that differ in spread,
# it ended at chance accuracy; with one lengthscale per input it switched
# inputs off (lengthscales of 100-1000) before the others had been learned;
# with several classes its thousands of variational parameters moved so
# slowly from the prior that on iris it stopped at the iteration cap with an
# ELBO below that of the constant predictor. And greedy variance selection
# in many dimensions picks the outlying inputs, where the inducing values
# say little about the boundary between classes: on that 20-input problem
# the ELBO at the conditional optimum of q(u) was -502 with greedy inducing
# inputs against -309 with k-means centres (1000 points, M = 100). So a
# classifier fitted from scratch, with what the user leaves unset:
#
#   1. its kernel starts at the best point of a small grid of lengthscales
#      (one multiplier of sd(x_d) sqrt(D) for all inputs, so that no input
#      starts switched off) and variances, scored by the ELBO with q(u) at
#      its conditional optimum on a subsample, with k-means inducing inputs
#      (.uc_start_classifier());
#   2. M is chosen there, from the curvature of the expected
#      log-likelihood (.uc_auto_M()), and the inducing inputs are k-means
#      centres;
#   3. q(u) starts at its conditional optimum for that kernel and those
#      inducing inputs (.uc_q_optimum());
#   4. L-BFGS-B fits the kernel and q(u) with the inducing inputs held,
#      with one lengthscale for all inputs in units of their standard
#      deviations when one per input is left to the data; then one per
#      input from there, kept only when it raises the ELBO by more than the
#      Bayesian information criterion's penalty for the extra lengthscales;
#      then, with optimize_inducing, every parameter (.uc_train_classifier());
#   5. with more than 4000 observations, steps 1-4 run on a random
#      subsample (half of them, at most .uc_subsample_rows()) and q(u) is
#      then set at its conditional optimum on all the data
#      (.uc_schedule_rows(), .uc_train_large()).
# Minibatch fits (Adam, natural gradients) take steps 1-3, with q(u) at its
# conditional optimum on a random subsample.

# ---- q(u) at its conditional optimum -------------------------------------------------

# Natural-gradient steps on q(u) with everything else held (Hensman, Fusi
# and Lawrence 2013; Salimbeni, Eleftheriadis and Hensman 2018). For a
# Gaussian likelihood one step of size 1 lands on the optimum; for the
# classifiers a step of size 1 is a Newton-like step in the natural
# parameters, which converges in a few steps from near the optimum but can
# overshoot from the prior. So each step starts at size 1 (or twice the
# last accepted size), and a step that lowers the ELBO is replaced by one a
# quarter as long from the same point (one evaluation serves every size).
# The run stops when a full step that follows a full step (or the start)
# gains less than `tol` nats, after `iters` steps, or when steps shorter
# than 1e-3 fail. A small gain right after a shortened or failed step says
# little: with the softmax, full steps can overshoot across the optimum,
# and one that lands at about the height it left from gains little while
# the next full step fails and a quarter step gains more than `tol` again
# (iris on 300 rows: a full step after a half step gained 0.0295 < tol =
# 0.03, then a quarter step 0.034). On the rows `batch` (NULL: all), whose
# expected log-likelihood is scaled by N / |batch|. Bases
# without natural parameters (hybrid, decoupled) and a q(u) the user holds
# keep their start.
# list(params, value, evaluations).
.uc_q_optimum <- function(fit, params, batch = NULL, iters = 20L, tol = NULL) {
  if (is.null(tol)) tol <- 1e-4 * .nobs(fit)
  if (!.uc_inner_possible(fit)) return(list(params = params, value = NA_real_, evaluations = 0L))
  r <- .uc_natural(fit, params, batch)
  value <- r$value
  evals <- 1L
  step <- 1
  # whether the last step was a full one that raised the ELBO (the start
  # counts as one)
  full <- TRUE
  for (it in seq_len(iters)) {
    cand <- .natgrad_apply(fit, params, r, step)$params
    rn <- tryCatch(.uc_natural(fit, cand, batch), error = function(e) NULL)
    evals <- evals + 1L
    if (!is.null(rn) && is.finite(rn$value) && rn$value >= value) {
      gain <- rn$value - value
      params <- cand
      r <- rn
      value <- rn$value
      if (gain < tol && step == 1 && full) break
      full <- step == 1
      step <- min(1, 2 * step)
    } else {
      full <- FALSE
      step <- step / 4
      if (step < 1e-3) break
    }
  }
  list(params = params, value = value, evaluations = evals)
}

# ---- the starting kernel and M ---------------------------------------------------------

# At most this many rows (evenly spaced in the data's order) score the
# grid of starting kernels.
.uc_start_rows <- 1000L

# The kernel a classifier starts from: `kernel` with every NULL parameter
# at the best point of the grid of R/start_classification.R (lengthscale
# multipliers .class_start_multipliers of sd(x_d) sqrt(D), the variances
# the likelihood lists, .lik_start_variances()), scored by the ELBO of a
# whitened SVGP with q(u) at its conditional optimum, on at most
# .uc_start_rows rows with min(M, 100, n/4) k-means inducing inputs (the
# same for every candidate). q(u) is carried from one variance to the next.
# With `auto_M`, also the number of inducing inputs (.uc_auto_M()) at the
# best kernel. `mean` is the fit's prior mean (a number). list(kernel, M).
#
# The grid's variances at one lengthscale are scored in rising order, and
# the rest are skipped once the score (the ELBO at q(u)'s conditional
# optimum) has fallen from one variance to the next: a variance too large
# costs KL divergence that the fit to the data no longer repays, and more of
# it costs more. Measured on every fold of iris, fgl and waveform
# (softmax) and of the six shipped binary sets (logit), 41 grids of 8 x 5
# points: the best point was the same with and without the skip in all 41,
# 6 to 17 of the 40 points skipped (on waveform 15, 1.2 of the grid's 3.6
# CPU s; inst/bench/results/bench_multiclass_fast.txt). A fall followed by
# a rise occurred in 3 of banana's 40 columns, never above the column's
# first maximum. Every point scored is scored as before (q(u) is carried
# only within a column), so the start differs from the full grid's only
# when a skipped point would have been the best.
.uc_start_classifier <- function(kernel, x, r, M, mean, control, auto_M = FALSE) {
  D <- ncol(x)
  kernel <- .kern_ard(kernel, D)
  leaves <- .kern_leaves(kernel)
  need_ls <- any(vapply(leaves, function(k) is.null(k$lengthscale), TRUE))
  need_var <- any(vapply(leaves, function(k) is.null(k$variance), TRUE))
  if (!need_ls && !need_var && !auto_M) return(list(kernel = kernel, M = NULL))
  sx <- .column_sd(x)
  n <- nrow(x)
  idx <- unique(round(seq(1, n, length.out = min(n, .uc_start_rows))))
  xs <- x[idx, , drop = FALSE]
  rs <- r
  rs$y <- r$y[idx]
  rs$target <- r$target[idx]
  m0 <- max(1L, min(if (is.null(M)) 100L else M, 100L, length(idx) %/% 4L,
                    nrow(unique(xs))))
  Z <- select_inducing(xs, kernel_rbf(1, 1), M = m0, method = "kmeans", trace = FALSE)$Z
  mult <- if (need_ls) .class_start_multipliers else NA_real_
  vars <- if (need_var) sort(.lik_start_variances(r$lik)) else NA_real_
  ctrl <- .svgp_control(list(), NULL)
  best <- list(value = -Inf)
  for (m in mult) {
    kls <- if (need_ls) .class_grid_lengthscale(kernel, m, sx, xs) else kernel
    q <- NULL
    last <- -Inf
    for (v in vars) {
      k <- .kern_init(if (need_var) .kern_fill_variance(kls, v) else kls, xs, NULL)
      s <- tryCatch({
        sf <- .uc_fit("svgp", NULL, xs, rs, k, Z, NULL, basis = "whitened", mean = mean,
                      noise = NULL, fixed = NULL, optimize_inducing = FALSE, control = ctrl,
                      batch_size = NULL, start = NULL, q_u = NULL, label = "")
        if (!is.null(q)) sf$params[names(q)] <- q
        o <- .uc_q_optimum(sf, sf$params, iters = 15L)
        sf$params <- o$params
        list(fit = sf, value = o$value)
      }, error = function(e) NULL)
      if (is.null(s) || !is.finite(s$value)) next
      q <- s$fit$params[c("q_mu", "q_sqrt_diag", "q_sqrt_lower")]
      if (s$value > best$value) best <- list(value = s$value, kernel = k, fit = s$fit)
      # the variances rise: past the first fall the score keeps falling
      if (s$value < last) break
      last <- s$value
    }
  }
  if (is.null(best$kernel)) return(list(kernel = kernel, M = NULL))
  list(kernel = best$kernel,
       M = if (auto_M) .uc_auto_M(best$fit, n, .uc_max_inducing(n, r$lik$latent)))
}

# The number of inducing inputs of a classifier, chosen at the start kernel
# of `sf` (the scoring fit of .uc_start_classifier(), with q(u) at its
# conditional optimum on its subsample): the number that greedy selection
# needs to bring the weighted trace sum_n w_n [Kff - Qff]_nn below 1e-3
# nats per observation (.pgpr_auto_kl, the target of pgpr()'s automatic
# M), with w_n = -2 sum_j h_nj, h_nj the derivative of the expected
# log-likelihood in the variance of f_j at x_n. For the logit link at
# f = 0 this w_n is the Polya-Gamma precision 1/4 of pgpr()'s weighted
# trace, and for a Gaussian likelihood it is 1 / noise: the trace then
# bounds the KL divergence that the missing inducing inputs cost (Burt,
# Rasmussen and van der Wilk 2020). Points the model already classifies
# with confidence have w_n near 0 and need no inducing input. Computed on
# the subsample (the trace per observation does not depend on N), at most
# `M_max` and at least the number of classes. `N` is the number of
# observations of the full data.
.uc_auto_M <- function(sf, N, M_max) {
  n <- nrow(sf$x)
  sf$posterior <- .evaluate(sf, sf$params, grad = FALSE)$posterior
  lat <- .predict_latent(sf, sf$x, FALSE)
  lik <- .lik_of(sf)
  h <- .lik_ell(lik, .qcols(lat$mean), pmax(.qcols(lat$var), 0), sf$target,
                sf$params[setdiff(names(sf$params), .uc_nonlik_blocks)], 1)$h
  w <- -2 * rowSums(h)
  w <- pmax(w, 1e-6 * max(w, 1e-12))
  k <- .kernel_at(sf$kernel, sf$params)
  sel <- select_inducing(sf$x, k, M = min(M_max, n), method = "greedy", weights = w,
                         threshold = .uc_auto_kl * n, perm = seq_len(n))
  as.integer(min(N, max(nrow(sel$Z), lik$latent, 2L)))
}

# The target of the automatic M: nats per observation.
.uc_auto_kl <- 1e-2

# The blocks of an uncollapsed fit that are not the likelihood's own.
.uc_nonlik_blocks <- c("variance", "lengthscale", "mean", "Z", "O", .basis_block_names)

# The most inducing inputs an automatic M takes: as many as keep one
# evaluation of the ELBO near K N M^2 = 1e9 multiplications for K latent
# functions on N rows, and the variational parameters K M^2 / 2 near
# 20 000 (L-BFGS-B moves them all), at least 10 and at most 200 and N.
.uc_max_inducing <- function(N, K) {
  m <- min(100, sqrt(1e9 / (K * N)), sqrt(4e4 / K))
  as.integer(min(N, max(10, floor(m))))
}

# ---- training -------------------------------------------------------------------------

# The blocks of q(u) that natural-gradient steps move.
.uc_q_blocks <- c("q_mu", "q_sqrt_diag", "q_sqrt_lower")

# The schedule of a classifier fitted from scratch by L-BFGS-B (steps 3 and
# 4 above); with too many rows, on a subsample first. Each L-BFGS-B run
# moves the kernel (and the inducing inputs, and odvgp's a_gamma) with q(u)
# at its conditional optimum in every evaluation (.uc_inner()). The report
# is that of the last run with every run's evaluations counted (those of
# the inner natural-gradient steps in `inner_evaluations`) and the ELBO
# after each stage (.stage_report()). `whole`: FALSE for the subsample of
# .uc_train_large(), fitted as it is.
.uc_train_classifier <- function(fit, whole = TRUE) {
  if (whole && nrow(fit$x) > .uc_schedule_rows(fit)) return(.uc_train_large(fit))
  start <- proc.time()[["elapsed"]]
  N <- nrow(fit$x)
  sets <- intersect(c("Z", "O"), names(fit$params))
  z_free <- any(.block_mask(fit, sets) & !fit$fixed)
  fit$params <- .uc_q_optimum(fit, fit$params)$params
  # q(u) inside every evaluation where natural steps reach its optimum in a
  # few steps; otherwise (several classes: on iris a median of 10 steps,
  # often 30, each a full pass over the data) L-BFGS-B moves it with the rest
  inner <- .uc_inner_possible(fit) && isTRUE(.lik_of(fit)$newton)
  if (inner) fit <- .uc_inner(fit)
  shared <- isTRUE(fit$shared_stage)
  reports <- list()
  stopped <- function(f) isTRUE(f$optim$interrupted)
  # 1. the kernel with the inducing inputs held
  held <- if (shared) .uc_to_shared(fit) else fit
  held$fixed <- .uc_fixed(held, sets)
  cur <- .uc_run(held, if (shared) "one lengthscale, inducing inputs held" else
                   "inducing inputs held", from_start = TRUE)
  reports$inducing_held <- cur$optim
  # 2. with the inducing inputs free: on 20 inputs (1000 points, M = 100)
  # the ELBO rose from -304 to -236 here, where one lengthscale per input
  # with the k-means inputs held reached only -197 with some inputs
  # switched off
  if (z_free && !stopped(cur)) {
    cur$fixed <- .uc_fixed(cur)
    cur <- .uc_run(cur, if (shared) "one lengthscale" else "all parameters")
    reports$all <- cur$optim
  }
  # 3. one lengthscale per input from there, kept when its ELBO is higher
  # by more than BIC's penalty for the extra lengthscales, (D - 1) log(N) / 2
  if (shared && !stopped(cur)) {
    penalty <- 0.5 * log(N) * (ncol(fit$x) - 1L)
    ard <- .uc_from_shared(fit, cur)
    ard$fixed <- .uc_fixed(ard, if (!z_free) sets)
    ard <- .uc_abandon_arm(ard, cur$optim$value + .uc_abandon_share * penalty)
    ard <- .uc_run(ard, "one lengthscale per input")
    abandoned <- isTRUE(ard$abandon$hit)
    ard <- .uc_abandon_disarm(ard)
    if (abandoned) {
      ard$optim$message <- sprintf(
        "abandoned after %d evaluations: its gain over one lengthscale was below %g of BIC's penalty (%.3g nats)",
        .uc_abandon_after, .uc_abandon_share, penalty)
      ard$optim$abandoned <- TRUE
    }
    reports$per_input <- ard$optim
    if (isTRUE(ard$optim$value > cur$optim$value + penalty)) {
      cur <- ard
      shared <- FALSE
    } else if (stopped(ard)) {
      cur$optim$interrupted <- TRUE
    }
  }
  out <- if (shared) .uc_from_shared(fit, cur) else cur
  inner_evals <- if (inner) out$inner_q$evaluations
  if (inner) out <- .uc_outer(out)
  out$fixed <- .fixed_from_spec(out)
  out$optim <- .stage_report(out$optim, reports, "classifier")
  if (isTRUE(reports$per_input$abandoned)) out$optim$per_input_abandoned <- TRUE
  if (inner) out$optim$inner_evaluations <- inner_evals
  out$time <- proc.time()[["elapsed"]] - start
  out
}

# The run of one lengthscale per input is abandoned after
# .uc_abandon_after evaluations while its ELBO has gained less than
# .uc_abandon_share of BIC's penalty over the fit with one lengthscale: it
# would then have to gain more than 1 / .uc_abandon_share times as much
# again to be kept. Measured on the runs of iris and MASS::fgl (5 folds,
# softmax and robust-max, 20 runs of 138-479 evaluations), the final gain
# was 1.2-4.4 times the gain after 80 evaluations; fgl's runs gained 1.1-2.7
# nats by then against a penalty of 20.6 (final 2.2-8.0, never kept), and
# iris's 3.7-9.8 against 7.2 (kept on 8 of 10). One run in a further 20
# (fgl, robust-max, other random numbers) went from 3.3 after 80 to 20.7,
# kept by 0.17 nats; abandoned, its held-out accuracy rose from 0.58 to
# 0.63 (the sparse bound can favour lengthscales that its inducing inputs
# represent well, not the data). A screen by a score test at the shared
# optimum was tried first and dropped: the curvature there was not
# positive definite in any softmax fit
# (inst/bench/results/bench_ard_stop.txt).
.uc_abandon_after <- 80L
.uc_abandon_share <- 1 / 6

# Arm the rule on `fit` for one run: below `below` (an ELBO) after
# .uc_abandon_after evaluations the run stops as the min_gain rule stops a
# run (the best point so far). The state lives in an environment that
# exists only during the run, under the class "uc_abandon".
.uc_abandon_arm <- function(fit, below) {
  st <- new.env(parent = emptyenv())
  st$count <- 0L
  st$best <- -Inf
  st$below <- below
  st$hit <- FALSE
  fit$abandon <- st
  class(fit) <- c("uc_abandon", class(fit))
  fit
}

.uc_abandon_disarm <- function(fit) {
  class(fit) <- setdiff(class(fit), "uc_abandon")
  fit$abandon <- NULL
  fit
}

#' @export
.evaluate.uc_abandon <- function(fit, params, grad = TRUE, ...) {
  st <- fit$abandon
  if (st$count >= .uc_abandon_after && st$best < st$below) {
    st$hit <- TRUE
    signalCondition(structure(class = c("sparsevgp_stopped", "condition"),
                              list(message = "abandoned", call = NULL)))
  }
  st$count <- st$count + 1L
  r <- NextMethod()
  if (is.finite(r$value)) st$best <- max(st$best, r$value)
  r
}

# q(u) at its conditional optimum inside every evaluation of the ELBO:
# L-BFGS-B then moves only the other parameters theta, on the profile
#   F(theta) = max_q ELBO(theta, q),
# whose gradient is the partial gradient of the ELBO in theta at the
# optimal q (the envelope theorem: the ELBO is stationary in q there), as
# with a collapsed bound. Moved jointly with theta, the M(M + 1)/2
# variational parameters of each latent function take L-BFGS-B hundreds of
# evaluations to follow a change of kernel (on 20 inputs with 1000 points,
# M = 100: 1000 evaluations still 10 nats short of the optimum), and
# stages stopped short of their optima cannot be compared. Each evaluation
# starts the natural-gradient steps of .uc_q_optimum() from the q(u) of the
# best evaluation of the run so far (the current point of L-BFGS-B, near
# which it tries the next), so that a poor trial point of a line search
# does not spoil the next start; it is kept in an environment
# (fit$inner_q) that exists only while the model trains, under the class
# "svgp_inner". A few steps (two to five) reach the optimum within 1e-5
# nats per observation.
.uc_inner <- function(fit, tol = .uc_inner_tol) {
  st <- new.env(parent = emptyenv())
  st$evaluations <- 0L
  st$tol <- tol * nrow(fit$x)
  fit$inner_q <- st
  class(fit) <- c("svgp_inner", class(fit))
  fit$fixed <- .uc_fixed(fit)
  .uc_resume(fit)
}

# Start a run of .uc_inner() from the q(u) in fit$params.
.uc_resume <- function(fit) {
  st <- fit$inner_q
  st$q <- fit$params[.uc_q_blocks]
  st$best <- -Inf
  fit
}

# After a run: q(u) at its optimum for the run's final parameters, from the
# best start of the run, in fit$params.
.uc_settle <- function(fit) {
  st <- fit$inner_q
  p <- fit$params
  p[.uc_q_blocks] <- st$q
  o <- .uc_q_optimum(fit, p, tol = st$tol, iters = 30L)
  st$evaluations <- st$evaluations + o$evaluations
  fit$params <- o$params
  fit
}

# The fit back from .uc_inner(): the class and fixed mask of the model, and
# the environment gone.
.uc_outer <- function(fit) {
  fit$inner_q <- NULL
  class(fit) <- setdiff(class(fit), "svgp_inner")
  fit
}

# The tolerance of the inner steps: nats per observation (the last full
# step gains less).
.uc_inner_tol <- 1e-5

#' @export
.evaluate.svgp_inner <- function(fit, params, grad = TRUE, ...) {
  st <- fit$inner_q
  params[.uc_q_blocks] <- st$q
  o <- .uc_q_optimum(fit, params, tol = st$tol, iters = 30L)
  st$evaluations <- st$evaluations + o$evaluations
  if (is.finite(o$value) && o$value > st$best) {
    st$best <- o$value
    st$q <- o$params[.uc_q_blocks]
  }
  .evaluate.svgp(fit, o$params, grad = grad, ...)
}

# One L-BFGS-B run of the schedule: from the q(u) of `fit` when it is
# trained inside .uc_inner(), which ends with q(u) at its optimum for the
# final parameters.
.uc_run <- function(fit, stage, from_start = FALSE) {
  inner <- inherits(fit, "svgp_inner")
  if (inner) fit <- .uc_resume(fit)
  fit <- .fit_lbfgsb(fit, stage, from_start = from_start)
  if (inner) fit <- .uc_settle(fit)
  fit
}

# Whether the inner optimisation applies: a basis with natural parameters
# (whitened, orthogonal) and a q(u) the user does not hold.
.uc_inner_possible <- function(fit) {
  !inherits(.basis_of(fit), c("basis_hybrid", "basis_decoupled")) &&
    !any(.fixed_from_spec(fit)[.block_mask(fit, .uc_q_blocks)])
}

# The fixed mask from the fit's spec, with the blocks `also` held and, while
# training inside .uc_inner(), q(u) too.
.uc_fixed <- function(fit, also = character()) {
  .fixed_from_spec(fit, c(also, if (inherits(fit, "svgp_inner")) .uc_q_blocks))
}

# The most rows the schedule fits on before the full data: as many as
# keep one evaluation near K n M^2 = 2e9 multiplications (20 000 for one
# latent function at M = 100), at most 10 000 (pgpr()'s control$subsample)
# and at least 2000.
.uc_subsample_rows <- function(fit) {
  K <- .lik_of(fit)$latent
  M <- nrow(fit$params$Z) + NROW(fit$params$O)
  as.integer(max(2000, min(10000, floor(2e9 / (K * M^2)))))
}

# The rows the schedule of a classifier fits on (.uc_train_classifier()):
# all of them up to 2 .uc_schedule_min rows, else half of them but at
# least .uc_schedule_min and at most .uc_subsample_rows(). The schedule
# fits the kernel, the inducing inputs and the choice of one lengthscale or
# one per input, a few dozen numbers (M D more with the inducing inputs)
# that need far fewer rows than q(u), whose K M (M + 3) / 2 parameters carry
# what the data say about each class; q(u) is then set at its conditional
# optimum on all the rows (.uc_train_large()), as beyond 10 000 rows
# before. On waveform (5000 rows, 21 inputs, 3 classes, M = 70) with two
# random seeds, the schedule on 2500 rows gave accuracies 0.8738 and
# 0.8746 against 0.8744 and 0.8744 on all 5000 and test NLL 0.2913 and
# 0.2915 against 0.2900 and 0.2908, with a higher ELBO on all the rows
# (-1660.9 against -1663.2: q(u) at its conditional optimum, where
# L-BFGS-B moving it with the kernel had stopped short), in 8.6 CPU s
# against 13.6 (inst/bench/results/bench_multiclass_fast.txt). Fewer rows
# than half would save little more: the grid of starting kernels
# (.uc_start_classifier(), at most .uc_start_rows rows) and the steps of
# q(u) on all the rows do not shrink.
.uc_schedule_rows <- function(fit) {
  N <- nrow(fit$x)
  if (N < 2L * .uc_schedule_min) return(N)
  as.integer(min(.uc_subsample_rows(fit), max(.uc_schedule_min, ceiling(N / 2))))
}
.uc_schedule_min <- 2000L

# Many rows: the schedule on a random subsample of .uc_schedule_rows()
# rows, then q(u) at its conditional optimum on all the data with
# everything else held.
.uc_train_large <- function(fit) {
  start <- proc.time()[["elapsed"]]
  N <- nrow(fit$x)
  n <- .uc_schedule_rows(fit)
  rows <- sort(sample.int(N, n))
  sub <- .subsample_fit(fit, rows)
  sub$target <- fit$target[rows]
  sub <- .uc_train_classifier(sub, whole = FALSE)
  fit$params <- sub$params
  q <- .uc_q_optimum(fit, fit$params)
  fit$params <- q$params
  fit$optim <- sub$optim
  fit$optim$counts <- fit$optim$counts + q$evaluations
  fit$optim$stages <- c(setNames(sub$optim$stages, paste0("subsample_", names(sub$optim$stages))),
                        all_data_q = q$value)
  fit$optim$subsample <- n
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# Minibatch fits (Adam, natural gradients) from scratch: q(u) at its
# conditional optimum on a random subsample of at most .uc_subsample_rows()
# rows, the expected log-likelihood scaled to the full data.
.uc_start_q_batch <- function(fit) {
  N <- .nobs(fit)
  n <- min(N, .uc_subsample_rows(fit))
  batch <- if (n < N) sort(sample.int(N, n))
  fit$params <- .uc_q_optimum(fit, fit$params, batch = batch)$params
  fit
}

# One lengthscale for all inputs in units of their standard deviations: the
# fit on the inputs divided by their sd (shared_scale), with an isotropic
# kernel of the geometric mean of the scaled lengthscales and the inducing
# inputs (every block with the role "inducing") scaled alike, and back. For
# lengthscales proportional to the sd (the grid's) both describe the same
# model, so q(u) carries over unchanged.
.uc_to_shared <- function(fit) {
  s <- .column_sd(fit$x)
  sh <- .to_shared_lengthscale(fit, s, .uc_inducing_blocks(fit))
  sh$fixed <- .uc_fixed(sh, .uc_held_sets(fit))
  sh$shared_scale <- s
  sh
}

.uc_from_shared <- function(fit, sh) {
  out <- .from_shared_lengthscale(fit, sh, sh$shared_scale, .uc_inducing_blocks(fit))
  out$shared_scale <- NULL
  out$fixed <- .uc_fixed(out, .uc_held_sets(sh))
  out
}

# The blocks of inducing inputs of a fit (Z, and O for odvgp).
.uc_inducing_blocks <- function(fit) {
  r <- .fit_roles(fit)$role
  names(r)[r == "inducing"]
}

# The blocks of inducing inputs that the fit holds at the moment (a stage
# that holds them), to be held again after a change of parameterisation.
.uc_held_sets <- function(fit) {
  b <- .uc_inducing_blocks(fit)
  b[vapply(b, function(nm) all(fit$fixed[.block_mask(fit, nm)]), TRUE)]
}
