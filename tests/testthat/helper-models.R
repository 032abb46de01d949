# Models built at given parameters (optimize = FALSE), shared by the
# per-model files, test-identities.R and test-gradients.R.

# SGPR at kernel k, inducing inputs Z, noise and mean.
sgpr_at <- function(d, k, Z, noise = 0.05, mean = 0, ...) {
  sgpr(d$x, d$y, kernel = k, inducing = Z, noise = noise, mean = mean,
       optimize = FALSE, ...)
}

# Orthogonal SGPR at kernel k, regular inputs Z and orthogonal inputs O.
osgpr_at <- function(d, k, Z, O, type = "solve", bound = "family", noise = 0.05,
                     mean = 0, ...) {
  osgpr(d$x, d$y, kernel = k, inducing = Z, orthogonal = O, type = type, bound = bound,
        noise = noise, mean = mean, optimize = FALSE, ...)
}

# A PGPR model at given kernel, inducing inputs and local parameters c.
pgpr_at <- function(d, k, Z, c = NULL, mean = 0, jitter = 0, ...) {
  f <- pgpr(d$x, d$y, kernel = k, inducing = Z, mean = mean, optimize = FALSE,
            control = list(jitter = jitter), ...)
  if (!is.null(c)) {
    f$c <- c
    f <- sparsevgp:::.finish(f)
  }
  f
}

# A fit with some of its parameters replaced (named as in fit$params),
# evaluated there.
with_params <- function(fit, ...) {
  new <- list(...)
  fit$params[names(new)] <- new
  sparsevgp:::.finish(fit)
}

# A random whitened q(v) = N(b, W W') for M inducing points.
random_q <- function(M, seed = 1) {
  set.seed(seed)
  W <- diag(exp(rnorm(M, sd = 0.3)), M)
  W[lower.tri(W)] <- rnorm(M * (M - 1) / 2, sd = 0.3)
  list(b = rnorm(M), W = W)
}

# Set the whitened q(v) = N(b, W W') of an svgp fit.
set_q <- function(fit, q) {
  with_params(fit, q_mu = q$b, q_sqrt_diag = diag(q$W), q_sqrt_lower = q$W[lower.tri(q$W)])
}

# Set the non-whitened q(u) = N(m, S) of an svgp fit from a whitened q(v):
# m = L b, S = L W W' L', so that W_u = chol(S) = L W.
set_q_nw <- function(fit, q) {
  L <- sparsevgp:::.svgp_chol(fit$params, fit$kernel, fit$control)
  Wu <- L %*% q$W
  with_params(fit, q_mu = drop(L %*% q$b), q_sqrt_diag = diag(Wu),
              q_sqrt_lower = Wu[lower.tri(Wu)])
}
