# The uncollapsed orthogonally decoupled variational GP (Salimbeni, Cheng,
# Boots and Deisenroth 2018, eq. 12): the mean of q(f) lives in the span of
# two sets of inducing inputs, beta (Z here, shared with the covariance, as
# in svgp) and gamma (O here, mean only, projected onto the orthogonal
# complement of span(beta)); the covariance is that of svgp on beta. With
# no gamma it is the non-whitened svgp. This file holds odvgp()'s
# documentation and arguments; its ELBO and gradient are those of the one
# evaluator of svgp() and odvgp() (R/uncollapsed.R), its bases (orthogonal,
# hybrid, decoupled) the dispatch classes of R/variational.R, its
# likelihoods those of R/likelihoods.R, and its methods svgp()'s.
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
#' Classifiers fitted from scratch take the starting values and schedule of
#' \code{\link{svgp}()} (see its Details), with the mean-only coefficients
#' \eqn{a_\gamma} moved by L-BFGS-B with the kernel and the inducing inputs.
#'
#' Likelihoods and minibatches are those of \code{\link{svgp}()}: Gaussian
#' (closed form), Bernoulli with the logit or probit link (Gauss-Hermite
#' quadrature), Poisson and Student-t (see \code{\link{gp_likelihood}}),
#' and the unbiased minibatch estimate that scales the expected
#' log-likelihood by \eqn{N/B}.
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
#'   Appendix F); a classifier fitted from scratch with \code{M} left unset
#'   chooses \eqn{M} as \code{\link{svgp}()} does.
#' @param orthogonal the mean-only inducing inputs \eqn{\gamma}: a matrix,
#'   a number (a uniform random subset of the distinct training inputs, as
#'   in Salimbeni et al. 2018, Appendix F; reproducible under
#'   \code{set.seed()}), or 0 for none. By default \eqn{\min(N, 2|\beta|)}{min(N, 2|beta|)}
#'   random training inputs.
#' @param likelihood \code{"gaussian"}, \code{"bernoulli"} (logit link),
#'   \code{"probit"}, \code{"poisson"}, \code{"student_t"} (or a
#'   \code{\link{gp_likelihood}()}), \code{"robustmax"} or \code{"softmax"}
#'   (several classes). By default \code{"softmax"} when \code{y} is a
#'   factor with more than two classes, \code{"bernoulli"} when it is a
#'   two-class factor, a logical or numbers coded 0/1, \code{"gaussian"}
#'   otherwise.
#' @param noise Gaussian likelihood: the starting noise variance (by default
#'   a tenth of the variance of \code{y}, the paper's 0.1 for standardised
#'   data); Student-t: the starting squared scale.
#' @param mean the prior mean: a fixed number or \code{"constant"} to learn
#'   it; by default 0 for the classifiers and \code{"constant"} for the
#'   others.
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
#'   \code{\link{predict.svgp}}, \code{\link{gp_likelihood}}
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
  if (is.null(likelihood)) likelihood <- .lik_choose(y, numeric = "gaussian")
  r <- .uc_response(likelihood, y, nrow(x), quadrature, control, NULL)
  optimize <- .check_flag(optimize, "optimize")
  s <- .uc_settings(kernel, optimize_inducing, batch_size, r, start, "odvgp", x)
  .odvgp_basis_control(basis, s$control)
  if (!is.null(start)) {
    if (missing(inducing)) inducing <- start$params$Z
    if (is.null(orthogonal)) orthogonal <- start$params$O
  }
  fresh <- optimize && is.null(start)
  k <- .uc_kernel(s$kernel, x, r, fresh, M, noise, joint_noise = FALSE, mean = mean,
                  auto_M = .uc_auto_spec(inducing, M))
  spec <- .inducing_spec(inducing, if (is.null(k$M)) M else k$M, NULL, x, default = "kmeans")
  Z <- .select_by_spec(spec, x, k$kernel, warn_short = !is.null(M) || is.numeric(inducing))
  O <- .odvgp_orthogonal(orthogonal, x, nrow(Z))
  name <- c(orthogonal = "Orthogonally decoupled", hybrid = "Hybrid-basis decoupled",
            decoupled = "Decoupled (Cheng-Boots basis)")[[basis]]
  fit <- .uc_fit("odvgp", call, x, r, k$kernel, Z, O, basis = basis, mean = mean,
                 noise = k$noise, fixed = fixed, optimize_inducing = s$optimize_inducing,
                 control = s$control, batch_size = s$batch_size, start = start, q_u = NULL,
                 label = sprintf("%s SVGP (|beta| = %d, |gamma| = %d)", name, nrow(Z), nrow(O)),
                 schedule = fresh, kernel_given = s$kernel)
  class(fit) <- c("odvgp", "svgp", "sparsevgp")
  .build_or_fit(fit, optimize)
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

# The basis argument of odvgp().
.odvgp_basis <- function(basis) {
  if (!is.character(basis) || length(basis) < 1L || anyNA(basis) ||
      (length(basis) > 1L && !identical(basis, c("orthogonal", "hybrid", "decoupled")))) {
    stop("'basis' must be \"orthogonal\", \"hybrid\" or \"decoupled\"", call. = FALSE)
  }
  if (identical(basis, c("orthogonal", "hybrid", "decoupled"))) basis <- "orthogonal"
  if (!(basis %in% c("orthogonal", "hybrid", "decoupled"))) {
    stop("'basis' must be \"orthogonal\", \"hybrid\" or \"decoupled\"", call. = FALSE)
  }
  basis
}

# Natural gradients are defined here for the orthogonal (and coupled) basis
# only: the hybrid's m_beta and a_gamma are coupled, and the decoupled
# basis's (a, B) are not natural parameters of q(f_beta).
.odvgp_basis_control <- function(basis, control) {
  if (basis != "orthogonal" && identical(control$optimizer, "natgrad")) {
    stop(sprintf("natural gradients are available for basis = \"orthogonal\" only, not \"%s\": use control$optimizer = \"adam\" or \"lbfgsb\"",
                 basis), call. = FALSE)
  }
  invisible(control)
}
