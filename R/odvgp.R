# The uncollapsed orthogonally decoupled variational GP (Salimbeni, Cheng,
# Boots and Deisenroth 2018, eq. 12): the mean of q(f) lives in the span of
# two sets of inducing inputs, beta (Z here, shared with the covariance, as
# in svgp) and gamma (O here, mean only, projected onto the orthogonal
# complement of span(beta)); the covariance is that of svgp on beta. With
# no gamma it is the non-whitened svgp. The ELBO and its gradient are
# computed here with BLAS matrix products (memory O(b (|beta| + |gamma|) +
# (|beta| + |gamma|)^2) for a batch of b rows, nothing b x b); the expected
# log-likelihood and its derivatives come from the svgp likelihoods in
# src/svgp.c; the kernel parameters and the inducing inputs get their
# gradients from the one contraction of R/kernels.R.
#
# Parameters: q_mu = m_beta (the mean of f at beta, minus the constant prior
# mean), q_sqrt = L_S (S = L_S L_S'), a_gamma; the paper's a_beta is
# K_beta^-1 m_beta. Natural-gradient steps on (m_beta, S) are in
# R/natgrad.R.

#' Orthogonally decoupled variational Gaussian process (ODVGP)
#'
#' Fits the orthogonally decoupled sparse variational Gaussian process of
#' Salimbeni, Cheng, Boots and Deisenroth (2018), an object of class
#' \code{c("odvgp", "svgp", "sparsevgp")}: a variational posterior
#' whose mean uses two sets of inducing inputs, \eqn{\beta} (\code{Z}, shared
#' with the covariance as in \code{\link{svgp}()}) and \eqn{\gamma}
#' (\code{O}, for the mean only), so that many cheap mean-only inducing
#' inputs can be added at a cost linear in their number.
#'
#' The variational posterior process is (Salimbeni et al. 2018, eq. 12 and
#' Appendix A.2; the printed forms in their section 3.2 miss a
#' \eqn{K_\beta^{-1}} in the mean and have the wrong sign in the covariance)
#' \deqn{m(x) = (k_{x\gamma} - k_{x\beta}K_\beta^{-1}K_{\beta\gamma})a_\gamma +
#'   k_{x\beta}K_\beta^{-1}m_\beta,}
#' \deqn{s(x, x') = k(x, x') - k_{x\beta}K_\beta^{-1}k_{\beta x'} +
#'   k_{x\beta}K_\beta^{-1} S K_\beta^{-1}k_{\beta x'},}
#' plus the constant prior mean. The \eqn{\gamma}-part of the mean is
#' orthogonal to the span of the \eqn{\beta} basis: \eqn{m(\beta_i) =
#' m_{\beta,i}} whatever \eqn{a_\gamma}. The KL divergence is exact
#' (Salimbeni et al. 2018, Prop. A.1):
#' \deqn{KL = \frac12\big(a_\gamma^\top(K_\gamma - K_{\gamma\beta}K_\beta^{-1}
#'   K_{\beta\gamma})a_\gamma + m_\beta^\top K_\beta^{-1}m_\beta +
#'   \mathrm{tr}(K_\beta^{-1}S) - \log|S| + \log|K_\beta| - |\beta|\big).}{KL = 1/2 (a_gamma' (K_gamma - K_gamma,beta K_beta^-1 K_beta,gamma) a_gamma
#'   + m_beta' K_beta^-1 m_beta + tr(K_beta^-1 S) - log|S| + log|K_beta| - |beta|).}
#' With no \eqn{\gamma} (\code{orthogonal = 0}) the model is the
#' non-whitened \code{svgp()} with \eqn{q(u) = N(m_\beta, S)}.
#'
#' The variational parameters are \code{q_mu} (\eqn{m_\beta}, the mean of
#' \eqn{f(\beta)} minus the prior mean; the paper's \eqn{a_\beta =
#' K_\beta^{-1}m_\beta}), the lower-triangular square root of \eqn{S}
#' (\code{q_sqrt_diag} on the log scale, \code{q_sqrt_lower}) and
#' \code{a_gamma}. They start at the prior (\eqn{a = 0}, \eqn{S = K_\beta};
#' Salimbeni et al. 2018, Appendix F).
#'
#' Likelihoods and minibatches are those of \code{\link{svgp}()}: Gaussian
#' (closed form), Bernoulli with the logit or probit link (Gauss-Hermite
#' quadrature), and the unbiased minibatch estimate that scales the
#' expected log-likelihood by \eqn{N/B}.
#'
#' Multiclass classification (a factor \code{y} with \eqn{K > 2} classes)
#' uses \eqn{K} independent latent functions that share the kernel and both
#' inducing sets, each with its own \eqn{a_\gamma}, \eqn{m_\beta} and
#' \eqn{L_S} (matrices with one column per class), and the robust-max
#' likelihood of Hernandez-Lobato, Hernandez-Lobato and Dupont (2011), as in
#' the experiments of Salimbeni et al. (2018): \eqn{p(y | f) = 1 - \epsilon}
#' when \eqn{y = \arg\max_k f_k}{y = argmax_k f_k} and \eqn{\epsilon/(K - 1)} otherwise, with
#' \eqn{\epsilon = 10^{-3}}. Its expectation \eqn{E[\log p(y | f)]}{E[log p(y | f)]} needs
#' \eqn{P(\arg\max_k f_k = y)}{P(argmax_k f_k = y)}, a one-dimensional integral computed by
#' Gauss-Hermite quadrature with \code{quadrature} points. The prior mean is
#' 0. With \code{orthogonal = 0} this is the multiclass (non-whitened)
#' SVGP.
#'
#' \code{likelihood = "softmax"} uses instead
#' \eqn{p(y = k | f) = \exp(f_k) / \sum_j \exp(f_j)}{p(y = k | f) = exp(f_k) / sum_j exp(f_j)}. Its expectation
#' \eqn{E[\log p(y | f)]}{E[log p(y | f)]} under the marginals
#' \eqn{f_j \sim N(\mu_j, s_j)}{f_j ~ N(mu_j, s_j)} has no closed form: it is
#' estimated by Monte Carlo with \code{control$mc_samples} (100 by default)
#' standard-normal vectors \eqn{\epsilon}{eps} drawn once per fit (from a seed
#' taken from the session's random stream, so reproducible under
#' \code{set.seed()}, and kept in \code{fit$mc}) and shared by all
#' observations, as \eqn{f = \mu + \sqrt{s}\,\epsilon}{f = mu + sqrt(s) eps}
#' (the reparametrisation of Kingma and Welling 2014). The estimate is then a
#' smooth deterministic function of the parameters, with exact gradients, so
#' that L-BFGS-B, Adam and natural gradients apply unchanged. With two classes
#' it estimates the Bernoulli-logit expectation
#' \eqn{E[\log \sigma(f)]}{E[log sigma(f)]} with
#' \eqn{f \sim N(\mu_y - \mu_o, s_y + s_o)}{f ~ N(mu_y - mu_o, s_y + s_o)} for an
#' observation of class \eqn{y}, \eqn{o} being the other class.
#'
#' Optimisers (\code{control$optimizer}): \code{"lbfgsb"} (the default
#' without \code{batch_size}) runs L-BFGS-B on the full batch, first with
#' the inducing inputs held and then with everything free; \code{"adam"}
#' (the default with \code{batch_size}) runs Adam on everything (the
#' paper's "Orth"); \code{"natgrad"} takes a natural-gradient step on
#' \eqn{(m_\beta, S)} (Salimbeni et al. 2018, eqs. 16b and 16c) and then an
#' Adam step on the other parameters at each iteration (their "OrthNat");
#' see \code{\link{natgrad_step}()} for the step and its settings.
#'
#' The two baselines of Salimbeni et al. (2018), both from Cheng and Boots
#' (2017), are available as \code{basis}: \code{"hybrid"} (their eq. 11),
#' the mean \eqn{k_{x\gamma}a_\gamma + k_{x\beta}K_\beta^{-1}m_\beta}{k_x,gamma a_gamma + k_x,beta K_beta^-1 m_beta} without the
#' projection (\code{q_mu} is this \eqn{m_\beta}, no longer the mean at
#' \eqn{\beta}) and the covariance above, with
#' \deqn{KL = \frac12 a_\gamma^\top K_\gamma a_\gamma + a_\gamma^\top K_{\gamma\beta}K_\beta^{-1}m_\beta +
#'   \frac12 m_\beta^\top K_\beta^{-1}m_\beta + \frac12\big(\mathrm{tr}(K_\beta^{-1}S) - \log|K_\beta^{-1}S| - |\beta|\big)}{KL = 1/2 a_gamma' K_gamma a_gamma + a_gamma' K_gamma,beta K_beta^-1 m_beta
#'   + 1/2 m_beta' K_beta^-1 m_beta + 1/2 (tr(K_beta^-1 S) - log|K_beta^-1 S| - |beta|)}
#' (the log-determinant carries the factor 1/2 that Cheng and Boots's eq. 14
#' misses); and \code{"decoupled"} (their eq. 8), the mean
#' \eqn{k_{x\alpha}a}{k_x,alpha a} on \eqn{\alpha = \beta \cup \gamma}{alpha = beta and gamma} (\code{a_beta},
#' \code{a_gamma}) and the covariance
#' \eqn{k(x, x') - k_{x\beta}(B^{-1} + K_\beta)^{-1}k_{\beta x'}}{k(x, x') - k_x,beta (B^-1 + K_beta)^-1 k_beta,x'} with
#' \eqn{B = L_B L_B^\top}{B = L_B L_B'} (\code{L_B}, the lower triangle by
#' columns, unconstrained), with (Cheng and Boots 2017, eq. 9)
#' \deqn{KL = \frac12 a^\top K_\alpha a + \frac12\log|I + K_\beta B| -
#'   \frac12\mathrm{tr}\big(K_\beta(B^{-1} + K_\beta)^{-1}\big),}{KL = 1/2 a' K_alpha a + 1/2 log|I + K_beta B| - 1/2 tr(K_beta (B^-1 + K_beta)^-1),}
#' started, as in the paper, at \eqn{a_\beta = 10^{-6}}{a_beta = 1e-6},
#' \eqn{a_\gamma = 0}{a_gamma = 0}, \eqn{L_B = 10^{-6}I}{L_B = 1e-6 I}. Both are trained by L-BFGS-B or Adam
#' (not by natural gradients); with \eqn{a_\gamma = 0}{a_gamma = 0} both are the
#' non-whitened SVGP. They are for comparisons: the orthogonal basis is
#' better conditioned (Salimbeni et al. 2018, section 3).
#'
#' @inheritParams svgp
#' @param basis the basis of the variational posterior: \code{"orthogonal"}
#'   (the default, Salimbeni et al. 2018), \code{"hybrid"} or
#'   \code{"decoupled"} (Cheng and Boots 2017; see Details).
#' @param inducing the inducing inputs \eqn{\beta} of the mean and the
#'   covariance: a matrix, a number, a method name or a
#'   \code{\link{select_inducing}()} result as in \code{\link{svgp}()}. By
#'   default \eqn{\min(N, 100)}{min(N, 100)} k-means centres (Salimbeni et al. 2018,
#'   Appendix F).
#' @param orthogonal the mean-only inducing inputs \eqn{\gamma}: a matrix,
#'   a number (a uniform random subset of the distinct training inputs, as
#'   in Salimbeni et al. 2018, Appendix F; reproducible under
#'   \code{set.seed()}), or 0 for none. By default \eqn{\min(N, 2|\beta|)}{min(N, 2|beta|)}
#'   random training inputs.
#' @param likelihood \code{"gaussian"}, \code{"bernoulli"} (logit link),
#'   \code{"probit"}, \code{"robustmax"} or \code{"softmax"} (several
#'   classes). By default
#'   \code{"robustmax"} when \code{y} is a factor with more than two
#'   classes, \code{"bernoulli"} when it is a two-class factor or logical,
#'   \code{"gaussian"} otherwise.
#' @param noise Gaussian likelihood: the starting noise variance (by default
#'   a tenth of the variance of \code{y}, the paper's 0.1 for standardised
#'   data).
#' @param mean the prior mean: a fixed number or \code{"constant"} to learn
#'   it; by default \code{"constant"} for the Gaussian likelihood and 0 for
#'   Bernoulli.
#' @param fixed names of parameters to hold at their starting values, as in
#'   \code{\link{svgp}()}, plus \code{"O"} and \code{"a_gamma"} (and, for
#'   \code{basis = "decoupled"}, \code{"a_beta"} and \code{"L_B"} in place of
#'   the \code{q_} blocks).
#' @param control as for \code{\link{svgp}()}: \code{maxit}, \code{lr}
#'   (Adam's step size, 0.01 by default), \code{optimizer} (\code{"lbfgsb"},
#'   \code{"adam"} or \code{"natgrad"}), \code{natgrad_step} (0.005),
#'   \code{natgrad_warmup} (100 iterations for non-Gaussian likelihoods, 0
#'   for the Gaussian) and \code{snapshots} (iterations of Adam or
#'   natural-gradient runs at which the parameters are kept in
#'   \code{fit$optim$snapshots}, with the CPU time, for convergence
#'   studies), \code{kl_columns} (with \code{batch_size}: estimate the term
#'   \eqn{a_\gamma^\top K_\gamma a_\gamma}{a_gamma' K_gamma a_gamma} of the KL divergence from this
#'   many random columns of \eqn{K_\gamma}, unbiasedly, at a cost
#'   \eqn{O(c|\gamma|)} instead of \eqn{O(|\gamma|^2)}; Salimbeni et al.
#'   2018, Appendix A.3, use 64; \code{NULL}, the default, is exact) and
#'   the shared settings (jitter, \code{trace}); for the softmax likelihood
#'   \code{mc_samples}, the number of Monte Carlo draws (100).
#' @param start a previous \code{odvgp} fit whose parameters are the starting
#'   values (the variational ones when both inducing sets keep their sizes
#'   and the basis is the same).
#' @templateVar model odvgp
#' @templateVar classifier yes
#' @template fit-value
#' @template practice
#' @references Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M.
#'   (2018). Orthogonally decoupled variational Gaussian processes. NeurIPS.
#'
#'   Cheng, C.-A. and Boots, B. (2017). Variational inference for Gaussian
#'   process models with linear complexity. NeurIPS.
#'
#'   Hernandez-Lobato, D., Hernandez-Lobato, J. M. and Dupont, P. (2011).
#'   Robust multi-class Gaussian process classification. NeurIPS.
#'
#'   Kingma, D. P. and Welling, M. (2014). Auto-encoding variational Bayes.
#'   ICLR.
#'
#'   See also \link{sparsevgp-references}.
#' @seealso \code{\link{svgp}}, \code{\link{natgrad_step}},
#'   \code{\link{predict.odvgp}}
#' @examples
#' set.seed(1)
#' fit <- odvgp(y ~ x, data = snelson, inducing = 6, orthogonal = 20,
#'              control = list(maxit = 200))
#' fit
#' p <- predict(fit, data.frame(x = c(1, 3, 5)), type = "response")
#' cbind(mean = p$mean, sd = sqrt(p$var))
#'
#' # with no orthogonal inputs it is the (non-whitened) SVGP
#' g <- odvgp(y ~ x, data = snelson, inducing = fit$params$Z, orthogonal = 0,
#'            optimize = FALSE)
#' s <- svgp(y ~ x, data = snelson, inducing = fit$params$Z, likelihood = "gaussian",
#'           kernel = kernel_rbf(g$params$lengthscale, g$params$variance),
#'           noise = g$params$noise, mean = g$params$mean, whiten = FALSE,
#'           optimize = FALSE)
#' c(odvgp = logLik(g), svgp = logLik(s))
#'
#' # the hybrid basis of Cheng and Boots (2017), one of the paper's baselines
#' h <- odvgp(y ~ x, data = snelson, inducing = fit$params$Z, orthogonal = fit$params$O,
#'            basis = "hybrid", control = list(maxit = 200))
#' c(orthogonal = logLik(fit), hybrid = logLik(h))
#' @export
odvgp <- function(x, ...) UseMethod("odvgp")

