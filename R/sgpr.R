# Sparse GP regression with the collapsed bound of Titsias (2009), for
# homoscedastic noise, known per-point noise variances, or a learned
# log-linear noise model (heteroscedastic SGPR, Passerello 2022, ch. 3).
# The bound and its adjoints are computed by src/bound_gaussian.c through
# R/collapsed.R; the noise model is in R/noise.R.

#' Sparse Gaussian process regression (SGPR)
#'
#' Fits a sparse variational Gaussian process with \eqn{M} inducing inputs
#' by maximising the collapsed evidence lower bound of Titsias (2009),
#' \deqn{F = \log N(y; m, Q_{ff} + \Lambda) - \frac12 \mathrm{tr}(\Lambda^{-1}(K_{ff} - Q_{ff})),}{F = log N(y; m, Qff + Lambda) - 1/2 tr(Lambda^-1(Kff - Qff)),}
#' \eqn{Q_{ff} = K_{fu} K_{uu}^{-1} K_{uf}}{Qff = Kfu Kuu^-1 Kuf}, over the kernel parameters, the
#' noise, the constant mean and the inducing inputs. The cost is
#' \eqn{O(N M^2)}{O(N M^2)} time and \eqn{O(N M)} memory. With the inducing inputs at
#' the training inputs the bound equals the exact log marginal likelihood
#' of \code{\link{gpr}()}.
#'
#' The noise covariance \eqn{\Lambda}{Lambda} is diagonal:
#' \itemize{
#'   \item \code{noise} a number: one learned variance \eqn{\sigma^2}{sigma^2}
#'     (homoscedastic; the number is the starting value);
#'   \item a numeric vector of length \eqn{N}: known per-point variances,
#'     held fixed;
#'   \item a one-sided formula such as \code{~ x + I(x^2)}: a log-linear
#'     model \eqn{\log\lambda_n = \phi(x_n)^\top\beta}{log lambda_n = phi(x_n)' beta} with \eqn{\beta}{beta}
#'     learned. Its variables are looked up in \code{data} (formula
#'     interface) or among the columns of \code{x} (matrix interface; unnamed
#'     columns are called \code{x1}, \code{x2}, ...).
#' }
#'
#' \strong{Training.} Each run is L-BFGS-B on the analytic gradient, from
#' starting values found on a grid (see \code{\link{kernels}}). By default
#' (\code{control$schedule = "auto"}) a fit with free inducing inputs is one
#' run over all parameters, inducing inputs included; if that run ends flat
#' (signal variance below 1\% of the noise), the staged schedule below runs
#' from the start and the better fit is kept. With held inducing inputs
#' (\code{optimize_inducing = FALSE}) the default is the staged schedule,
#' whose re-selection is what places them. \code{control$schedule =
#' "staged"} always runs the stages:
#' \enumerate{
#'   \item the kernel, noise and mean, with the inducing inputs held where
#'     greedy selection put them at the starting values (few parameters:
#'     tens of evaluations);
#'   \item for greedy inducing inputs, re-selection at the fitted parameters
#'     and a refit, repeated (up to three times) while it raises the bound
#'     (Burt, Rasmussen and van der Wilk 2020); with an automatic \eqn{M}
#'     it is chosen anew in each pass;
#'   \item with \code{optimize_inducing = TRUE}, all parameters together,
#'     inducing inputs included.
#' }
#' On kin8nm and power (about 8000 observations) the one run reaches the
#' test accuracy of the stages in 55--65\% of their time; the stages are
#' what rescues fits that a single run leaves flat.
#' With more than 20 000 observations, the schedule runs on a random
#' subsample of 20 000, and then the kernel, noise and mean are refined on
#' all the data with the inducing inputs held: each evaluation on the full
#' data costs \eqn{O(N M^2)}{O(N M^2)}, and a few suffice from there.
#' \code{control$schedule = "joint"} gives the former path, one L-BFGS-B run
#' over all free parameters from simple starting values, without the grid.
#' The report (\code{fit$optim}) has the bound after each run in
#' \code{stages} and the schedule used in \code{schedule}.
#' Starting values left unset are chosen as described in
#' \code{\link{kernels}}.
#'
#' \strong{Number of inducing inputs.} By default (\code{inducing =
#' "greedy"} without \code{M} or \code{threshold}), greedy selection adds
#' inducing inputs until the trace term
#' \eqn{t = \sum_n [K_{ff} - Q_{ff}]_{nn} / \lambda_n}{t = sum_n [Kff - Qff]_nn / lambda_n}, which brackets the
#' expected KL divergence from the exact posterior (\eqn{t/2 \le E[KL] \le
#' t}{t/2 <= E[KL] <= t}, Burt et al. 2019), is below 0.001 nats per observation, and at most
#' \eqn{\max(100, \sqrt{3 \cdot 10^8 / N})}{max(100, sqrt(3e8 / N))} of them (so
#' that one evaluation costs about \eqn{3 \cdot 10^8}{3e8} multiplications at most).
#' The selection runs at the starting values, or, when the trial of
#' \code{neighbours = "auto"} keeps none, at the parameters that trial
#' fitted. Without neighbours, when the
#' optimised fit misses the target at its fitted kernel and noise (shorter
#' lengthscales or less noise than at the start) and \eqn{M} is below its
#' cap, greedy selection runs again there (same target and cap) and the fit
#' is refitted from its fitted parameters with the new inducing inputs, at
#' most twice, keeping a refit when it raises the bound (not on small data,
#' where the cap is \eqn{N}: there the rounds did not predict better). A
#' round whose selection takes at most 10\% more inducing inputs than the
#' fit has is not refitted: it would change the fit little.
#' \code{summary()} reports the \eqn{M} chosen, these rounds and the trace
#' term at the fitted parameters. Give \code{inducing} (a
#' number) or \code{M} to choose it yourself.
#'
#' \strong{Neighbours: local structure on top of the inducing points.}
#' A global rank-\eqn{M} approximation cannot follow a signal that varies
#' on scales shorter than the spacing of affordable inducing points (a
#' surface, low-dimensional data with short-range structure). With
#' \code{neighbours = K > 0} the model is \eqn{y = m + f_{global} + r +
#' \epsilon}{y = m + f_global + r + eps}: \eqn{f_{global}}{f_global} is the inducing-point (Nystrom) part of
#' the GP, and the residual process with the noise, whose covariance
#' \eqn{R = K_{ff} - Q_{ff} + \Lambda}{R = Kff - Qff + Lambda} is the kernel minus its Nystrom part plus
#' the noise, gets a Vecchia approximation (Vecchia 1988; Katzfuss and
#' Guinness 2021): each observation conditions on \eqn{K} others that
#' come earlier in an ordering. This is the Vecchia-inducing-points
#' full-scale approximation (VIF) of Gyger, Furrer and Sigrist (2025). The
#' objective is then the exact log likelihood of this approximate model,
#' \eqn{\log N(y; m, Q_{ff} + \tilde R)}{log N(y; m, Qff + R~)}, computed by the Woodbury identity
#' with the sparse Vecchia precision \eqn{\tilde R^{-1} = B^\top D^{-1} B}{R~^-1 = B' D^-1 B} in
#' \eqn{O(N(M^2 + M K^2 + K^3))}{O(N (M^2 + M K^2 + K^3))} time and \eqn{O(NK + M^2)}{O(N K + M^2)} memory
#' plus a chunk of rows, with analytic gradients. It is a likelihood,
#' not a lower bound: \code{logLik()} (its attribute \code{"kind"} is
#' \code{"likelihood"}), \code{print()} and \code{summary()} say so, there
#' is no upper bound of Titsias (2014) for it, and \code{\link{anova}()}
#' notes when fits of the two kinds are compared.
#' With \eqn{K = N - 1} it is the exact GP likelihood; \code{neighbours =
#' 0} is the collapsed bound above.
#' \itemize{
#'   \item \emph{Ordering}: random, drawn when the model is built
#'     (\code{set.seed()} reproduces it), as in VIF: random orderings give
#'     far sharper Vecchia approximations than coordinate-based ones
#'     (Guinness 2018).
#'   \item \emph{Neighbours}: for each observation, its \eqn{2K} nearest
#'     earlier observations in the inputs divided by the lengthscales are
#'     the candidates (a kd-tree search, \eqn{O(N \log N)}{O(N log N)}); the
#'     \eqn{K} most correlated with it under the residual process
#'     \eqn{K_{ff} - Q_{ff}}{Kff - Qff} are kept (Gyger et al. 2025 choose by this correlation:
#'     near an inducing input the residual is small and no longer
#'     correlated by distance alone).
#'   \item \emph{When they are chosen}: the neighbour sets are held fixed
#'     during each optimiser run (so that it sees one smooth function),
#'     chosen at the starting values and again after a run whenever a
#'     lengthscale has moved by more than 20\% since they were and the new
#'     sets raise the likelihood at the fitted parameters by more than
#'     \code{control$min_gain} per observation (the run then continues from
#'     where it stopped; at most three times, or
#'     \code{control$neighbour_rounds}); new sets that do not are dropped
#'     and the fit keeps the sets it was fitted with.
#'   \item \emph{Kernel}: when none is given (\code{kernel = NULL}),
#'     Matern 5/2 with one lengthscale per input column, the family of the
#'     Vecchia packages (GpGp, GPBoost): the neighbours follow local
#'     structure rougher than an RBF kernel allows (on the benchmark sets it
#'     predicted better than RBF with neighbours, by up to 0.3 nats). When
#'     \code{neighbours = "auto"} keeps the neighbours, a second,
#'     short-range Matern 5/2 is added to that kernel where the likelihood
#'     prefers it. One kernel must serve both the global part, which the
#'     inducing points carry, and the residual, which the neighbours carry;
#'     where the data vary on two scales (short-range variation weaker than
#'     the noise, say) its likelihood calls the short part noise. The short
#'     part starts with the lengthscales of the trial's fitted kernel times
#'     0.3, 0.1 or 0.03 and half the trial's noise variance (the other half
#'     stays noise); the best of these three sums and the single kernel by
#'     the log likelihood on the trial's rows starts the full fit, which then
#'     moves both parts. On nine benchmark sets (splits 0-2, one run,
#'     \code{bench_peers.R}) this lowered the test negative log predictive
#'     density by 0.13 nats per observation on the DAX series, 0.12 on
#'     North American rainfall, 0.07 on jason3, 0.04 on sunspots, 0.02 on
#'     volcano and 0.007 on the power plant, left a daily series and
#'     treering as they were, and raised it by 0.004 on kin8nm; the default
#'     is now ahead of GpGp on all nine (by 0.02 to 0.13, 1.1 on the daily
#'     series and 0.0004 on treering), for 1.0 to 1.9 times the CPU
#'     of the single kernel (the scores take a few tenths of a second; the
#'     rest is the full fit of a kernel with twice the parameters).
#'     Where the fit without neighbours has called the short-range
#'     variation noise (a lengthscale far longer than the data's spread,
#'     say), the trial's model with neighbours and one kernel, started
#'     there, stays there and gains too little to be kept. It is then
#'     fitted once more from that kernel plus a short-range Matern 5/2 on
#'     the neighbours' own scale: lengthscales 0.125, 0.25 or 0.5 times
#'     the median distance to the \eqn{K}-th nearest row (in the inputs
#'     scaled by their standard deviations, then in each input's units) and
#'     a quarter or half of the noise variance, the best of these six by the
#'     likelihood on the trial's rows; the same rule then decides, and
#'     where it keeps the neighbours the full fit starts from that sum. On
#'     a surface with two scales, \eqn{\sin(3a) + 0.3 \sin(40a)\cos(35b)}{sin(3a) + 0.3 sin(40a) cos(35b)}
#'     plus noise of variance 0.0675 (3000 rows, three draws), this kept
#'     the neighbours where they had been dropped: test NLPD 0.129 against
#'     0.203, GpGp 0.126; on the 20 standard splits of concrete and energy
#'     (8 inputs, 927 and 691 rows) it kept them on 15 splits each, for a
#'     test NLPD of 2.936 against 3.030 and 0.424 against 0.700 (about 1.3
#'     and 2 times the CPU; \code{bench_peers_reach.txt}).
#'     With \code{neighbours} a number, the kernel is the single Matern 5/2.
#'     Without neighbours the default is RBF, except on small data: where the
#'     automatic \eqn{M} can take an inducing input for every observation
#'     (about \eqn{N \le 669}) and the inducing inputs and neighbours are
#'     chosen automatically, both RBF and Matern 5/2 are fitted and Matern
#'     5/2 is kept when its bound is higher by more than 1 nat (type-II
#'     maximum likelihood; a Bayes factor above \eqn{e}, Kass and Raftery
#'     1995). On yacht (20 standard splits) this gave a test log predictive
#'     density 0.19 nats per observation better than RBF, and nothing
#'     worse beyond noise on fourteen small sets; the fit costs both fits.
#'     \code{summary()} reports the two bounds. From 300 observations on
#'     (with the noise learned, no weights, fixed parameters or
#'     \code{optimize_inducing} given), where the automatic \eqn{M} comes
#'     close to \eqn{N} and the exact GP is the cheaper fit, the two
#'     families are fitted as exact GPs (\code{\link{gpr}()}), the family
#'     is chosen by their log marginal likelihoods with the same margin, and
#'     the sparse model takes the chosen fit's hyperparameters, with
#'     inducing inputs chosen by greedy selection there (for the automatic
#'     \eqn{M}'s target, so that its bound is close to the exact log
#'     marginal likelihood) and held; the optimiser's report is the exact
#'     fit's, and \code{summary()} says so. On Boston housing (455 rows, 20
#'     splits) this gave the same test accuracy in a third of the time, and
#'     on a series of 600 points with short cycles, where the sparse fit's
#'     own optimisation ended far below the exact GP, the exact GP's
#'     accuracy in a tenth of the time.
#'   \item \emph{Inducing inputs}: greedy selection at the starting values,
#'     with the automatic \eqn{M} capped by a budget for one evaluation,
#'     \eqn{N(M^2 + 1.5 M (K+1)^2) \le 10^8}{N (M^2 + 1.5 M (K+1)^2) <= 1e8} (a third of the budget
#'     without neighbours: the neighbours carry the local structure, so the
#'     global part needs fewer inducing inputs; at least 30), and held there
#'     (\code{optimize_inducing = NULL}): optimising \eqn{M \times D}{M x D}
#'     coordinates costs many evaluations for little gain.
#'   \item \emph{Predictions}: the global part as above plus the residual
#'     conditioned on the \eqn{K_p} training observations most correlated
#'     with the new input among its \eqn{2K_p} nearest, in
#'     \eqn{O(M^2 + M K_p^2 + K_p^3)}{O(M^2 + M Kp^2 + Kp^3)} per new
#'     input. By default \eqn{K_p = 2K}{Kp = 2K} (at most \eqn{N};
#'     \code{predict(fit, newdata, neighbours = )} sets it): a new input
#'     comes after all the training observations in the ordering, so any
#'     set of them gives a predictive of the same fitted model, and a larger
#'     set is nearer the exact GP at the fitted parameters (GpGp predicts
#'     with 60 neighbours where it fits with 30). Twice \eqn{K} predicted
#'     better than \eqn{K} on 9 of 11 benchmark sets (split 0; test NLPD
#'     on kin8nm -1.176 against -1.141, volcano 0.765 against 0.770, a
#'     series with gaps to fill -0.239 against -0.153), slightly worse on
#'     MBA's LIDAR (+0.008) and a synthetic field (+0.001), for about a
#'     tenth of a CPU second more per thousand new inputs. The local residuals of
#'     distinct new inputs are independent given the data, so the
#'     covariance (\code{full_cov = TRUE}) and joint draws of
#'     \code{simulate()} are smooth in their global part only.
#'   \item \emph{Automatic choice} (\code{neighbours = "auto"}, the
#'     default): \eqn{K = 0} or \eqn{K = 20} (\eqn{K = 10} with one input,
#'     with the inducing inputs that 20 would allow: on a line a few
#'     observations on either side of a point screen it from the rest, and
#'     on four series, splits 0-2, 10 neighbours gave the same test NLPD
#'     as 20, within 0.002 nats, in 30-55\% less CPU), decided by a trial that
#'     compares the two models as each would be fitted, with the inducing
#'     inputs each can afford on all the data. 1000 random observations
#'     (at most a fifth) are held out, and on a random subsample of 1500
#'     of the others the model without neighbours is fitted from its
#'     starting values and inducing inputs. Unless its residuals show local
#'     structure, the model with neighbours is not tried: each held-out
#'     observation's residual is rank-correlated with that of its nearest other
#'     observation and with the mean of its 5 nearest (nearest by the
#'     fitted lengthscales and by the inputs' standard deviations), and
#'     when no correlation exceeds twice its standard error under
#'     independence (\eqn{2/\sqrt{V}}{2 / sqrt(V)} over \eqn{V} held-out
#'     observations) no neighbours are taken (on R's \code{quakes}, 900
#'     observations of noisy data where the model with them never won, the
#'     default fit takes 1.2 CPU seconds instead of 3.5). Otherwise the model with
#'     \eqn{K} neighbours (its smaller \eqn{M}, inducing inputs held,
#'     neighbour sets chosen once) from the better, by its likelihood, of
#'     where that fit ended and its own starting values. On data dense for
#'     the starting grid (see \code{\link{kernels}}: a median distance to
#'     the nearest other observation of at most 1/128 of the inputs'
#'     standard deviations, as in a long series with one observation per
#'     time unit), the model with neighbours is fitted instead on four disjoint
#'     compact windows of 1500 observations in all, where its neighbours are
#'     as close as in the full fit: a subsample spread over all the data has
#'     its neighbours far apart and takes structure on the scale of a few
#'     observations for noise (20000 hourly observations with a daily
#'     cycle: test RMSE 0.88 before, 0.30 after; GpGp's default 0.84). Each is then built
#'     at its fitted
#'     parameters on all observations but the held-out ones (so that the
#'     neighbours are as close as in the full fit) and predicts the
#'     held-out ones; the neighbours are kept when their mean log predictive
#'     density is higher by more than 0.01 nats per observation, a margin
#'     for their extra cost, and by more than twice the standard error of
#'     that mean difference over the held-out observations (so that a gain
#'     from chance or a few outlying observations, as on small data, keeps
#'     the simpler model). Unless the subsample is all the observations not
#'     held out, the model without neighbours is fitted first
#'     with its inducing inputs held; when the neighbours win by 0.25 nats
#'     per observation more than the rule asks (more than freeing those
#'     inputs has given on the benchmark sets, at most 0.18), they are
#'     kept, and otherwise that fit goes on with its inducing inputs free
#'     and is scored again (on volcano this saves a quarter of the fit's time).
#'     The model kept starts the full fit from its trial's parameters. No dimension or other property of the data
#'     enters the rule: on smooth functions the inducing points predict as
#'     well and no neighbours are taken. When the neighbours are kept but
#'     the model at the trial's parameters leaves more than 2\% of the
#'     prior variance unexplained by both parts (the mean conditional
#'     variance of the residual signal given the neighbours against the
#'     kernel's variance: neighbours far apart for the lengthscales, as with
#'     many inputs), the global part takes more inducing inputs, placed at
#'     k-means centres of the inputs (as in GPBoost's full-scale Vecchia
#'     approximation): as many as a budget of \eqn{6 \times 10^8}{6e8}
#'     multiplications per evaluation allows (about 100 for
#'     \eqn{N = 7373}{N = 7373}, \eqn{K = 20}; at most \eqn{N / 4}), or the
#'     \code{M} given, and the full fit holds them there (unless
#'     \code{optimize_inducing = FALSE} or the inducing inputs are given, or
#'     the data are dense: there the neighbours are the closest observations
#'     there are, and what they leave is structure on the data's own
#'     spacing, which sparser inducing inputs do not reach). The centres are
#'     kept only when, at the trial's parameters, they predict the held-out
#'     rows better than the inducing inputs they would replace by the
#'     rule's margin of 0.01 nats per observation: where what the neighbours
#'     leave is on a scale shorter than the centres' spacing, they would
#'     double the cost of each evaluation for nothing.
#'     With \eqn{N} small enough that
#'     the budget of the automatic \eqn{M} covers an inducing input for
#'     every observation (\eqn{N^3 \le 3 \times 10^8}{N^3 <= 3e8}, about
#'     \eqn{N \le 669}), there is no trial and no neighbours. The trial
#'     costs two or three short fits on the subsample (at most 100
#'     iterations of L-BFGS-B for each of the two fits of the model without
#'     neighbours, 200 for the one with) and one or two evaluations of each
#'     model on the data (with the neighbours kept, four more on the
#'     subsample: the starts of the kernel's short-range part, see
#'     \emph{Kernel}; when the first model with neighbours is not kept, six
#'     evaluations and one more fit of it on the subsample and one
#'     evaluation on the data), and restores the
#'     stream of random numbers. On 700 to 3000 observations with local
#'     structure it takes most of the fit's time (on
#'     concrete, 927 observations, about half); give \code{neighbours = 0}
#'     (smooth data) or \code{20} (rough data in few inputs) to skip it.
#'     \code{summary()} reports the choice and its figures; give
#'     \code{neighbours} a number to choose. With \code{optimize = FALSE}
#'     \code{"auto"} means 0.
#'   \item Everything else works as without neighbours: known or learned
#'     (log-linear) noise, prior weights, offsets, kernels combined by
#'     \code{+} and \code{*} (the neighbours use each column's shortest
#'     lengthscale), fits on a 10 000-row subsample first for large
#'     \eqn{N}, chunks of rows within \code{control$memory} and
#'     \code{cluster} (each worker holds a run of observations that are
#'     close in the inputs, with their neighbours; see \code{\link{scaling}}).
#'     \code{control$schedule} does not apply: training is the runs above.
#'   \item \emph{On shards} (\code{data = \link{shards}(cl, load)}) the
#'     neighbours come from the same shard: each worker orders its own rows
#'     and chooses their neighbours among them, since no process holds all
#'     rows (see \code{\link{shards}}). This is still a Vecchia approximation
#'     with an exact likelihood, the residual independent across shards;
#'     it costs little when each shard holds a region of the inputs and
#'     more when the shards are random splits (on volcano, 2 random shards
#'     predicted 0.13 nats per observation worse than one process, 2
#'     spatial halves 0.004, no neighbours 0.72). Predictions at new points need the shards:
#'     \code{predict(fit, newdata, cluster = sh)}.
#' }
#'
#' Predictions follow the Titsias/GPflow convention (no diagonal
#' correction); see \code{\link{predict.sparsevgp}}. \code{summary()} reports
#' the bound's terms, the upper bound on \eqn{\log p(y)}{log p(y)} of Titsias (2014)
#' (Passerello 2022, eq. 3.4) and so a bracket on the KL divergence from
#' the approximation to the exact posterior.
#'
#' @inheritParams gpr
#' @param inducing the inducing inputs: a matrix with the columns of the
#'   inputs; a number \eqn{M}, for that many training inputs chosen by the
#'   default method; a method name, \code{"greedy"} (greedy conditional
#'   variance, \code{\link{select_inducing}()}; weighted by
#'   \eqn{1/\lambda_n}{1/lambda_n} when the noise variances differ at the start, that is
#'   for known per-point variances; \code{"hgv"} is the same),
#'   \code{"gv"} (greedy variance without weights), \code{"kmeans"} or
#'   \code{"random"}, for \code{M} inputs chosen that way; or the result of
#'   \code{select_inducing()}, for full control (threshold, weights). By
#'   default greedy selection with \eqn{M} chosen from the data (see
#'   Details). Greedy selection
#'   uses R's random numbers only to break ties: \code{set.seed()} makes it
#'   reproducible. A learned noise model starts from a constant variance, so
#'   its first selection is unweighted; \code{\link{reinit_inducing}()}
#'   re-selects with the fitted variances. At most \eqn{N} inducing inputs
#'   are accepted: more cannot raise the bound above what \eqn{Z = X} gives
#'   (the exact GP), and a larger \eqn{M} is almost always a mistake in the
#'   call.
#' @param M the number of inducing inputs for a method name in
#'   \code{inducing} (by default chosen from the data for \code{"greedy"}, see
#'   Details, and \eqn{\min(N, 100)}{min(N, 100)} for \code{"kmeans"} and
#'   \code{"random"}); with a \code{threshold}, the most that greedy
#'   selection may take.
#' @param threshold for the greedy methods: stop adding inducing inputs once
#'   the trace \eqn{\sum_n [K_{ff} - Q_{ff}]_{nn} / \lambda_n}{sum_n [Kff - Qff]_nn / lambda_n} falls below it,
#'   so that \eqn{M} is chosen from the data. It is on the scale of the KL
#'   divergence: \code{kl_threshold(kl, N = N)} for a target of \code{kl}
#'   nats per observation.
#' @param optimize_inducing if \code{TRUE}, the inducing inputs are
#'   optimised with the other parameters in the last stage of training;
#'   \code{FALSE} holds them where (re-)selection put them. By default
#'   (\code{NULL}) \code{TRUE} without neighbours and \code{FALSE} with
#'   them (see Details).
#' @param control as for \code{\link{gpr}()}, and \code{schedule}:
#'   \code{"auto"} (the default, see Details), \code{"staged"} or
#'   \code{"joint"}, and \code{memory}: the working memory of one evaluation
#'   beyond which the bound is computed over chunks of rows and greedy
#'   selection of the inducing inputs runs on a subsample of rows (bytes, or a
#'   string such as \code{"2GB"}; by default an eighth of the machine's memory within 256 MB and 2 GB; see \code{\link{scaling}}),
#'   and, with neighbours, \code{neighbour_rounds}: the most times the
#'   neighbour sets are chosen anew at the fitted lengthscales and the run
#'   repeated from where it ended (default 3; 0 holds the sets chosen at
#'   the starting values).
#' @param cluster a cluster from \code{parallel::makeCluster()}: the data
#'   are split over its workers, which compute their shares of every
#'   evaluation of the bound (see \code{\link{scaling}}); by default
#'   \code{NULL}, one process.
#' @param noise a number, a vector of \eqn{N} known variances, or a
#'   one-sided formula; see Details. By default one variance starting at a
#'   tenth of the variance of \code{y}.
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"},
#'   \code{"noise_coef"}, \code{"mean"}, \code{"Z"}, or single entries such
#'   as \code{"Z[3,1]"}.
#' @param start a previous fit of the same kind whose parameters are used as
#'   starting values (this is how \code{update()} warm-starts; with
#'   \code{neighbours = "auto"} the new fit keeps the number of neighbours
#'   of \code{start}).
#' @param kernel a kernel, such as \code{\link{kernel_rbf}()}; parameters
#'   left \code{NULL} are chosen from the data. By default (\code{NULL})
#'   \code{kernel_rbf()}, \code{kernel_matern52()} when the model has
#'   neighbours, and on small data the one of the two with the higher bound
#'   (see Details).
#' @param neighbours the number \eqn{K} of neighbours each observation
#'   conditions on in the residual process (see Details): \code{"auto"}
#'   (the default), 0 (the collapsed bound alone) or a whole number below
#'   \eqn{N}.
#' @return An object of class \code{c("sgpr", "sparsevgp")}.
#' @templateVar model sgpr
#' @templateVar classifier no
#' @template fit-value
#' @template practice
#' @references Titsias, M. (2009). Variational learning of inducing
#'   variables in sparse Gaussian processes. AISTATS.
#'
#'   Gyger, T., Furrer, R. and Sigrist, F. (2025). Vecchia-inducing-points
#'   full-scale approximations for Gaussian processes. arXiv:2507.05064.
#'
#'   Guinness, J. (2018). Permutation and grouping methods for sharpening
#'   Gaussian process approximations. \emph{Technometrics} 60(4), 415--429.
#'
#'   Katzfuss, M. and Guinness, J. (2021). A general framework for Vecchia
#'   approximations of Gaussian processes. \emph{Statistical Science} 36(1),
#'   124--141.
#'
#'   Kass, R. E. and Raftery, A. E. (1995). Bayes factors. \emph{Journal of
#'   the American Statistical Association} 90(430), 773--795.
#'
#'   Vecchia, A. V. (1988). Estimation and model identification for
#'   continuous spatial processes. \emph{Journal of the Royal Statistical
#'   Society B} 50(2), 297--312.
#' @seealso \code{\link{posterior_inducing}}, \code{\link{gpr}},
#'   \code{\link{objective}}
#' @examples
#' fit <- sgpr(y ~ x, data = snelson, inducing = 15)
#' fit
#' summary(fit)
#' plot(fit)
#'
#' # heteroscedastic: the log noise variance is quadratic in x
#' set.seed(1)
#' x <- runif(200, -5, 5)
#' y <- 2.5 * sin(6 * x / 5) + rnorm(200, sd = sqrt(0.05 + 0.05 * x^2))
#' het <- sgpr(x, y, inducing = 20, noise = ~ x + I(x^2))
#' coef(het)
#'
#' # a surface with short-range structure: inducing points for the global
#' # part, 10 neighbours per observation for the rest (VIF)
#' v <- data.frame(row = c(row(volcano)), col = c(col(volcano)),
#'                 height = c(volcano))[seq(1, length(volcano), by = 5), ]
#' set.seed(1)
#' surf <- sgpr(height ~ row + col, data = v, neighbours = 10, inducing = 30)
#' surf
#' predict(surf, data.frame(row = 40, col = 30), interval = "prediction")
#'
#' # model frames as in lm(): rows with NA are dropped, subset and weights
#' aq <- sgpr(Ozone ~ Temp + Wind, data = airquality, subset = Month > 5,
#'            inducing = 15)
#' nobs(aq)
#' predict(aq, airquality[1:3, ], interval = "prediction")
#' @export
sgpr <- function(x, ...) UseMethod("sgpr")

