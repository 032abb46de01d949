# The kernel family of sgpr()'s default on small data.
#
# Where the budget of the automatic M covers an inducing input for every
# observation (about N <= 669, .auto_max_inducing()), the fit is cheap and
# close to the exact GP, so the choice between the two families with the
# same hyperparameters, RBF and Matern 5/2 (one lengthscale per input
# column each), is made by type-II maximum likelihood (Rasmussen and
# Williams 2006, section 5.4): both are fitted and the one with the higher
# bound is kept. Both bounds are within the automatic M's target of their
# log marginal likelihoods (.auto_kl per observation, at most 0.67 nats at
# N = 669), so their difference is a log Bayes factor up to that gap; RBF,
# the default without neighbours, is left only when Matern 5/2 is ahead by
# more than .family_margin nats, a Bayes factor above e (Kass and Raftery
# 1995: "positive" evidence from 2 log B > 2). Near-ties, where the test
# error of either follows the noise, keep RBF.
#
# Measured (OpenBLAS, means over splits; NLPD, lower is better): yacht
# (277 rows, 20 standard splits) RBF 0.071, Matern 5/2 -0.116, the rule
# -0.115; Boston housing (455, 20 splits) 2.380, 2.356, 2.354; on twelve
# further small sets (R's and MASS's data and two simulated functions, 10
# random 90/10 splits each, standardised NLPD) the rule changed the mean
# by -0.055 (a rough 1-D path), +0.008 and +0.018 (cpus, airquality,
# within one standard error) and nothing on the nine others, where RBF's
# bound was the higher or within 1 nat (an infinitely smooth 2-D function
# among them, on which Matern 5/2 predicts 0.022 worse).
# (inst/bench/results/bench_kernel_family.txt)
.family_margin <- 1

# Does sgpr() choose the kernel family for these arguments? Only for the
# fully automatic default (no kernel, no start, automatic inducing inputs
# and neighbours, optimised) on the small path, one process or a cluster
# (not rows on shards, which choose their own way).
.family_by_bound <- function(kernel, start, neighbours, inducing, M, threshold, optimize,
                             cluster, N) {
  is.null(kernel) && is.null(start) && identical(neighbours, "auto") &&
    identical(inducing, "greedy") && is.null(M) && is.null(threshold) && isTRUE(optimize) &&
    !inherits(cluster, "sparsevgp_held") && .auto_max_inducing(N) >= N
}

# Fit with each family by fit_with(kernel) and keep the one the bound
# prefers (see above). The warnings of the fit not kept are dropped. The
# stream of random numbers after the choice is that after the RBF fit, so
# that whichever is kept, the stream is as without the choice.
.choose_family <- function(fit_with) {
  rbf <- .collect_warnings(fit_with(kernel_rbf()))
  if (isTRUE(rbf$value$optim$interrupted) || .interrupt_pending()) return(.rewarn(rbf))
  m52 <- .keep_stream(.collect_warnings(fit_with(kernel_matern52())))
  if (isTRUE(m52$value$optim$interrupted)) return(.rewarn(rbf))
  bounds <- c(RBF = rbf$value$bound, "Matern 5/2" = m52$value$bound)
  use_m52 <- isTRUE(bounds[[2L]] - bounds[[1L]] > .family_margin)
  fit <- .rewarn(if (use_m52) m52 else rbf)
  fit$auto_kernel <- list(bounds = bounds, chosen = if (use_m52) "Matern 5/2" else "RBF")
  # (the fit's report was made before the choice; .report.sgpr() adds the
  # line on later reports)
  fit$summary_extra[["Kernel"]] <- .family_line(fit$auto_kernel)
  fit
}

# The value of `expr` and the warnings it gave (muffled), and the value
# after giving them again.
.collect_warnings <- function(expr) {
  ws <- list()
  value <- withCallingHandlers(expr, warning = function(w) {
    ws[[length(ws) + 1L]] <<- w
    invokeRestart("muffleWarning")
  })
  list(value = value, warnings = ws)
}

.rewarn <- function(r) {
  for (w in r$warnings) warning(w)
  r$value
}

# The line of summary() on the choice.
.family_line <- function(a) {
  sprintf("%s, chosen by the fitted bound (RBF %s, Matern 5/2 %s; Matern 5/2 is taken when ahead by more than %g nat)",
          a$chosen, format(a$bounds[[1L]], digits = 7L), format(a$bounds[[2L]], digits = 7L),
          .family_margin)
}