#' @rdname odvgp
#' @export
odvgp.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("odvgp", match.call(), parent.frame(), x, data, ...)
}

#' @rdname odvgp
#' @export
odvgp.default <- function(x, y, kernel = kernel_rbf(), inducing = "kmeans", M = NULL,
                          orthogonal = NULL, likelihood = NULL, noise = NULL, mean = NULL,
                          optimize = TRUE, optimize_inducing = TRUE, fixed = NULL,
                          control = list(), start = NULL, batch_size = NULL,
                          quadrature = 20L, basis = c("orthogonal", "hybrid", "decoupled"),
                          ...) {
  call <- .model_call(match.call(), "odvgp")
  basis <- .odvgp_basis(basis)
  .dots_data(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  N <- nrow(x)
  if (is.null(likelihood)) {
    likelihood <- if (is.factor(y) && length(unique(y[!is.na(y)])) > 2L) "robustmax" else
      if (is.factor(y) || is.logical(y)) "bernoulli" else "gaussian"
  }
  likelihood <- match.arg(likelihood, c("gaussian", "bernoulli", "probit", "robustmax",
                                        "softmax"))
  bern <- likelihood != "gaussian"
  multi <- likelihood %in% c("robustmax", "softmax")
  # the softmax's Monte Carlo draws: a setting of this model only, taken out
  # before svgp's control check
  mc_samples <- if (is.list(control)) control$mc_samples
  if (is.list(control)) control$mc_samples <- NULL
  if (likelihood != "softmax" && !is.null(mc_samples)) {
    stop("'control$mc_samples' applies to the softmax likelihood only", call. = FALSE)
  }
  if (multi) {
    lab <- .odvgp_classes(y, N)
    target <- as.double(lab$index)
    nl <- length(lab$coding$levels)
    mc <- if (likelihood == "softmax") .softmax_mc(mc_samples, nl)
  } else if (bern) {
    lab <- .as_labels(y, N)
    target <- lab$ypm
    nl <- 1L
  } else {
    target <- .as_response(y, N)
    nl <- 1L
  }
  kernel <- .check_kernel(kernel)
  optimize <- .check_flag(optimize, "optimize")
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  quadrature <- .svgp_check_quadrature(quadrature, bern)
  batch_size <- .svgp_check_batch(batch_size, N)
  control <- .svgp_control(control, batch_size)
  .odvgp_basis_control(basis, control)
  if (!is.null(.check_start(start, "odvgp", x))) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (missing(inducing)) inducing <- start$params$Z
    if (is.null(orthogonal)) orthogonal <- start$params$O
  }
  if (!bern) {
    if (is.null(noise)) noise <- .noise_start(target)
    noise <- .check_positive(noise, "noise", 1L)
    if (optimize && is.null(start)) {
      # lengthscales (and the variance) left unset start at the best point
      # of the shared grid, with the noise at its start
      kernel <- .start_regression(kernel, x, target, M = if (is.null(M)) 100L else M,
                                  noise_free = FALSE, lambda = rep(noise, N))$kernel
    }
  } else if (!is.null(noise)) {
    stop("'noise' applies to the Gaussian likelihood only", call. = FALSE)
  }
  kernel <- .kern_init(kernel, x, if (bern) NULL else target)
  spec <- .inducing_spec(inducing, M, NULL, x, default = "kmeans")
  Z <- .select_by_spec(spec, x, kernel, warn_short = !is.null(M) || is.numeric(inducing))
  M <- nrow(Z)
  O <- .odvgp_orthogonal(orthogonal, x, M)
  G <- nrow(O)
  if (is.null(mean)) mean <- if (bern) 0 else "constant"
  if (multi && !identical(mean, 0) && !identical(mean, 0L)) {
    stop("'mean' must be 0 for multiclass likelihoods (a constant shared by all classes does not change the likelihood)",
         call. = FALSE)
  }
  mn <- .mean_start(mean, if (multi) 0 else if (bern) .class_mean_start(lab$y01) else
    mean(target))
  params <- .kern_params(kernel)
  transforms <- c(variance = "log", lengthscale = "log")
  if (!bern) {
    params$noise <- noise
    transforms <- c(transforms, noise = "log")
  }
  # one column per latent function with more than two classes
  shape <- function(n, v) if (nl == 1L) rep(v, n) else matrix(v, n, nl)
  params <- c(params, list(mean = mn$value, Z = Z, O = O, a_gamma = shape(G, 0),
                           q_mu = shape(M, 0), q_sqrt_diag = shape(M, 1),
                           q_sqrt_lower = shape(M * (M - 1L) / 2, 0)))
  transforms <- c(transforms, mean = "identity", Z = "identity", O = "identity",
                  a_gamma = "identity", q_mu = "identity", q_sqrt_diag = "log",
                  q_sqrt_lower = "identity")
  if (basis == "decoupled") {
    db <- .decoupled_params(params, transforms, M, nl)
    params <- db$params
    transforms <- db$transforms
  }
  qb <- if (basis == "decoupled") c("a_gamma", "a_beta", "L_B") else
    c("a_gamma", "q_mu", "q_sqrt_diag", "q_sqrt_lower")
  copied <- FALSE
  if (!is.null(start)) {
    same <- identical(dim(start$params$Z), dim(Z)) && identical(dim(start$params$O), dim(O)) &&
      identical(if (is.null(start$basis)) "orthogonal" else start$basis, basis) &&
      identical(dim(as.matrix(start$params[[qb[2L]]])), dim(as.matrix(params[[qb[2L]]])))
    params <- .warm_params(params, start$params,
                           skip = c("Z", "O", if (mn$fixed) "mean", if (!same) qb))
    copied <- same
  }
  if (!copied && basis != "decoupled") {
    # the prior: S = K_beta (Salimbeni et al. 2018, Appendix F)
    if (nl == 1L) {
      params <- .svgp_set_q(list(mean = rep(params$mean, M), cov = NULL), params, kernel,
                            control, whiten = FALSE)
    } else {
      Lb <- .svgp_chol(params, kernel, control)
      params$q_sqrt_diag[] <- diag(Lb)
      params$q_sqrt_lower[] <- Lb[lower.tri(Lb)]
    }
  }
  fit <- .new_fit("odvgp", call, x, if (multi) lab$index else if (bern) lab$y01 else target,
                  kernel, params, transforms,
                  fixed, always = c(if (mn$fixed) "mean", if (!optimize_inducing) c("Z", "O")),
                  control = control,
                  label = sprintf("%s SVGP (|beta| = %d, |gamma| = %d), %s likelihood%s",
                                  c(orthogonal = "Orthogonally decoupled",
                                    hybrid = "Hybrid-basis decoupled",
                                    decoupled = "Decoupled (Cheng-Boots basis)")[[basis]],
                                  M, G,
                                  if (likelihood == "softmax")
                                    sprintf("softmax (%d classes, %d Monte Carlo draws)",
                                            nl, nrow(mc$draws))
                                  else if (multi) sprintf("robust-max (%d classes, %d-point Gauss-Hermite)",
                                                     nl, quadrature)
                                  else if (bern) sprintf("Bernoulli-%s (%d-point Gauss-Hermite)",
                                                    if (likelihood == "probit") "probit" else "logit",
                                                    quadrature)
                                  else "Gaussian",
                                  if (optimize_inducing) "" else ", fixed inducing inputs"),
                  extra = list(target = target, labels = if (bern) lab$coding else NULL,
                               likelihood = likelihood, whiten = FALSE, basis = basis,
                               quadrature = quadrature, batch_size = batch_size,
                               mc = if (likelihood == "softmax") mc))
  class(fit) <- c("odvgp", "svgp", "sparsevgp")
  .build_or_fit(fit, optimize)
}

