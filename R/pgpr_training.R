# Training of pgpr(): the double loop of Passerello (2022, sections 4.3.2
# and 5.4), an outer loop that re-selects the inducing inputs and an inner
# loop that alternates L-BFGS-B on the kernel at fixed local parameters c
# with closed-form updates of c, with what its defaults need on data nobody
# tuned to:
#
#   1. c at their optimum for the starting kernel (R/start_classification.R)
#      and the first selection, before any kernel parameter moves: from the
#      conventional c = 0.1 every point has the same PG precision theta and
#      L-BFGS-B fits the kernel to a poor objective;
#   2. heteroscedastic greedy variance (HGV) weighted by the theta_n of a
#      fitted model: its first pass runs at the greedy-variance (GV)
#      selection (with every c_n = 0.1 the weights are equal), and every
#      later selection is weighted by the theta_n of the kernel and c fitted
#      in the pass before. Weights of c fitted at the starting kernel alone
#      favour the points that kernel explains worst (the largest theta_n
#      belong to the smallest c_n = sqrt(mu_n^2 + s_n^2)): from
#      kernel_rbf(1, 1) on 34 standardised inputs (every kernel value between
#      distinct inputs about e^-32) they picked the isolated inputs, where
#      the bound is flat in the lengthscale, and L-BFGS-B drove the variance
#      to 1e-8 in 9 of 10 splits of ionosphere, while from GV's selection it
#      found the lengthscale; since the first pass is GV's and the pass with
#      the highest bound is kept, HGV's bound is never below GV's first pass;
#   3. lengthscales left to the data: one lengthscale for all inputs in
#      units of their standard deviations (the kernel of ksvm() and
#      gausspr() on scaled inputs), and only with ard = TRUE then one per
#      input from there. On the shipped sets and ringnorm one per input
#      raised the bound by 5 to 100 nats and lowered the test accuracy or
#      NLL as often as it raised them: the sparse bound favours kernels its
#      inducing inputs can represent, and switched off inputs that the data
#      need (ringnorm, 20 inputs that all matter: 2 points of accuracy);
#      started at once, ARD does so before the others are learned;
#   4. the number of inducing inputs, when the user leaves it, chosen in
#      each re-selection at the fitted kernel (.pgpr_auto_threshold());
#   5. loops that stop when the bound changes by less than control$tol, by
#      default 1e-4 nats per observation;
#   6. the amplitude of the latent function (kernel variance and mean)
#      chosen at the end by the Bernoulli bound, which is tighter than the
#      Polya-Gamma bound (.pgpr_amplitude());
#   7. more than control$subsample observations: the schedule on a random
#      subsample, then c and the kernel on all the data with the inducing
#      inputs held.
# The pass with the highest bound is kept (Passerello 2022, section 5.4).

# The tolerance of the loops: control$tol (pgpr() sets 1e-4 nats per
# observation when it is NULL).
.pgpr_tol <- function(fit) {
  if (is.null(fit$control$tol)) 1e-4 * length(fit$y) else fit$control$tol
}

# L-BFGS-B runs at fixed c bound the kernel's log parameters above by 30. On
# near-separable data the kernel variance grows without bound, and a line
# search can step to values (variance ~ 1e22 with lengthscale ~ 1e8 on
# crabs) where K_uu + jitter is numerically rank one and I + A A' cannot be
# factorised; the bound keeps every trial point computable and is far beyond
# any sensible optimum. Only upper bounds: when every variable has two
# bounds L-BFGS-B takes a full first step to the Cauchy point, which can land
# on a lower bound where the bound is flat (variance e^-30) and stall there.
#' @export
.optim_upper.pgpr <- function(fit, par) {
  ifelse(.par_info(fit)[names(par), "transform"] == "log", 30, Inf)
}

# reinit_inducing(): refit with new inducing inputs held fixed, by the inner
# loop (L-BFGS-B on the kernel alternated with c updates).
#' @export
.refit_inducing.pgpr <- function(fit, Z) {
  fit <- .set_inducing(fit, Z)
  start <- proc.time()[["elapsed"]]
  fit <- .pgpr_inner(fit)
  fit$time <- proc.time()[["elapsed"]] - start
  .finish(fit)
}

# A Ctrl-C stopped the run of `fit` or an earlier phase of the fit.
.pgpr_stopped <- function(fit) isTRUE(fit$optim$interrupted) || .interrupt_pending()

