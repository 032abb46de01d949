# The uncollapsed SVGP (Hensman et al. 2013, 2015; Tiao 2020; the baseline
# of Passerello 2022, sections 5.1.1-5.1.2): q(u) = N(L b, L W W' L') with
# L = chol(Kuu) (whitened, the default)
# or q(u) = N(b, W W') (whiten = FALSE), fitted jointly with the kernel
# parameters by L-BFGS-B on the full batch or by Adam on minibatches
# (R/optim_adam.R). The ELBO, its gradient in the variational parameters
# and its adjoints for the kernel matrices are computed by src/svgp.c.
# With a Bernoulli-logit likelihood it is Passerello's baseline classifier;
# with a Gaussian likelihood it must agree with SGPR at SGPR's optimal q(u).

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
#' variance, whose expectations are exact. With the Gaussian likelihood and
#' \eqn{q(u)} set to the optimal distribution of an \code{\link{sgpr}()} fit
#' with the same parameters, the ELBO equals the SGPR bound; otherwise it is
#' lower. \code{\link{natgrad_step}()} moves \eqn{q(u)} by a natural-gradient
#' step (of size 1, it lands on that optimum for the Gaussian likelihood).
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
#'   for \code{"gaussian"} a numeric vector, for \code{"robustmax"} and
#'   \code{"softmax"} a factor (or character vector). A factor with more than
#'   two classes selects the robust-max likelihood unless \code{likelihood}
#'   is given.
#' @param kernel a kernel; parameters left \code{NULL} are chosen from the
#'   data (variance 1 for Bernoulli).
#' @param inducing the inducing inputs: a matrix, a number \eqn{M}, a
#'   method name as in \code{\link{sgpr}()} (\code{"greedy"}, \code{"hgv"}
#'   and \code{"gv"} are all plain greedy conditional variance here,
#'   \code{"kmeans"}, \code{"random"}), or the result of
#'   \code{\link{select_inducing}()}. By default \eqn{M = \min(N, 100)}{M = min(N, 100)} by
#'   greedy conditional variance. More inducing inputs than data points
#'   (\eqn{M > N}) are refused.
#' @param likelihood \code{"bernoulli"} (logit link), \code{"gaussian"},
#'   \code{"probit"} (Bernoulli with the probit link), or for more than two
#'   classes \code{"robustmax"} (Hernandez-Lobato et al. 2011, by
#'   Gauss-Hermite quadrature) or \code{"softmax"} (by Monte Carlo with
#'   \code{control$mc_samples} draws, 100 by default, fixed per fit). The
#'   multiclass likelihoods fit one latent function per class sharing the
#'   inducing inputs, with a non-whitened \eqn{q(u)} per class: this is
#'   \code{\link{odvgp}(orthogonal = 0)}, and the fit has that class, so
#'   \code{predict(type = "prob")} gives a matrix with a column per class and
#'   \code{type = "class"} a factor (see \code{\link{predict.odvgp}}).
#'   \code{whiten}, \code{threshold}, \code{q_u}, \code{offset} and
#'   \code{cluster} do not apply to them.
#' @param noise Gaussian likelihood: the starting noise variance (by default
#'   a tenth of the variance of \code{y}).
#' @param mean the prior mean: a fixed number or \code{"constant"} to learn
#'   it. By default 0 for Bernoulli (as in Passerello 2022) and \code{"constant"} for
#'   Gaussian.
#' @param optimize_inducing if \code{TRUE} (the default, as in GPflow), the
#'   inducing inputs are optimised with the other parameters; Passerello's
#'   "SVGP K-means" baseline holds them at the k-means centres
#'   (\code{FALSE}). With \code{TRUE}, full-batch fits run L-BFGS-B twice:
#'   first with the inducing inputs held at their start, then with
#'   everything free. Joint
#'   optimisation from the prior \eqn{q(u)} can collapse the inducing inputs
#'   into clusters while the kernel variance is still small, a poor local
#'   optimum that the first stage avoids; \code{fit$optim$stages} gives the
#'   ELBO after each stage.
#' @param q_u the starting \eqn{q(u)}: \code{list(mean, cov)} in the
#'   convention of \code{\link{posterior_inducing}()} (the mean includes the
#'   constant prior mean), which is converted to the fit's parameterisation
#'   (see \code{whiten}).
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"}, \code{"mean"},
#'   \code{"Z"}, \code{"q_mu"}, \code{"q_sqrt_diag"}, \code{"q_sqrt_lower"}, or
#'   single entries.
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
#' @param quadrature the number of Gauss-Hermite points for the Bernoulli
#'   expectations (1 to 500).
#' @return An object of class \code{c("svgp", "sparsevgp")}, with
#'   \code{q(u)} in \code{params$q_mu}, \code{params$q_sqrt_diag} and
#'   \code{params$q_sqrt_lower}; \code{predict()} is described in
#'   \code{\link{predict.pgpr}} for the Bernoulli likelihoods and in
#'   \code{\link{predict.sparsevgp}} for the Gaussian one.
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
#' d <- classification_data("banana")
#' set.seed(1)
#' fit <- svgp(y ~ x1 + x2, data = d, inducing = 15, optimize_inducing = FALSE,
#'             control = list(maxit = 200))
#' fit
#' mean(predict(fit, type = "class") == d$y)
#'
#' # Gaussian likelihood: at SGPR's optimal q(u) the ELBO is the SGPR bound
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
#' # three classes: one latent function per class, robust-max likelihood
#' set.seed(1)
#' m <- svgp(Species ~ Petal.Length + Petal.Width, data = iris, inducing = 10,
#'           control = list(maxit = 100))
#' table(predict(m, type = "class"), iris$Species)
#' @export
svgp <- function(x, ...) UseMethod("svgp")