#' @rdname sgpr
#' @export
sgpr.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("sgpr", match.call(), parent.frame(), x, data, ...)
}

#' @rdname sgpr
#' @export
sgpr.default <- function(x, y, kernel = NULL, inducing = "greedy", M = NULL,
                         threshold = NULL, noise = NULL, mean = "constant", optimize = TRUE,
                         optimize_inducing = NULL, fixed = NULL, control = list(),
                         start = NULL, weights = NULL, offset = NULL, cluster = NULL,
                         neighbours = "auto", ...) {
  call <- .model_call(match.call(), "sgpr")
  # the default on small data: RBF or Matern 5/2 by the fitted bound
  # (R/kernel_choice.R)
  if (.family_by_bound(kernel, start, neighbours, inducing, M, threshold, optimize, cluster,
                       NROW(x))) {
    # from the exact GP's hyperparameters where it is the cheaper fit (NULL:
    # an error there, such as bad input, left to the route below to report)
    fit <- if (.small_exact(NROW(x), noise, weights, fixed, optimize_inducing, mean)) {
      .choose_family_exact(
        function(k) gpr.default(x, y, kernel = k, control = .exact_control(control),
                                offset = offset, ...),
        function(k, noise, mean) {
          sgpr.default(x, y, kernel = k, noise = noise, mean = mean, optimize = FALSE,
                       optimize_inducing = FALSE, control = control, offset = offset,
                       neighbours = 0L, ...)
        })
    }
    if (!is.null(fit)) {
      fit$call <- call
      return(fit)
    }
    fit <- .choose_family(function(k) {
      sgpr.default(x, y, kernel = k, inducing = inducing, M = M, threshold = threshold,
                   noise = noise, mean = mean, optimize = optimize,
                   optimize_inducing = optimize_inducing, fixed = fixed, control = control,
                   start = NULL, weights = weights, offset = offset, cluster = cluster,
                   neighbours = neighbours, ...)
    })
    fit$call <- call
    return(fit)
  }
  data <- .dots_data(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  y <- .as_response(y, nrow(x), model = "sgpr")
  wo <- .check_weights_offset(weights, offset, nrow(x))
  if (!is.null(wo$offset)) y <- y - wo$offset
  optimize <- .check_flag(optimize, "optimize")
  control <- .collapsed_control(control, neighbours = TRUE)
  start <- .check_start(start, "sgpr", x)
  nbr <- .sgpr_neighbours(neighbours, nrow(x), start)
  kernel_default <- is.null(kernel)
  kernel <- if (kernel_default) .sgpr_default_kernel(nbr$K, start) else .check_kernel(kernel)
  if (!is.null(start)) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    # the previous inducing inputs, when there are enough rows for them
    if (missing(inducing) && nrow(start$params$Z) <= nrow(x)) inducing <- start$params$Z
  }
  spec <- .inducing_spec(inducing, M, threshold, x, auto_kl = .auto_kl)
  # with neighbours, the automatic M keeps one evaluation within the same
  # budget (R/vif.R)
  if (isTRUE(spec$auto) && isTRUE(nbr$K > 0L)) {
    spec$M <- min(spec$M, .vif_max_inducing(nrow(x), nbr$K))
  }
  st <- .start_collapsed(kernel, x, y, noise, spec, optimize && is.null(start) &&
                           control$schedule != "joint", neighbours = nbr$K)
  kernel <- st$kernel
  nz <- .noise_setup(noise, x, y, data, start = st$noise, weights = wo$weights)
  # greedy selection weighted by 1/lambda at the starting noise, so that a
  # threshold is on the scale of the KL divergence (kl_threshold())
  sel_weights <- 1 / .noise_lambda(list(noise_model = nz$model, x = x), nz$params,
                                    compact = TRUE)
  Z <- .select_by_spec(spec, x, kernel, sel_weights,
                       warn_short = !is.null(M) || is.numeric(inducing), memory = control$memory)
  mn <- .mean_start(mean, mean(y))
  # neighbours = "auto": a trial on a subsample decides (R/vif.R), and the
  # fitted parameters of the model it keeps start the fit
  auto <- NULL
  if (nbr$auto) {
    auto <- .vif_auto(x, y, if (!kernel_default) kernel, noise, spec, Z, control, mean, optimize,
                      start0 = list(kernel = kernel, noise = nz$params[["noise"]],
                                    optimize_inducing = !isFALSE(optimize_inducing),
                                    place = !isFALSE(optimize_inducing) &&
                                      spec$method != "given",
                                    M = if (!isTRUE(spec$auto) && isTRUE(spec$M > 0L)) spec$M))
    nbr$K <- auto$K
    if (auto$K > 0L || !is.null(auto$params)) {
      # the fit starts from the trial's fitted kernel, noise and mean (with
      # no neighbours, where the trial's fit without them ended, which saves
      # more evaluations on all the data than the trial costs: kin8nm, 224
      # instead of 286)
      kernel <- auto$kernel
      # exact names: $noise would match a noise model's noise_coef
      if (!is.null(nz$params[["noise"]])) nz$params[["noise"]] <- auto$params[["noise"]]
      if (!mn$fixed) mn$value <- auto$params$mean
    }
    # greedy selection at the trial's parameters
    select_at_trial <- function(spec) {
      .select_by_spec(spec, x, kernel,
                      1 / .noise_lambda(list(noise_model = nz$model, x = x), nz$params),
                      memory = control$memory)
    }
    if (auto$K > 0L) {
      if (spec$method != "given") {
        # the k-means centres the trial chose where the neighbours leave
        # much of the variance unexplained (R/vif.R; their number within a
        # budget of their own, or the M given), else greedy selection at the
        # trial's parameters
        if (!is.null(auto$Z)) {
          Z <- auto$Z
          spec$M <- nrow(Z)
        } else {
          if (isTRUE(spec$auto)) spec$M <- min(spec$M, .vif_auto_max_inducing(nrow(x)))
          Z <- select_at_trial(spec)
        }
      }
    } else if (!is.null(auto$params)) {
      if (isTRUE(spec$auto)) {
        # the automatic M chosen again at the trial's fitted kernel and
        # noise, where the fit will end, rather than at the starting values
        # (R/auto_m.R)
        Z <- select_at_trial(spec)
      } else if (spec$method != "given" && nrow(auto$params$Z) == nrow(Z)) {
        # the trial's inducing inputs
        Z <- auto$params$Z
      }
    }
  }
  # by default the inducing inputs are optimised, except with neighbours:
  # there the residual model carries the local structure, and greedy
  # selection places them well for the global part at a fraction of the
  # cost (R/vif.R)
  if (is.null(optimize_inducing)) optimize_inducing <- !isTRUE(nbr$K > 0L)
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  params <- c(.kern_params(kernel),
              nz$params, list(mean = mn$value, Z = Z))
  transforms <- c(variance = "log", lengthscale = "log", nz$transforms,
                  mean = "identity", Z = "identity")
  if (!is.null(start)) {
    params <- .warm_params(params, start$params, skip = c("Z", if (mn$fixed) "mean"))
  }
  fit <- .new_fit("sgpr", call, x, y, kernel, params, transforms, fixed,
                  always = c(if (mn$fixed) "mean", if (!optimize_inducing) "Z"),
                  control = control,
                  label = sprintf("Sparse GP regression (SGPR), %s noise", nz$label),
                  extra = c(list(noise_model = nz$model,
                                 selection = spec[intersect(names(spec),
                                                            c("method", "M", "threshold", "auto"))]),
                            wo, list(auto_neighbours = auto$report,
                                     from_trial = !is.null(auto$params))))
  # with neighbours: the Vecchia residual of R/vif.R
  if (isTRUE(nbr$K > 0L)) fit <- .vif_setup(fit, nbr$K, from = start)
  # with a cluster the data go to the workers once (R/cluster.R; a fit
  # with neighbours sends the shares of .share_vif())
  fit <- .cluster_fit(fit, optimize, cluster)
  fit$from_trial <- NULL
  # an automatic M that misses its target at the fitted parameters is
  # chosen again there, and the fit refitted (R/auto_m.R)
  if (isTRUE(optimize) && !inherits(cluster, "sparsevgp_held")) {
    fit <- .auto_m_refit(fit, function(f) .cluster_fit(f, optimize, cluster))
  }
  fit
}

