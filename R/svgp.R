# The uncollapsed SVGP (Hensman et al. 2013, 2015; Tiao 2020; the baseline
# of Passerello 2022, sections 5.1.1-5.1.2): q(u) = N(L b, L W W' L') with
# L = chol(Kuu) (whitened, the default)
# or q(u) = N(b, W W') (whiten = FALSE), fitted jointly with the kernel
# parameters by L-BFGS-B on the full batch, by Adam on minibatches
# (R/objective.R) or by natural gradients (R/natgrad.R). The ELBO and its
# gradient come from the one evaluator of svgp() and odvgp()
# (R/uncollapsed.R), with the basis of q(u) (R/variational.R) and the
# likelihood (R/likelihoods.R) as dispatch classes. This file holds
# svgp()'s documentation and arguments, what svgp() and odvgp() share in
# building a fit, and their methods. With a Bernoulli-logit likelihood it is
# Passerello's baseline classifier; with a Gaussian likelihood it must agree
# with SGPR at SGPR's optimal q(u).

#' Stochastic variational Gaussian process (SVGP), uncollapsed
#'
#' Fits a sparse variational Gaussian process with an explicit Gaussian
#' \eqn{q(u)} for the function values at the inducing inputs, by maximising
#' \deqn{\mathrm{ELBO} = \sum_n E_{q(f_n)}[\log p(y_n | f_n)] - KL[q(u) \| p(u)]}{ELBO = sum_n E_(q(f_n))[log p(y_n | f_n)] - KL[q(u) || p(u)]}
#' (Hensman et al. 2015; Tiao 2020, "Non-Gaussian likelihoods") over the
#' variational parameters,
#' the kernel parameters (and the noise and mean) and, optionally, the
#' inducing inputs, with L-BFGS-B on the analytic gradient (full batch).
#'
#' By default the variational distribution is whitened, as GPflow does:
#' \eqn{u = L v} with \eqn{L L^\top = K_{uu}}{L L' = Kuu} and \eqn{q(v) = N(b, W W^\top)}{q(v) = N(b, W W')},
#' \eqn{W} lower triangular with a positive diagonal (optimised on the log
#' scale), so that \eqn{KL = \frac12(\|W\|_F^2 + \|b\|^2 - M - 2\sum
#' \log W_{ii})}{KL = 1/2(||W||_F^2 + ||b||^2 - M - 2 sum log Wii)}. With \code{whiten = FALSE}, \eqn{q(u) = N(b, W W^\top)}{q(u) = N(b, W W')}
#' directly and \eqn{KL[N(b, W W^\top) \| N(0, K_{uu})] = \frac12(\|L^{-1}W\|_F^2
#' + \|L^{-1}b\|^2 - M) + \sum \log L_{ii} - \sum \log W_{ii}}{KL[N(b, W W') || N(0, Kuu)] = 1/2(||L^-1 W||_F^2 + ||L^-1 b||^2 - M) +
#'   sum log Lii - sum log Wii} (the
#' Gaussian KL divergence written with Cholesky factors; Tiao 2020,
#' "Whitened parameterization"); the predictive is the algorithm of Tiao
#' (2020), Appendix II. Both
#' start at the prior (\eqn{q(u) = p(u)}) unless \code{q_u} is given, and
#' both give the same ELBO and predictions for the same \eqn{q(u)}; the
#' whitened form is usually better conditioned for gradient-based
#' optimisation.
#'
#' Likelihoods: \code{"bernoulli"}, the logistic
#' \eqn{p(y | f) = \sigma(y f)}{p(y | f) = sigma(y f)} with \eqn{y \in \{-1, +1\}}{y in \{-1, +1\}}, whose expectations
#' are computed by Gauss-Hermite quadrature with \code{quadrature} points
#' (20 by default, GPflow's choice and that of the SVGP baseline in
#' Passerello's tables; at
#' a latent variance of 100 the 20-point rule is biased by about 0.035 nats
#' per point, so raise it for very uncertain latent functions);
#' \code{"probit"}, the Bernoulli likelihood with the probit link
#' \eqn{p(y | f) = \Phi(y f)}{p(y | f) = Phi(y f)} (GPflow's default classifier), with the same
#' quadrature and predictive probabilities
#' \eqn{\Phi(\mu / \sqrt{1 + \sigma^2})}{Phi(mu / sqrt(1 + sigma^2))}, exact for any \code{method};
#' \code{"gaussian"}, \eqn{N(y; f, \sigma^2)}{N(y; f, sigma^2)} with a learned
#' variance, whose expectations are exact; \code{"poisson"} for counts (log
#' link, exact expectations) and \code{"student_t"} for data with outliers
#' (see \code{\link{gp_likelihood}} for every family and its predictions).
#' With the Gaussian likelihood and
#' \eqn{q(u)} set to the optimal distribution of an \code{\link{sgpr}()} fit
#' with the same parameters, the ELBO equals the SGPR bound; otherwise it is
#' lower. \code{\link{natgrad_step}()} moves \eqn{q(u)} by a natural-gradient
#' step (of size 1, it lands on that optimum for the Gaussian likelihood).
#'
#' Classifiers fitted from scratch (two classes, or several with
#' \code{"robustmax"} or \code{"softmax"}; \code{optimize = TRUE} and no
#' \code{start}) take a schedule of their own, since from \eqn{q(u) = p(u)}
#' and a kernel of variance 1 their ELBO has poor optima (a flat latent
#' function, inputs switched off by ARD). The kernel parameters left
#' \code{NULL} start at the best point of a grid of lengthscales (one
#' multiple of \eqn{sd(x_d)\sqrt{D}}{sd(x_d) sqrt(D)} for every input) and
#' variances (one for robust-max, whose ELBO does not depend on it), scored by
#' the ELBO with \eqn{q(u)} at its conditional optimum on at most 1000 rows
#' (at each lengthscale the variances rise until the score falls).
#' With \code{M} left unset, \eqn{M} is the number of greedily selected
#' points that brings \eqn{\sum_n w_n [K_{ff} - Q_{ff}]_{nn}}{sum_n w_n [Kff - Qff]_nn} below 0.01 nats per
#' observation at that kernel, with \eqn{w_n} minus twice the derivative of
#' the expected log-likelihood in the latent variance (the Polya-Gamma
#' precision of \code{\link{pgpr}()}'s weighted trace for the logit link at
#' \eqn{f = 0}), at most 100 (fewer for many classes). \eqn{q(u)} starts at
#' its conditional optimum, reached by natural-gradient steps (see
#' \code{\link{natgrad_step}()}), each shortened until it raises the ELBO. With
#' one latent function, every L-BFGS-B evaluation then re-optimises
#' \eqn{q(u)} in a few such steps, so that L-BFGS-B moves the kernel and the
#' inducing inputs on \eqn{\max_q \mathrm{ELBO}}{max_q ELBO}, with the partial
#' gradient at the optimal \eqn{q(u)} (the envelope theorem); several classes
#' move \eqn{q(u)} with the other parameters. L-BFGS-B fits the kernel with the
#' inducing inputs held, then everything; when one lengthscale per input is
#' left to the data, both stages use one lengthscale for all inputs (in
#' units of their standard deviations), and one per input is then fitted
#' from there and kept only when its ELBO is higher by more than
#' \eqn{(D - 1)\log(N)/2}{(D - 1) log(N) / 2} (the penalty of the Bayesian
#' information criterion); that run is abandoned after 80 evaluations while
#' it has gained less than a sixth of the penalty
#' (\code{fit$optim$per_input_abandoned}). \code{fit$optim$stages} gives the ELBO after each
#' stage (\code{inducing_held}, \code{all}, \code{per_input}). From 4000
#' rows the schedule runs on a random subsample of half of them (at least
#' 2000, at most 10 000 and fewer for a large \eqn{M} with several classes;
#' \code{fit$optim$subsample}) and \eqn{q(u)} is then set at its conditional
#' optimum on all the data (the stages are then named \code{subsample_*},
#' then \code{all_data_q}). Minibatch fits start
#' from the same kernel and inducing inputs with \eqn{q(u)} at its optimum on
#' a subsample.
#'
#' Optimisation: with \code{batch_size = NULL} (the default) the full-batch
#' ELBO is maximised by L-BFGS-B. With \code{batch_size = B}, each of
#' \code{control$maxit} Adam iterations (Kingma and Ba 2015; \eqn{\beta_1 =
#' 0.9}{beta_1 = 0.9}, \eqn{\beta_2 = 0.999}{beta_2 = 0.999}, \eqn{\epsilon = 10^{-8}}{epsilon = 10^-8}) uses the unbiased
#' minibatch estimate \deqn{\frac{N}{B}\sum_{n \in \mathcal B} E_{q(f_n)}[\log
#' p(y_n | f_n)] - KL[q(u) \| p(u)]}{N/B sum_(n in B) E_(q(f_n))[log p(y_n | f_n)] - KL[q(u) || p(u)]} and its gradient on a batch of
#' \eqn{B} points drawn uniformly without replacement (Hensman, Fusi and
#' Lawrence 2013), at a cost of \eqn{O(B M^2 + M^3)}{O(B M^2 + M^3)} per iteration;
#' the batches come from R's random number generator, so
#' \code{set.seed()} makes fits reproducible. The step size is
#' \code{control$lr} (default 0.01); parameters are scaled as for
#' L-BFGS-B (inducing inputs in units of the inputs' standard deviations).
#' There is no convergence test: \code{fit$optim$trace} holds the minibatch
#' ELBO estimate of every iteration for judging convergence, and the
#' reported ELBO (\code{logLik()}) is the full-batch value at the end.
#'
#' @inheritParams sgpr
#' @param y the response: for \code{"bernoulli"} and \code{"probit"} labels as in
#'   \code{\link{pgpr}()} (a two-level factor, a logical or a 0/1 vector),
#'   for \code{"gaussian"} and \code{"student_t"} a numeric vector, for
#'   \code{"poisson"} counts (whole numbers >= 0), for \code{"robustmax"} and
#'   \code{"softmax"} a factor (or character vector). A factor with more than
#'   two classes selects the softmax likelihood unless \code{likelihood}
#'   is given.
#' @param kernel a kernel; parameters left \code{NULL} are chosen from the
#'   data (variance 1 for Bernoulli).
#' @param inducing the inducing inputs: a matrix, a number \eqn{M}, a
#'   method name as in \code{\link{sgpr}()} (\code{"greedy"}, \code{"hgv"}
#'   and \code{"gv"} are all plain greedy conditional variance here,
#'   \code{"kmeans"}, \code{"random"}), or the result of
#'   \code{\link{select_inducing}()}. By default (\code{NULL}) k-means
#'   centres for the classifiers and greedy conditional variance for the
#'   other likelihoods, \eqn{M = \min(N, 100)}{M = min(N, 100)}; a
#'   classifier fitted from scratch with \code{M} left unset chooses \eqn{M}
#'   (see Details). More inducing inputs than data points
#'   (\eqn{M > N}) are refused.
#' @param likelihood the likelihood (see \code{\link{gp_likelihood}}):
#'   \code{"bernoulli"} (logit link), \code{"gaussian"}, \code{"probit"}
#'   (Bernoulli with the probit link), \code{"poisson"} (counts, log link),
#'   \code{"student_t"} (heavy tails; \code{gp_likelihood("student_t", df,
#'   learn_df)} for other degrees of freedom), or for more than two classes
#'   \code{"robustmax"} (Hernandez-Lobato et al. 2011, by Gauss-Hermite
#'   quadrature) or \code{"softmax"} (by Monte Carlo with
#'   \code{control$mc_samples} draws, 100 by default, fixed per fit). By
#'   default \code{"softmax"} for a factor with more than two classes (its
#'   probabilities are calibrated; robust-max gives at most
#'   \eqn{1 - 10^{-3}}{1 - 1e-3} to a class and a test log-loss three times the
#'   softmax's on the benchmark of \code{inst/bench/bench_multiclass.R}), else
#'   \code{"bernoulli"}: a numeric response that is not coded 0/1 is then an
#'   error that says to name the likelihood. The
#'   multiclass likelihoods fit one latent function per class sharing the
#'   inducing inputs, with a non-whitened \eqn{q(u)} per class (the model of
#'   \code{\link{odvgp}(orthogonal = 0)}, with its k-means inducing inputs for
#'   a count \code{inducing}); \code{predict(type = "prob")} gives a matrix
#'   with a column per class and \code{type = "class"} a factor (see
#'   \code{\link{predict.svgp}}). \code{whiten}, \code{threshold}, \code{q_u},
#'   \code{offset} and \code{cluster} do not apply to them.
#' @param noise Gaussian likelihood: the starting noise variance (by default
#'   a tenth of the variance of \code{y}); Student-t: the starting squared
#'   scale.
#' @param mean the prior mean: a fixed number or \code{"constant"} to learn
#'   it. By default 0 for several classes and \code{"constant"} for the
#'   others (starting at the mean of \code{y}, its median for Student-t,
#'   the log of its mean for Poisson, and for two classes the link of the
#'   share of the second class, as \code{\link{pgpr}()} does: with
#'   unbalanced classes a mean held at 0 pulls every prediction towards one
#'   half). \code{mean = 0} holds it at 0, as in Passerello (2022).
#' @param optimize_inducing if \code{TRUE} (the default, as in GPflow), the
#'   inducing inputs are optimised with the other parameters; Passerello's
#'   "SVGP K-means" baseline holds them at the k-means centres
#'   (\code{FALSE}). With \code{TRUE}, full-batch fits run L-BFGS-B twice:
#'   first with the inducing inputs held at their start, then with
#'   everything free (for classifiers see Details). Joint
#'   optimisation from the prior \eqn{q(u)} can collapse the inducing inputs
#'   into clusters while the kernel variance is still small, a poor local
#'   optimum that the first stage avoids; \code{fit$optim$stages} gives the
#'   ELBO after each stage.
#' @param q_u the starting \eqn{q(u)}: \code{list(mean, cov)} in the
#'   convention of \code{\link{posterior_inducing}()} (the mean includes the
#'   constant prior mean), which is converted to the fit's parameterisation
#'   (see \code{whiten}).
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"} (Gaussian),
#'   \code{"scale"} and \code{"df"} (Student-t), \code{"mean"}, \code{"Z"},
#'   \code{"q_mu"}, \code{"q_sqrt_diag"}, \code{"q_sqrt_lower"}, or single
#'   entries.
#' @param control as for \code{\link{gpr}()}; \code{maxit} defaults to 1000
#'   (per L-BFGS-B stage; with \code{batch_size}, the number of Adam
#'   iterations), and \code{lr} is Adam's step size (default 0.01; used only
#'   by Adam and natural gradients). \code{optimizer} chooses
#'   \code{"lbfgsb"} (the default without \code{batch_size}), \code{"adam"}
#'   (the default with it; without it, Adam on the full batch) or
#'   \code{"natgrad"}: a natural-gradient step on \eqn{q(u)} and an Adam
#'   step on the other parameters at each of \code{maxit} iterations
#'   ("CoupledNat" in Salimbeni et al. 2018), with step size
#'   \code{natgrad_step} (default 0.005) after a linear warm-up from
#'   \eqn{10^{-5}} over \code{natgrad_warmup} iterations (default 100 for
#'   Bernoulli, 0 for Gaussian; see \code{\link{natgrad_step}()}).
#'   \code{snapshots}: iterations of Adam or natural-gradient runs at which
#'   the parameters and the CPU time are kept in \code{fit$optim$snapshots}.
#' @param start a previous \code{svgp} fit whose parameters (including
#'   \eqn{q(u)} when the inducing inputs keep their number and \code{whiten}
#'   is unchanged; otherwise \eqn{q(u)} starts at the prior) are the
#'   starting values.
#' @param whiten if \code{TRUE} (the default), \eqn{q(u)} is parameterised
#'   through \eqn{u = L v}; if \code{FALSE}, directly.
#' @param batch_size \code{NULL} for full-batch L-BFGS-B, or the number of
#'   points in each minibatch of Adam (values above \eqn{N} mean \eqn{N}).
#' @param cluster a cluster from \code{parallel::makeCluster()}: the data
#'   are split over its workers, which compute their shares of the expected
#'   log-likelihood and its gradient in every evaluation, full batch or
#'   minibatch (see \code{\link{scaling}}); by default \code{NULL}, one
#'   process. Not with \code{control$optimizer = "natgrad"}.
#' @param quadrature the number of Gauss-Hermite points for the expectations
#'   of the Bernoulli, robust-max and Student-t likelihoods (1 to 500).
#' @return An object of class \code{c("svgp", "sparsevgp")}, with
#'   \code{q(u)} in \code{params$q_mu}, \code{params$q_sqrt_diag} and
#'   \code{params$q_sqrt_lower} (one column per class with several classes)
#'   and the likelihood in \code{fit$likelihood} (its name) and
#'   \code{fit$lik}; \code{predict()} is described in
#'   \code{\link{predict.svgp}}.
#' @templateVar model svgp
#' @templateVar classifier yes
#' @template fit-value
#' @template practice
#' @references Hensman, J., Matthews, A. G. de G. and Ghahramani, Z. (2015).
#'   Scalable variational Gaussian process classification. AISTATS.
#'
#'   Tiao, L. C. (2020). A handbook for sparse variational Gaussian
#'   processes. Online handbook, tiao.io.
#'
#'   Kingma, D. P. and Ba, J. (2015). Adam: a method for stochastic
#'   optimization. ICLR.
#'
#'   Hensman, J., Fusi, N. and Lawrence, N. D. (2013). Gaussian processes
#'   for big data. UAI.
#'
#'   Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M. (2018).
#'   Orthogonally decoupled variational Gaussian processes. NeurIPS.
#' @seealso \code{\link{pgpr}}, \code{\link{sgpr}}, \code{\link{natgrad_step}},
#'   \code{\link{odvgp}}
#' @examples
#' # two classes: see ?predict.svgp. Gaussian likelihood: at SGPR's optimal
#' # q(u) the ELBO is the SGPR bound
#' s <- sgpr(y ~ x, data = snelson, inducing = 10)
#' g <- svgp(y ~ x, data = snelson, kernel = kernel_rbf(s$params$lengthscale,
#'           s$params$variance), inducing = s$params$Z, likelihood = "gaussian",
#'           noise = s$params$noise, mean = s$params$mean,
#'           q_u = posterior_inducing(s), optimize = FALSE)
#' c(svgp = logLik(g), sgpr = logLik(s))
#'
#' # minibatches of 50 points, Adam
#' set.seed(1)
#' a <- svgp(y ~ x, data = snelson, inducing = s$params$Z, likelihood = "gaussian",
#'           optimize_inducing = FALSE, batch_size = 50, control = list(maxit = 300, lr = 0.05))
#' c(adam = logLik(a), sgpr = logLik(s))
#'
#' # three classes: one latent function per class, softmax likelihood,
#' # M chosen from the data
#' set.seed(1)
#' m <- svgp(Species ~ ., data = iris)
#' table(predict(m, type = "class"), iris$Species)
#' c(ELBO = logLik(m), constant = 150 * log(1 / 3))
#' @export
svgp <- function(x, ...) UseMethod("svgp")