# Class labels for the multiclass likelihoods: a factor (or character
# vector) with at least two classes; list(index (1..K), coding).
.odvgp_classes <- function(y, n) {
  if (is.character(y)) y <- factor(y)
  if (!is.factor(y) || !is.null(dim(y))) {
    stop("'y' must be a factor for multiclass likelihoods", call. = FALSE)
  }
  if (length(y) != n) {
    stop(sprintf("'y' has length %d but the inputs have %d rows", length(y), n), call. = FALSE)
  }
  if (anyNA(y)) stop("'y' contains NA: remove those observations first", call. = FALSE)
  used <- levels(y)[levels(y) %in% as.character(y)]
  if (length(used) < 2L) {
    stop(sprintf("'y' must have at least two classes, but it has %d", length(used)),
         call. = FALSE)
  }
  list(index = match(as.character(y), used), coding = list(type = "multiclass", levels = used))
}

# The mean-only inducing inputs gamma: a matrix (checked like `inducing`),
# a count of distinct training inputs drawn uniformly at random, or 0 (none).
# NULL: min(N, 2 M) random inputs.
.odvgp_orthogonal <- function(orthogonal, x, M) {
  empty <- matrix(0, 0L, ncol(x), dimnames = list(NULL, colnames(x)))
  if (is.null(orthogonal)) orthogonal <- min(nrow(x), 2L * M)
  if ((is.matrix(orthogonal) || is.data.frame(orthogonal)) && nrow(orthogonal) == 0L) {
    if (ncol(orthogonal) != ncol(x)) {
      stop(sprintf("'orthogonal' must have %d columns like the inputs", ncol(x)), call. = FALSE)
    }
    return(empty)
  }
  if (is.numeric(orthogonal) && is.null(dim(orthogonal)) && length(orthogonal) == 1L &&
      !(ncol(x) == 1L && !isTRUE(orthogonal == round(orthogonal)))) {
    if (!is.finite(orthogonal) || orthogonal < 0 || orthogonal != round(orthogonal)) {
      stop("'orthogonal' must be a whole number >= 0, a matrix of inputs or a select_inducing() result",
           call. = FALSE)
    }
    if (orthogonal == 0) return(empty)
    ux <- unique(x)
    if (orthogonal > nrow(ux)) {
      stop(sprintf("'orthogonal' asks for %d inputs but there are only %d distinct training inputs",
                   as.integer(orthogonal), nrow(ux)), call. = FALSE)
    }
    O <- ux[sort(sample.int(nrow(ux), orthogonal)), , drop = FALSE]
    dimnames(O) <- list(NULL, colnames(x))
    return(O)
  }
  if (!is.matrix(orthogonal) && !is.data.frame(orthogonal) &&
      !inherits(orthogonal, "sparsevgp_inducing") && !(ncol(x) == 1L && is.numeric(orthogonal))) {
    stop("'orthogonal' must be a whole number >= 0, a matrix of inputs or a select_inducing() result",
         call. = FALSE)
  }
  .given_inducing(orthogonal, x, "orthogonal")
}