# ---- bound, gradient, prediction ----------------------------------------

# The collapsed bound (Titsias 2009, eq. 9, with per-point noise) at
# `params` and, with grad = TRUE, its gradient with respect to every
# parameter block on the unconstrained scale. Where it runs (one piece,
# chunks, a cluster) is decided by .collapsed_eval() (R/stream.R); the
# noise and targets are .targets.sgpr().
#' @export
.evaluate.sgpr <- function(fit, params, grad = TRUE, ...) {
  if (.has_neighbours(fit)) return(.vif_evaluate(fit, params, grad))
  b <- .collapsed_eval(fit, params, params$Z, grad)
  out <- list(value = b$bound,
              terms = c(fit = b$fit, logdet = b$logdet, trace = -0.5 * b$trace,
                        constant = -0.5 * .nobs(fit) * log(2 * pi)),
              jitter = b$jitter, jitter_scale = mean(diag(b$Kww)),
              posterior = list(L = b$L, LB = b$LB, v = b$v))
  if (grad) out$grad <- .collapsed_grad(params, b$gk, b$blocks, Z = b$gk$W)
  out
}

#' @export
.predict_latent.sgpr <- function(fit, xnew, full_cov) {
  if (.has_neighbours(fit)) return(.vif_predict(fit, xnew, full_cov))
  .collapsed_predict(fit, fit$params$Z, xnew, full_cov)
}