# Inner loop (Passerello 2022, section 4.1.3): L-BFGS-B on the free
# parameters at fixed c, then closed-form c updates, until the bound changes
# by less than the tolerance.
.pgpr_inner <- function(fit) {
  ctrl <- fit$control
  tol <- .pgpr_tol(fit)
  prev <- -Inf
  evals <- 0L
  rounds <- 0L
  converged <- FALSE
  for (it in seq_len(ctrl$inner_max)) {
    var0 <- fit$params$variance
    fit <- .fit_lbfgsb(fit)
    evals <- evals + as.integer(fit$optim$counts[[1L]])
    # interrupted: no further update or run (R/interrupt.R); the bound is
    # the run's best
    if (.pgpr_stopped(fit)) {
      fit$bound <- fit$optim$value
      break
    }
    fit <- .pgpr_update_c(fit, ctrl$ci_iters, tol / 10)
    fit <- .pgpr_ridge(fit, var0, tol)
    rounds <- it
    if (.interrupt_pending()) break
    if (abs(fit$bound - prev) <= tol) {
      converged <- TRUE
      break
    }
    prev <- fit$bound
  }
  fit$inner <- list(rounds = rounds, evaluations = evals, converged = converged)
  .pgpr_sync_c(fit)
}

# A parameter (by its packed name) that the optimiser moves.
.pgpr_free <- function(fit, name) name %in% names(fit$fixed) && !fit$fixed[[name]]

# The alternation of L-BFGS-B at fixed c and updates of c climbs the ridge
# of the bound along the latent amplitude slowly: at fixed c the bound
# penalises a larger variance through the spread of q(f) beyond c^2, so
# each round raised the variance by a factor of about 1.5 only (ringnorm, N
# = 5000: 20 rounds of about 27 evaluations from variance 0.7 to 260). When
# a round raised the variance (from var0) by more than a fifth, the same
# factor is tried again along the ridge, the variance and a free mean scaled
# together with c (.pgpr_scaled(), with at most 3 updates of c, which only
# raise the bound), while the bound rises by more than the tolerance.
.pgpr_ridge <- function(fit, var0, tol) {
  if (is.null(fit$params$variance) || !.pgpr_free(fit, "log_variance") ||
      .interrupt_pending()) {
    return(fit)
  }
  r <- fit$params$variance / var0
  if (!is.finite(r) || r < 1.2) return(fit)
  free_mean <- .pgpr_free(fit, "mean")
  # on a cluster: c from the workers, and back to them when a trial fails
  fit <- .pgpr_sync_c(fit)
  for (k in 1:5) {
    f <- .pgpr_scaled(fit, sqrt(r), free_mean, tol / 10, iters = 3L)
    if (.interrupt_pending() || !(f$bound > fit$bound + tol)) {
      .pgpr_sync_c(fit, push = TRUE)
      break
    }
    fit <- f
  }
  fit
}

# Inducing inputs selected afresh at the current kernel and c (greedy
# methods), with M from the threshold when it is chosen automatically and
# `auto` is TRUE (a fitted kernel); c then at their optimum for the new set.
.pgpr_reselect <- function(fit, weighted = TRUE, auto = TRUE) {
  spec <- fit$selection
  fit <- .pgpr_sync_c(fit)
  kern <- .kernel_at(fit$kernel, fit$params)
  theta <- pg_theta(fit$c)
  if (isTRUE(spec$auto)) {
    spec$M <- if (auto) spec$M_max else spec$M_start
    spec$threshold <- if (auto) .pgpr_auto_threshold(fit) else NULL
    # greedy variance without weights: its trace is about the weighted one
    # over the mean weight
    if (auto && !weighted) spec$threshold <- spec$threshold / mean(theta)
  }
  .work_drop(fit)
  Z <- .pgpr_select(spec, fit$x, kern, if (weighted) theta else NULL, fit$control$memory,
                    hook = "reselection")
  # interrupted: the inducing inputs stay
  if (.interrupt_pending()) return(fit)
  if (!identical(unname(Z), unname(fit$params$Z))) {
    fit$params$Z <- Z
    fit$fixed <- .fixed_from_spec(fit)
    fit <- .pgpr_update_c(fit, fit$control$ci_iters, .pgpr_tol(fit) / 10)
  }
  fit
}

# The threshold on the theta-weighted trace t = sum_n theta_n [Kff - Qff]_nn
# for an automatic M. The PG bound contains -t/2, and for fixed c it is the
# bound of heteroscedastic regression with noise 1/theta, whose expected KL
# divergence from the exact posterior is between t/2 and t (Passerello
# 2022, eq. 3.7): a target of .pgpr_auto_kl nats per observation, as
# sgpr()'s. Evaluated at the current (fitted) kernel and c.
.pgpr_auto_threshold <- function(fit) {
  .pgpr_auto_kl * length(fit$y)
}