# What every basis's evaluation needs first: the rows of a minibatch (with
# the scale N / b of its sum), the kernel at params, and the blocks of
# K([beta; gamma]) and K(., x): the cross blocks K(beta, x) and K(gamma, x)
# apart, so that neither is a copy of rows of K([beta; gamma], x). On
# minibatches with control$kl_columns, a_gamma' K_gamma a_gamma of the KL
# comes from the columns kl_index of K_gamma, (|gamma| / c) sum_{i in C}
# a_i [K_C,gamma a]_i, unbiased for a uniform random C of c columns
# (Salimbeni et al. 2018, Appendix A.3): it avoids the |gamma|^2 block.
# `ch` is the jittered Cholesky factor of K_beta.
.odvgp_blocks <- function(fit, params, batch, kl_index) {
  x <- fit$x
  target <- fit$target
  scale <- 1
  if (!is.null(batch)) {
    scale <- nrow(x) / length(batch)
    x <- x[batch, , drop = FALSE]
    target <- target[batch]
  }
  k <- .kernel_at(fit$kernel, params)
  Z <- params$Z
  O <- params$O
  M <- nrow(Z)
  G <- nrow(O)
  ib <- seq_len(M)
  ig <- M + seq_len(G)
  cols <- fit$control$kl_columns
  if (is.null(kl_index) && !is.null(batch) && !is.null(cols) && G > cols) {
    kl_index <- sort(sample.int(G, cols))
  }
  b <- list(x = x, target = target, scale = scale, k = k, Z = Z, O = O, M = M, G = G,
            ib = ib, ig = ig, W = rbind(Z, O), kl_index = kl_index,
            sampled = !is.null(kl_index), Kbg = NULL, Kg = NULL, Kgx = NULL)
  if (b$sampled) {
    b$Kb <- .ffi_kern_matrix(k, Z)
    b$Kbg <- .ffi_kern_matrix(k, Z, O)
    b$OC <- O[kl_index, , drop = FALSE]
    b$KCg <- .ffi_kern_matrix(k, b$OC, O)
    b$wC <- G / length(kl_index)
  } else {
    Kww <- .ffi_kern_matrix(k, b$W)
    b$Kb <- Kww[ib, ib, drop = FALSE]
    if (G > 0L) {
      b$Kbg <- Kww[ib, ig, drop = FALSE]
      b$Kg <- Kww[ig, ig, drop = FALSE]
    }
  }
  b$ch <- .ffi_chol(b$Kb, fit$control$jitter, fit$control$jitter_cap)
  b$Kbx <- .ffi_kern_matrix(k, Z, x)
  if (G > 0L) b$Kgx <- .ffi_kern_matrix(k, O, x)
  b$kd <- .ffi_kern_diag(k, x)
  b
}

