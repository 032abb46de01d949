# Natural-gradient steps for the q(u) of an svgp() fit (Hensman et al.
# 2013; Salimbeni et al. 2018, section 3.4, eqs. 16b-16c without orthogonal
# inputs). For the Gaussian likelihood one step of size 1 lands on SGPR's
# optimal q(u); the tests check it.

#' Natural-gradient step for the inducing distribution of an SVGP fit
#'
#' Moves \eqn{q(u) = N(m, S)} of an \code{\link{svgp}()} fit (or the
#' \eqn{\beta}-block \eqn{q(f_\beta) = N(m_\beta, S)} of an \code{\link{odvgp}()}
#' fit) by one
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
#' For an \code{odvgp()} fit, \eqn{\Psi \bar g}{Psi g_bar} is \eqn{K_\beta^{-1}K_{\beta f}\bar g}{Kbeta^-1 Kbeta,f g_bar}
#' with \eqn{\bar g}{g_bar} at the full mean (with its \eqn{\gamma}-part), which
#' stays fixed: a step of size 1 with the Gaussian likelihood gives the
#' optimal \eqn{q(f_\beta)} given \eqn{a_\gamma}, the SGPR solution for the
#' residuals \eqn{y - \Phi_\perp a_\gamma}{y - Phi_perp a_gamma} (Salimbeni et al. 2018, section
#' 3.4).
#'
#' Fits use these steps with \code{control = list(optimizer = "natgrad")}:
#' each iteration takes one natural-gradient step on \eqn{q(u)} (on a
#' minibatch with \code{batch_size}) and then one Adam step on the other
#' free parameters (Salimbeni et al. 2018, section 4 and Appendix F; their
#' "CoupledNat" and "OrthNat"). The step size is \code{control$natgrad_step}
#' (default 0.005, the paper's); for non-Gaussian likelihoods it rises
#' linearly from \eqn{10^{-5}} over the first \code{control$natgrad_warmup}
#' iterations (default 100; Salimbeni, Eleftheriadis and Hensman 2018). A
#' step whose precision is not positive definite is halved until it is (up
#' to 30 times; otherwise \eqn{q(u)} is kept for that iteration), and the
#' number of halvings is reported in \code{fit$optim$natgrad_halvings}.
#'
#' The step does not depend on whether the fit is whitened (the natural
#' parameters of \eqn{u = Lv} are linear in those of \eqn{v}); the result is
#' stored in the fit's own parameterisation. Fixed variational parameters
#' are overwritten too. To alternate natural-gradient steps on \eqn{q(u)}
#' with the optimisation of the other parameters, call \code{svgp()} with
#' \code{start} = the stepped fit and \code{fixed = c("q_mu",
#' "q_sqrt_diag", "q_sqrt_lower")}.
#'
#' @param fit an \code{\link{svgp}} or \code{\link{odvgp}} fit.
#' @param step the step size \eqn{\gamma}{gamma}, in (0, 1].
#' @return The fit with the new \eqn{q(u)}, its ELBO and its predictive
#'   caches.
#' @references Hensman, J., Fusi, N. and Lawrence, N. D. (2013). Gaussian
#'   processes for big data. UAI.
#'
#'   Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M. (2018).
#'   Orthogonally decoupled variational Gaussian processes. NeurIPS.
#'
#'   Salimbeni, H., Eleftheriadis, S. and Hensman, J. (2018). Natural
#'   gradients in practice: non-conjugate variational inference in Gaussian
#'   process models. AISTATS.
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
  ng <- .natgrad_q(fit, fit$params, step, halve = FALSE)
  if (is.null(ng$params)) {
    stop("the natural-gradient step gives an indefinite precision: use a smaller 'step'",
         call. = FALSE)
  }
  fit$params <- ng$params
  .finish(fit)
}

# One natural-gradient step of size `step` on q(u) at `params` (on the rows
# `batch`; NULL: all), for every latent function: list(params, value (the
# bound before the step), halvings). With halve = TRUE an indefinite new
# precision halves the step (up to 30 times, then that q(u) is kept); with
# halve = FALSE, params is NULL. The gradients come from the one evaluator
# (.uc_natural(), R/uncollapsed.R); the basis (R/variational.R) gives q(u)
# in the coordinates of u and stores the result in its own.
.natgrad_q <- function(fit, params, step, batch = NULL, halve = TRUE) {
  r <- .uc_natural(fit, params, batch)
  s <- .natgrad_apply(fit, params, r, step, halve)
  list(params = s$params, value = r$value, halvings = s$halvings)
}

