# Minibatch training of svgp(): Adam (Kingma and Ba 2015) on unbiased
# minibatch estimates of the ELBO and its gradient (seed001 section 5,
# "Minibatching"; Hensman et al. 2013), for data too large for full-batch
# L-BFGS-B. Kept apart from R/objective.R, which serves the full-batch
# fits of every model.

# Adam's settings in svgp()'s `control`: `lr` (the step size, 0.01 by
# default, the GPflow tutorials' choice for SVGP); the other entries go to
# .check_control(). beta1 = 0.9, beta2 = 0.999 and eps = 1e-8 are Kingma
# and Ba's defaults (also TensorFlow's and torch's).
.svgp_adam_control <- function(control) {
  if (!is.list(control)) stop("'control' must be a list", call. = FALSE)
  lr <- if (is.null(control$lr)) 0.01 else control$lr
  if (!is.numeric(lr) || length(lr) != 1L || !is.finite(lr) || lr <= 0) {
    stop("'control$lr' must be one positive number", call. = FALSE)
  }
  control$lr <- NULL
  list(lr = lr, rest = control)
}

# Maximise the ELBO of an svgp fit by Adam over all free parameters, for
# control$maxit iterations, each on a batch of fit$batch_size points drawn
# uniformly without replacement (so reproducible under set.seed()). The
# parameters are scaled as for L-BFGS-B (.optim_setup(): inducing inputs in
# units of sd(x), the mean in units of sd(y)) and kept in its boxes.
# Returns the fit with its parameters and optimiser report; the report's
# `trace` holds the minibatch ELBO estimate at each iteration (before its
# step).
.fit_adam <- function(fit) {
  o <- .objective(fit, safe = FALSE)
  template <- fit$params
  free <- !fit$fixed
  N <- nrow(fit$x)
  B <- fit$batch_size
  iters <- fit$control$maxit
  lr <- fit$lr
  b1 <- 0.9
  b2 <- 0.999
  eps <- 1e-8
  start <- proc.time()[["elapsed"]]
  trace <- numeric(iters)
  if (sum(free) > 0L) {
    su <- .optim_setup(fit, o$par)
    sc <- su$parscale
    s <- o$par / sc
    lo <- su$lower / sc
    hi <- su$upper / sc
    m1 <- m2 <- numeric(length(s))
    for (it in seq_len(iters)) {
      batch <- if (B < N) sort(sample.int(N, B)) else NULL
      r <- tryCatch(.svgp_eval(fit, o$unpack(s * sc), grad = TRUE, batch = batch),
                    error = function(e) {
                      stop(sprintf("Adam iteration %d failed: %s (try a smaller control$lr)",
                                   it, conditionMessage(e)), call. = FALSE)
                    })
      g <- unlist(lapply(names(template), function(b) as.vector(r$grad[[b]])),
                  use.names = FALSE)[free] * sc
      if (!is.finite(r$value) || any(!is.finite(g))) {
        stop(sprintf("Adam iteration %d: the minibatch ELBO or its gradient is not finite (try a smaller control$lr)",
                     it), call. = FALSE)
      }
      trace[it] <- r$value
      # ascent step on the bias-corrected moments
      m1 <- b1 * m1 + (1 - b1) * g
      m2 <- b2 * m2 + (1 - b2) * g^2
      s <- s + lr * (m1 / (1 - b1^it)) / (sqrt(m2 / (1 - b2^it)) + eps)
      s <- pmin(pmax(s, lo), hi)
      if (fit$control$trace > 0L && it %% max(1L, iters %/% 10L) == 0L) {
        message(sprintf("Adam iteration %d: minibatch ELBO %.6g", it, r$value))
      }
    }
    par <- s * sc
    names(par) <- names(o$par)
    fit$params <- o$unpack(par)
  } else {
    par <- o$par
    iters <- 0L
    trace <- numeric(0)
  }
  fit$optim <- list(method = "Adam", convergence = 1L,
                    message = sprintf("%d iterations on minibatches of %d points (no convergence test)",
                                      iters, B),
                    counts = c("function" = iters, gradient = iters), value = NA_real_,
                    par = par, trace = trace, failed_evaluations = 0L)
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}
