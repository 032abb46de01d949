# The likelihoods of the uncollapsed models (svgp(), odvgp()): one small S3
# class per family, "lik_<family>" (with "sparsevgp_likelihood"), holding
# plain data (the family, the Gauss-Hermite order, the classes, Monte Carlo
# draws, fixed parameters). Everything the models and the shared methods
# need to know about a likelihood is one of the internal generics below;
# no other file tests which likelihood a fit has. A new likelihood is a
# new class here: its name in .lik_families and its methods.
#
#   .lik_read(lik, y, n)       the response as this family reads it:
#                              list(lik, y (kept in fit$y), target (what
#                              .lik_ell() reads), labels (class coding or
#                              NULL)), with clear errors for values it
#                              cannot take
#   .lik_blocks(lik, target, noise)
#                              the likelihood's own parameter blocks:
#                              list(params, transforms, roles)
#   .lik_ell(lik, MU, S, target, params, scale)
#                              E_q[log p(y | f)] of the marginals
#                              f_nk ~ N(MU_nk, S_nk) (n x K, K latent
#                              functions) times `scale`, its derivatives g
#                              and h in MU and S (n x K), and `grad`, its
#                              gradient in the likelihood's own blocks on
#                              the unconstrained scale
#   .lik_moments(lik, mu, s, params)
#                              mean and variance of a new y (regression
#                              families)
#   .lik_quantile(lik, mu, s, params, p)
#                              quantiles of a new y (prediction intervals)
#   .lik_draw(lik, f, params)  y drawn given latent values f
#   .lik_link_inverse(lik, f)  E[y | f] (the inverse link)
#   .lik_prob(lik, MU, S)      class probabilities (classifiers)
#   .lik_label(lik), .lik_title(lik), .lik_noise_label(lik, params, digits)
#                              what print(), summary() and plots say
#   .lik_mean(lik, mean, target)
#                              the prior mean: list(value, fixed) from the
#                              user's `mean` (NULL: the family's default)
#   .lik_start_variances(lik)  the kernel variances the starting grid of a
#                              classifier scores (R/uncollapsed_training.R)
# and these fields: `family`, `latent` (the number of latent functions),
# `location` (TRUE when y is on the scale of f: the optimiser standardises
# by y and offsets apply), `conjugate` (Gaussian: a natural-gradient step
# of size 1 is exact), `newton` (a natural-gradient step of size 1 is
# close to a Newton step on q(u), so that a few reach its conditional
# optimum: one latent function with a log-concave likelihood; not
# robust-max, whose log-likelihood is not concave, nor the softmax, whose
# latent functions the steps move one by one although the likelihood
# couples them, nor Student-t), `link` (the inverse link of predictions),
# `quadrature` (Gauss-Hermite nodes, where used).

.lik_families <- c("bernoulli", "gaussian", "probit", "robustmax", "softmax", "poisson",
                   "student_t")

# ---- construction -------------------------------------------------------------

# A likelihood object of `family` with the quadrature order `quadrature`,
# for the softmax `mc_samples` Monte Carlo draws, for Student-t `df`
# degrees of freedom (held, or the start when learn_df).
.new_lik <- function(family, quadrature = 20L, mc_samples = NULL, df = 4, learn_df = FALSE) {
  family <- match.arg(family, .lik_families)
  fields <- switch(family,
    gaussian = list(location = TRUE, conjugate = TRUE, newton = TRUE, link = "identity"),
    bernoulli = list(link = "logit", newton = TRUE),
    probit = list(link = "probit", newton = TRUE),
    robustmax = list(link = "robustmax"),
    softmax = list(link = "softmax", mc_samples = mc_samples),
    poisson = list(link = "log", newton = TRUE),
    student_t = list(location = TRUE, link = "identity", df = df, learn_df = learn_df))
  base <- list(family = family, latent = 1L, location = FALSE, conjugate = FALSE,
               newton = FALSE, quadrature = as.integer(quadrature))
  cls <- c(paste0("lik_", family),
           if (family %in% c("bernoulli", "probit")) "lik_binary",
           if (family %in% c("robustmax", "softmax")) "lik_multiclass", "sparsevgp_likelihood")
  structure(utils::modifyList(base, fields), class = cls)
}

# The likelihood of a model: a family name or a likelihood object (its
# family's settings kept), with the model's quadrature order and Monte Carlo
# draws; mc_samples is for the softmax only.
.as_likelihood <- function(likelihood, quadrature = 20L, mc_samples = NULL) {
  if (inherits(likelihood, "sparsevgp_likelihood")) {
    lik <- likelihood
    lik$quadrature <- as.integer(quadrature)
  } else {
    if (!is.character(likelihood) || length(likelihood) < 1L) {
      stop(sprintf("'likelihood' must be one of %s", paste0("\"", .lik_families, "\"",
                                                          collapse = ", ")), call. = FALSE)
    }
    lik <- .new_lik(match.arg(likelihood[1L], .lik_families), quadrature)
  }
  if (!is.null(mc_samples) && lik$family != "softmax") {
    stop("'control$mc_samples' applies to the softmax likelihood only", call. = FALSE)
  }
  if (lik$family == "softmax") lik$mc_samples <- mc_samples
  lik
}

