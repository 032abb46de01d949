# The uncollapsed, whitened SVGP (Hensman et al. 2015; seed001; seed004
# section 6.1): q(u) = N(L b, L W W' L') with L = chol(Kuu), fitted jointly
# with the kernel parameters by L-BFGS-B. The ELBO, its gradient in the
# variational parameters and its adjoints for the kernel matrices are
# computed by src/svgp.c. With a Bernoulli-logit likelihood it is seed004's
# baseline classifier; with a Gaussian likelihood it must agree with SGPR at
# SGPR's optimal q(u).

#' Stochastic variational Gaussian process (SVGP), uncollapsed
#'
#' Fits a sparse variational Gaussian process with an explicit Gaussian
#' \eqn{q(u)} for the function values at the inducing inputs, by maximising
#' \deqn{\mathrm{ELBO} = \sum_n E_{q(f_n)}[\log p(y_n | f_n)] - KL[q(u) \| p(u)]}
#' (seed001 section 5; Hensman et al. 2015) over the variational parameters,
#' the kernel parameters (and the noise and mean) and, optionally, the
#' inducing inputs, with L-BFGS-B on the analytic gradient (full batch).
#'
#' The variational distribution is whitened, as GPflow does by default:
#' \eqn{u = L v} with \eqn{L L^\top = K_{uu}} and \eqn{q(v) = N(b, W W^\top)},
#' \eqn{W} lower triangular with a positive diagonal (optimised on the log
#' scale). It starts at the prior (\eqn{b = 0}, \eqn{W = I}) unless
#' \code{q_u} is given. Then \eqn{KL = \frac12(\|W\|_F^2 + \|b\|^2 - M - 2\sum
#' \log W_{ii})}.
#'
#' Likelihoods: \code{"bernoulli"}, the logistic
#' \eqn{p(y | f) = \sigma(y f)} with \eqn{y \in \{-1, +1\}}, whose expectations
#' are computed by 20-point Gauss-Hermite quadrature (the baseline of seed004's
#' tables); \code{"gaussian"}, \eqn{N(y; f, \sigma^2)} with a learned
#' variance, whose expectations are exact. With the Gaussian likelihood and
#' \eqn{q(u)} set to the optimal distribution of an \code{\link{sgpr}()} fit
#' with the same parameters, the ELBO equals the SGPR bound; otherwise it is
#' lower.
#'
#' @inheritParams sgpr
#' @param y the response: for \code{"bernoulli"} labels as in
#'   \code{\link{pgpr}()} (a two-level factor, a logical or a 0/1 vector),
#'   for \code{"gaussian"} a numeric vector.
#' @param kernel a kernel; parameters left \code{NULL} are chosen from the
#'   data (variance 1 for Bernoulli).
#' @param inducing the inducing inputs: a matrix, a number \eqn{M} or one of
#'   \code{"greedy"}, \code{"kmeans"}, \code{"random"} (chosen by
#'   \code{\link{select_inducing}()} as in \code{\link{sgpr}()}), or the
#'   result of \code{select_inducing()}. By default \eqn{M = \min(N, 100)} by
#'   greedy conditional variance.
#' @param likelihood \code{"bernoulli"} (logit link) or \code{"gaussian"}.
#' @param noise Gaussian likelihood: the starting noise variance (by default
#'   a tenth of the variance of \code{y}).
#' @param mean the prior mean: a fixed number or \code{"constant"} to learn
#'   it. By default 0 for Bernoulli (as in seed004) and \code{"constant"} for
#'   Gaussian.
#' @param optimize_inducing if \code{TRUE} (the default, as in GPflow), the
#'   inducing inputs are optimised with the other parameters; seed004's
#'   "SVGP K-means" baseline holds them at the k-means centres
#'   (\code{FALSE}).
#' @param q_u the starting \eqn{q(u)}: \code{list(mean, cov)} in the
#'   convention of \code{\link{posterior_inducing}()} (the mean includes the
#'   constant prior mean), which is converted to the whitened parameters.
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"noise"}, \code{"mean"},
#'   \code{"Z"}, \code{"q_mu"}, \code{"q_sqrt_diag"}, \code{"q_sqrt_lower"}, or
#'   single entries.
#' @param control as for \code{\link{gpr}()}; \code{maxit} defaults to 1000.
#' @param start a previous \code{svgp} fit whose parameters (including
#'   \eqn{q(u)} when the inducing inputs keep their number) are the starting
#'   values.
#' @return An object of class \code{c("svgp", "sparsevgp")}. Methods:
#'   \code{print}, \code{summary}, \code{coef}, \code{predict} (see
#'   \code{\link{predict.pgpr}} for Bernoulli, \code{\link{predict.sparsevgp}}
#'   for Gaussian), \code{plot}, \code{fitted}, \code{logLik} (the ELBO),
#'   \code{\link{objective}}.
#' @references Hensman, J., Matthews, A. G. de G. and Ghahramani, Z. (2015).
#'   Scalable variational Gaussian process classification. AISTATS.
#'
#'   Tiao, L. C. (2020). A handbook for sparse variational Gaussian processes
#'   (seed001).
#' @seealso \code{\link{pgpr}}, \code{\link{sgpr}}
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
#' @export
svgp <- function(x, ...) UseMethod("svgp")