#' @rdname svgp
#' @export
svgp.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("svgp", match.call(), parent.frame(), x, data, ...)
}

#' @rdname svgp
#' @export
svgp.default <- function(x, y, kernel = kernel_rbf(), inducing = NULL, M = NULL,
                         threshold = NULL, likelihood = NULL, noise = NULL, mean = NULL,
                         optimize = TRUE, optimize_inducing = TRUE, q_u = NULL, fixed = NULL,
                         control = list(), start = NULL, whiten = TRUE, batch_size = NULL,
                         quadrature = 20L, offset = NULL, cluster = NULL, ...) {
  call <- .model_call(match.call(), "svgp")
  .dots_data(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  optimize <- .check_flag(optimize, "optimize")
  if (is.null(likelihood)) likelihood <- .lik_choose(y, numeric = NULL)
  r <- .uc_response(likelihood, y, nrow(x), quadrature, control, offset)
  multi <- r$lik$latent > 1L
  # several latent functions: the non-whitened SVGP (the orthogonal basis
  # with no gamma), with the settings of the orthogonally decoupled model
  if (multi) .svgp_multiclass_args(if (!missing(whiten)) whiten, threshold, q_u, offset, cluster)
  whiten <- !multi && .check_flag(whiten, "whiten")
  s <- .uc_settings(kernel, optimize_inducing, batch_size, r, start, "svgp", x)
  if (!is.null(start) && missing(inducing)) inducing <- start$params$Z
  fresh <- optimize && is.null(start)
  k <- .uc_kernel(s$kernel, x, r, fresh, M, noise, joint_noise = TRUE, mean = mean,
                  auto_M = is.null(threshold) && .uc_auto_spec(inducing, M))
  # classifiers: k-means centres by default (R/uncollapsed_training.R)
  default <- if (!is.null(r$labels) && is.null(threshold)) "kmeans" else "greedy"
  spec <- .inducing_spec(inducing, if (is.null(k$M)) M else k$M, threshold, x,
                         default = default)
  Z <- .select_by_spec(spec, x, k$kernel, warn_short = !is.null(M) || is.numeric(inducing))
  fit <- .uc_fit("svgp", call, x, r, k$kernel, Z, NULL,
                 basis = if (whiten) "whitened" else "orthogonal", mean = mean, noise = k$noise,
                 fixed = fixed, optimize_inducing = s$optimize_inducing, control = s$control,
                 batch_size = s$batch_size, start = start, q_u = q_u,
                 schedule = fresh && is.null(q_u), kernel_given = s$kernel,
                 label = sprintf("Uncollapsed %s SVGP (M = %d)",
                                 if (whiten) "whitened" else "non-whitened", nrow(Z)))
  if (!is.null(cluster) && fit$control$optimizer == "natgrad") {
    stop("natural-gradient steps (control$optimizer = \"natgrad\") need the whole N x M cross-covariance and do not run on a 'cluster': use \"lbfgsb\" or \"adam\"",
         call. = FALSE)
  }
  # with a cluster the data go to the workers once (R/cluster.R)
  .cluster_fit(fit, optimize, cluster, .shard_svgp_data(fit))
}

# Arguments that do not apply to several latent functions.
.svgp_multiclass_args <- function(whiten, threshold, q_u, offset, cluster) {
  if (isTRUE(whiten)) {
    stop("'whiten = TRUE' is not available with more than one latent function: the multiclass SVGP is non-whitened",
         call. = FALSE)
  }
  args <- list(threshold = threshold, q_u = q_u, offset = offset, cluster = cluster)
  for (a in names(args)) {
    if (!is.null(args[[a]])) {
      stop(sprintf("'%s' is not available with more than one latent function (several classes)",
                   a), call. = FALSE)
    }
  }
  invisible()
}

# ---- what svgp() and odvgp() share ------------------------------------------------

# The likelihood and the response as it reads it (R/likelihoods.R), the
# offset (for likelihoods on the scale of f), and the control without the
# softmax's Monte Carlo setting: list(lik, y, target, labels, offset, control).
.uc_response <- function(likelihood, y, N, quadrature, control, offset) {
  quadrature <- .svgp_check_quadrature(quadrature)
  mc_samples <- if (is.list(control)) control$mc_samples
  if (is.list(control)) control$mc_samples <- NULL
  lik <- .as_likelihood(likelihood, quadrature, mc_samples)
  r <- .lik_read(lik, y, N)
  if (!is.null(offset) && !r$lik$location) {
    stop("'offset' is for the Gaussian likelihood only (or another whose link is the identity)",
         call. = FALSE)
  }
  r$offset <- .check_weights_offset(NULL, offset, N)$offset
  if (!is.null(r$offset)) {
    r$target <- r$target - r$offset
    r$y <- r$target
  }
  r$control <- control
  r
}

# The checked settings of a model call on inputs x; a warm start's kernel.
.uc_settings <- function(kernel, optimize_inducing, batch_size, r, start, model, x) {
  kernel <- .check_kernel(kernel)
  if (!is.null(.check_start(start, model, x))) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
  }
  batch_size <- .svgp_check_batch(batch_size, length(r$y))
  list(kernel = kernel, optimize_inducing = .check_flag(optimize_inducing, "optimize_inducing"),
       batch_size = batch_size, control = .svgp_control(r$control, batch_size))
}