#' Likelihoods of the uncollapsed models
#'
#' The observation models of \code{\link{svgp}()} and \code{\link{odvgp}()},
#' chosen with their argument \code{likelihood}: a family name, or the
#' result of \code{gp_likelihood()} for a family with settings of its own
#' (the degrees of freedom of Student-t). Each model fits
#' \eqn{\sum_n E_{q(f_n)}[\log p(y_n | f_n)] - KL}{sum_n E_q(f_n)[log p(y_n | f_n)] - KL}
#' with the expectations below.
#' \describe{
#'   \item{\code{"gaussian"}}{\eqn{y \sim N(f, \sigma^2)}{y ~ N(f, sigma^2)} with a learned
#'     noise variance; the expectation is exact.}
#'   \item{\code{"bernoulli"}, \code{"probit"}}{two classes,
#'     \eqn{p(y | f) = \sigma(y f)}{p(y | f) = sigma(y f)} (logit) or \eqn{\Phi(y f)}{Phi(y f)}
#'     with \eqn{y = \pm 1}{y = +/- 1}; expectations by Gauss-Hermite quadrature
#'     (\code{quadrature} points).}
#'   \item{\code{"robustmax"}, \code{"softmax"}}{several classes, one latent
#'     function each (see \code{\link{odvgp}()}).}
#'   \item{\code{"poisson"}}{counts, \eqn{y \sim \mathrm{Poisson}(e^f)}{y ~ Poisson(exp(f))}
#'     (log link). The expectation is exact:
#'     \eqn{E[\log p(y | f)] = y\mu - e^{\mu + s/2} - \log y!}{E[log p(y | f)] = y mu - exp(mu + s/2) - log y!}
#'     for \eqn{f \sim N(\mu, s)}{f ~ N(mu, s)}. \code{predict(type =
#'     "response")} gives the expected count
#'     \eqn{E[y] = e^{\mu + s/2}}{E[y] = exp(mu + s/2)} and its variance
#'     \eqn{E[y] + (e^s - 1)E[y]^2}{E[y] + (exp(s) - 1) E[y]^2}; prediction
#'     intervals are quantiles of the predictive distribution of the count
#'     (a Poisson mixed over the log-normal rate, by 40-point
#'     Gauss-Hermite quadrature).}
#'   \item{\code{"student_t"}}{heavy-tailed noise for data with outliers,
#'     \eqn{y = f + \sigma t_\nu}{y = f + sigma t_nu} with a learned scale
#'     \eqn{\sigma}{sigma} and \eqn{\nu}{nu} degrees of freedom, 4 by default and
#'     held unless \code{learn_df = TRUE}; expectations by Gauss-Hermite
#'     quadrature. The mean of a new \eqn{y} is \eqn{\mu}{mu}, its variance
#'     \eqn{s + \sigma^2\nu/(\nu - 2)}{s + sigma^2 nu / (nu - 2)} (infinite for
#'     \eqn{\nu \le 2}{nu <= 2}); prediction intervals are quantiles of the
#'     predictive distribution. A model's \code{noise} argument starts
#'     \eqn{\sigma^2}{sigma^2}.}
#' }
#' The expectations and their derivatives are checked in the tests against
#' numerical integration and finite differences. With no \code{likelihood}
#' a model reads the response: a factor with more than two classes is
#' robust-max, two classes (a factor, a logical, 0/1) Bernoulli, other
#' numbers Gaussian (\code{odvgp()}) or an error that says which
#' likelihood to name (\code{svgp()}).
#'
#' @param family the name of the family.
#' @param df Student-t: the degrees of freedom (held fixed), or their start
#'   with \code{learn_df = TRUE}.
#' @param learn_df Student-t: whether the degrees of freedom are learned
#'   (on the log scale, as a hyperparameter counted by \code{logLik()}).
#' @return An object of class \code{"sparsevgp_likelihood"} for the
#'   \code{likelihood} argument of \code{svgp()} and \code{odvgp()}.
#' @references Hensman, J., Matthews, A. G. de G. and Ghahramani, Z. (2015).
#'   Scalable variational Gaussian process classification. AISTATS.
#'
#'   Vanhatalo, J., Jylanki, P. and Vehtari, A. (2009). Gaussian process
#'   regression with Student-t likelihood. NeurIPS.
#'
#'   See also \link{sparsevgp-references}.
#' @seealso \code{\link{svgp}}, \code{\link{odvgp}}, \code{\link{predict.svgp}}
#' @examples
#' # counts: a smooth rate, Poisson likelihood with the log link
#' set.seed(1)
#' x <- seq(0, 10, length.out = 200)
#' y <- rpois(200, exp(1 + sin(x)))
#' fit <- svgp(x, y, likelihood = "poisson", inducing = 15)
#' p <- predict(fit, data.frame(x = c(2, 5)), type = "response", interval = "prediction")
#' cbind(p, true_rate = exp(1 + sin(c(2, 5))))
#'
#' # outliers: Student-t noise keeps the curve where the Gaussian bends
#' set.seed(2)
#' y2 <- sin(x) + rnorm(200, sd = 0.1)
#' y2[c(20, 60, 120, 170)] <- c(6, -5, 7, -6)
#' g <- svgp(x, y2, likelihood = "gaussian", inducing = 15)
#' t4 <- svgp(x, y2, likelihood = "student_t", inducing = 15)
#' xs <- matrix(c(1.9, 5.9))
#' cbind(true = sin(xs[, 1]), gaussian = predict(g, xs)$mean, student_t = predict(t4, xs)$mean)
#' t4
#' # learned degrees of freedom
#' tl <- svgp(x, y2, likelihood = gp_likelihood("student_t", df = 4, learn_df = TRUE),
#'            inducing = 15)
#' coef(tl)
#' @export
gp_likelihood <- function(family = c("gaussian", "bernoulli", "probit", "poisson", "student_t",
                                     "robustmax", "softmax"), df = 4, learn_df = FALSE) {
  family <- match.arg(family)
  if (!is.numeric(df) || length(df) != 1L || !is.finite(df) || df <= 0) {
    stop("'df' must be one positive number", call. = FALSE)
  }
  .new_lik(family, df = as.double(df), learn_df = .check_flag(learn_df, "learn_df"))
}