# The step of size `step` from `params`, given what .uc_natural() returned
# there (`r`): list(params, halvings), params NULL when a step failed and
# halve = FALSE. Steps of several sizes from one point share one
# evaluation (R/uncollapsed_training.R tries smaller ones after a step
# that lowers the bound).
.natgrad_apply <- function(fit, params, r, step, halve = TRUE) {
  nat <- .basis_natural(.basis_of(fit), params, r$ib)
  halvings <- 0L
  for (j in seq_along(nat)) {
    q <- nat[[j]]
    lat <- r$latents[[j]]
    new <- .natgrad_move(q$m, q$R, r$Kinv, drop(r$Kinv %*% lat$r), lat$P, step, halve, q$Lw)
    halvings <- halvings + new$halvings
    if (is.null(new$b)) {
      if (!halve) return(list(params = NULL, halvings = halvings))
      next
    }
    params <- .natgrad_set(params, j, new$b, new$W)
  }
  list(params = params, halvings = halvings)
}

# Column j of q(u)'s blocks set to the mean b and square root W.
.natgrad_set <- function(params, j, b, W) {
  set <- function(v, x) {
    if (is.matrix(v)) v[, j] <- x else v[] <- x
    v
  }
  params$q_mu <- set(params$q_mu, b)
  params$q_sqrt_diag <- set(params$q_sqrt_diag, diag(W))
  params$q_sqrt_lower <- set(params$q_sqrt_lower, W[lower.tri(W)])
  params
}

# The step in the natural parameters theta1 = S^-1 m, Lam = S^-1 of
# q(u) = N(m, S) (S = R R'), from gm = K^-1 K_uf g and GS = Psi diag(h) Psi':
#   theta1 <- (1 - step) theta1 + step (gm - 2 GS m)
#   Lam    <- (1 - step) Lam + step (K^-1 - 2 GS)
# Returns the new mean and lower square root in the fit's parameterisation
# (whitened by Lw = chol(Kuu) when given: v = Lw^-1 u), with the number of
# halvings of the step; b = NULL when no step kept Lam positive definite.
.natgrad_move <- function(m, R, Kinv, gm, GS, step, halve, Lw) {
  Sinv <- chol2inv(t(R))
  th_old <- drop(Sinv %*% m)
  th_new <- gm - 2 * drop(GS %*% m)
  Lam_new <- Kinv - 2 * GS
  halvings <- 0L
  repeat {
    th1 <- (1 - step) * th_old + step * th_new
    Lam <- (1 - step) * Sinv + step * Lam_new
    Lam <- (Lam + t(Lam)) / 2
    if (!is.null(Lw)) {
      # v = Lw^-1 u: precision Lw' Lam Lw, natural mean Lw' th1
      Lam <- crossprod(Lw, Lam %*% Lw)
      Lam <- (Lam + t(Lam)) / 2
      th1 <- drop(crossprod(Lw, th1))
    }
    U <- tryCatch(chol(Lam), error = function(e) NULL)
    if (!is.null(U)) break
    if (!halve || halvings >= 30L) return(list(b = NULL, halvings = halvings + as.integer(halve)))
    step <- step / 2
    halvings <- halvings + 1L
  }
  b <- backsolve(U, forwardsolve(t(U), th1))
  list(b = drop(b), W = t(chol(chol2inv(U))), halvings = halvings)
}

