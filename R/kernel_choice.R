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

# From the exact GP on small data of some size. There a sparse fit of the
# bound route above (inducing inputs selected at the grid's starting values,
# then optimised with the hyperparameters) costs more than the exact GP it
# approximates: its automatic M comes to 0.7-0.9 N, one evaluation of the
# bound with M inducing inputs (about 3 N M^2 + 5 M^3 operations) then
# costs more than one of the exact log marginal likelihood (about N^3), and
# it has D M more parameters. Its optimisation can also fail: on a series
# of 600 points with cycles of 5.3 and 12 units, the grid's rows with 200
# inducing inputs preferred a lengthscale of 168 units, greedy selection
# took 7 inducing inputs there, and the fit with them free ended 60 nats
# below the exact GP (test NLPD -0.245 against -0.33, in 55 CPU s against
# 2.4 for the exact GP). So from .small_exact_rows rows on, each family is
# fitted as the exact GP (gpr(): its hyperparameters by type-II maximum
# likelihood), the family is chosen by the exact log marginal likelihoods
# (a log Bayes factor, with the margin above), and the sparse model takes
# the chosen fit's hyperparameters, with its inducing inputs chosen by
# greedy selection there (for the automatic M's target: the bound is then
# close to the exact log marginal likelihood) and held. It is not
# optimised further: a run from there gained 0.1 nats on Boston housing for
# 2.3 more CPU s (5.1 against 2.8). Measured in one run (OpenBLAS, one
# thread; test NLPD and CPU s of fit and predict, means;
# inst/bench/results/bench_small_exact.txt):
#   Boston housing (455 rows, 20 standard splits): 2.3564 in 8.4 s by the
#     bound route, 2.3566 in 3.0 s from the exact GP (difference 0.0002,
#     standard error 0.003);
#   R's co2 (374 months, 5 random splits): 0.347 in 4.5 s, 0.350 in 1.3 s;
#   that series (3 draws): -0.267 in 57 s, -0.361 in 5.9 s;
#   two simulated sets of bench_kernel_small.R (360 and 540 rows): the same
#     accuracy (-0.001, -0.0001).
# Below .small_exact_rows the bound route is kept: there the fit costs a
# fraction of a second, and with its inducing inputs free it predicted a
# little better than from the exact GP (yacht, 277 rows, 20 splits: -0.118
# against -0.101, standard error of the difference 0.009; R's data sets of
# 31-133 rows, by 0.002-0.016).
# On shards (R/shards.R) the rows, at most 669, are gathered for the exact
# GPs, and the sparse model is built on the workers: the fit of one process.
.small_exact_rows <- 300L

# Does the fully automatic default on small data (.family_by_bound()) start
# from the exact GP? For N rows from .small_exact_rows on, with the noise
# learned (one variance, no prior weights), no fixed parameters, the mean
# learned and the inducing inputs left to the default. (With a cluster
# these fits run in this process: the data are small.)
.small_exact <- function(N, noise, weights, fixed, optimize_inducing, mean) {
  N >= .small_exact_rows && is.null(noise) && is.null(weights) && is.null(fixed) &&
    is.null(optimize_inducing) && identical(mean, "constant")
}

# The settings of sgpr()'s control that gpr() takes too.
.exact_control <- function(control) control[intersect(names(control), names(.default_control))]

# The exact GP of each family by exact(kernel), the family by their log
# marginal likelihoods (the margin as above), and the sparse model
# sparse(kernel, noise, mean) built at the chosen one's kernel, noise and
# mean (`mean`: "constant" starting there, .mean_start()). The
# exact fits' warnings are dropped (the sparse fit is the one returned).
# NULL when a step fails (bad input, say): the caller takes the bound route,
# whose checks report it in sgpr()'s words.
.choose_family_exact <- function(exact, sparse) {
  tryCatch(.choose_family_exact_run(exact, sparse), error = function(e) {
    .rethrow_fatal(e)
    NULL
  })
}

.choose_family_exact_run <- function(exact, sparse) {
  rbf <- .collect_warnings(exact(kernel_rbf()))$value
  m52 <- if (!isTRUE(rbf$optim$interrupted) && !.interrupt_pending()) {
    .keep_stream(.collect_warnings(exact(kernel_matern52()))$value)
  }
  ll <- c(RBF = rbf$bound, "Matern 5/2" = if (is.null(m52)) NA_real_ else m52$bound)
  use_m52 <- !isTRUE(m52$optim$interrupted) && isTRUE(ll[[2L]] - ll[[1L]] > .family_margin)
  g <- if (use_m52) m52 else rbf
  fit <- sparse(.kernel_at(g$kernel, g$params), g$params[["noise"]],
                structure("constant", start = g$params$mean))
  # the optimiser's report is the exact fit's (the sparse model is not
  # optimised further, see above), its time that of both exact fits
  fit$optim <- g$optim
  fit$optim$value <- fit$bound
  fit$time <- rbf$time + if (!is.null(m52)) m52$time else 0
  fit$auto_kernel <- list(bounds = ll, chosen = if (use_m52) "Matern 5/2" else "RBF",
                          exact = TRUE)
  fit$summary_extra[["Kernel"]] <- .family_line(fit$auto_kernel)
  fit
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
  if (isTRUE(a$exact)) {
    return(sprintf("%s, chosen by the exact GP's log marginal likelihood (RBF %s, Matern 5/2 %s; Matern 5/2 is taken when ahead by more than %g nat); the hyperparameters are that exact GP's (type-II maximum likelihood: the optimiser's report is its fit's), the inducing inputs chosen there by greedy selection",
                   a$chosen, format(a$bounds[[1L]], digits = 7L),
                   format(a$bounds[[2L]], digits = 7L), .family_margin))
  }
  sprintf("%s, chosen by the fitted bound (RBF %s, Matern 5/2 %s; Matern 5/2 is taken when ahead by more than %g nat)",
          a$chosen, format(a$bounds[[1L]], digits = 7L), format(a$bounds[[2L]], digits = 7L),
          .family_margin)
}