# The family a response implies when the user names none: a factor (or
# character vector) with more than two classes is multiclass (robust-max);
# two classes (a factor, a logical, numbers coded 0/1 or -1/+1) are
# Bernoulli; any other numbers are `numeric` ("gaussian" for odvgp(); NULL
# for svgp(), which then reads them as labels and says which likelihood to
# name).
.lik_choose <- function(y, numeric = "gaussian") {
  v <- y[!is.na(y)]
  # several classes: the softmax, whose probabilities are calibrated; on
  # iris, forensic glass and waveform (inst/bench/bench_multiclass.R) its
  # test NLL was 0.10, 0.84 and 0.29 against robust-max's 0.23, 1.96 and
  # 0.85 at equal or better accuracy and in less time
  if ((is.factor(y) || is.character(y)) && length(unique(v)) > 2L) return("softmax")
  if (is.factor(y) || is.character(y) || is.logical(y)) return("bernoulli")
  if (is.numeric(y) && length(v) && (all(v %in% c(0, 1)) || all(v %in% c(-1, 1)))) {
    return("bernoulli")
  }
  if (is.null(numeric)) "bernoulli" else numeric
}

# The likelihood of any fit: the uncollapsed models keep theirs; the
# collapsed ones are Gaussian, pgpr Bernoulli-logit.
.lik_of <- function(fit) {
  if (!is.null(fit$lik)) return(fit$lik)
  .new_lik(if (is.null(fit$labels)) "gaussian" else "bernoulli")
}

# ---- the generics ---------------------------------------------------------------

.lik_read <- function(lik, y, n) UseMethod(".lik_read")
.lik_blocks <- function(lik, target, noise) UseMethod(".lik_blocks")
.lik_ell <- function(lik, MU, S, target, params, scale) UseMethod(".lik_ell")
.lik_moments <- function(lik, mu, s, params) UseMethod(".lik_moments")
.lik_quantile <- function(lik, mu, s, params, p) UseMethod(".lik_quantile")
.lik_draw <- function(lik, f, params) UseMethod(".lik_draw")
.lik_link_inverse <- function(lik, f) UseMethod(".lik_link_inverse")
.lik_prob <- function(lik, MU, S) UseMethod(".lik_prob")
.lik_label <- function(lik) UseMethod(".lik_label")
.lik_title <- function(lik) UseMethod(".lik_title")
.lik_noise_label <- function(lik, params, digits) UseMethod(".lik_noise_label")
.lik_mean <- function(lik, mean, target) UseMethod(".lik_mean")
.lik_start_variances <- function(lik) UseMethod(".lik_start_variances")

# Defaults: no parameters of its own (a `noise` is an error), no noise line,
# a prior mean of 0 by default (classifiers), learned when asked.
#' @export
.lik_blocks.sparsevgp_likelihood <- function(lik, target, noise) {
  if (!is.null(noise)) {
    stop("'noise' applies to the Gaussian likelihood only", call. = FALSE)
  }
  list(params = list(), transforms = character(), roles = list())
}

#' @export
.lik_noise_label.sparsevgp_likelihood <- function(lik, params, digits) NULL

#' @export
.lik_mean.sparsevgp_likelihood <- function(lik, mean, target) {
  .mean_start(if (is.null(mean)) 0 else mean, 0)
}

# The latent scale matters to the classifiers through the slope of the link:
# the variances of the grid of R/start_classification.R and one step more
# (256), since the ELBO of separable classes often peaked at its largest.
#' @export
.lik_start_variances.sparsevgp_likelihood <- function(lik) {
  c(.class_start_variances, 4 * max(.class_start_variances))
}

#' @export
.lik_moments.sparsevgp_likelihood <- function(lik, mu, s, params) {
  stop(sprintf("the %s likelihood has no predictive mean and variance of y: use type = \"prob\"",
               lik$family), call. = FALSE)
}

