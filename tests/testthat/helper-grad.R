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

# The gradient of the bound at the fit's parameters (objective()'s gradient,
# negated) as a list of blocks named like fit$params: the free entries on the
# unconstrained scale, the inducing inputs as matrices.
grad_blocks <- function(fit) {
  o <- objective(fit)
  g <- -o$gr(o$par)
  block <- sub("^log_", "", sub("\\[.*$", "", names(g)))
  out <- split(unname(g), factor(block, levels = unique(block)))
  for (b in intersect(names(out), c("Z", "O"))) {
    out[[b]] <- matrix(out[[b]], nrow(fit$params[[b]]))
  }
  out
}

# The bound at the fit's parameters, evaluated afresh through objective().
bound_at <- function(fit) {
  o <- objective(fit)
  -o$fn(o$par)
}

# The messages of the warnings an expression gives (muffled), for tests that
# expect one warning among others.
collect_warnings <- function(expr) {
  msgs <- character()
  withCallingHandlers(expr, warning = function(w) {
    msgs <<- c(msgs, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  msgs
}