.pgpr_auto_kl <- 1e-3

# The double loop with the stages above; the fit with the highest bound.
.pgpr_train <- function(fit) {
  ctrl <- fit$control
  spec <- fit$selection
  tol <- .pgpr_tol(fit)
  start <- proc.time()[["elapsed"]]
  # 1. c at their optimum for the starting kernel and inducing inputs
  fit <- .pgpr_update_c(fit, max(ctrl$ci_iters, 30L), tol / 10)
  # 3. one lengthscale for all inputs (in units of their sd), and from there
  # one per input when the kernel asks for it (ard = TRUE)
  if (isTRUE(fit$shared_stage)) {
    sh <- .pgpr_loop(.pgpr_to_shared(fit), "one lengthscale", first_reselect = FALSE)
    out <- .pgpr_from_shared(fit, sh)
    out$lengthscale_tied <- TRUE
    if (isTRUE(fit$ard_stage) && !.pgpr_stopped(out)) {
      ard <- .pgpr_loop(out, "one lengthscale per input", first_reselect = TRUE,
                        prev = out$bound, pass0 = max(out$history$pass))
      ard$lengthscale_tied <- FALSE
      ard$history <- rbind(out$history, ard$history)
      if (ard$bound < out$bound) {
        out$history <- ard$history
        ard <- out
      }
      out <- ard
    }
  } else {
    out <- .pgpr_loop(fit, "", first_reselect = FALSE)
  }
  # 4. the latent function's amplitude by the Bernoulli bound
  if (isTRUE(out$scale_latent) && !.pgpr_stopped(out)) out <- .pgpr_amplitude(out)
  # the optimiser report covers every inner L-BFGS-B run of every pass
  total <- sum(out$history$evaluations)
  out$optim$counts <- c("function" = total, gradient = total)
  out$time <- proc.time()[["elapsed"]] - start
  out
}

# The passes of the outer loop from `fit`: re-selection (greedy methods;
# not before the first pass unless `first_reselect`), the inner loop, until
# the bound changes by less than the tolerance (with an automatic M, by
# less than its target .pgpr_auto_kl nats per observation) or control$outer_max
# passes; the pass with the highest bound, with the history of all passes
# (numbered from pass0 + 1) in `history` and `converged`. With an automatic
# M the passes whose bounds are within the automatic M's target
# (.pgpr_auto_kl nats per observation) of the highest are equally good
# approximations, and the one with the fewest inducing inputs is kept: more
# inducing inputs always raise the bound a little, so that the highest bound
# alone would keep the largest M of any pass.
.pgpr_loop <- function(fit, stage, first_reselect, prev = -Inf, pass0 = 0L) {
  ctrl <- fit$control
  spec <- fit$selection
  tol <- .pgpr_tol(fit)
  # with an automatic M, passes whose bounds differ by less than its target
  # are equally good approximations (see the rule that keeps one below):
  # the outer loop stops at the first pass that gains less than that
  outer_tol <- if (isTRUE(spec$auto)) max(tol, .pgpr_auto_kl * length(fit$y)) else tol
  reselect <- spec$method %in% .greedy_methods
  passes <- if (reselect) ctrl$outer_max else 1L
  hist <- vector("list", passes)
  fits <- vector("list", passes)
  converged <- FALSE
  for (pass in seq_len(passes)) {
    if (reselect && (pass > 1L || first_reselect)) {
      fit <- .pgpr_reselect(fit, weighted = spec$method != "gv")
    }
    fit <- .pgpr_inner(fit)
    hist[[pass]] <- data.frame(pass = pass0 + pass, stage = stage, M = nrow(fit$params$Z),
                               bound = fit$bound, inner_rounds = fit$inner$rounds,
                               evaluations = fit$inner$evaluations)
    fits[[pass]] <- fit
    if (.pgpr_stopped(fit)) break
    if (abs(fit$bound - prev) <= outer_tol) {
      converged <- TRUE
      break
    }
    prev <- fit$bound
  }
  if (!reselect) converged <- isTRUE(fit$inner$converged)
  h <- do.call(rbind, hist[!vapply(hist, is.null, TRUE)])
  slack <- if (isTRUE(spec$auto)) .pgpr_auto_kl * length(fit$y) else 0
  ok <- which(h$bound >= max(h$bound) - slack)
  keep <- ok[order(h$M[ok], -h$bound[ok])[1L]]
  best <- fits[[keep]]
  best$history <- h
  best$kept_pass <- h$pass[keep]
  if (.pgpr_stopped(fit)) best$optim$interrupted <- TRUE
  best$converged <- converged
  # the workers' c are the last pass's: the final evaluation reads the best
  if (!identical(best$c, fit$c)) .pgpr_sync_c(best, push = TRUE)
  best
}