# The ELBO at `params` on the rows `batch` (NULL: all; the expected
# log-likelihood is then scaled by N / |batch|), its terms, the marginals of
# q(f) and, with grad = TRUE, its gradient in every block (natural scale
# for the variational blocks, the kernel blocks by the contraction), plus
# the pieces of the natural-gradient step: r = K_beta,x g, P = B diag(h) B'
# with B = K_beta^-1 K_beta,x, and K_beta^-1 (natural_only = TRUE: only
# these). The recipe (Salimbeni et al.
# 2018, eq. 12 and Prop. A.1, evaluated with Cholesky factors):
#   v  = K_bg a_g,  a~ = K_b^-1 (m_b - v)                     (|beta|)
#   mu = mean + K_xg a_g + K_xb a~,  A = L^-1 K_bx,  B = L^-T A
#   s  = k_xx - |A|^2 + |L_S' B|^2                             (per column)
#   KL = 1/2 (a_g' K_g a_g - v' K_b^-1 v + m_b' K_b^-1 m_b + |L^-1 L_S|_F^2
#        - 2 sum log|L_S,ii| + 2 sum log L_ii - |beta|)
# With g = dELL/dmu and h = dELL/ds (scaled), the adjoints (derived for this
# package and checked against finite differences in the tests):
#   dF/dK_bx = a~ g' + 2 (K_b^-1 S B - B) diag(h),   dF/dK_gx = a_g g'
#   dF/dm_b  = K_b^-1 (r - m_b),  dF/dv = c - K_b^-1 r  (c = K_b^-1 v)
#   dF/da_g  = K_gx g - K_g a_g + K_gb dF/dv
#   dF/dS    = P - K_b^-1 / 2 (+ S^-1 / 2 from log|S|)
#   dF/dK_b  = -K_b^-1 r a~' + P - K_b^-1 S P - P S K_b^-1 - c c'/2
#              + (K_b^-1 m_b)(K_b^-1 m_b)'/2 + K_b^-1 S K_b^-1/2 - K_b^-1/2
#   dF/dK_bg = dF/dv a_g',  dF/dK_g = -a_g a_g'/2
.odvgp_eval <- function(fit, params, grad = TRUE, batch = NULL, natural_only = FALSE,
                        kl_index = NULL) {
  # the data, kernel blocks and Cholesky factor shared with the other bases
  blk <- .odvgp_blocks(fit, params, batch, kl_index)
  x <- blk$x
  target <- blk$target
  scale <- blk$scale
  k <- blk$k
  Z <- blk$Z
  O <- blk$O
  M <- blk$M
  G <- blk$G
  ib <- blk$ib
  ig <- blk$ig
  W <- blk$W
  kl_index <- blk$kl_index
  sampled <- blk$sampled
  Kb <- blk$Kb
  Kbg <- blk$Kbg
  Kg <- blk$Kg
  OC <- blk$OC
  KCg <- blk$KCg
  wC <- blk$wC
  Kbx <- blk$Kbx
  Kgx <- blk$Kgx
  kd <- blk$kd
  ch <- blk$ch
  L <- ch$L
  Ksolve <- function(b) backsolve(L, forwardsolve(L, b), upper.tri = FALSE, transpose = TRUE)
  A <- forwardsolve(L, Kbx)
  B <- backsolve(L, A, upper.tri = FALSE, transpose = TRUE)
  prior_var <- kd - colSums(A^2)
  # one latent function per column of the variational parameters (K > 1:
  # multiclass), sharing the kernel and both inducing sets
  qs <- .odvgp_q(params)
  hybrid <- identical(fit$basis, "hybrid") && G > 0L
  # the hybrid basis through the orthogonal one (R/odvgp_bases.R)
  if (hybrid) qs <- .hybrid_q(qs, Kbg)
  nl <- length(qs)
  lat <- lapply(qs, function(q) {
    v <- if (G > 0L) drop(Kbg %*% q$ag) else numeric(M)
    cv <- Ksolve(v)
    Km <- Ksolve(q$mb)
    at <- Km - cv
    mu <- params$mean + drop(crossprod(Kbx, at))
    if (G > 0L) mu <- mu + drop(crossprod(Kgx, q$ag))
    V <- crossprod(q$LS, B)
    LiLS <- forwardsolve(L, q$LS)
    quad_g <- if (G == 0L) 0 else if (sampled) {
      wC * sum(q$ag[kl_index] * (KCg %*% q$ag)) - sum(v * cv)
    } else {
      sum(q$ag * (Kg %*% q$ag)) - sum(v * cv)
    }
    kl <- 0.5 * (quad_g + sum(q$mb * Km) + sum(LiLS^2) - 2 * sum(log(abs(diag(q$LS)))) +
                   2 * sum(log(diag(L))) - M)
    list(v = v, cv = cv, Km = Km, at = at, mu = mu, V = V,
         s = pmax(prior_var + colSums(V^2), 0), kl = kl)
  })
  MU <- vapply(lat, `[[`, numeric(ncol(Kbx)), "mu")
  SV <- vapply(lat, `[[`, numeric(ncol(Kbx)), "s")
  dim(MU) <- dim(SV) <- c(ncol(Kbx), nl)
  e <- .odvgp_ell(fit, MU, SV, target, params, scale)
  kl <- sum(vapply(lat, `[[`, 1, "kl"))
  at <- vapply(lat, `[[`, numeric(M), "at")
  dim(at) <- c(M, nl)
  out <- list(value = e$ell - kl, ell = e$ell, kl = kl, mu = MU, var = SV, L = L,
              a_tilde = at, jitter = ch$jitter, jitter_scale = mean(diag(Kb)), kernel = k,
              x = x, W = W)
  if (!grad) return(out)
  Kinv <- chol2inv(t(L))
  nat <- lapply(seq_len(nl), function(j) {
    r <- drop(Kbx %*% e$g[, j])
    list(r = r, P = tcrossprod(B * rep(e$h[, j], each = M), B))
  })
  out$natural <- list(latents = nat, Kinv = Kinv)
  # a natural-gradient step needs only these (R/natgrad.R)
  if (natural_only) return(out)
  Gww <- matrix(0, M + G, M + G)
  Gbx <- matrix(0, M, ncol(Kbx))
  Ggx <- matrix(0, G, ncol(Kbx))
  if (sampled) GCg <- matrix(0, length(kl_index), G)
  gq <- vector("list", nl)
  for (j in seq_len(nl)) {
    q <- qs[[j]]
    la <- lat[[j]]
    g <- e$g[, j]
    h <- e$h[, j]
    r <- nat[[j]]$r
    P <- nat[[j]]$P
    Kr <- Ksolve(r)
    KiS <- Kinv %*% tcrossprod(q$LS)
    KiSB <- Ksolve(q$LS %*% la$V)
    Gbx <- Gbx + outer(la$at, g) + 2 * (KiSB - B) * rep(h, each = M)
    dv <- la$cv - Kr
    Gww[ib, ib] <- Gww[ib, ib] - outer(Kr, la$at) + P - KiS %*% P - P %*% t(KiS) -
      0.5 * outer(la$cv, la$cv) + 0.5 * outer(la$Km, la$Km) + 0.5 * KiS %*% Kinv - 0.5 * Kinv
    gag <- numeric(0)
    if (G > 0L) {
      Gww[ib, ig] <- Gww[ib, ig] + outer(dv, q$ag)
      Ggx <- Ggx + outer(q$ag, g)
      gag <- drop(Kgx %*% g) + drop(crossprod(Kbg, dv))
      if (sampled) {
        aC <- q$ag[kl_index]
        GCg <- GCg - 0.5 * wC * outer(aC, q$ag)
        gag <- gag - 0.5 * wC * drop(crossprod(KCg, aC))
        gag[kl_index] <- gag[kl_index] - 0.5 * wC * drop(KCg %*% q$ag)
      } else {
        Gww[ig, ig] <- Gww[ig, ig] - 0.5 * outer(q$ag, q$ag)
        gag <- gag - drop(Kg %*% q$ag)
      }
    }
    dLS <- 2 * (P - 0.5 * Kinv) %*% q$LS
    dLS[upper.tri(dLS)] <- 0
    diag(dLS) <- diag(dLS) + 1 / diag(q$LS)
    gq[[j]] <- list(a_gamma = gag, q_mu = Kr - la$Km, q_sqrt_diag = diag(dLS) * diag(q$LS),
                    q_sqrt_lower = dLS[lower.tri(dLS)])
    if (hybrid) {
      hg <- .hybrid_grad(gq[[j]], q, Kbg, Gww[ib, ig, drop = FALSE])
      gq[[j]] <- hg$gq
      Gww[ib, ig] <- hg$Gbg
    }
  }
  gk <- .odvgp_contract(k, x, Z, O, Gww, Gbx, Ggx, rowSums(e$h), Kbx,
                        if (G > 0L) Kgx, ch$jitter, .any_free(fit, c("Z", "O")),
                        if (sampled) list(OC = OC, index = kl_index, GCg = GCg))
  gW <- gk$W
  out$grad <- list(variance = gk$variance, lengthscale = gk$lengthscale,
                   noise = if (is.null(params$noise)) NULL else e$gnoise * params$noise,
                   mean = sum(e$g), Z = gW[ib, , drop = FALSE], O = gW[ig, , drop = FALSE])
  for (b in c("a_gamma", "q_mu", "q_sqrt_diag", "q_sqrt_lower")) {
    gb <- vapply(gq, `[[`, numeric(length(gq[[1L]][[b]])), b)
    out$grad[[b]] <- if (nl == 1L) as.vector(gb) else matrix(gb, ncol = nl)
  }
  out
}