# The starting kernel (and noise) of an uncollapsed model fitted from
# scratch (`search`): for a likelihood on the scale of f, the unset
# parameters at the best point of the grid of R/start.R (svgp: the noise on
# the grid too, unless given; odvgp: at its start, `joint_noise = FALSE`);
# for a classifier, at the best point of the grid of
# R/uncollapsed_training.R, which with `auto_M` also gives the number of
# inducing inputs M; then every unset parameter from the data (variance 1
# for the other likelihoods). list(kernel, noise, M (NULL: not chosen)).
.uc_kernel <- function(kernel, x, r, search, M, noise, joint_noise, mean = NULL,
                       auto_M = FALSE) {
  location <- r$lik$location
  Mc <- NULL
  if (location && search) {
    Ms <- if (is.null(M)) 100L else M
    if (joint_noise) {
      st <- .start_regression(kernel, x, r$target, M = Ms, noise_free = is.null(noise))
      kernel <- st$kernel
      if (is.null(noise)) noise <- st$noise
    } else {
      if (is.null(noise)) noise <- .noise_start(r$target)
      kernel <- .start_regression(kernel, x, r$target, M = Ms, noise_free = FALSE,
                                  lambda = rep(.check_positive(noise, "noise", 1L),
                                               nrow(x)))$kernel
    }
  }
  if (search && !is.null(r$labels)) {
    st <- .uc_start_classifier(kernel, x, r, M, mean, auto_M = auto_M)
    kernel <- st$kernel
    Mc <- st$M
  }
  list(kernel = .kern_init(kernel, x, if (location) r$target), noise = noise, M = Mc)
}

