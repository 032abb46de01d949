# Natural-gradient steps for the q(u) of an svgp() fit (Hensman et al.
# 2013; Salimbeni et al. 2018, section 3.4, eqs. 16b-16c without orthogonal
# inputs). For the Gaussian likelihood one step of size 1 lands on SGPR's
# optimal q(u); the tests check it.

#' Natural-gradient step for the inducing distribution of an SVGP fit
#'
#' Moves \eqn{q(u) = N(m, S)} of an \code{\link{svgp}()} fit by one
#' natural-gradient step of size \code{step} on the full-batch ELBO, with the
#' kernel, likelihood and inducing inputs held fixed. In the natural
#' parameters \eqn{\theta_1 = S^{-1} m}{theta_1 = S^-1 m}, \eqn{\theta_2 = -S^{-1}/2}{theta_2 = -S^-1/2} the step is
#' \deqn{\theta_1 \leftarrow (1 - \gamma)\theta_1 + \gamma(\Psi \bar g - 2 G_S m),
#'       \quad \theta_2 \leftarrow (1 - \gamma)\theta_2 + \gamma(G_S - K_{uu}^{-1}/2),}{theta_1 <- (1 - gamma) theta_1 + gamma (Psi g_bar - 2 G_S m),
#'   theta_2 <- (1 - gamma) theta_2 + gamma (G_S - Kuu^-1 / 2),}
#' with \eqn{\Psi = K_{uu}^{-1}K_{uf}}{Psi = Kuu^-1 Kuf}, \eqn{\bar g_n}{g_bar_n} and \eqn{\bar h_n}{h_bar_n} the
#' derivatives of the expected log-likelihood with respect to the mean and
#' variance of \eqn{q(f_n)}{q(f_n)} and \eqn{G_S = \Psi\,\mathrm{diag}(\bar h)\Psi^\top}{G_S = Psi diag(h_bar)Psi'}
#' (the update of Salimbeni et al. 2018, eqs. 16b and 16c, without
#' orthogonal inputs, with gradients derived for this package and checked
#' against finite differences). For the Gaussian likelihood a step of size 1 lands on
#' the optimal \eqn{q(u)} of \code{\link{sgpr}()} from any starting point, and
#' the ELBO then equals the collapsed bound. For the Bernoulli likelihood,
#' smaller steps (0.1 to 0.5, say) increase the ELBO from a poor
#' \eqn{q(u)}; a step of 1 can overshoot.
#'
#' The step does not depend on whether the fit is whitened (the natural
#' parameters of \eqn{u = Lv} are linear in those of \eqn{v}); the result is
#' stored in the fit's own parameterisation. Fixed variational parameters
#' are overwritten too. To alternate natural-gradient steps on \eqn{q(u)}
#' with the optimisation of the other parameters, call \code{svgp()} with
#' \code{start} = the stepped fit and \code{fixed = c("q_mu",
#' "q_sqrt_diag", "q_sqrt_lower")}.
#'
#' @param fit an \code{\link{svgp}} fit.
#' @param step the step size \eqn{\gamma}{gamma}, in (0, 1].
#' @return The fit with the new \eqn{q(u)}, its ELBO and its predictive
#'   caches.
#' @references Hensman, J., Fusi, N. and Lawrence, N. D. (2013). Gaussian
#'   processes for big data. UAI.
#'
#'   Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M. (2018).
#'   Orthogonally decoupled variational Gaussian processes. NeurIPS.
#'
#'   See also \link{sparsevgp-references}.
#' @examples
#' s <- sgpr(y ~ x, data = snelson, inducing = 10)
#' g <- svgp(y ~ x, data = snelson, likelihood = "gaussian", inducing = s$params$Z,
#'           kernel = kernel_rbf(s$params$lengthscale, s$params$variance),
#'           noise = s$params$noise, mean = s$params$mean, optimize = FALSE)
#' c(prior = logLik(g), one_step = logLik(natgrad_step(g)), sgpr = logLik(s))
#' @export
natgrad_step <- function(fit, step = 1) {
  if (!inherits(fit, "svgp")) stop("'fit' must be an svgp fit", call. = FALSE)
  if (!is.numeric(step) || length(step) != 1L || !is.finite(step) || step <= 0 || step > 1) {
    stop("'step' must be one number in (0, 1]", call. = FALSE)
  }
  params <- fit$params
  r <- .svgp_call(fit, params, grad = TRUE)
  L <- r$L
  whiten <- !isFALSE(fit$whiten)
  W <- .svgp_qsqrt(params)
  # current q(u) = N(m, S), S = R R'
  m <- if (whiten) drop(L %*% params$q_mu) else params$q_mu
  R <- if (whiten) L %*% W else W
  P <- backsolve(t(L), forwardsolve(L, r$Kuf))            # Psi = Kuu^-1 Kuf: M x N
  GS <- P %*% (r$gdiag * t(P))                            # Psi diag(h) Psi'
  gm <- drop(P %*% r$gmu)
  Ri_m <- forwardsolve(R, m)
  Sinv <- chol2inv(t(R))
  Kinv <- chol2inv(t(L))
  # natural parameters: theta1 = S^-1 m, Lam = -2 theta2 = S^-1
  th1 <- (1 - step) * backsolve(t(R), Ri_m) + step * (gm - 2 * drop(GS %*% m))
  Lam <- (1 - step) * Sinv + step * (Kinv - 2 * GS)
  Lam <- (Lam + t(Lam)) / 2
  if (whiten) {
    # v = L^-1 u: precision L' Lam L, natural mean L' th1
    Lam <- crossprod(L, Lam %*% L)
    Lam <- (Lam + t(Lam)) / 2
    th1 <- drop(crossprod(L, th1))
  }
  U <- tryCatch(chol(Lam), error = function(e) {
    stop("the natural-gradient step gives an indefinite precision: use a smaller 'step'",
         call. = FALSE)
  })
  b <- backsolve(U, forwardsolve(t(U), th1))
  Wn <- t(chol(chol2inv(U)))
  params$q_mu <- drop(b)
  params$q_sqrt_diag <- diag(Wn)
  params$q_sqrt_lower <- Wn[lower.tri(Wn)]
  fit$params <- params
  .finish(fit)
}