# The expected log-likelihood of the marginals (n x K matrices MU, SV) with
# its derivatives g and h in them (n x K), the noise's and the scale N / b.
.odvgp_ell <- function(fit, MU, SV, target, params, scale) {
  if (fit$likelihood == "robustmax") {
    return(.robustmax_ell(MU, SV, target, .gauss_hermite(fit$quadrature), scale))
  }
  if (fit$likelihood == "softmax") return(.softmax_ell(MU, SV, target, fit$mc$draws, scale))
  bern <- fit$likelihood != "gaussian"
  e <- .ffi_svgp_ell(MU[, 1L], SV[, 1L], target, fit$likelihood,
                     if (bern) 1 else params$noise, .gauss_hermite(fit$quadrature), scale)
  e$g <- matrix(e$g, ncol = 1L)
  e$h <- matrix(e$h, ncol = 1L)
  e
}

# The contraction of the adjoints of the kernel blocks: Gww of K(W, W) on
# W = [Z; O], the cross blocks Gbx of K(Z, x) and Ggx of K(O, x) apart (Kbx,
# Kgx: those blocks, whose exponentials are then not recomputed; no copy of
# K(W, x) is made) and gdiag of diag K(x, x); `jitter` is the one added to
# K_beta (see .contract()). With `sampled` = list(OC, index, GCg) the KL's
# K_gamma is column-sampled: the gamma-gamma block of Gww is left out and
# GCg, the adjoint of K(O_C, O) for the rows `index` of O, is contracted
# instead, so that K_gamma is never formed. Each cross block K(A, B) of two
# different sets is contracted twice for the inputs of both sides (the
# contraction gives the gradient in its first argument only) and once for
# the kernel parameters. Returns list(variance, lengthscale, W).
.odvgp_contract <- function(k, x, Z, O, Gww, Gbx, Ggx, gdiag, Kbx, Kgx, jitter, want_W,
                            sampled = NULL) {
  M <- nrow(Z)
  G <- nrow(O)
  ib <- seq_len(M)
  ig <- M + seq_len(G)
  bx <- .kern_grad(k, Z, x, Gbx, want_W, K = Kbx)
  gW <- matrix(0, M + G, ncol(Z))
  if (is.null(sampled)) {
    ww <- .kern_grad(k, rbind(Z, O), NULL, Gww, want_W)
    th <- ww$theta + bx$theta
    if (want_W) gW <- ww$x
  } else {
    Gbg <- Gww[ib, ig, drop = FALSE]
    bb <- .kern_grad(k, Z, NULL, Gww[ib, ib, drop = FALSE], want_W)
    bg <- .kern_grad(k, Z, O, Gbg, want_W)
    cg <- .kern_grad(k, sampled$OC, O, sampled$GCg, want_W)
    th <- bb$theta + bg$theta + cg$theta + bx$theta
    if (want_W) {
      gW[ib, ] <- bb$x + bg$x
      gW[ig, ] <- .kern_grad(k, O, Z, t(Gbg), TRUE)$x +
        .kern_grad(k, O, sampled$OC, t(sampled$GCg), TRUE)$x
      gW[M + sampled$index, ] <- gW[M + sampled$index, ] + cg$x
    }
  }
  if (want_W) gW[ib, ] <- gW[ib, ] + bx$x
  if (G > 0L) {
    gx <- .kern_grad(k, O, x, Ggx, want_W, K = Kgx)
    th <- th + gx$theta
    if (want_W) gW[ig, ] <- gW[ig, ] + gx$x
  }
  theta <- .kern_split_theta(k, th + .kern_grad_diag(k, x, gdiag))
  # the jitter on K_beta is proportional to k(x, x) (see .contract())
  theta$variance <- theta$variance + sum(diag(Gww)[ib]) * jitter * .jitter_variance_grad(k)
  list(variance = theta$variance, lengthscale = theta$lengthscale, W = gW)
}

# The variational parameters of each latent function: list over the columns
# of q_mu of list(ag = a_gamma, mb = m_beta, LS = lower L_S).
.odvgp_q <- function(params) {
  qm <- as.matrix(params$q_mu)
  M <- nrow(qm)
  ag <- params$a_gamma
  ag <- if (is.matrix(ag)) ag else matrix(ag, ncol = 1L)
  dg <- as.matrix(params$q_sqrt_diag)
  lo <- if (is.matrix(params$q_sqrt_lower)) params$q_sqrt_lower else
    matrix(params$q_sqrt_lower, ncol = 1L)
  lapply(seq_len(ncol(qm)), function(j) {
    W <- diag(dg[, j], M)
    W[lower.tri(W)] <- lo[, j]
    list(ag = ag[, j], mb = qm[, j], LS = W)
  })
}

#' @export
.evaluate.odvgp <- function(fit, params, grad = TRUE, batch = NULL, kl_index = NULL, ...) {
  dec <- identical(fit$basis, "decoupled")
  r <- if (dec) .decoupled_eval(fit, params, grad, batch, kl_index = kl_index) else
    .odvgp_eval(fit, params, grad, batch, kl_index = kl_index)
  out <- list(value = r$value, terms = c(ell = r$ell, neg_kl = -r$kl), jitter = r$jitter,
              jitter_scale = r$jitter_scale,
              posterior = if (dec) list(R = r$R) else
                list(L = r$L, q_sqrt = lapply(.odvgp_q(params), `[[`, "LS"),
                     a_tilde = r$a_tilde))
  if (grad) {
    gr <- r$grad
    dimnames(gr$Z) <- dimnames(params$Z)
    dimnames(gr$O) <- dimnames(params$O)
    out$grad <- gr[names(params)]
  }
  out
}

