# Central finite differences and a relative gradient check.
fd_grad <- function(fn, par, h = 1e-5) {
  vapply(seq_along(par), function(i) {
    e <- replace(numeric(length(par)), i, h)
    (fn(par + e) - fn(par - e)) / (2 * h)
  }, 1)
}

# max |g - g_fd| / max(1, max |g|) <= tol for the objective of a fit
expect_grad <- function(fit, tol = 1e-6, h = 1e-5) {
  o <- objective(fit)
  g <- o$gr(o$par)
  fd <- fd_grad(o$fn, o$par, h)
  err <- max(abs(g - fd)) / max(1, max(abs(g)))
  expect_lte(err, tol, label = sprintf("relative gradient error (worst: %s)",
                                       names(o$par)[which.max(abs(g - fd))]))
  invisible(err)
}