#' @export
.lik_link_inverse.sparsevgp_likelihood <- function(lik, f) f

#' @export
.lik_prob.sparsevgp_likelihood <- function(lik, MU, S) {
  stop(sprintf("the %s likelihood has no class probabilities", lik$family), call. = FALSE)
}

# The nodes and weights of the expectation E[g(f)], f ~ N(mu, s2), as
# sum_i w_i g(mu + sd u_i): Gauss-Hermite of order n rescaled to the normal.
.gh_normal <- function(n) {
  gh <- .gauss_hermite(n)
  list(u = sqrt(2) * gh$x, w = gh$w / sqrt(pi))
}

# Quantiles p (a vector) of a new y at the points with a latent predictive
# N(mu, s) (NA where there is none): a list, one vector per p.
.lik_quantiles <- function(lik, mu, s, params, p) {
  ok <- !is.na(mu) & !is.na(s)
  lapply(p, function(pp) {
    q <- rep(NA_real_, length(mu))
    if (any(ok)) q[ok] <- .lik_quantile(lik, mu[ok], s[ok], params, pp)
    names(q) <- names(mu)
    q
  })
}

# The expectation of a non-finite value is an error that names it (the
# fitting loops step back from it).
.lik_check <- function(ell) {
  if (!is.finite(ell)) stop("the expected log-likelihood is not finite", call. = FALSE)
  ell
}

# ---- Gaussian -------------------------------------------------------------------

# y ~ N(f, sigma^2) with a learned noise variance sigma^2; the expectation
# E[log N(y; f, sigma^2)] = log N(y; mu, sigma^2) - s / (2 sigma^2) is exact
# (src/svgp.c).
#' @export
.lik_read.lik_gaussian <- function(lik, y, n) {
  target <- .as_response(y, n)
  list(lik = lik, y = target, target = target, labels = NULL)
}

#' @export
.lik_blocks.lik_gaussian <- function(lik, target, noise) {
  if (is.null(noise)) noise <- .noise_start(target)
  list(params = list(noise = .check_positive(noise, "noise", 1L)),
       transforms = c(noise = "log"), roles = list())
}

#' @export
.lik_ell.lik_gaussian <- function(lik, MU, S, target, params, scale) {
  e <- .ffi_svgp_ell(MU[, 1L], S[, 1L], target, "gaussian", params$noise,
                     .gauss_hermite(1L), scale)
  list(ell = e$ell, g = matrix(e$g, ncol = 1L), h = matrix(e$h, ncol = 1L),
       grad = list(noise = e$gnoise * params$noise))
}

#' @export
.lik_moments.lik_gaussian <- function(lik, mu, s, params) {
  list(mean = mu, var = s + params$noise)
}

#' @export
.lik_quantile.lik_gaussian <- function(lik, mu, s, params, p) {
  mu + stats::qnorm(p) * sqrt(s + params$noise)
}

#' @export
.lik_draw.lik_gaussian <- function(lik, f, params) {
  f + sqrt(params$noise) * stats::rnorm(length(f))
}

#' @export
.lik_label.lik_gaussian <- function(lik) "Gaussian"

#' @export
.lik_title.lik_gaussian <- function(lik) "Gaussian"

#' @export
.lik_noise_label.lik_gaussian <- function(lik, params, digits) {
  sprintf("variance %s", format(params$noise, digits = digits))
}

#' @export
.lik_mean.lik_gaussian <- function(lik, mean, target) {
  .mean_start(if (is.null(mean)) "constant" else mean, mean(target))
}

# ---- Bernoulli (logit and probit links) -----------------------------------------

# p(y | f) = sigmoid(y f) (logit) or Phi(y f) (probit) with y in {-1, +1};
# expectations by Gauss-Hermite quadrature in src/svgp.c (their derivatives
# are those of the quadrature sum).
#' @export
.lik_read.lik_binary <- function(lik, y, n) {
  lab <- .as_labels(y, n, hint = "likelihood")
  list(lik = lik, y = lab$y01, target = lab$ypm, labels = lab$coding)
}

#' @export
.lik_ell.lik_binary <- function(lik, MU, S, target, params, scale) {
  e <- .ffi_svgp_ell(MU[, 1L], S[, 1L], target, lik$family, 1, .gauss_hermite(lik$quadrature),
                     scale)
  list(ell = e$ell, g = matrix(e$g, ncol = 1L), h = matrix(e$h, ncol = 1L), grad = list())
}

#' @export
.lik_prob.lik_binary <- function(lik, MU, S) .class_prob(MU, S, "quadrature", lik$link)

#' @export
.lik_link_inverse.lik_binary <- function(lik, f) {
  if (lik$link == "probit") stats::pnorm(f) else stats::plogis(f)
}

#' @export
.lik_draw.lik_binary <- function(lik, f, params) {
  as.numeric(stats::runif(length(f)) < .lik_link_inverse(lik, f))
}

#' @export
.lik_label.lik_binary <- function(lik) {
  sprintf("Bernoulli-%s (%d-point Gauss-Hermite)", lik$link, lik$quadrature)
}

#' @export
.lik_title.lik_binary <- function(lik) lik$link