# The predictive cache: L = chol(K_beta), L_S, and the coefficient
# a~ = K_beta^-1 (m_beta - K_beta,gamma a_gamma) of k_x,beta in the mean,
# m(x) = mean + k_x,gamma a_gamma + k_x,beta a~ (precomputed, so that a
# prediction costs O(|gamma| + |beta|^2) per point; Salimbeni et al. 2018,
# section 3.2).
#' @export
.predict_latent.odvgp <- function(fit, xnew, full_cov) {
  if (identical(fit$basis, "decoupled")) return(.decoupled_predict(fit, xnew, full_cov))
  k <- .kernel_at(fit$kernel, fit$params)
  p <- fit$params
  L <- fit$posterior$L
  LS <- fit$posterior$q_sqrt
  at <- fit$posterior$a_tilde
  ag <- if (is.matrix(p$a_gamma)) p$a_gamma else matrix(p$a_gamma, ncol = 1L)
  nl <- length(LS)
  G <- nrow(p$O)
  # mean (n x K), prior conditional A = L^-1 K_beta,x and V_j = L_S,j' K_beta^-1 K_beta,x
  parts <- function(xb) {
    Kbx <- .ffi_kern_matrix(k, p$Z, xb)
    A <- forwardsolve(L, Kbx)
    B <- backsolve(L, A, upper.tri = FALSE, transpose = TRUE)
    m <- p$mean + crossprod(Kbx, at)
    if (G > 0L) m <- m + crossprod(.ffi_kern_matrix(k, p$O, xb), ag)
    list(mean = m, A = A, V = lapply(LS, function(l) crossprod(l, B)))
  }
  if (full_cov) {
    if (nl > 1L) stop("'full_cov = TRUE' is not available for multiclass fits", call. = FALSE)
    q <- parts(xnew)
    return(list(mean = drop(q$mean),
                cov = .ffi_kern_matrix(k, xnew) - crossprod(q$A) + crossprod(q$V[[1L]])))
  }
  mean <- var <- matrix(0, nrow(xnew), nl)
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    q <- parts(xb)
    mean[b, ] <- q$mean
    pv <- .ffi_kern_diag(k, xb) - colSums(q$A^2)
    for (j in seq_len(nl)) var[b, j] <- pv + colSums(q$V[[j]]^2)
  }
  if (nl == 1L) return(list(mean = drop(mean), var = drop(var)))
  list(mean = mean, var = var)
}

# Full-batch fits: L-BFGS-B with the inducing inputs held first (as svgp);
# control$optimizer chooses Adam or natural gradients instead.
#' @export
.train.odvgp <- function(fit) .svgp_train(fit, c("Z", "O"))

#' @export
coef.odvgp <- function(object, ...) {
  co <- coef.sparsevgp(object)
  co[!grepl("^(q_|a_gamma|a_beta|L_B)", names(co))]
}

#' @export
summary.odvgp <- function(object, ...) {
  s <- NextMethod()
  s$parameters <- s$parameters[!grepl("^(q_|a_gamma|a_beta|L_B)", rownames(s$parameters)), ,
                               drop = FALSE]
  s
}

#' @export
logLik.odvgp <- function(object, ...) {
  var_par <- grepl("^(q_mu|log_q_sqrt_diag|q_sqrt_lower|a_gamma|a_beta|L_B)",
                    names(object$fixed))
  structure(object$bound, df = sum(!object$fixed & !var_par), nobs = length(object$y),
            class = "logLik")
}

# ---- multiclass: the robust-max likelihood --------------------------------

# The robust-max likelihood (Hernandez-Lobato, Hernandez-Lobato and Dupont
# 2011; the multiclass likelihood of Salimbeni et al. 2018, section 4):
# p(y | f) = 1 - eps when y = argmax_k f_k, eps / (K - 1) otherwise, with
# eps = 1e-3 (GPflow's default). Under independent marginals
# f_k ~ N(mu_k, s_k), E[log p(y | f)] = log(eps / (K - 1)) + c P with
# c = log(1 - eps) - log(eps / (K - 1)) and
#   P = P(f_y > f_k for all k != y)
#     = int N(u; 0, 1) prod_{k != y} Phi((mu_y + sd_y u - mu_k) / sd_k) du,
# computed by Gauss-Hermite quadrature in u, with its exact derivatives in
# mu and s (those of the quadrature sum; derived for this package and
# checked against finite differences). Variances are floored at 1e-12.
.robustmax_eps <- 1e-3

.robustmax_P <- function(MU, S, y, gh, deriv = TRUE) {
  n <- nrow(MU)
  K <- ncol(MU)
  sd <- sqrt(pmax(S, 1e-12))
  iy <- cbind(seq_len(n), y)
  my <- MU[iy]
  sy <- sd[iy]
  u <- sqrt(2) * gh$x
  w <- gh$w / sqrt(pi)
  P <- numeric(n)
  dmu <- dsd <- matrix(0, n, K)
  for (i in seq_along(u)) {
    Zi <- (my + sy * u[i] - MU) / sd
    lP <- stats::pnorm(Zi, log.p = TRUE)
    lP[iy] <- 0
    lF <- rowSums(lP)
    P <- P + w[i] * exp(lF)
    if (!deriv) next
    # R = F phi(z) / Phi(z) for k != y, 0 for k = y
    R <- exp(lF - lP + stats::dnorm(Zi, log = TRUE))
    R[iy] <- 0
    Rs <- R / sd
    dmu <- dmu - w[i] * Rs
    dsd <- dsd - w[i] * Rs * Zi
    dmu[iy] <- dmu[iy] + w[i] * rowSums(Rs)
    dsd[iy] <- dsd[iy] + w[i] * u[i] * rowSums(Rs)
  }
  list(P = P, dmu = dmu, ds = dsd / (2 * sd))
}

# list(ell, g, h, gnoise) as from .ffi_svgp_ell(), with g and h n x K.
.robustmax_ell <- function(MU, S, y, gh, scale) {
  K <- ncol(MU)
  eps <- .robustmax_eps
  lo <- log(eps / (K - 1))
  cc <- log(1 - eps) - lo
  r <- .robustmax_P(MU, S, y, gh)
  ell <- scale * sum(lo + cc * r$P)
  if (!is.finite(ell)) stop("the expected log-likelihood is not finite", call. = FALSE)
  list(ell = ell, g = scale * cc * r$dmu, h = scale * cc * r$ds, gnoise = 0)
}

# Class probabilities from the latent marginals: P(argmax = k) for every k
# (normalised over k, which removes the quadrature's small error in their
# sum), mixed with the label noise eps.
.robustmax_prob <- function(MU, S, gh) {
  K <- ncol(MU)
  P <- vapply(seq_len(K), function(k) {
    .robustmax_P(MU, S, rep(k, nrow(MU)), gh, deriv = FALSE)$P
  }, numeric(nrow(MU)))
  P <- matrix(P, nrow(MU), K)
  P <- P / rowSums(P)
  eps <- .robustmax_eps
  (1 - eps) * P + eps / (K - 1) * (1 - P)
}

# ---- multiclass: the softmax likelihood -----------------------------------

# p(y = k | f) = exp(f_k) / sum_j exp(f_j). Its expectation under independent
# marginals f_j ~ N(mu_j, s_j) has no closed form; it is estimated by Monte
# Carlo with a fixed S x K matrix of standard-normal draws eps (shared by all
# rows, drawn once per fit), reparametrised as f = mu + sqrt(s) eps (Kingma
# and Welling 2014), so that the estimate is a deterministic smooth function
# of (mu, s) and its gradients below are exact for the fixed draws:
#   d/dmu_k  = mean_s (1[k = y] - p_k(f_s)),
#   d/ds_k   = mean_s (1[k = y] - p_k(f_s)) eps_sk / (2 sqrt(s_k)).

# The seed (from the session's random stream, so reproducible under
# set.seed()) and the draws, made without moving that stream further.
.softmax_mc <- function(samples, K) {
  if (is.null(samples)) samples <- 100L
  if (!is.numeric(samples) || length(samples) != 1L || !is.finite(samples) ||
      samples < 1 || samples != round(samples)) {
    stop("'control$mc_samples' must be a whole number >= 1", call. = FALSE)
  }
  seed <- sample.int(.Machine$integer.max, 1L)
  old <- get(".Random.seed", envir = globalenv())
  on.exit(assign(".Random.seed", old, envir = globalenv()))
  set.seed(seed)
  list(seed = seed, draws = matrix(stats::rnorm(samples * K), samples, K))
}