#' @rdname svgp
#' @export
svgp.formula <- function(x, data = NULL, ...) {
  md <- .formula_data(x, data)
  fit <- svgp.default(md$x, md$y, ...)
  fit$terms <- md$terms
  fit$xlevels <- md$xlevels
  fit$call <- .formula_call(match.call(), "svgp")
  fit
}

#' @rdname svgp
#' @export
svgp.default <- function(x, y, kernel = kernel_rbf(), inducing = NULL,
                         likelihood = c("bernoulli", "gaussian"), noise = NULL, mean = NULL,
                         optimize = TRUE, optimize_inducing = TRUE, q_u = NULL, fixed = NULL,
                         control = list(), start = NULL, ...) {
  call <- match.call()
  call[[1L]] <- as.name("svgp")
  call$start <- NULL
  .no_dots(...)
  likelihood <- match.arg(likelihood)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  N <- nrow(x)
  bern <- likelihood == "bernoulli"
  if (bern) {
    lab <- .as_labels(y, N)
    target <- lab$ypm
  } else {
    target <- .as_response(y, N)
  }
  kernel <- .check_kernel(kernel)
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  if (!is.null(start)) {
    if (!inherits(start, "svgp")) stop("'start' must be an svgp fit", call. = FALSE)
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (is.null(inducing)) inducing <- start$params$Z
  }
  kernel <- .kern_init(kernel, x, if (bern) NULL else target)
  Z <- .inducing_inputs(inducing, x, kernel)
  M <- nrow(Z)
  if (is.null(mean)) mean <- if (bern) 0 else "constant"
  mn <- if (bern) .pgpr_mean_start(mean, lab$y01) else .mean_start(mean, target)
  params <- list(variance = kernel$variance, lengthscale = kernel$lengthscale)
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
  control <- .check_control(utils::modifyList(list(maxit = 1000L), control))
  if (!is.null(start)) {
    params <- .warm_params(params, start$params, skip = c("Z", if (mn$fixed) "mean"))
  }
  if (!is.null(q_u)) params <- .svgp_whiten(q_u, params, kernel, control)
  fit <- structure(list(
    call = call, x = x, y = if (bern) lab$y01 else target, target = target,
    labels = if (bern) lab$coding else NULL, likelihood = likelihood,
    kernel = kernel, params = params, transforms = transforms,
    fixed = .fixed_mask(fixed, params, transforms,
                        c(if (mn$fixed) "mean", if (!optimize_inducing) "Z")),
    control = control, eval_fun = .svgp_eval, predict_fun = .svgp_predict_latent,
    noise_fun = .noise_constant,
    model = sprintf("Uncollapsed whitened SVGP, %s likelihood%s",
                    if (bern) "Bernoulli-logit (20-point Gauss-Hermite)" else "Gaussian",
                    if (optimize_inducing) "" else ", fixed inducing inputs")),
    class = c("svgp", "sparsevgp"))
  .build_or_fit(fit, optimize)
}