# One lengthscale for all inputs in units of their standard deviations: an
# isotropic kernel on the inputs divided by fit$shared_scale (the same
# model as the ARD kernel with lengthscales l * sd(x_d)), and back.
.pgpr_to_shared <- function(fit) {
  sh <- .to_shared_lengthscale(fit, fit$shared_scale, "Z")
  sh$fixed <- .fixed_from_spec(sh)
  sh
}

.pgpr_from_shared <- function(fit, sh) {
  out <- .from_shared_lengthscale(fit, sh, fit$shared_scale, "Z")
  out$fixed <- .fixed_from_spec(out)
  out
}

#' @export
.train.pgpr <- function(fit) {
  if (nrow(fit$x) > fit$control$subsample) {
    return(.pgpr_train_large(fit))
  }
  .pgpr_train(fit)
}

# More than control$subsample observations: the schedule on a random
# subsample of that many rows (selection and M included); then, on all the
# data, c from the subsample's q(f) at every row and closed-form updates of
# c, so that q(u) is that of all the data. The kernel, the mean and the
# inducing inputs stay as fitted on the subsample: an evaluation on all the
# data costs N / control$subsample of one there, and the hyperparameters
# of a classifier change little beyond ten thousand rows.
# The subsample's tie-breaking order is the fit's, restricted to its rows.
.pgpr_train_large <- function(fit) {
  start <- proc.time()[["elapsed"]]
  N <- nrow(fit$x)
  n <- as.integer(fit$control$subsample)
  rows <- sort(sample.int(N, n))
  sub <- fit
  # the workers of a cluster hold all the rows: the subsample is fitted here
  sub$cluster <- NULL
  sub$x <- fit$x[rows, , drop = FALSE]
  sub$y <- fit$y[rows]
  sub$ypm <- fit$ypm[rows]
  sub$c <- fit$c[rows]
  sub$control$tol <- fit$control$tol * n / N
  if (!is.null(fit$selection$perm)) {
    perm <- fit$selection$perm
    sub$selection$perm <- match(perm[perm %in% rows], rows)
  }
  if (!is.null(fit$selection$threshold)) {
    sub$selection$threshold <- fit$selection$threshold * n / N
  }
  sub <- .pgpr_train(sub)
  fit$params <- sub$params
  fit$lengthscale_tied <- sub$lengthscale_tied
  fit$fixed <- .fixed_from_spec(fit)
  fit$optim <- sub$optim
  # c at every row from the subsample's q(f), then updated on all the data
  r <- .evaluate(sub, sub$params, grad = FALSE)
  sub$posterior <- r$posterior
  p <- .collapsed_predict(sub, sub$params$Z, fit$x, FALSE)
  fit$c <- sqrt(p$mean^2 + pmax(p$var, 0))
  if (!is.null(fit$cluster)) .pgpr_sync_c(fit, push = TRUE)
  fit <- .pgpr_update_c(fit, max(fit$control$ci_iters, 30L), .pgpr_tol(fit) / 10)
  fit <- .pgpr_sync_c(fit)
  fit$history <- data.frame(pass = 1L, stage = "all data: c updated, kernel and Z of the subsample",
                            M = nrow(fit$params$Z), bound = fit$bound, inner_rounds = 0L,
                            evaluations = 0L)
  fit$subsample <- list(rows = length(rows), history = sub$history)
  total <- sum(sub$history$evaluations)
  fit$optim$counts <- c("function" = total, gradient = total)
  fit$converged <- isTRUE(sub$converged)
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# ---- the amplitude of the latent function ---------------------------------------

# The Polya-Gamma bound is the Jaakkola and Jordan (2000) bound
#   log sigma(z) >= log sigma(c) + (z - c) / 2 - theta(c) / 2 (z^2 - c^2)
# in expectation under q(f), minus KL[q(u) || p(u)] (Wenzel et al. 2019,
# eq. 9). The Bernoulli bound of the same q(u),
#   sum_n E_q(f_n)[log sigma(y_n f_n)] - KL[q(u) || p(u)],
# is higher by sum_n (E[log sigma(y_n f_n)] - E[JJ_n]), a gap that grows
# with the spread of q(f_n): maximising the PG bound over the kernel favours
# small latent amplitudes. On the shipped sets the kernel variance it chose
# was 4 to 7 times below that of svgp() (which maximises the Bernoulli
# bound), and the predictive probabilities were too close to 1/2 (ionosphere:
# test NLL 0.19 where svgp reached 0.16 and the PG posterior at svgp's kernel
# 0.16). So after the double loop one factor a scales the prior of the
# latent function (variance a^2 sigma^2, a free mean a m), c go to their
# optimum for the scaled kernel, and a is chosen by the Bernoulli bound of
# that q(u), on a grid of factors 1.25^k from 1 while it rises (at most
# 1.25^6 ~ 3.8 either way). Only when the kernel variance was left to the
# data; the fit's bound is the PG bound at the chosen parameters, and
# fit$amplitude records the factor and both bounds.
.pgpr_amplitude <- function(fit) {
  fit <- .pgpr_sync_c(fit)
  free_mean <- .pgpr_free(fit, "mean")
  tol <- .pgpr_tol(fit) / 10
  at <- function(a) {
    f <- .pgpr_scaled(fit, a, free_mean, tol)
    f$bernoulli <- .pgpr_bernoulli_bound(f, f$last_evaluation)
    f$last_evaluation <- NULL
    f
  }
  base <- fit
  base$bernoulli <- .pgpr_bernoulli_bound(fit)
  best <- base
  best_a <- 1
  for (step in c(1.25, 0.8)) {
    a <- 1
    for (k in 1:6) {
      a <- a * step
      f <- at(a)
      if (.interrupt_pending() || !(f$bernoulli > best$bernoulli)) break
      best <- f
      best_a <- a
    }
    if (best_a != 1) break
  }
  best$amplitude <- list(factor = best_a, bernoulli_bound = best$bernoulli,
                         bernoulli_bound_before = base$bernoulli, pg_bound_before = base$bound)
  best$bernoulli <- NULL
  # the workers' c are those of the last factor tried
  .pgpr_sync_c(best, push = TRUE)
  best
}

# The fit with its latent function's prior scaled by a (kernel variance
# a^2 sigma^2, a free mean a m) and c from a c (q(f) scales with a, and
# c = sqrt(mu^2 + s^2) with it), then updated to their optimum; c are
# synced from the workers of a cluster. The last evaluation of the updates
# (at the returned parameters and c) comes along as f$last_evaluation, so
# that the Bernoulli bound does not evaluate the PG bound again.
.pgpr_scaled <- function(fit, a, free_mean, tol, iters = max(fit$control$ci_iters, 10L)) {
  f <- fit
  f$params$variance <- fit$params$variance * a^2
  if (free_mean) f$params$mean <- fit$params$mean * a
  f$c <- fit$c * a
  if (!is.null(f$cluster)) .pgpr_sync_c(f, push = TRUE)
  f <- .pgpr_update_c(f, iters, tol, keep = TRUE)
  .pgpr_sync_c(f)
}

# The Bernoulli bound sum_n E[log sigma(y_n f_n)] - KL[q(u) || p(u)] of the
# fit's q(u) (optimal for its c): the PG bound plus the sum over n of
# E[log sigma(y_n f_n)] (Gauss-Hermite, 20 nodes) minus the Jaakkola-Jordan
# bound at c_n under q(f_n) (see .pgpr_amplitude()). `r` is the evaluation
# of the PG bound at the fit's parameters and c when the caller has it.
.pgpr_bernoulli_bound <- function(fit, r = NULL) {
  if (is.null(r)) r <- .evaluate(fit, fit$params, grad = FALSE)
  if (is.null(fit$cluster)) {
    gap <- .pg_bernoulli_gap(fit, r$posterior, fit$x, fit$ypm, fit$c)
  } else {
    gap <- sum(unlist(.cluster_call(fit$cluster, ".shard_pg_gap",
                                    list(kernel = fit$kernel, params = fit$params,
                                         posterior = r$posterior))))
  }
  r$value + gap
}

# sum_n E_q[log sigma(y_n f_n)] - E_q[JJ_n(c_n)] at the rows x.
.pg_bernoulli_gap <- function(a, posterior, x, ypm, c) {
  a$posterior <- posterior
  q <- .collapsed_predict(a, a$params$Z, x, FALSE)
  mu <- ypm * q$mean
  s2 <- pmax(q$var, 0)
  ell <- .ffi_svgp_ell(mu, s2, rep(1, length(mu)), "bernoulli", 1, .gauss_hermite(20L), 1)$ell
  jj <- sum(stats::plogis(c, log.p = TRUE) + (mu - c) / 2 - pg_theta(c) / 2 * (mu^2 + s2 - c^2))
  ell - jj
}

# On a worker: its share of the gap above.
.shard_pg_gap <- function(s, a, each = NULL) {
  .pg_bernoulli_gap(a, a$posterior, s$fit$x, s$fit$ypm, s$fit$c)
}