# Whether a classifier's M is left to the data: no M and a selection method
# (not a number or given inducing inputs) for `inducing`.
.uc_auto_spec <- function(inducing, M) {
  is.null(M) && (is.null(inducing) || (is.character(inducing) && length(inducing) == 1L))
}

# The fit of an uncollapsed model: its parameters (kernel, likelihood,
# prior mean, inducing inputs Z and O, the basis's variational blocks at the
# prior, a warm start's where they fit, or q_u), with their roles.
.uc_fit <- function(model, call, x, r, kernel, Z, O, basis, mean, noise, fixed,
                    optimize_inducing, control, batch_size, start, q_u, label,
                    schedule = FALSE, kernel_given = NULL) {
  lik <- r$lik
  lb <- .lik_blocks(lik, r$target, noise)
  mn <- .lik_mean(lik, mean, r$target)
  bas <- .new_basis(basis)
  qb <- .basis_blocks(bas, nrow(Z), NROW(O), lik$latent)
  params <- c(.kern_params(kernel), lb$params, list(mean = mn$value, Z = Z),
              if (!is.null(O)) list(O = O), qb$params)
  transforms <- c(variance = "log", lengthscale = "log", lb$transforms, mean = "identity",
                  Z = "identity", if (!is.null(O)) c(O = "identity"), qb$transforms)
  params <- .uc_start_q(params, bas, start, q_u, kernel, control, mn$fixed, names(qb$params))
  sets <- c("Z", if (!is.null(O)) "O")
  extra <- list(target = r$target, labels = r$labels, lik = lik, likelihood = lik$family,
                basis = basis, whiten = basis == "whitened", quadrature = lik$quadrature,
                batch_size = batch_size, offset = r$offset)
  # the softmax's Monte Carlo draws, also where users find them (?odvgp)
  if (!is.null(lik$mc)) extra$mc <- lik$mc
  # a classifier fitted from scratch takes the schedule of
  # R/uncollapsed_training.R, with one lengthscale for all inputs first when
  # one per input is left to the data
  if (schedule && !is.null(r$labels)) {
    extra$classifier_start <- TRUE
    extra$shared_stage <- !is.null(kernel_given) && .pgpr_shares(kernel_given, x, fixed)
  }
  .new_fit(model, call, x, r$y, kernel, params, transforms, fixed,
           always = c(if (mn$fixed) "mean", if (!optimize_inducing) sets),
           control = control, roles = lb$roles,
           label = sprintf("%s, %s likelihood%s", label, .lik_label(lik),
                           if (optimize_inducing) "" else ", fixed inducing inputs"),
           extra = extra)
}