#' @rdname svgp
#' @export
svgp.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("svgp", match.call(), parent.frame(), x, data, ...)
}

#' @rdname svgp
#' @export
svgp.default <- function(x, y, kernel = kernel_rbf(), inducing = "greedy", M = NULL,
                         threshold = NULL,
                         likelihood = c("bernoulli", "gaussian", "probit", "robustmax", "softmax"),
                         noise = NULL, mean = NULL,
                         optimize = TRUE, optimize_inducing = TRUE, q_u = NULL, fixed = NULL,
                         control = list(), start = NULL, whiten = TRUE, batch_size = NULL,
                         quadrature = 20L, offset = NULL, cluster = NULL, ...) {
  call <- .model_call(match.call(), "svgp")
  .dots_data(...)
  if (missing(likelihood) && .svgp_many_classes(y)) likelihood <- "robustmax"
  likelihood <- match.arg(likelihood)
  if (likelihood %in% c("robustmax", "softmax")) {
    # one latent function per class: the orthogonally decoupled model with
    # no mean-only inputs is this SVGP (non-whitened), so it serves here
    if (!missing(whiten) && isTRUE(whiten)) {
      stop("'whiten = TRUE' is not available with more than one latent function: the multiclass SVGP is non-whitened",
           call. = FALSE)
    }
    for (a in c("threshold", "q_u", "offset", "cluster")) {
      if (!is.null(get(a))) {
        stop(sprintf("'%s' is not available with the %s likelihood", a, likelihood),
             call. = FALSE)
      }
    }
    fit <- odvgp.default(x, y, kernel = kernel, inducing = inducing, M = M, orthogonal = 0L,
                         likelihood = likelihood, mean = mean, optimize = optimize,
                         optimize_inducing = optimize_inducing, fixed = fixed,
                         control = control, start = start, batch_size = batch_size,
                         quadrature = quadrature, ...)
    fit$call <- call
    fit$model <- sub("^Orthogonally decoupled SVGP \\(\\|beta\\| = ([0-9]+), \\|gamma\\| = 0\\)",
                     "Uncollapsed non-whitened SVGP (M = \\1)", fit$model)
    return(fit)
  }
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  N <- nrow(x)
  bern <- likelihood != "gaussian"
  if (bern) {
    lab <- .as_labels(y, N)
    target <- lab$ypm
  } else {
    target <- .as_response(y, N)
  }
  if (!is.null(offset) && bern) {
    stop("'offset' is for the Gaussian likelihood only", call. = FALSE)
  }
  wo <- .check_weights_offset(NULL, offset, N)
  if (!is.null(wo$offset)) target <- target - wo$offset
  kernel <- .check_kernel(kernel)
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  whiten <- .check_flag(whiten, "whiten")
  quadrature <- .svgp_check_quadrature(quadrature, bern)
  batch_size <- .svgp_check_batch(batch_size, N)
  control <- .svgp_control(control, batch_size)
  if (!is.null(.check_start(start, "svgp", x))) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (missing(inducing)) inducing <- start$params$Z
  }
  if (!bern && .check_flag(optimize, "optimize") && is.null(start)) {
    st <- .start_regression(kernel, x, target, M = if (is.null(M)) 100L else M,
                            noise_free = is.null(noise))
    kernel <- st$kernel
    if (is.null(noise)) noise <- st$noise
  }
  kernel <- .kern_init(kernel, x, if (bern) NULL else target)
  spec <- .inducing_spec(inducing, M, threshold, x)
  Z <- .select_by_spec(spec, x, kernel, warn_short = !is.null(M) || is.numeric(inducing))
  M <- nrow(Z)
  if (is.null(mean)) mean <- if (bern) 0 else "constant"
  mn <- .mean_start(mean, if (bern) .class_mean_start(lab$y01) else mean(target))
  params <- .kern_params(kernel)
  transforms <- c(variance = "log", lengthscale = "log")
  if (!bern) {
    if (is.null(noise)) noise <- .noise_start(target)
    params$noise <- .check_positive(noise, "noise", 1L)
    transforms <- c(transforms, noise = "log")
  } else if (!is.null(noise)) {
    stop("'noise' applies to the Gaussian likelihood only", call. = FALSE)
  }
  params <- c(params, list(mean = mn$value, Z = Z, q_mu = numeric(M), q_sqrt_diag = rep(1, M),
                           q_sqrt_lower = numeric(M * (M - 1L) / 2)))
  transforms <- c(transforms, mean = "identity", Z = "identity", q_mu = "identity",
                  q_sqrt_diag = "log", q_sqrt_lower = "identity")
  if (!is.null(start)) {
    # q(u)'s parameters mean different things in the two parameterisations
    same_q <- identical(!isFALSE(start$whiten), whiten)
    params <- .warm_params(params, start$params,
                           skip = c("Z", if (mn$fixed) "mean",
                                    if (!same_q) c("q_mu", "q_sqrt_diag", "q_sqrt_lower")))
  }
  copied <- !is.null(start) && identical(!isFALSE(start$whiten), whiten) &&
    length(start$params$q_mu) == M
  if (!is.null(q_u) && (!is.list(q_u) || is.null(q_u$cov))) {
    stop("'q_u' must be list(mean, cov)", call. = FALSE)
  }
  if (!whiten && is.null(q_u) && !copied) {
    # the prior q(u) = p(u): W = chol(Kuu), as the whitened start W = I
    params <- .svgp_set_q(list(mean = rep(params$mean, M), cov = NULL), params, kernel,
                          control, whiten)
  }
  if (!is.null(q_u)) params <- .svgp_set_q(q_u, params, kernel, control, whiten)
  fit <- .new_fit("svgp", call, x, if (bern) lab$y01 else target, kernel, params, transforms,
                  fixed, always = c(if (mn$fixed) "mean", if (!optimize_inducing) "Z"),
                  control = control,
                  label = sprintf("Uncollapsed %s SVGP, %s likelihood%s",
                                  if (whiten) "whitened" else "non-whitened",
                                  if (bern) sprintf("Bernoulli-%s (%d-point Gauss-Hermite)",
                                                    if (likelihood == "probit") "probit" else "logit",
                                                    quadrature)
                                  else "Gaussian",
                                  if (optimize_inducing) "" else ", fixed inducing inputs"),
                  extra = list(target = target, labels = if (bern) lab$coding else NULL,
                               likelihood = likelihood, whiten = whiten,
                               quadrature = quadrature, batch_size = batch_size,
                               offset = wo$offset))
  if (!is.null(cluster) && control$optimizer == "natgrad") {
    stop("natural-gradient steps (control$optimizer = \"natgrad\") need the whole N x M cross-covariance and do not run on a 'cluster': use \"lbfgsb\" or \"adam\"",
         call. = FALSE)
  }
  # with a cluster the data go to the workers once (R/cluster.R)
  .cluster_fit(fit, optimize, cluster, .shard_svgp_data(fit))
}