#' @export
# A learned constant by default, as in pgpr(): with unbalanced classes a
# prior mean of 0 pulls every prediction towards one half (ionosphere, 64%
# of one class: test accuracy 0.906 with the mean at 0, 0.954 learned).
.lik_mean.lik_binary <- function(lik, mean, target) {
  p <- (target + 1) / 2
  start <- if (identical(lik$link, "probit")) stats::qnorm(min(max(mean(p), 0.01), 0.99)) else
    .class_mean_start(p)
  .mean_start(if (is.null(mean)) "constant" else mean, start)
}

# ---- several classes: robust-max and softmax -------------------------------------

# K latent functions, one per class; y a factor (or character vector) with
# at least two classes, read as the index of the class.
#' @export
.lik_read.lik_multiclass <- function(lik, y, n) {
  lab <- .multiclass_labels(y, n)
  lik$latent <- length(lab$coding$levels)
  if (lik$family == "softmax") lik$mc <- .softmax_mc(lik$mc_samples, lik$latent)
  list(lik = lik, y = lab$index, target = as.double(lab$index), labels = lab$coding)
}

# A constant shared by all classes does not change these likelihoods: the
# prior mean is 0.
#' @export
.lik_mean.lik_multiclass <- function(lik, mean, target) {
  if (!is.null(mean) && !identical(mean, 0) && !identical(mean, 0L)) {
    stop("'mean' must be 0 for multiclass likelihoods (a constant shared by all classes does not change the likelihood)",
         call. = FALSE)
  }
  .mean_start(0, 0)
}

#' @export
.lik_draw.lik_multiclass <- function(lik, f, params) {
  p <- .lik_prob(lik, f, matrix(0, nrow(f), ncol(f)))
  u <- stats::runif(nrow(p))
  1L + rowSums(u > t(apply(p, 1L, cumsum))[, -ncol(p), drop = FALSE])
}

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