# The variational parameters at the start: a previous fit's when the warm
# start has the same basis and sizes, else the prior (or q_u, svgp only).
.uc_start_q <- function(params, basis, start, q_u, kernel, control, mean_fixed, qb) {
  copied <- FALSE
  if (!is.null(start)) {
    same <- identical(.basis_of(start)$name, basis$name) &&
      identical(dim(start$params$Z), dim(params$Z)) && identical(dim(start$params$O), dim(params$O)) &&
      all(vapply(qb, function(b) identical(dim(as.matrix(start$params[[b]])),
                                           dim(as.matrix(params[[b]]))), TRUE))
    params <- .warm_params(params, start$params,
                           skip = c("Z", "O", if (mean_fixed) "mean", if (!same) qb))
    copied <- same
  }
  if (!is.null(q_u)) {
    if (!is.list(q_u) || is.null(q_u$cov)) stop("'q_u' must be list(mean, cov)", call. = FALSE)
    return(.svgp_set_q(q_u, params, kernel, control, basis$name == "whitened"))
  }
  if (copied) return(params)
  .basis_prior(basis, params, .svgp_chol(params, kernel, control))
}

# svgp's control: the shared settings with maxit = 1000 (per L-BFGS-B stage,
# or Adam iterations) and Adam's step size `lr` (0.01 by default, the GPflow
# tutorials' choice for SVGP; used only by Adam and natural gradients);
# `optimizer` "lbfgsb" (full batch; the default without batch_size), "adam"
# (the default with batch_size) or "natgrad" (natural-gradient steps on q(u)
# with Adam on the rest, R/natgrad.R, with `natgrad_step` and
# `natgrad_warmup`); `snapshots`, iterations of Adam or natural-gradient
# runs at which the parameters are kept.
.svgp_control <- function(control, batch_size) {
  opt <- if (is.list(control)) control$optimizer
  if (is.null(opt)) opt <- if (is.null(batch_size)) "lbfgsb" else "adam"
  if (!is.character(opt) || length(opt) != 1L || !(opt %in% c("lbfgsb", "adam", "natgrad"))) {
    stop("'control$optimizer' must be \"lbfgsb\", \"adam\" or \"natgrad\"", call. = FALSE)
  }
  ctrl <- .check_control(control, defaults = list(maxit = 1000L, lr = 0.01, optimizer = opt,
                                                  natgrad_step = 0.005),
                         own = c("lr", "optimizer", "natgrad_step", "natgrad_warmup",
                                 "snapshots", "kl_columns"))
  lr <- ctrl$lr
  if (!is.numeric(lr) || length(lr) != 1L || !is.finite(lr) || lr <= 0) {
    stop("'control$lr' must be one positive number", call. = FALSE)
  }
  ns <- ctrl$natgrad_step
  if (!is.numeric(ns) || length(ns) != 1L || !is.finite(ns) || ns <= 0 || ns > 1) {
    stop("'control$natgrad_step' must be one number in (0, 1]", call. = FALSE)
  }
  nw <- ctrl$natgrad_warmup
  if (!is.null(nw) && (!is.numeric(nw) || length(nw) != 1L || !is.finite(nw) || nw < 0 ||
                       nw != round(nw))) {
    stop("'control$natgrad_warmup' must be NULL or a whole number >= 0", call. = FALSE)
  }
  sn <- ctrl$snapshots
  if (!is.null(sn) && (!is.numeric(sn) || any(!is.finite(sn)) || any(sn < 1) ||
                       any(sn != round(sn)))) {
    stop("'control$snapshots' must be whole numbers >= 1", call. = FALSE)
  }
  kc <- ctrl$kl_columns
  if (!is.null(kc) && (!is.numeric(kc) || length(kc) != 1L || !is.finite(kc) || kc < 1 ||
                       kc != round(kc))) {
    stop("'control$kl_columns' must be NULL or a whole number >= 1", call. = FALSE)
  }
  if (opt == "lbfgsb" && !is.null(batch_size)) {
    stop("L-BFGS-B needs the full batch: use control$optimizer = \"adam\" or \"natgrad\" with 'batch_size'",
         call. = FALSE)
  }
  if (opt == "lbfgsb" && !is.null(control$lr)) {
    warning("'control$lr' is Adam's step size and is ignored without 'batch_size'",
            call. = FALSE)
  }
  ctrl
}