# The whitened q(v) = N(b, W W') with W = tril(diag = exp(log diag), lower).
.svgp_qsqrt <- function(params) {
  M <- length(params$q_mu)
  W <- diag(params$q_sqrt_diag, M)
  W[lower.tri(W)] <- params$q_sqrt_lower
  W
}

# q(u) = N(mean, cov) (mean including the constant prior mean) to whitened
# parameters: b = L^-1 (mean - m), W = chol(L^-1 cov L^-T), L = chol(Kuu)
# with the same jitter as the bound.
.svgp_whiten <- function(q_u, params, kernel, control) {
  M <- length(params$q_mu)
  if (!is.list(q_u) || is.null(q_u$mean) || is.null(q_u$cov) || length(q_u$mean) != M ||
      !is.matrix(q_u$cov) || any(dim(q_u$cov) != M) ||
      any(!is.finite(q_u$mean)) || any(!is.finite(q_u$cov))) {
    stop(sprintf("'q_u' must be list(mean, cov) with a mean of length %d and a %d x %d covariance",
                 M, M, M), call. = FALSE)
  }
  kc <- .kern_c(.kernel_at(kernel, params))
  Kuu <- .Call(ffi_kern_matrix, kc, params$Z, NULL)
  L <- .chol_jitter(Kuu, control$jitter, control$jitter_cap)$L
  b <- forwardsolve(L, q_u$mean - params$mean)
  Sw <- forwardsolve(L, t(forwardsolve(L, q_u$cov)))
  Sw <- (Sw + t(Sw)) / 2
  W <- tryCatch(t(chol(Sw)), error = function(e) {
    stop("'q_u$cov' must be positive definite", call. = FALSE)
  })
  params$q_mu <- drop(b)
  params$q_sqrt_diag <- diag(W)
  params$q_sqrt_lower <- W[lower.tri(W)]
  params
}

# The ELBO at `params` and its gradient on the unconstrained scale: the
# variational blocks from src/svgp.c directly, the kernel parameters and Z
# by contracting the adjoints Guu, Guf, gdiag with the kernel derivatives.
.svgp_eval <- function(fit, params, grad = TRUE) {
  x <- fit$x
  kc <- .kern_c(.kernel_at(fit$kernel, params))
  Z <- params$Z
  Kuu <- .Call(ffi_kern_matrix, kc, Z, NULL)
  Kuf <- .Call(ffi_kern_matrix, kc, Z, x)
  kdiag <- .Call(ffi_kern_diag, kc, x)
  W <- .svgp_qsqrt(params)
  gh <- .gauss_hermite(20L)
  bern <- fit$likelihood == "bernoulli"
  r <- .Call(ffi_svgp_elbo, Kuu, Kuf, kdiag, as.double(params$q_mu), W, fit$target,
             if (bern) 1L else 2L, if (bern) 1 else params$noise, params$mean, gh$x, gh$w,
             fit$control$jitter, fit$control$jitter_cap, grad)
  out <- list(value = r$elbo, terms = c(ell = r$ell, kl = -r$kl), jitter = r$jitter,
              jitter_scale = mean(diag(Kuu)),
              posterior = list(L = r$L, q_mu = params$q_mu, q_sqrt = W))
  if (!grad) return(out)
  wantZ <- !all(fit$fixed[grepl("^Z\\[", names(fit$fixed))])
  g_uu <- .Call(ffi_kern_grad, kc, Z, NULL, r$Guu, wantZ)
  g_uf <- .Call(ffi_kern_grad, kc, Z, x, r$Guf, wantZ)
  th <- g_uu$theta + g_uf$theta + .Call(ffi_kern_grad_diag, kc, x, r$gdiag)
  th[1L] <- th[1L] + sum(diag(r$Guu)) * r$jitter
  g <- list(variance = th[1L], lengthscale = th[-1L],
            noise = if (bern) NULL else r$gnoise * params$noise,
            mean = r$gmean,
            Z = if (wantZ) g_uu$x + g_uf$x else matrix(0, nrow(Z), ncol(Z)),
            q_mu = r$gq_mu,
            q_sqrt_diag = diag(r$gq_sqrt) * params$q_sqrt_diag,
            q_sqrt_lower = r$gq_sqrt[lower.tri(r$gq_sqrt)])
  out$grad <- g[names(params)]
  out
}