# Natural gradients on q(u) with Adam on the other free parameters
# (Salimbeni et al. 2018, section 4 and Appendix F): each iteration draws a
# batch (all rows without batch_size), takes one natural-gradient step on
# q(u) and then one Adam step (as in .fit_adam(): Kingma and Ba's defaults,
# the parameters scaled as for L-BFGS-B) on the rest at the new q(u). The
# step rises linearly from 1e-5 to control$natgrad_step over the first
# control$natgrad_warmup iterations (default 100 for non-Gaussian
# likelihoods, 0 for the Gaussian). The report's `trace` holds the batch
# bound after each natural-gradient step.
.fit_natgrad <- function(fit) {
  qb <- c("q_mu", "q_sqrt_diag", "q_sqrt_lower")
  cur <- fit$params
  trans <- fit$transforms
  if (any(fit$fixed[.block_mask(fit, qb)])) {
    stop("natural gradients move all of q(u): 'fixed' must not name q_mu, q_sqrt_diag or q_sqrt_lower",
         call. = FALSE)
  }
  free <- !fit$fixed & !.block_mask(fit, qb)
  N <- nrow(fit$x)
  B <- if (is.null(fit$batch_size)) N else fit$batch_size
  ctrl <- fit$control
  tau <- if (is.null(ctrl$natgrad_step)) 0.005 else ctrl$natgrad_step
  warm <- ctrl$natgrad_warmup
  if (is.null(warm)) warm <- if (.lik_of(fit)$conjugate) 0L else 100L
  progress <- .progress_new(fit, "natural gradients")
  snaps <- .snapshot_new(ctrl$snapshots)
  if (any(free)) adam <- .adam_new(fit, .pack(cur, trans)[free])
  trace <- numeric(ctrl$maxit)
  halvings <- 0L
  done <- 0L
  start <- proc.time()[["elapsed"]]
  interrupted <- identical(tryCatch(for (it in seq_len(ctrl$maxit)) {
    .interrupt_count_hook(it)
    batch <- if (B < N) sort(sample.int(N, B)) else NULL
    step <- if (it <= warm) 1e-5 + (tau - 1e-5) * (it - 1) / warm else tau
    ng <- tryCatch(.natgrad_q(fit, cur, step, batch), error = function(e) {
      .rethrow_fatal(e)
      stop(sprintf("natural-gradient iteration %d failed: %s", it, conditionMessage(e)),
           call. = FALSE)
    })
    cur <- ng$params
    halvings <- halvings + ng$halvings
    value <- ng$value
    if (any(free)) {
      r <- .natgrad_adam(fit, cur, batch, free, adam, it)
      adam <- r$adam
      cur <- r$params
      value <- r$value
    }
    trace[it] <- value
    done <- it
    snaps <- .snapshot_take(snaps, it, cur)
    .progress_tick(progress, it, value, "iterations, batch bound")
  }, interrupt = function(e) "interrupted"), "interrupted")
  fit$params <- cur
  fit$optim <- list(method = "Adam", convergence = 1L,
                    message = sprintf("%d iterations of natural gradients on q(u) (step %g) and Adam on the rest, on %s (no convergence test)",
                                      done, tau,
                                      if (B < N) sprintf("minibatches of %d points", B) else
                                        "the full batch"),
                    counts = c("function" = 2L * done, gradient = 2L * done), value = NA_real_,
                    par = .pack(cur, trans)[!fit$fixed], trace = trace[seq_len(done)],
                    failed_evaluations = 0L, natgrad_halvings = halvings,
                    snapshots = snaps$list)
  if (interrupted) {
    fit$optim$interrupted <- TRUE
    fit$optim$interrupted_in <- "the natural-gradient iterations"
    .interrupt_note("the natural-gradient iterations")
  }
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# The Adam step of iteration `it` on the free parameters other than q(u),
# at the new q(u) `params`: list(params, value, adam).
.natgrad_adam <- function(fit, params, batch, free, adam, it) {
  r <- tryCatch(.evaluate(fit, params, grad = TRUE, batch = batch), error = function(e) {
    .rethrow_fatal(e)
    stop(sprintf("Adam iteration %d failed: %s (try a smaller control$lr)", it,
                 conditionMessage(e)), call. = FALSE)
  })
  g <- .flatten_grad(r$grad, params)[free]
  if (!is.finite(r$value) || any(!is.finite(g))) {
    stop(sprintf("iteration %d: the bound or its gradient is not finite (try a smaller control$lr)",
                 it), call. = FALSE)
  }
  adam <- .adam_step(adam, g, it)
  full <- .pack(params, fit$transforms)
  full[free] <- adam$s * adam$sc + adam$sh
  list(params = .unpack(full, params, fit$transforms), value = r$value, adam = adam)
}

# Adam (Kingma and Ba 2015; beta1 = 0.9, beta2 = 0.999, eps = 1e-8) on the
# free parameters `par` scaled and boxed as for L-BFGS-B (.optim_setup()):
# its state, and one ascent step along the gradient g.
.adam_new <- function(fit, par) {
  su <- .optim_setup(fit, par)
  list(sc = su$parscale, sh = su$shift, s = (par - su$shift) / su$parscale,
       lo = (su$lower - su$shift) / su$parscale, hi = (su$upper - su$shift) / su$parscale,
       m1 = numeric(length(par)), m2 = numeric(length(par)), lr = fit$control$lr)
}

.adam_step <- function(st, g, it, b1 = 0.9, b2 = 0.999, eps = 1e-8) {
  g <- g * st$sc
  st$m1 <- b1 * st$m1 + (1 - b1) * g
  st$m2 <- b2 * st$m2 + (1 - b2) * g^2
  st$s <- st$s + st$lr * (st$m1 / (1 - b1^it)) / (sqrt(st$m2 / (1 - b2^it)) + eps)
  st$s <- pmin(pmax(st$s, st$lo), st$hi)
  st
}