# ---- what summary() reports beyond the bound ------------------------------

# The upper bound on log p(y) of Titsias (2014) (Passerello 2022, eq. 3.4):
#   U = -N/2 log 2 pi - 1/2 log|Q + Lambda| - 1/2 y'(Q + t I + Lambda)^-1 y,
# t = tr(Kff - Qff). Its quadratic term is the `fit` term of the Gaussian
# bound with noise Lambda + t I, so the same C routine computes it.
.sgpr_upper_bound <- function(fit) {
  params <- fit$params
  # rows on the workers (R/shards.R) are evaluated there
  if (is.null(fit$shards)) fit$cluster <- NULL
  t <- .targets(fit, params)
  # unweighted trace: the Gaussian bound with unit noise reports it
  unit <- t
  unit$lambda <- 1
  tr <- max(.collapsed_eval(fit, params, params$Z, FALSE, targets = unit)$trace, 0)
  t$lambda <- t$lambda + tr
  # (workers of shards with prior weights add t to their own variances)
  t$add_lambda <- tr
  up <- .collapsed_eval(fit, params, params$Z, FALSE, targets = t)
  -0.5 * .nobs(fit) * log(2 * pi) + fit$bound_terms[["logdet"]] + up$fit
}

#' @export
.report.sgpr <- function(fit) {
  if (.has_neighbours(fit)) return(.vif_report(fit))
  U <- .sgpr_upper_bound(fit)
  fit$upper_bound <- U
  fit$summary_extra <- list(
    "Upper bound on log p(y) (Titsias 2014)" = format(U, digits = 8L),
    "KL(q || exact posterior) <= U - ELBO" = format(U - fit$bound, digits = 4L))
  if (!is.null(fit$auto_neighbours)) {
    fit$summary_extra[["Neighbours"]] <- .vif_auto_line(fit$auto_neighbours)
  }
  if (!is.null(fit$auto_kernel)) fit$summary_extra[["Kernel"]] <- .family_line(fit$auto_kernel)
  if (isTRUE(fit$selection$auto)) {
    fit$summary_extra[["Number of inducing inputs"]] <- .auto_m_line(fit)
  }
  fit
}