# Whether y is a factor (or character vector) with more than two classes:
# then the default likelihood is robust-max.
.svgp_many_classes <- function(y) {
  (is.factor(y) || is.character(y)) && length(unique(y[!is.na(y)])) > 2L
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
# inducing inputs (`hold`) are free (see below).
.svgp_train <- function(fit, hold) {
  opt <- fit$control$optimizer
  if (is.null(opt)) opt <- if (is.null(fit$batch_size)) "lbfgsb" else "adam"
  switch(opt,
         lbfgsb = .fit_staged(fit, hold),
         adam = .fit_adam(fit),
         natgrad = .fit_natgrad(fit))
}

# Full-batch fits run L-BFGS-B in two stages when the inducing inputs are
# free (.fit_staged(): optimised jointly from the prior q(u), Z tends to
# collapse into clusters of near-duplicate points while the kernel variance
# is still small; on a 1-D logistic toy with N = 2000, M = 15 the ELBO ended
# at -399 and -375 in two of six starts against -355.45 for the others);
# minibatch fits run Adam.
#' @export
.train.svgp <- function(fit) .svgp_train(fit, "Z")

# The Gauss-Hermite order: a whole number from 1 to 500 (used only by the
# Bernoulli likelihood; the Gaussian expectations are exact).
.svgp_check_quadrature <- function(quadrature, bern) {
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

# The whitened q(v) = N(b, W W') (or q(u) when not whitened) with
# W = tril(diag = exp(log diag), lower).
.svgp_qsqrt <- function(params) {
  M <- length(params$q_mu)
  W <- diag(params$q_sqrt_diag, M)
  W[lower.tri(W)] <- params$q_sqrt_lower
  W
}

# L = chol(Kuu + jitter I) at `params`, with the jitter of the bound.
.svgp_chol <- function(params, kernel, control) {
  Kuu <- .ffi_kern_matrix(.kernel_at(kernel, params), params$Z)
  .ffi_chol(Kuu, control$jitter, control$jitter_cap)$L
}

# q(u) = N(mean, cov) (mean including the constant prior mean; cov = NULL
# means Kuu, the prior) to the variational parameters: whitened
# b = L^-1 (mean - m), W = chol(L^-1 cov L^-T); non-whitened b = mean - m,
# W = chol(cov). L = chol(Kuu) with the same jitter as the bound.
.svgp_set_q <- function(q_u, params, kernel, control, whiten) {
  M <- length(params$q_mu)
  if (!is.list(q_u) || is.null(q_u$mean) || length(q_u$mean) != M ||
      any(!is.finite(q_u$mean)) ||
      (!is.null(q_u$cov) && (!is.matrix(q_u$cov) || any(dim(q_u$cov) != M) ||
                               any(!is.finite(q_u$cov))))) {
    stop(sprintf("'q_u' must be list(mean, cov) with a mean of length %d and a %d x %d covariance",
                 M, M, M), call. = FALSE)
  }
  L <- .svgp_chol(params, kernel, control)
  b <- q_u$mean - params$mean
  cov <- if (is.null(q_u$cov)) tcrossprod(L) else q_u$cov
  if (whiten) {
    b <- forwardsolve(L, b)
    cov <- forwardsolve(L, t(forwardsolve(L, cov)))
  }
  cov <- (cov + t(cov)) / 2
  W <- tryCatch(t(chol(cov)), error = function(e) {
    stop("'q_u$cov' must be positive definite", call. = FALSE)
  })
  params$q_mu <- drop(b)
  params$q_sqrt_diag <- diag(W)
  params$q_sqrt_lower <- W[lower.tri(W)]
  params
}

# One call of src/svgp.c at `params`, on the rows `batch` of the data
# (NULL: all), with the data term scaled by N / |batch| (Hensman et al.
# 2013) or by `scale` (a worker's rows of a minibatch, R/cluster.R).
.svgp_call <- function(fit, params, grad, batch = NULL, scale = NULL) {
  x <- fit$x
  target <- fit$target
  if (is.null(scale)) scale <- if (is.null(batch)) 1 else nrow(x) / length(batch)
  if (!is.null(batch)) {
    x <- x[batch, , drop = FALSE]
    target <- target[batch]
  }
  k <- .kernel_at(fit$kernel, params)
  Kuu <- .ffi_kern_matrix(k, params$Z)
  Kuf <- .ffi_kern_matrix(k, params$Z, x)
  kdiag <- .ffi_kern_diag(k, x)
  gh <- .gauss_hermite(if (is.null(fit$quadrature)) 20L else fit$quadrature)
  bern <- fit$likelihood != "gaussian"
  r <- .ffi_svgp_elbo(Kuu, Kuf, kdiag, params$q_mu, .svgp_qsqrt(params), target,
                      fit$likelihood, if (bern) 1 else params$noise, params$mean, gh,
                      fit$control$jitter, fit$control$jitter_cap, !isFALSE(fit$whiten),
                      scale, grad)
  c(r, list(kernel = k, x = x, Kuu = Kuu, Kuf = Kuf))
}

# The ELBO at `params` (a minibatch estimate when `batch` is given) and its
# gradient on the unconstrained scale: the variational blocks from
# src/svgp.c directly, the kernel parameters and Z by the one contraction
# of the adjoints Guu, Guf, gdiag (R/kernels.R).
#' @export
.evaluate.svgp <- function(fit, params, grad = TRUE, batch = NULL, ...) {
  # on a cluster the workers hold the rows (R/cluster.R)
  on <- !is.null(fit$cluster)
  r <- if (on) .svgp_cluster_call(fit, params, grad, batch) else
    .svgp_call(fit, params, grad, batch)
  W <- .svgp_qsqrt(params)
  bern <- fit$likelihood != "gaussian"
  # terms sum to the bound: the expected log-likelihood and minus the KL
  out <- list(value = r$elbo, terms = c(ell = r$ell, neg_kl = -r$kl), jitter = r$jitter,
              jitter_scale = mean(diag(r$Kuu)),
              posterior = list(L = r$L, q_mu = params$q_mu, q_sqrt = W,
                               whiten = !isFALSE(fit$whiten)))
  if (!grad) return(out)
  gk <- if (on) {
    .stream_add(.stream_contract_uu(r$kernel, fit$x, params$Z, r$Guu, r$jitter,
                                    .any_free(fit, "Z")), r$gk_data)
  } else {
    .contract(r$kernel, r$x, params$Z, Gww = r$Guu, Gwf = r$Guf, gdiag = r$gdiag,
              Kwf = r$Kuf, jitter = r$jitter, want_W = .any_free(fit, "Z"))
  }
  g <- list(variance = gk$variance, lengthscale = gk$lengthscale,
            noise = if (bern) NULL else r$gnoise * params$noise,
            mean = r$gmean, Z = gk$W,
            q_mu = r$gq_mu,
            q_sqrt_diag = diag(r$gq_sqrt) * params$q_sqrt_diag,
            q_sqrt_lower = r$gq_sqrt[lower.tri(r$gq_sqrt)])
  out$grad <- g[names(params)]
  out
}

# q(f*) (Tiao 2020, Appendix II): A = L^-1 K_u*; whitened mean m + A' b,
# variance k** - |A|^2 + |W' A|^2; non-whitened the same with
# Psi = L^-T A in place of A in the mean and in W' Psi. Blocks of 1000 rows.
#' @export
.predict_latent.svgp <- function(fit, xnew, full_cov) {
  k <- .kernel_at(fit$kernel, fit$params)
  post <- fit$posterior
  Z <- fit$params$Z
  m <- fit$params$mean
  proj <- function(Ku) {
    A <- forwardsolve(post$L, Ku)
    P <- if (isFALSE(post$whiten)) backsolve(t(post$L), A) else A
    list(A = A, P = P, V = crossprod(post$q_sqrt, P))
  }
  if (full_cov) {
    p <- proj(.ffi_kern_matrix(k, Z, xnew))
    return(list(mean = drop(crossprod(p$P, post$q_mu)) + m,
                cov = .ffi_kern_matrix(k, xnew) - crossprod(p$A) + crossprod(p$V)))
  }
  mean <- var <- numeric(nrow(xnew))
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    p <- proj(.ffi_kern_matrix(k, Z, xb))
    mean[b] <- drop(crossprod(p$P, post$q_mu)) + m
    var[b] <- .ffi_kern_diag(k, xb) - colSums(p$A^2) + colSums(p$V^2)
  }
  list(mean = mean, var = var)
}

#' @rdname predict.pgpr
#' @export
predict.svgp <- function(object, newdata = NULL, type = NULL, method = NULL,
                         interval = c("none", "confidence", "prediction"), level = 0.95,
                         se.fit = FALSE, full_cov = FALSE, na.action = stats::na.pass,
                         cluster = NULL, ...) {
  .check_dots("predict", ...)
  gauss <- object$likelihood == "gaussian"
  if (gauss && !is.null(method)) {
    stop("'method' applies to the Bernoulli likelihood only (the Gaussian predictive is exact)",
         call. = FALSE)
  }
  types <- if (gauss) c("latent", "response") else .classifier_types
  type <- if (is.null(type)) types[1L] else match.arg(type, unique(types))
  interval <- match.arg(interval)
  if (!gauss) {
    method <- if (is.null(method)) "quadrature" else
      match.arg(method, c("quadrature", "probit", "plugin"))
  }
  if (!is.null(newdata) && NROW(newdata) == 0L) {
    return(.svgp_predict_empty(object, type, .check_flag(full_cov, "full_cov")))
  }
  if (gauss) {
    return(predict.sparsevgp(object, newdata, type = type, interval = interval, level = level,
                             se.fit = se.fit, full_cov = full_cov, na.action = na.action,
                             cluster = cluster))
  }
  .predict_classifier(object, newdata, type, method, interval, level, se.fit, full_cov, na.action,
                      cluster = cluster)
}

# predict() on zero rows of new data: empty results of the usual shapes.
.svgp_predict_empty <- function(object, type, full_cov) {
  e <- setNames(numeric(0), character(0))
  if (type == "class") return(.labels_from_prob(e, object$labels))
  if (type %in% c("pg_variance", "prob", "response") && object$likelihood != "gaussian") return(e)
  if (full_cov) {
    if (!type %in% c("link", "latent", "response") ||
        (object$likelihood != "gaussian" && type == "response")) {
      stop("'full_cov = TRUE' is only available for type = \"link\"", call. = FALSE)
    }
    return(list(mean = e, cov = matrix(0, 0, 0, dimnames = list(NULL, NULL))))
  }
  list(mean = e, var = e)
}

#' @export
fitted.svgp <- function(object, method = "quadrature", cluster = NULL, ...) {
  if (object$likelihood == "gaussian") return(NextMethod())
  .check_dots("fitted", ...)
  .fitted_classifier(object, method, cluster)
}

#' @export
coef.svgp <- function(object, ...) {
  co <- NextMethod()
  co[!grepl("^q_", names(co))]
}

#' @export
summary.svgp <- function(object, ...) {
  s <- NextMethod()
  s$parameters <- s$parameters[!grepl("^q_", rownames(s$parameters)), , drop = FALSE]
  if (!is.null(object$batch_size)) {
    s$extra <- c(s$extra, list(Minibatches = sprintf(
      "%d of %d points, Adam with learning rate %g; the ELBO is the full-batch value",
      object$batch_size, length(object$y), object$control$lr)))
  }
  s
}

#' @rdname plot.pgpr
#' @export
plot.svgp <- function(x, which = c("fit", "convergence", "residuals"),
                      what = c("prob", "pg_variance"), n = 200L,
                      method = c("quadrature", "probit", "plugin"), level = 0.95, inducing = TRUE,
                      xlab = NULL, ylab = NULL, main = NULL, ...) {
  if (x$likelihood == "gaussian") {
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
