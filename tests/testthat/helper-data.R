# Small deterministic problems and dense reference formulas.
toy_data <- function(n = 30, d = 1, seed = 1) {
  set.seed(seed)
  x <- matrix(runif(n * d, -2, 2), n, d)
  y <- sin(2 * x[, 1]) + if (d > 1) 0.5 * x[, 2] else 0
  y <- y + rnorm(n, sd = 0.2)
  list(x = x, y = y)
}

# Toy binary data: labels from the sign of a noisy smooth function.
toy_class <- function(n = 40, d = 2, seed = 3) {
  t <- toy_data(n, d, seed)
  list(x = t$x, y = as.integer(t$y > 0), ypm = ifelse(t$y > 0, 1, -1))
}

all_kernels <- function(d = 1) {
  ls_ard <- seq(0.6, 1.2, length.out = d)
  list(rbf = kernel_rbf(0.8, 1.3), rbf_ard = kernel_rbf(ls_ard, 0.9),
       matern12 = kernel_matern12(0.9, 1.1), matern12_ard = kernel_matern12(ls_ard, 1),
       matern32 = kernel_matern32(0.7, 1.2), matern32_ard = kernel_matern32(ls_ard, 0.8),
       matern52 = kernel_matern52(1.1, 0.7), matern52_ard = kernel_matern52(ls_ard, 1.4))
}

# Naive double loop oracle for a kernel matrix.
naive_kernel <- function(kernel, a, b) {
  ls <- rep_len(kernel$lengthscale, ncol(a))
  K <- matrix(0, nrow(a), nrow(b))
  for (i in seq_len(nrow(a))) for (j in seq_len(nrow(b))) {
    r <- sqrt(sum(((a[i, ] - b[j, ]) / ls)^2))
    K[i, j] <- kernel$variance * switch(kernel$family,
      rbf = exp(-r^2 / 2),
      matern12 = exp(-r),
      matern32 = (1 + sqrt(3) * r) * exp(-sqrt(3) * r),
      matern52 = (1 + sqrt(5) * r + 5 * r^2 / 3) * exp(-sqrt(5) * r))
  }
  K
}

dense_log_normal <- function(y, C) {
  R <- chol(C)
  z <- backsolve(R, y, transpose = TRUE)
  -0.5 * length(y) * log(2 * pi) - sum(log(diag(R))) - 0.5 * sum(z^2)
}

# The collapsed bound by the dense textbook formula (Titsias 2009; with
# per-point noise, Passerello 2022, eq. 3.2):
# log N(y; m, Q + Lambda) - 1/2 tr(Lambda^-1 (K - Q)).
dense_sgpr_bound <- function(kernel, x, y, Z, lambda, mean = 0) {
  Kuu <- naive_kernel(kernel, Z, Z)
  Kuf <- naive_kernel(kernel, Z, x)
  Kff <- naive_kernel(kernel, x, x)
  Q <- crossprod(Kuf, solve(Kuu, Kuf))
  lambda <- rep_len(lambda, nrow(x))
  dense_log_normal(y - mean, Q + diag(lambda, nrow(x))) -
    0.5 * sum(diag(Kff - Q) / lambda)
}

dense_gpr_lml <- function(kernel, x, y, noise, mean = 0) {
  dense_log_normal(y - mean, naive_kernel(kernel, x, x) + diag(noise, nrow(x)))
}

# Dense ingredients of the Polya-Gamma bound (Passerello 2022, ch. 4) for
# kernel k, inputs x, inducing inputs Z and local parameters c.
pg_dense <- function(k, x, Z, c) {
  Kuu <- naive_kernel(k, Z, Z)
  Kuf <- naive_kernel(k, Z, x)
  Kff <- naive_kernel(k, x, x)
  th <- tanh(c / 2) / (2 * c)
  Q <- crossprod(Kuf, solve(Kuu, Kuf))
  Sig <- Kuu + Kuf %*% (th * t(Kuf))
  list(Kuu = Kuu, Kuf = Kuf, Kff = Kff, th = th, Q = Q, Sig = Sig,
       pg = 0.5 * sum(c^2 * th - 2 * log(cosh(c / 2))))
}

# The noise variances of a regression fit at its training inputs.
training_noise <- function(fit) {
  unname(predict(fit, type = "response")$var - predict(fit)$var)
}

# A fit's kernel at its current parameters.
fitted_kernel <- function(fit) {
  k <- fit$kernel
  k$variance <- fit$params$variance
  k$lengthscale <- fit$params$lengthscale
  k
}