# q(f*) = N(m + A' b, k** - |A|^2 + |W' A|^2), A = L^-1 K_u* (seed001
# section 6, whitened), in blocks of 1000 rows.
.svgp_predict_latent <- function(object, xnew, full_cov) {
  kc <- .kern_c(.kernel_at(object$kernel, object$params))
  post <- object$posterior
  Z <- object$params$Z
  m <- object$params$mean
  if (full_cov) {
    A <- forwardsolve(post$L, .Call(ffi_kern_matrix, kc, Z, xnew))
    V <- crossprod(post$q_sqrt, A)
    return(list(mean = drop(crossprod(A, post$q_mu)) + m,
                cov = .Call(ffi_kern_matrix, kc, xnew, NULL) - crossprod(A) + crossprod(V)))
  }
  mean <- var <- numeric(nrow(xnew))
  for (b in .row_blocks(nrow(xnew))) {
    xb <- xnew[b, , drop = FALSE]
    A <- forwardsolve(post$L, .Call(ffi_kern_matrix, kc, Z, xb))
    V <- crossprod(post$q_sqrt, A)
    mean[b] <- drop(crossprod(A, post$q_mu)) + m
    var[b] <- .Call(ffi_kern_diag, kc, xb) - colSums(A^2) + colSums(V^2)
  }
  list(mean = mean, var = var)
}

#' @rdname predict.pgpr
#' @export
predict.svgp <- function(object, newdata = NULL, type = NULL,
                         method = c("quadrature", "probit", "plugin"), full_cov = FALSE, ...) {
  if (object$likelihood == "gaussian") {
    if (is.null(type)) type <- "latent"
    return(predict.sparsevgp(object, newdata, type = type, full_cov = full_cov))
  }
  if (is.null(type)) type <- "link"
  .predict_classifier(object, newdata, type[1L], method[1L], full_cov)
}

#' @export
fitted.svgp <- function(object, method = "quadrature", ...) {
  if (object$likelihood == "gaussian") return(NextMethod())
  .fitted_classifier(object, method)
}

#' @export
residuals.svgp <- function(object, ...) {
  object$y - fitted(object)
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
  s
}

#' @export
logLik.svgp <- function(object, ...) {
  # degrees of freedom: the model parameters, not the variational ones
  var_par <- grepl("^(q_mu|log_q_sqrt_diag|q_sqrt_lower)", names(object$fixed))
  structure(object$bound, df = sum(!object$fixed & !var_par), nobs = length(object$y),
            class = "logLik")
}

#' @rdname plot.pgpr
#' @export
plot.svgp <- function(x, what = c("prob", "pg_variance"), n = 200L,
                      method = c("quadrature", "probit", "plugin"), inducing = TRUE, xlab = NULL,
                      ylab = NULL, main = NULL, ...) {
  if (x$likelihood == "gaussian") {
    return(plot.sparsevgp(x, n = n, xlab = xlab, ylab = ylab, main = main, ...))
  }
  what <- match.arg(what)
  method <- match.arg(method)
  .plot_classifier(x, what, n, method, xlab, ylab, main, .check_flag(inducing, "inducing"), ...)
}
