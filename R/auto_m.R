# The automatic M at the fitted parameters.
#
# sgpr()'s automatic M is chosen by greedy selection at the starting kernel
# and noise, until the weighted trace t = sum_n [Kff - Qff]_nn / lambda_n
# (which brackets the expected KL divergence from the exact posterior,
# t/2 <= E[KL] <= t; Burt, Rasmussen and van der Wilk 2019) is below
# .auto_kl nats per observation. The fitted lengthscales are often much
# shorter than the starting ones, and the fitted noise smaller, so that at
# the fitted parameters t is far above that target (concrete, Matern 5/2:
# t = 38 against 0.93 at M = 394) and the fit loses accuracy against the
# exact GP. After such a fit, greedy selection runs again at the fitted
# kernel and noise (same target and cap) and the fit is refitted from its
# fitted kernel, noise and mean with the new inducing inputs, at most
# .auto_m_rounds times, while t misses the target and M is below its cap;
# a refit is kept when its bound is higher. (The new selection may have
# fewer points than the fitted ones: optimised inducing inputs explain more
# than greedily selected ones; the bound decides.) A round refits only when
# its selection has more than 10% more inducing inputs than the fit
# (.auto_m_growth): a selection of about as many as the fit's own, which
# were optimised or selected at nearly these parameters, changes the fit
# little (concrete: a round from 516 to 520 inducing inputs gained 0.01
# nats, one from 507 to 537 0.95 nats on 927 rows, each for a refit;
# rounds from about 380 to 520 changed test NLPD by up to 0.09;
# inst/bench/results/bench_warm_window.txt).
# Not on small data, where the cap is N (about N <= 669,
# .auto_max_inducing()): there the rounds take M to about N, the fit to
# the exact GP, and test NLPD did not improve (20 standard splits: yacht
# -0.115 -> -0.106, Boston housing +0.0015) at 1.25-2.1x the CPU
# (inst/bench/results/bench_auto_m_refit.txt).
.auto_m_rounds <- 2L
.auto_m_growth <- 1.1

# `fit`: an sgpr fit; `refit(fit)` trains a fit from its parameters where
# the first fit was trained (this process, a cluster, or the workers of
# shards); `x`: the training inputs the selection reads (the rows gathered
# on the small path of shards); `weights`: the selection weights at the
# fitted parameters (NULL: the model's, .select_weights()). Only an
# optimised fit without neighbours whose M was automatic takes rounds.
.auto_m_refit <- function(fit, refit, x = fit$x, weights = NULL) {
  if (!isTRUE(fit$selection$auto) || is.null(fit$optim) || .has_neighbours(fit) ||
      is.null(x) || nrow(x) == 0L || !isTRUE(fit$selection$M < .nobs(fit))) {
    return(fit)
  }
  target <- fit$selection$threshold
  # every evaluation and second of the rounds, kept or not, counts in the
  # report of the fit returned
  counts <- fit$optim$counts
  time <- fit$time
  fit$selection$rounds <- 0L
  fit$selection$trace <- .auto_m_trace(fit)
  for (round in seq_len(.auto_m_rounds)) {
    if (isTRUE(fit$optim$interrupted) || .interrupt_pending()) break
    t <- fit$selection$trace
    M <- nrow(fit$params$Z)
    if (!is.finite(t) || t <= target || M >= fit$selection$M) break
    Z <- .select_by_spec(fit$selection, x, .kernel_at(fit$kernel, fit$params),
                         weights = if (is.null(weights)) .select_weights(fit) else
                           weights(fit), memory = fit$control$memory, hook = "reselection")
    if (.interrupt_pending() || identical(unname(Z), unname(fit$params$Z))) break
    if (nrow(Z) <= .auto_m_growth * M) {
      fit$selection$settled <- nrow(Z)
      break
    }
    cand <- fit
    cand$params$Z <- Z
    cand$fixed <- .fixed_from_spec(cand)
    cand$selection$rounds <- round
    cand <- refit(cand)
    counts <- counts + cand$optim$counts
    time <- time + cand$time
    if (!isTRUE(cand$bound > fit$bound)) break
    cand$selection$trace <- .auto_m_trace(cand)
    fit <- cand
  }
  if (!is.null(counts)) fit$optim$counts <- counts
  if (!is.null(time)) fit$time <- time
  if (!is.null(fit$summary_extra)) {
    fit$summary_extra[["Number of inducing inputs"]] <- .auto_m_line(fit)
  }
  fit
}

# The weighted trace t at the fit's parameters (its bound's trace term is
# -t/2).
.auto_m_trace <- function(fit) {
  tr <- fit$bound_terms[["trace"]]
  if (is.null(tr)) NA_real_ else -2 * tr
}

# summary()'s line on the automatic M, with the rounds at the fitted
# parameters (R/auto_m.R) once they are known.
.auto_m_line <- function(fit) {
  line <- sprintf(
    "M = %d, chosen by greedy selection for an expected KL divergence below %g nats per observation (at most %d; give 'inducing' or 'M' to choose)",
    nrow(fit$params$Z), .auto_kl, fit$selection$M)
  rounds <- fit$selection$rounds
  if (is.null(rounds)) return(line)
  settled <- fit$selection$settled
  sprintf("%s; %s at the fitted parameters, where the trace term is %s per observation%s",
          line, if (rounds == 0L) "not chosen again" else
            sprintf("chosen again %d time%s", rounds, if (rounds == 1L) "" else "s"),
          format(.auto_m_trace(fit) / .nobs(fit), digits = 3L),
          if (!is.null(settled))
            sprintf(" (a selection there took %d, within %d%% of the fit's)", settled,
                    round(100 * (.auto_m_growth - 1))) else "")
}