# The target of the automatic choice of M, in nats per observation: the
# trace term t = sum_n [Kff - Qff]_nn / lambda_n brackets the expected KL
# divergence from the exact posterior, t/2 <= E[KL] <= t (Burt et al. 2019).
.auto_kl <- 0.001

#' The optimal distribution of the inducing variables
#'
#' For a collapsed sparse model the optimal \eqn{q(u) = N(\mu, S)}{q(u) = N(mu, S)} of the
#' function values at the inducing inputs is available in closed form
#' (Titsias 2009; Passerello 2022, eq. 3.3):
#' \deqn{\mu = K_{uu}\Sigma^{-1}K_{uf}\Lambda^{-1}(y - m), \quad
#'       S = K_{uu}\Sigma^{-1}K_{uu}, \quad \Sigma = K_{uu} + K_{uf}\Lambda^{-1}K_{fu}.}{mu = Kuu Sigma^-1 Kuf Lambda^-1 (y - m),
#'   S = Kuu Sigma^-1 Kuu,
#'   Sigma = Kuu + Kuf Lambda^-1 Kfu.}
#' The constant mean \eqn{m} is added to \eqn{\mu}{mu}, so that \eqn{q(u)} equals
#' \code{predict(fit, Z, full_cov = TRUE)} up to the jitter.
#'
#' For a \code{\link{pgpr}} fit it is the optimal \eqn{q(u)} of the collapsed
#' Polya-Gamma bound at the fit's local parameters \eqn{c} (Passerello 2022, eq. 4.5),
#' the same expression with \eqn{\Lambda = \Theta^{-1}}{Lambda = Theta^-1},
#' \eqn{\theta_n = \tanh(c_n/2)/(2c_n)}{theta_n = tanh(c_n/2)/(2c_n)}, and the pseudo-targets
#' \eqn{y_n/(2\theta_n)}{y_n/(2 theta_n)} in place of \eqn{y} (labels \eqn{y_n = \pm 1}{y_n = +/- 1}):
#' \eqn{\mu = m + K_{uu}\Sigma^{-1}K_{uf}(y/2 - \Theta m)}{mu = m + Kuu Sigma^-1 Kuf(y/2 - Theta m)},
#' \eqn{\Sigma = K_{uu} + K_{uf}\Theta K_{fu}}{Sigma = Kuu + Kuf Theta Kfu} (Passerello 2022, eq. 4.5;
#' that it is the regression optimum on the pseudo-targets was derived for
#' this package and is checked numerically in its tests).
#'
#' @param fit an \code{\link{sgpr}} or \code{\link{pgpr}} fit.
#' @return A list with \code{Z} (the inducing inputs), \code{mean} and
#'   \code{cov}.
#' @examples
#' fit <- sgpr(y ~ x, data = snelson, inducing = 10)
#' qu <- posterior_inducing(fit)
#' cbind(Z = qu$Z[, 1], mean = qu$mean, sd = sqrt(diag(qu$cov)))
#'
#' # a classifier's latent function at its inducing inputs
#' d <- classification_data("banana")
#' set.seed(1)
#' pf <- pgpr(y ~ x1 + x2, data = d, inducing = "kmeans", M = 10,
#'            control = list(inner_max = 2))
#' str(posterior_inducing(pf))
#' @export
posterior_inducing <- function(fit) {
  if (!inherits(fit, c("sgpr", "pgpr"))) {
    stop("'fit' must be an sgpr or pgpr fit", call. = FALSE)
  }
  # mean = L LB^-T v + m; cov = L B^-1 L' (whitened forms of the expressions
  # above; for pgpr, v holds the pseudo-targets' projection)
  .collapsed_qu(fit)
}