# The optimiser of control$optimizer; L-BFGS-B runs in two stages when the
# inducing inputs are free (.fit_staged(): optimised jointly from the prior
# q(u), Z tends to collapse into clusters of near-duplicate points while the
# kernel variance is still small; on a 1-D logistic toy with N = 2000, M =
# 15 the ELBO ended at -399 and -375 in two of six starts against -355.45
# for the others); minibatch fits run Adam.
#' @export
.train.svgp <- function(fit) {
  opt <- fit$control$optimizer
  if (is.null(opt)) opt <- if (is.null(fit$batch_size)) "lbfgsb" else "adam"
  # classifiers fitted from scratch (R/uncollapsed_training.R)
  if (isTRUE(fit$classifier_start)) {
    if (opt == "lbfgsb") return(.uc_train_classifier(fit))
    fit <- .uc_start_q_batch(fit)
  }
  switch(opt,
         lbfgsb = .fit_staged(fit, intersect(c("Z", "O"), names(fit$params))),
         adam = .fit_adam(fit),
         natgrad = .fit_natgrad(fit))
}

# The Gauss-Hermite order: a whole number from 1 to 500 (used by the
# likelihoods whose expectations need quadrature).
.svgp_check_quadrature <- function(quadrature) {
  if (!is.numeric(quadrature) || length(quadrature) != 1L || !is.finite(quadrature) ||
      quadrature < 1 || quadrature > 500 || quadrature != round(quadrature)) {
    stop("'quadrature' must be a whole number from 1 to 500", call. = FALSE)
  }
  as.integer(quadrature)
}

# NULL (full batch, L-BFGS-B) or a whole number from 1 to N.
.svgp_check_batch <- function(batch_size, N) {
  if (is.null(batch_size)) return(NULL)
  if (!is.numeric(batch_size) || length(batch_size) != 1L || !is.finite(batch_size) ||
      batch_size < 1 || batch_size != round(batch_size)) {
    stop("'batch_size' must be NULL or a whole number >= 1", call. = FALSE)
  }
  as.integer(min(batch_size, N))
}

# summary() of a minibatch fit says so.
#' @export
.report.svgp <- function(fit) {
  if (!is.null(fit$batch_size)) {
    fit$summary_extra[["Minibatches"]] <- sprintf(
      "%d of %d points, Adam with learning rate %g; the ELBO is the full-batch value",
      fit$batch_size, .nobs(fit), fit$control$lr)
  }
  fit
}

# print()'s line on the likelihood's own parameters.
#' @export
.noise_label.svgp <- function(fit, digits) .lik_noise_label(.lik_of(fit), fit$params, digits)

# ---- predictions ------------------------------------------------------------------