# list(ell, g, h, gnoise) with g and h n x K.
.robustmax_ell <- function(MU, S, y, gh, scale) {
  K <- ncol(MU)
  eps <- .robustmax_eps
  lo <- log(eps / (K - 1))
  cc <- log(1 - eps) - lo
  r <- .robustmax_P(MU, S, y, gh)
  ell <- .lik_check(scale * sum(lo + cc * r$P))
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

#' @export
.lik_ell.lik_robustmax <- function(lik, MU, S, target, params, scale) {
  e <- .robustmax_ell(MU, S, target, .gauss_hermite(lik$quadrature), scale)
  list(ell = e$ell, g = e$g, h = e$h, grad = list())
}

# Robust-max depends on f only through argmax_k f_k: scaling the kernel
# variance by a scales q(u) at its optimum by sqrt(a) and leaves the ELBO as
# it was, so the starting grid scores one variance.
#' @export
.lik_start_variances.lik_robustmax <- function(lik) 1

#' @export
.lik_prob.lik_robustmax <- function(lik, MU, S) {
  .robustmax_prob(MU, S, .gauss_hermite(lik$quadrature))
}

#' @export
.lik_label.lik_robustmax <- function(lik) {
  sprintf("robust-max (%d classes, %d-point Gauss-Hermite)", lik$latent, lik$quadrature)
}

#' @export
.lik_title.lik_robustmax <- function(lik) "robust-max"

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

# list(ell, g, h, gnoise) with g and h n x K, from src/softmax.c: each row
# and draw in turn, n S K exponentials without the n x S matrices of the
# former vectorised R code (the same estimator, equal to rounding; on 5000
# rows, 3 classes and 100 draws 0.015 s against the R code's 0.053 s, which
# was more than half of the CPU time of waveform's default fit).
.softmax_ell <- function(MU, S, y, draws, scale) {
  sd <- sqrt(pmax(S, 1e-12))
  e <- .ffi_softmax_ell(MU, sd, y, draws)
  ell <- .lik_check(scale * e$ell)
  list(ell = ell, g = scale * e$g, h = scale * e$h, gnoise = 0)
}

# Class probabilities: the Monte Carlo average of the softmax over the
# fit's draws (each draw's probabilities sum to one, so their average does).
.softmax_prob <- function(MU, S, draws) .ffi_softmax_prob(MU, sqrt(pmax(S, 0)), draws)

#' @export
.lik_ell.lik_softmax <- function(lik, MU, S, target, params, scale) {
  e <- .softmax_ell(MU, S, target, lik$mc$draws, scale)
  list(ell = e$ell, g = e$g, h = e$h, grad = list())
}

#' @export
.lik_prob.lik_softmax <- function(lik, MU, S) .softmax_prob(MU, S, lik$mc$draws)

#' @export
.lik_label.lik_softmax <- function(lik) {
  sprintf("softmax (%d classes, %d Monte Carlo draws)", lik$latent, nrow(lik$mc$draws))
}

#' @export
.lik_title.lik_softmax <- function(lik) "softmax"

# ---- Poisson (counts, log link) ---------------------------------------------------

# y ~ Poisson(exp(f)): E[log p(y | f)] = y mu - exp(mu + s/2) - log y!
# exactly, with g = y - exp(mu + s/2) and h = -exp(mu + s/2) / 2.
#' @export
.lik_read.lik_poisson <- function(lik, y, n) {
  if (is.matrix(y) && ncol(y) == 1L) y <- drop(y)
  if (!is.numeric(y) || !is.null(dim(y)) || length(y) != n || anyNA(y) || any(!is.finite(y)) ||
      any(y < 0) || any(y != round(y))) {
    bad <- if (is.numeric(y)) utils::head(unique(y[!is.finite(y) | y < 0 | y != round(y)]), 3L)
    stop(sprintf("'y' must be %d counts (whole numbers >= 0) for the Poisson likelihood%s",
                 n, if (length(bad)) sprintf("; it has %s", paste(bad, collapse = ", ")) else ""),
         call. = FALSE)
  }
  y <- as.double(y)
  list(lik = lik, y = y, target = y, labels = NULL)
}

#' @export
.lik_ell.lik_poisson <- function(lik, MU, S, target, params, scale) {
  rate <- exp(MU[, 1L] + S[, 1L] / 2)
  ell <- .lik_check(scale * sum(target * MU[, 1L] - rate - lgamma(target + 1)))
  list(ell = ell, g = matrix(scale * (target - rate), ncol = 1L),
       h = matrix(-scale * rate / 2, ncol = 1L), grad = list())
}

#' @export
.lik_mean.lik_poisson <- function(lik, mean, target) {
  .mean_start(if (is.null(mean)) "constant" else mean,
              log(max(mean(target), 0.5 / length(target))))
}

#' @export
.lik_link_inverse.lik_poisson <- function(lik, f) exp(f)

#' @export
.lik_moments.lik_poisson <- function(lik, mu, s, params) {
  m <- exp(mu + s / 2)
  list(mean = m, var = m + expm1(s) * m^2)
}

# The smallest k with P(y <= k) >= p, P(y <= k) = E[ppois(k, exp(f))] by
# 40-point Gauss-Hermite quadrature over f ~ N(mu, s), found by doubling and
# bisection over the integers (vectorised over the points).
#' @export
.lik_quantile.lik_poisson <- function(lik, mu, s, params, p) {
  q <- .gh_normal(40L)
  sd <- sqrt(pmax(s, 0))
  cdf <- function(k) {
    out <- 0
    for (i in seq_along(q$u)) out <- out + q$w[i] * stats::ppois(k, exp(mu + sd * q$u[i]))
    out
  }
  lo <- rep(-1, length(mu))
  hi <- pmax(1, stats::qpois(p, exp(mu + s / 2)))
  for (it in 1:60) {
    low <- cdf(hi) < p
    if (!any(low)) break
    lo[low] <- hi[low]
    hi[low] <- 2 * hi[low] + 1
  }
  while (any(hi - lo > 1)) {
    mid <- floor((lo + hi) / 2)
    up <- cdf(mid) >= p
    act <- hi - lo > 1
    hi[act & up] <- mid[act & up]
    lo[act & !up] <- mid[act & !up]
  }
  hi
}

#' @export
.lik_draw.lik_poisson <- function(lik, f, params) as.double(stats::rpois(length(f), exp(f)))

#' @export
.lik_label.lik_poisson <- function(lik) "Poisson (log link)"

#' @export
.lik_title.lik_poisson <- function(lik) "Poisson"

# ---- Student-t (heavy tails) -------------------------------------------------------

# y = f + sigma t_nu: log p = lgamma((nu + 1)/2) - lgamma(nu/2) - log(nu pi)/2
# - log sigma - (nu + 1)/2 log(1 + r^2 / (nu sigma^2)), r = y - f, by
# Gauss-Hermite quadrature, with the exact derivatives of the quadrature sum
# in mu, s (as for the Bernoulli likelihood; at s < 1e-16, half the
# expected second derivative), log sigma and, when learned, log nu. The
# scale and the degrees of freedom are blocks `scale` and `df`.
.t_df <- function(lik, params) if (isTRUE(lik$learn_df)) params$df else lik$df

#' @export
.lik_read.lik_student_t <- function(lik, y, n) .lik_read.lik_gaussian(lik, y, n)

#' @export
.lik_blocks.lik_student_t <- function(lik, target, noise) {
  if (is.null(noise)) noise <- .noise_start(target)
  out <- list(params = list(scale = sqrt(.check_positive(noise, "noise", 1L))),
              transforms = c(scale = "log"),
              roles = list(scale = c(role = "likelihood", scale = "log_sd_y")))
  if (isTRUE(lik$learn_df)) {
    out$params$df <- lik$df
    out$transforms <- c(out$transforms, df = "log")
    out$roles$df <- c(role = "likelihood", scale = "none")
  }
  out
}

#' @export
.lik_ell.lik_student_t <- function(lik, MU, S, target, params, scale) {
  nu <- .t_df(lik, params)
  sig2 <- params$scale^2
  q <- .gh_normal(lik$quadrature)
  mu <- MU[, 1L]
  s2 <- pmax(S[, 1L], 0)
  sd <- sqrt(s2)
  c0 <- lgamma((nu + 1) / 2) - lgamma(nu / 2) - 0.5 * log(nu * pi) - log(params$scale)
  e <- g <- h1 <- h2 <- gs <- gd <- 0
  for (i in seq_along(q$u)) {
    r <- target - mu - sd * q$u[i]
    a <- nu * sig2 + r^2
    d1 <- (nu + 1) * r / a
    e <- e + q$w[i] * (c0 - (nu + 1) / 2 * log1p(r^2 / (nu * sig2)))
    g <- g + q$w[i] * d1
    h1 <- h1 + q$w[i] * d1 * q$u[i]
    h2 <- h2 + q$w[i] * (nu + 1) * (r^2 - nu * sig2) / a^2
    gs <- gs + q$w[i] * ((nu + 1) * r^2 / a - 1)
    gd <- gd + q$w[i] * ((1 + 1 / nu) * r^2 / a - log1p(r^2 / (nu * sig2)))
  }
  h <- ifelse(s2 < 1e-16, h2 / 2, h1 / (2 * pmax(sd, 1e-300)))
  out <- list(ell = .lik_check(scale * sum(e)), g = matrix(scale * g, ncol = 1L),
              h = matrix(scale * h, ncol = 1L), grad = list(scale = scale * sum(gs)))
  if (isTRUE(lik$learn_df)) {
    # d log p / d nu = (psi((nu + 1)/2) - psi(nu/2) - 1/nu - log(1 + r^2 /
    # (nu sigma^2)) + (nu + 1) r^2 / (nu a)) / 2, a = nu sigma^2 + r^2; on
    # the log scale times nu
    dnu <- (digamma((nu + 1) / 2) - digamma(nu / 2) - 1 / nu) * length(mu) + sum(gd)
    out$grad$df <- scale * nu * dnu / 2
  }
  out
}

#' @export
.lik_moments.lik_student_t <- function(lik, mu, s, params) {
  nu <- .t_df(lik, params)
  list(mean = mu, var = s + if (nu > 2) params$scale^2 * nu / (nu - 2) else Inf)
}

# Quantiles of y = f + sigma t_nu, f ~ N(mu, s): the root of
# E[pt((q - f) / sigma, nu)] = p (40-point Gauss-Hermite quadrature) by
# bisection from a bracket that holds it (vectorised over the points).
#' @export
.lik_quantile.lik_student_t <- function(lik, mu, s, params, p) {
  nu <- .t_df(lik, params)
  sig <- params$scale
  q <- .gh_normal(40L)
  sd <- sqrt(pmax(s, 0))
  cdf <- function(v) {
    out <- 0
    for (i in seq_along(q$u)) out <- out + q$w[i] * stats::pt((v - mu - sd * q$u[i]) / sig, nu)
    out
  }
  wide <- 9 * sd + sig * abs(stats::qt(min(p, 1 - p) / 4, nu)) + 1e-12
  lo <- mu - wide
  hi <- mu + wide
  for (it in 1:80) {
    mid <- (lo + hi) / 2
    up <- cdf(mid) >= p
    hi[up] <- mid[up]
    lo[!up] <- mid[!up]
  }
  (lo + hi) / 2
}

#' @export
.lik_draw.lik_student_t <- function(lik, f, params) {
  f + params$scale * stats::rt(length(f), .t_df(lik, params))
}

#' @export
.lik_label.lik_student_t <- function(lik) {
  sprintf("Student-t (%s, %d-point Gauss-Hermite)",
          if (isTRUE(lik$learn_df)) "learned degrees of freedom" else
            sprintf("%s degrees of freedom", format(lik$df)), lik$quadrature)
}

#' @export
.lik_title.lik_student_t <- function(lik) "Student-t"

#' @export
.lik_noise_label.lik_student_t <- function(lik, params, digits) {
  sprintf("Student-t, scale %s, %s degrees of freedom", format(params$scale, digits = digits),
          format(.t_df(lik, params), digits = digits))
}

#' @export
.lik_mean.lik_student_t <- function(lik, mean, target) {
  .mean_start(if (is.null(mean)) "constant" else mean, stats::median(target))
}

# ---- reading labels -------------------------------------------------------------

# Two classes coded as y01 in {0, 1} and ypm = 2 y01 - 1 in {-1, +1} (the PG
# formulas use y_n^2 = 1, Passerello 2022, chapter 4), plus what is needed to give
# class predictions back in the user's coding. The positive class (1) is the
# second factor level, TRUE, or 1, as in glm(). `hint` says what to do with
# numbers that are not labels: "likelihood" (name another likelihood of an
# uncollapsed model) or "sgpr" (a regression model).
.as_labels <- function(y, n, name = "y", hint = "sgpr") {
  if (is.null(y)) stop(sprintf("'%s' is missing", name), call. = FALSE)
  if (is.matrix(y) && ncol(y) == 1L) y <- drop(y)
  if (!is.null(dim(y))) stop(sprintf("'%s' must be a vector, not a matrix", name), call. = FALSE)
  if (length(y) != n) {
    stop(sprintf("'%s' has length %d but the inputs have %d rows", name, length(y), n),
         call. = FALSE)
  }
  if (anyNA(y)) {
    stop(sprintf("'%s' contains NA (%d of %d labels): remove those observations first",
                 name, sum(is.na(y)), n), call. = FALSE)
  }
  two <- function(k, what) {
    if (k != 2L) {
      stop(sprintf("'%s' must have exactly two classes, but it has %d (%s)", name, k, what),
           call. = FALSE)
    }
  }
  if (is.factor(y)) {
    used <- levels(y)[levels(y) %in% as.character(y)]
    two(length(used), paste(used, collapse = ", "))
    y01 <- as.numeric(as.character(y) == used[2L])
    coding <- list(type = "factor", levels = used)
  } else if (is.logical(y)) {
    two(length(unique(y)), paste(unique(y), collapse = ", "))
    y01 <- as.numeric(y)
    coding <- list(type = "logical", levels = c("FALSE", "TRUE"))
  } else if (is.numeric(y)) {
    u <- sort(unique(y))
    if (!all(u %in% c(0, 1)) && !all(u %in% c(-1, 1))) {
      stop(sprintf("'%s' as a number must be coded 0/1 (or -1/+1) for a classifier; it has values %s. %s",
                   name, paste(utils::head(u, 5L), collapse = ", "),
                   if (identical(hint, "likelihood"))
                     "For a numeric response say so: likelihood = \"gaussian\" (regression)" else
                     "For a numeric response use a regression model such as sgpr()"),
           call. = FALSE)
    }
    two(length(u), paste(u, collapse = ", "))
    y01 <- as.numeric(y == 1)
    coding <- list(type = "numeric", levels = as.character(u), values = u)
  } else {
    stop(sprintf("'%s' must be a two-level factor, a logical vector or a 0/1 vector, not %s",
                 name, class(y)[1L]), call. = FALSE)
  }
  list(y01 = y01, ypm = 2 * y01 - 1, coding = coding)
}

# Class labels for the multiclass likelihoods: a factor (or character
# vector) with at least two classes; list(index (1..K), coding).
.multiclass_labels <- function(y, n) {
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

# The starting value of a learned constant prior mean of a classifier: the
# logit of the share of positive labels (kept within [0.01, 0.99]).
.class_mean_start <- function(y01) stats::qlogis(min(max(mean(y01), 0.01), 0.99))

# Class labels in the user's coding from the probability of the positive
# class (p > 1/2; every probability method gives the same boundary mu = 0).
.labels_from_prob <- function(p, coding) {
  pos <- p > 0.5
  out <- switch(coding$type,
    factor = factor(coding$levels[1L + pos], levels = coding$levels),
    logical = pos,
    numeric = coding$values[1L + pos])
  names(out) <- names(p)
  out
}

# ---- quadrature and binary probabilities ----------------------------------------

.gh_cache <- new.env(parent = emptyenv())

# Gauss-Hermite nodes and weights for int exp(-t^2) g(t) dt (Golub and Welsch 1969:
# the nodes are the eigenvalues of the Jacobi matrix of the Hermite
# polynomials, the weights sqrt(pi) times the squared first components).
.gauss_hermite <- function(n = 20L) {
  key <- as.character(n)
  if (!is.null(.gh_cache[[key]])) return(.gh_cache[[key]])
  if (n == 1L) {
    gh <- list(x = 0, w = sqrt(pi))
  } else {
    J <- matrix(0, n, n)
    off <- sqrt(seq_len(n - 1L) / 2)
    J[cbind(1:(n - 1L), 2:n)] <- off
    J[cbind(2:n, 1:(n - 1L))] <- off
    e <- eigen(J, symmetric = TRUE)
    o <- order(e$values)
    gh <- list(x = e$values[o], w = sqrt(pi) * e$vectors[1L, o]^2)
  }
  .gh_cache[[key]] <- gh
  gh
}

# p(y = 1 | x) from the latent predictive N(mu, s2):
#   "quadrature": int sigmoid(f) N(f; mu, s2) df by 20-point Gauss-Hermite,
#   "probit":     sigmoid(mu / sqrt(1 + pi s2 / 8)) (MacKay 1992),
#   "plugin":     sigmoid(mu), the choice of the code behind Passerello's
#                 experiments (2022, chapter 5).
.class_prob <- function(mu, s2, method, link = "logit") {
  # probit link: int Phi(f) N(f; mu, s2) df = Phi(mu / sqrt(1 + s2)) exactly
  if (identical(link, "probit")) {
    return(if (method == "plugin") stats::pnorm(mu) else stats::pnorm(mu / sqrt(1 + pmax(s2, 0))))
  }
  switch(method,
    plugin = stats::plogis(mu),
    probit = stats::plogis(mu / sqrt(1 + pi * s2 / 8)),
    quadrature = {
      gh <- .gauss_hermite(20L)
      s <- sqrt(pmax(s2, 0))
      p <- numeric(length(mu))
      for (i in seq_along(gh$x)) p <- p + gh$w[i] * stats::plogis(mu + sqrt(2) * s * gh$x[i])
      p / sqrt(pi)
    })
}
