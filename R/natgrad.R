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
# `batch`; NULL: all): list(params, value (the bound before the step),
# halvings). With halve = TRUE an indefinite new precision halves the step
# (up to 30 times, then q(u) is kept); with halve = FALSE, params is NULL.
.natgrad_q <- function(fit, params, step, batch = NULL, halve = TRUE) {
  UseMethod(".natgrad_q")
}

#' @export
.natgrad_q.svgp <- function(fit, params, step, batch = NULL, halve = TRUE) {
  r <- .svgp_call(fit, params, grad = TRUE, batch = batch)
  L <- r$L
  whiten <- !isFALSE(fit$whiten)
  W <- .svgp_qsqrt(params)
  # current q(u) = N(m, S), S = R R'
  m <- if (whiten) drop(L %*% params$q_mu) else params$q_mu
  R <- if (whiten) L %*% W else W
  P <- backsolve(L, forwardsolve(L, r$Kuf), upper.tri = FALSE, transpose = TRUE)  # Psi = Kuu^-1 Kuf: M x N
  GS <- P %*% (r$gdiag * t(P))                                # Psi diag(h) Psi'
  gm <- drop(P %*% r$gmu)
  new <- .natgrad_move(m, R, chol2inv(t(L)), gm, GS, step, halve, if (whiten) L)
  .natgrad_result(params, new, r$elbo, halve)
}

#' @export
.natgrad_q.odvgp <- function(fit, params, step, batch = NULL, halve = TRUE) {
  if (!is.null(fit$basis) && fit$basis != "orthogonal") {
    stop(sprintf("natural gradients are available for basis = \"orthogonal\" only, not \"%s\"",
                 fit$basis), call. = FALSE)
  }
  r <- .odvgp_eval(fit, params, grad = TRUE, batch = batch, natural_only = TRUE)
  Kinv <- r$natural$Kinv
  qs <- .odvgp_q(params)
  if (length(qs) == 1L) {
    nat <- r$natural$latents[[1L]]
    new <- .natgrad_move(params$q_mu, qs[[1L]]$LS, Kinv, drop(Kinv %*% nat$r), nat$P, step,
                         halve, NULL)
    return(.natgrad_result(params, new, r$value, halve))
  }
  # one step per latent function (multiclass): the natural parameters of
  # the K independent q(f_beta) blocks move independently
  halvings <- 0L
  for (j in seq_along(qs)) {
    nat <- r$natural$latents[[j]]
    new <- .natgrad_move(qs[[j]]$mb, qs[[j]]$LS, Kinv, drop(Kinv %*% nat$r), nat$P, step,
                         halve, NULL)
    halvings <- halvings + new$halvings
    if (is.null(new$b)) {
      if (!halve) return(list(params = NULL, value = r$value, halvings = halvings))
      next
    }
    params$q_mu[, j] <- new$b
    params$q_sqrt_diag[, j] <- diag(new$W)
    params$q_sqrt_lower[, j] <- new$W[lower.tri(new$W)]
  }
  list(params = params, value = r$value, halvings = halvings)
}

# The parameters after a step from .natgrad_move(). No step (b = NULL):
# after halvings (halve = TRUE) q(u) is kept, otherwise params is NULL.
.natgrad_result <- function(params, new, value, halve = TRUE) {
  if (is.null(new$b)) {
    return(list(params = if (halve) params, value = value, halvings = new$halvings))
  }
  params$q_mu <- new$b
  params$q_sqrt_diag <- diag(new$W)
  params$q_sqrt_lower <- new$W[lower.tri(new$W)]
  list(params = params, value = value, halvings = new$halvings)
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
  block <- rep(names(cur), lengths(cur))
  if (any(fit$fixed[block %in% qb])) {
    stop("natural gradients move all of q(u): 'fixed' must not name q_mu, q_sqrt_diag or q_sqrt_lower",
         call. = FALSE)
  }
  free <- !fit$fixed & !(block %in% qb)
  N <- nrow(fit$x)
  B <- if (is.null(fit$batch_size)) N else fit$batch_size
  ctrl <- fit$control
  iters <- ctrl$maxit
  tau <- if (is.null(ctrl$natgrad_step)) 0.005 else ctrl$natgrad_step
  warm <- ctrl$natgrad_warmup
  if (is.null(warm)) warm <- if (fit$likelihood == "gaussian") 0L else 100L
  lr <- ctrl$lr
  b1 <- 0.9
  b2 <- 0.999
  eps <- 1e-8
  progress <- .progress_new(fit, "natural gradients")
  snaps <- .snapshot_new(ctrl$snapshots)
  full <- .pack(cur, trans)
  if (any(free)) {
    su <- .optim_setup(fit, full[free])
    sc <- su$parscale
    sh <- su$shift
    s <- (full[free] - sh) / sc
    lo <- (su$lower - sh) / sc
    hi <- (su$upper - sh) / sc
    m1 <- m2 <- numeric(length(s))
  }
  trace <- numeric(iters)
  halvings <- 0L
  done <- 0L
  start <- proc.time()[["elapsed"]]
  interrupted <- identical(tryCatch(for (it in seq_len(iters)) {
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
      r <- tryCatch(.evaluate(fit, cur, grad = TRUE, batch = batch), error = function(e) {
        .rethrow_fatal(e)
        stop(sprintf("Adam iteration %d failed: %s (try a smaller control$lr)", it,
                     conditionMessage(e)), call. = FALSE)
      })
      g <- .flatten_grad(r$grad, cur)[free] * sc
      if (!is.finite(r$value) || any(!is.finite(g))) {
        stop(sprintf("iteration %d: the bound or its gradient is not finite (try a smaller control$lr)",
                     it), call. = FALSE)
      }
      value <- r$value
      m1 <- b1 * m1 + (1 - b1) * g
      m2 <- b2 * m2 + (1 - b2) * g^2
      s <- s + lr * (m1 / (1 - b1^it)) / (sqrt(m2 / (1 - b2^it)) + eps)
      s <- pmin(pmax(s, lo), hi)
      full <- .pack(cur, trans)
      full[free] <- s * sc + sh
      cur <- .unpack(full, cur, trans)
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

# Snapshots of the parameters during Adam and natural-gradient runs
# (control$snapshots: the iterations to keep), each with the CPU time
# (user + system) since the run started, for convergence studies.
.snapshot_new <- function(at) {
  list(at = if (is.null(at)) integer(0) else as.integer(at), start = .cpu_now(), list = list())
}

.snapshot_take <- function(snaps, it, params) {
  if (it %in% snaps$at) {
    snaps$list[[length(snaps$list) + 1L]] <- list(iteration = it,
                                                  cpu = .cpu_now() - snaps$start,
                                                  params = params)
  }
  snaps
}

.cpu_now <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}