#' Predictions from svgp and odvgp fits
#'
#' Predictions of \code{\link{svgp}()} and \code{\link{odvgp}()} fits at new
#' inputs, for every likelihood (see \code{\link{gp_likelihood}}).
#' \itemize{
#'   \item Gaussian: the types, intervals and standard errors of
#'     \code{\link{predict.sparsevgp}}.
#'   \item Bernoulli (logit or probit link): those of
#'     \code{\link{predict.pgpr}} (the latent function, class
#'     probabilities by \code{method}, labels); \code{type = "pg_variance"}
#'     too.
#'   \item Several classes (robust-max, softmax): \code{type = "link"} gives
#'     the marginals of the \eqn{K} latent functions, \code{list(mean, var)}
#'     as \eqn{n \times K}{n x K} matrices; \code{"prob"} the matrix of class
#'     probabilities; \code{"class"} the most probable class as a factor.
#'     For robust-max the probabilities are
#'     \eqn{(1 - \epsilon)P_k + \epsilon/(K - 1)(1 - P_k)} with
#'     \eqn{P_k = P(\arg\max_j f_j = k)}{P_k = P(argmax_j f_j = k)} by
#'     Gauss-Hermite quadrature (normalised to sum to one over \eqn{k}) and
#'     \eqn{\epsilon = 10^{-3}}; for the softmax the Monte Carlo average of
#'     \eqn{\exp(f_k) / \sum_j \exp(f_j)}{exp(f_k) / sum_j exp(f_j)} over the
#'     fit's draws \eqn{f = \mu + \sqrt{s}\,\epsilon}{f = mu + sqrt(s) eps}
#'     (see \code{\link{odvgp}()}), which sums to one over \eqn{k}.
#' }
#'
#' @param object an \code{svgp} or \code{odvgp} fit.
#' @param newdata new inputs, as for \code{\link{predict.sparsevgp}}; by
#'   default the training inputs.
#' @param type as for \code{\link{predict.sparsevgp}} (Gaussian) or
#'   \code{\link{predict.pgpr}} (two classes); for several classes
#'   \code{"link"} (the default), \code{"prob"} or \code{"class"}.
#' @param method two classes only: as for \code{\link{predict.pgpr}}.
#' @param interval,level,se.fit as for \code{\link{predict.sparsevgp}}
#'   (Gaussian) and \code{\link{predict.pgpr}} (two classes); not for
#'   several classes.
#' @param full_cov not for several classes: the full covariance of the
#'   latent function.
#' @param na.action what to do with rows of \code{newdata} with missing
#'   inputs: \code{na.pass} (the default) gives them \code{NA},
#'   \code{na.omit} drops them, \code{na.exclude} pads them with \code{NA}.
#' @param cluster a cluster from \code{parallel::makeCluster()} over whose
#'   workers the rows of \code{newdata} are split (see \code{\link{scaling}}).
#' @param ... not used: any argument here is an error.
#' @return See \code{type}; rows are named by the row names of
#'   \code{newdata}, columns of multiclass results by the classes.
#' @aliases predict.odvgp
#' @examples
#' # two classes: classes, probabilities with intervals
#' d <- classification_data("banana")[1:200, ]
#' set.seed(1)
#' fit <- svgp(y ~ x1 + x2, data = d, inducing = 15, optimize_inducing = FALSE)
#' fit
#' mean(predict(fit, type = "class") == d$y)
#' head(predict(fit, d[1:3, ], type = "prob", interval = "confidence"))
#'
#' # three classes: a matrix of probabilities
#' set.seed(1)
#' x <- matrix(runif(120, -2, 2), 60, 2)
#' y <- factor(c("a", "b", "c")[1 + (x[, 1] > 0) + (x[, 2] > 0.5)])
#' fit <- odvgp(x, y, inducing = 5, orthogonal = 8,
#'              control = list(optimizer = "natgrad", maxit = 50, natgrad_step = 0.1,
#'                             natgrad_warmup = 10))
#' round(predict(fit, x[1:3, ], type = "prob"), 3)
#' predict(fit, x[1:3, ], type = "class")
#' @export
predict.svgp <- function(object, newdata = NULL, type = NULL, method = NULL,
                         interval = c("none", "confidence", "prediction"), level = 0.95,
                         se.fit = FALSE, full_cov = FALSE, na.action = stats::na.pass,
                         cluster = NULL, ...) {
  .check_dots("predict", ...)
  a <- list(newdata = newdata, type = type, method = method, interval = match.arg(interval),
            level = level, se.fit = se.fit, full_cov = .check_flag(full_cov, "full_cov"),
            na.action = na.action, cluster = cluster)
  .svgp_predict(.lik_of(object), object, a)
}

# predict() by the kind of likelihood: Gaussian, two classes, several
# classes, and any other (R/likelihoods.R's moments and quantiles).
.svgp_predict <- function(lik, object, a) UseMethod(".svgp_predict")

#' @export
.svgp_predict.lik_gaussian <- function(lik, object, a) {
  if (!is.null(a$method)) {
    stop("'method' applies to the Bernoulli likelihood only (the Gaussian predictive is exact)",
         call. = FALSE)
  }
  type <- if (is.null(a$type)) "latent" else match.arg(a$type, c("latent", "response"))
  if (!is.null(a$newdata) && NROW(a$newdata) == 0L) {
    e <- setNames(numeric(0), character(0))
    if (a$full_cov) return(list(mean = e, cov = matrix(0, 0, 0, dimnames = list(NULL, NULL))))
    return(list(mean = e, var = e))
  }
  predict.sparsevgp(object, a$newdata, type = type, interval = a$interval, level = a$level,
                    se.fit = a$se.fit, full_cov = a$full_cov, na.action = a$na.action,
                    cluster = a$cluster)
}

#' @export
.svgp_predict.lik_binary <- function(lik, object, a) {
  type <- if (is.null(a$type)) "link" else match.arg(a$type, .classifier_types)
  method <- if (is.null(a$method)) "quadrature" else
    match.arg(a$method, c("quadrature", "probit", "plugin"))
  if (!is.null(a$newdata) && NROW(a$newdata) == 0L) {
    e <- setNames(numeric(0), character(0))
    if (type == "class") return(.labels_from_prob(e, object$labels))
    if (type %in% c("pg_variance", "prob", "response")) return(e)
    if (a$full_cov) return(list(mean = e, cov = matrix(0, 0, 0, dimnames = list(NULL, NULL))))
    return(list(mean = e, var = e))
  }
  .predict_classifier(object, a$newdata, type, method, a$interval, a$level, a$se.fit,
                      a$full_cov, a$na.action, cluster = a$cluster)
}

#' @export
.svgp_predict.lik_multiclass <- function(lik, object, a) {
  type <- if (is.null(a$type)) "link" else match.arg(a$type, c("link", "latent", "prob", "class"))
  if (!is.null(a$method)) stop("'method' applies to binary classifiers only", call. = FALSE)
  if (a$full_cov) stop("'full_cov = TRUE' is not available for multiclass fits", call. = FALSE)
  if (a$interval != "none" || isTRUE(a$se.fit)) {
    stop("'interval' and 'se.fit' are not available for multiclass fits: use type = \"prob\"",
         call. = FALSE)
  }
  pin <- .prediction_inputs(object, a$newdata, a$na.action)
  xnew <- pin$x
  lev <- object$labels$levels
  # rows with missing inputs give NA (na.pass) and are padded back for
  # na.exclude, as in predict.lm()
  fill <- function(v) {
    out <- matrix(NA_real_, nrow(xnew), ncol(v))
    out[pin$ok, ] <- v
    dimnames(out) <- list(rownames(xnew), lev)
    stats::napredict(pin$na, out)
  }
  lat <- .predict_latent_on(object, xnew[pin$ok, , drop = FALSE], FALSE, a$cluster)
  lat$var <- pmax(lat$var, 0)
  if (type %in% c("link", "latent")) return(list(mean = fill(lat$mean), var = fill(lat$var)))
  p <- fill(.lik_prob(lik, lat$mean, lat$var))
  if (type == "prob") return(p)
  cls <- factor(lev[max.col(replace(p, is.na(p), 0), ties.method = "first")], levels = lev)
  cls[!stats::complete.cases(p)] <- NA
  names(cls) <- rownames(p)
  cls
}