# Row maxima of a matrix by K vectorised pmax() calls (apply() over n rows
# would dominate the cost of the softmax expectation).
.row_max <- function(A) {
  m <- A[, 1L]
  for (k in seq_len(ncol(A))[-1L]) m <- pmax(m, A[, k])
  m
}

# The softmax of each draw, n x K, for row-wise latent values Fs (n x K).
.softmax_rows <- function(Fs) {
  E <- exp(Fs - .row_max(Fs))
  E / rowSums(E)
}

# list(ell, g, h, gnoise) as from .robustmax_ell(), with g and h n x K.
.softmax_ell <- function(MU, S, y, draws, scale) {
  n <- nrow(MU)
  K <- ncol(MU)
  sd <- sqrt(pmax(S, 1e-12))
  iy <- cbind(seq_len(n), y)
  Y <- matrix(0, n, K)
  Y[iy] <- 1
  ns <- nrow(draws)
  ell <- numeric(n)
  g <- h <- matrix(0, n, K)
  for (s in seq_len(ns)) {
    Es <- matrix(draws[s, ], n, K, byrow = TRUE)
    Fs <- MU + sd * Es
    mx <- .row_max(Fs)
    lse <- mx + log(rowSums(exp(Fs - mx)))
    ell <- ell + Fs[iy] - lse
    R <- Y - exp(Fs - lse)
    g <- g + R
    h <- h + R * Es
  }
  ell <- scale * sum(ell) / ns
  if (!is.finite(ell)) stop("the expected log-likelihood is not finite", call. = FALSE)
  list(ell = ell, g = scale * g / ns, h = scale * h / (2 * sd * ns), gnoise = 0)
}

# Class probabilities: the Monte Carlo average of the softmax over the
# fit's draws (each draw's probabilities sum to one, so their average does).
.softmax_prob <- function(MU, S, draws) {
  n <- nrow(MU)
  K <- ncol(MU)
  sd <- sqrt(pmax(S, 0))
  P <- matrix(0, n, K)
  for (s in seq_len(nrow(draws))) {
    P <- P + .softmax_rows(MU + sd * matrix(draws[s, ], n, K, byrow = TRUE))
  }
  P / nrow(draws)
}

#' Predictions from an ODVGP fit
#'
#' Predictions of \code{\link{odvgp}()} fits. With the Gaussian, Bernoulli
#' and probit likelihoods they are those of \code{\link{predict.sparsevgp}}
#' and \code{\link{predict.pgpr}} (the same types and methods). With the
#' robust-max likelihood (more than two classes), \code{type = "link"} gives
#' the marginals of the \eqn{K} latent functions, \code{list(mean, var)}
#' as \eqn{n \times K}{n x K} matrices; \code{"prob"} the matrix of class
#' probabilities \eqn{(1 - \epsilon)P_k + \epsilon/(K - 1)(1 - P_k)} with
#' \eqn{P_k = P(\arg\max_j f_j = k)}{P_k = P(argmax_j f_j = k)} by Gauss-Hermite quadrature
#' (normalised to sum to one over \eqn{k}) and \eqn{\epsilon = 10^{-3}};
#' \code{"class"} the most probable class as a factor. With the softmax
#' likelihood \code{"prob"} is the Monte Carlo average of
#' \eqn{\exp(f_k) / \sum_j \exp(f_j)}{exp(f_k) / sum_j exp(f_j)} over the fit's draws
#' \eqn{f = \mu + \sqrt{s}\,\epsilon}{f = mu + sqrt(s) eps} (see \code{\link{odvgp}()}),
#' which sums to one over \eqn{k}.
#'
#' @param object an \code{odvgp} fit.
#' @param newdata new inputs, as for \code{\link{predict.sparsevgp}}; by
#'   default the training inputs.
#' @param type as for \code{\link{predict.pgpr}} (binary) or
#'   \code{\link{predict.sparsevgp}} (Gaussian); for multiclass fits
#'   \code{"link"} (the default), \code{"prob"} or \code{"class"}.
#' @param method binary classifiers only: as for \code{\link{predict.pgpr}}.
#' @param full_cov not for multiclass fits: as for
#'   \code{\link{predict.sparsevgp}}.
#' @param na.action what to do with rows of \code{newdata} with missing
#'   inputs: \code{na.pass} (the default) gives them \code{NA},
#'   \code{na.omit} drops them, \code{na.exclude} pads them with \code{NA}.
#' @param ... further arguments of \code{\link{predict.svgp}} for binary and
#'   Gaussian fits (\code{interval}, \code{level}, \code{se.fit}); an error
#'   for multiclass fits.
#' @return See \code{type}; rows are named by the row names of
#'   \code{newdata}, columns of multiclass results by the classes.
#' @examples
#' set.seed(1)
#' x <- matrix(runif(120, -2, 2), 60, 2)
#' y <- factor(c("a", "b", "c")[1 + (x[, 1] > 0) + (x[, 2] > 0.5)])
#' fit <- odvgp(x, y, inducing = 5, orthogonal = 8,
#'              control = list(optimizer = "natgrad", maxit = 50, natgrad_step = 0.1,
#'                             natgrad_warmup = 10))
#' round(predict(fit, x[1:3, ], type = "prob"), 3)
#' predict(fit, x[1:3, ], type = "class")
#' @export
predict.odvgp <- function(object, newdata = NULL, type = NULL, method = NULL, full_cov = FALSE,
                          na.action = stats::na.pass, ...) {
  if (!(object$likelihood %in% c("robustmax", "softmax"))) {
    return(predict.svgp(object, newdata, type = type, method = method, full_cov = full_cov,
                        na.action = na.action, ...))
  }
  .check_dots("predict", ...)
  type <- if (is.null(type)) "link" else match.arg(type, c("link", "latent", "prob", "class"))
  if (!is.null(method)) {
    stop("'method' applies to binary classifiers only", call. = FALSE)
  }
  if (.check_flag(full_cov, "full_cov")) {
    stop("'full_cov = TRUE' is not available for multiclass fits", call. = FALSE)
  }
  pin <- .prediction_inputs(object, newdata, na.action)
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
  lat <- .predict_latent(object, xnew[pin$ok, , drop = FALSE], FALSE)
  lat$var <- pmax(lat$var, 0)
  if (type %in% c("link", "latent")) return(list(mean = fill(lat$mean), var = fill(lat$var)))
  p <- fill(if (object$likelihood == "softmax") .softmax_prob(lat$mean, lat$var, object$mc$draws)
            else .robustmax_prob(lat$mean, lat$var, .gauss_hermite(object$quadrature)))
  if (type == "prob") return(p)
  cls <- factor(lev[max.col(replace(p, is.na(p), 0), ties.method = "first")], levels = lev)
  cls[!stats::complete.cases(p)] <- NA
  names(cls) <- rownames(p)
  cls
}

#' @export
fitted.odvgp <- function(object, ...) {
  if (object$likelihood %in% c("robustmax", "softmax")) return(predict(object, type = "prob"))
  NextMethod()
}

#' @export
residuals.odvgp <- function(object, ...) {
  if (object$likelihood %in% c("robustmax", "softmax")) {
    stop("residuals() is not defined for multiclass fits", call. = FALSE)
  }
  NextMethod()
}

#' @export
plot.odvgp <- function(x, ...) {
  if (x$likelihood %in% c("robustmax", "softmax")) {
    stop("plot() is not available for multiclass fits: use predict(type = \"prob\")",
         call. = FALSE)
  }
  NextMethod()
}
