# Helpers of the tests of the model with neighbours (test-vif.R, test-shards-vif.R).

# The dense VIF covariance of a fit at its parameters: Q + R~, with R~ the
# Vecchia approximation B^-1 D B^-T of R = Kff - Q + Lambda on the fit's
# own neighbour sets, built entry by entry from the kernel matrices.
vif_dense <- function(fit) {
  ns <- asNamespace("sparsevgp")
  p <- fit$params
  k <- ns$.kernel_at(fit$kernel, p)
  x <- fit$x
  N <- nrow(x)
  lam <- ns$.noise_lambda(fit, p)
  Kuu <- kernel_matrix(k, p$Z)
  jit <- ns$.ffi_chol(Kuu, fit$control$jitter, fit$control$jitter_cap)$jitter
  Kuu <- Kuu + diag(jit, nrow(Kuu))
  Kuf <- kernel_matrix(k, p$Z, x)
  Q <- crossprod(Kuf, solve(Kuu, Kuf))
  R <- kernel_matrix(k, x) - Q + diag(lam, N)
  B <- diag(N)
  d <- numeric(N)
  for (i in seq_len(N)) {
    nn <- fit$neighbours$index[, i]
    nn <- nn[nn > 0]
    b <- if (length(nn)) solve(R[nn, nn, drop = FALSE], R[nn, i]) else numeric(0)
    B[i, nn] <- -b
    d[i] <- R[i, i] - sum(R[i, nn] * b)
  }
  Bi <- solve(B)
  Rt <- Bi %*% (d * t(Bi))
  S <- Q + Rt
  yt <- fit$y - p$mean
  ll <- -0.5 * N * log(2 * pi) - 0.5 * as.numeric(determinant(S)$modulus) -
    0.5 * sum(yt * solve(S, yt))
  list(ll = ll, S = S, Rt = Rt, R = R, Kuu = Kuu, k = k, lam = lam, yt = yt)
}