# Any other likelihood (counts, heavy tails): type = "latent" is f, with
# confidence intervals; type = "response" is a new y, its mean and variance
# (.lik_moments()), with confidence intervals for E[y | f] (the inverse link
# of the interval of f) and prediction intervals from the quantiles of the
# predictive distribution of y (.lik_quantile()).
#' @export
.svgp_predict.sparsevgp_likelihood <- function(lik, object, a) {
  if (!is.null(a$method)) {
    stop("'method' applies to the Bernoulli likelihood only", call. = FALSE)
  }
  type <- if (is.null(a$type)) "latent" else match.arg(a$type, c("latent", "link", "response"))
  level <- .check_level(a$level)
  se.fit <- .check_flag(a$se.fit, "se.fit")
  if (a$full_cov && (type == "response" || a$interval != "none" || se.fit)) {
    stop("'full_cov = TRUE' gives the covariance of the latent function: use type = \"latent\" without 'interval' or 'se.fit'",
         call. = FALSE)
  }
  if (type != "response" && a$interval == "prediction") {
    stop("a prediction interval is for a new observation y: use type = \"response\"",
         call. = FALSE)
  }
  inp <- .prediction_inputs(object, a$newdata, a$na.action)
  lat <- .predict_moments(object, inp, a$full_cov, cluster = a$cluster)
  if (a$full_cov) return(list(mean = .pad(inp, lat$mean), cov = .pad(inp, lat$cov, cov = TRUE)))
  mu <- lat$mean
  s <- lat$var
  m <- if (type == "response") .lik_moments(lik, mu, s, object$params) else list(mean = mu, var = s)
  names(m$mean) <- names(m$var) <- names(mu)
  if (a$interval == "none" && !se.fit) return(list(mean = .pad(inp, m$mean), var = .pad(inp, m$var)))
  fit <- m$mean
  if (a$interval != "none") {
    z <- stats::qnorm((1 + level) / 2)
    lu <- if (a$interval == "prediction") {
      .lik_quantiles(lik, mu, s, object$params, (1 + c(-1, 1) * level) / 2)
    } else {
      inv <- if (type == "response") function(f) .lik_link_inverse(lik, f) else identity
      list(inv(mu - z * sqrt(s)), inv(mu + z * sqrt(s)))
    }
    fit <- .interval_matrix(m$mean, lu[[1L]], lu[[2L]])
  }
  fit <- .pad(inp, fit)
  if (!se.fit) return(fit)
  list(fit = fit, se.fit = .pad(inp, sqrt(m$var)))
}

# Fitted values: class probabilities of a classifier, else the mean of y at
# the training inputs (E[y] under the predictive: the expected count of a
# Poisson fit).
#' @export
fitted.svgp <- function(object, method = NULL, cluster = NULL, ...) {
  .check_dots("fitted", ...)
  # a fit on shards: computed on the workers (cluster = its shards)
  if (!is.null(object$shards)) {
    return(.shards_fit_values(object, cluster, "fitted", list(method = method)))
  }
  if (!is.null(object$labels)) {
    return(predict(object, type = "prob", method = method, cluster = cluster))
  }
  if (!is.null(method)) stop("'method' is for classifiers", call. = FALSE)
  predict(object, type = "response", cluster = cluster)$mean
}

# Residuals of a regression likelihood against the predictive mean of y;
# Pearson residuals divide by its predictive standard deviation
# (.lik_moments(): for the Gaussian, that of the latent function and the
# noise together, as for the other models).
#' @export
residuals.svgp <- function(object, type = c("response", "pearson"), cluster = NULL, ...) {
  lik <- .lik_of(object)
  if (lik$latent > 1L) {
    stop("residuals() is not defined for multiclass fits: compare predict(fit, type = \"prob\") with the classes",
         call. = FALSE)
  }
  .check_dots("residuals", ...)
  if (!is.null(object$labels)) return(.residuals_classifier(object, type, cluster))
  type <- match.arg(type)
  if (!is.null(object$shards)) {
    return(.shards_fit_values(object, cluster, "residuals", list(type = type)))
  }
  .no_cluster_residuals(cluster)
  inp <- .prediction_inputs(object)
  p <- .predict_moments(object, inp)
  m <- .lik_moments(lik, p$mean, p$var, object$params)
  r <- object$y - (m$mean - if (is.null(object$offset)) 0 else object$offset)
  if (type == "pearson") r <- r / sqrt(m$var)
  names(r) <- rownames(object$x)
  stats::naresid(object$na.action, r)
}

#' @rdname plot.pgpr
#' @export
plot.svgp <- function(x, which = c("fit", "convergence", "residuals"),
                      what = c("prob", "pg_variance"), n = 200L,
                      method = c("quadrature", "probit", "plugin"), level = 0.95, inducing = TRUE,
                      xlab = NULL, ylab = NULL, main = NULL, ...) {
  if (.lik_of(x)$latent > 1L) {
    stop("plot() is not available for multiclass fits: use predict(type = \"prob\")",
         call. = FALSE)
  }
  if (is.null(x$labels)) {
    if (!missing(method)) stop("'method' is for classifiers: see ?plot.sparsevgp", call. = FALSE)
    return(plot.sparsevgp(x, which = which, what = if (missing(what)) "mean" else what, n = n,
                          level = level, inducing = inducing, xlab = xlab, ylab = ylab,
                          main = main, ...))
  }
  what <- match.arg(what)
  method <- match.arg(method)
  .plot_classifier(x, which[1L], what, n, method, level, xlab, ylab, main,
                   .check_flag(inducing, "inducing"), ...)
}
