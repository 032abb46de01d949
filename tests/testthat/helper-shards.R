# Helpers of the tests of data on shards() (test-shards.R, test-shards-vif.R,
# test-shards-osgpr.R).

# A local PSOCK cluster of n workers. R CMD check --as-cran limits clusters
# to two processes (_R_CHECK_LIMIT_CORES_); the tests of shards run only
# where NOT_CRAN is set (skip_on_cran()), and three light workers are what
# the tests of three shards need, so the limit is lifted while it starts.
local_cluster <- function(n) {
  old <- Sys.getenv("_R_CHECK_LIMIT_CORES_", unset = NA)
  Sys.setenv("_R_CHECK_LIMIT_CORES_" = "false")
  on.exit(if (is.na(old)) Sys.unsetenv("_R_CHECK_LIMIT_CORES_") else
    Sys.setenv("_R_CHECK_LIMIT_CORES_" = old))
  parallel::makeCluster(n)
}

# shards of the rows of d split at `ends` (cumulative row counts)
make_shards <- function(cl, d, ends) {
  starts <- c(0, head(ends, -1))
  parts <- Map(function(a, b) d[seq_len(b - a) + a, , drop = FALSE], starts, ends)
  shards(cl, function(i, parts) parts[[i]], parts = parts)
}

# `expr` (a fit on shards of the cluster cl) run while the last worker of
# cl is killed at the first evaluation on the workers' rows (after the
# subsample's fit, with the option sparsevgp.shards_subsample = sub); the
# cluster is stopped after. Returns list(result: the value or the error,
# killed).
shards_kill_during <- function(cl, expr, sub) {
  pids <- unlist(parallel::clusterCall(cl, Sys.getpid))
  killed <- FALSE
  old <- options(sparsevgp.shards_subsample = sub, sparsevgp.evaluation_hook = function(i) {
    f <- dynGet("fit", ifnotfound = NULL)
    if (!killed && !is.null(f$shards)) {
      tools::pskill(pids[length(pids)])
      Sys.sleep(0.5)
      killed <<- TRUE
    }
  })
  r <- tryCatch(expr, error = function(e) e)
  options(old)
  try(parallel::stopCluster(cl), silent = TRUE)
  for (node in cl) try(close(node$con), silent = TRUE)
  list(result = r, killed = killed)
}

# the objectives of two fits at the same parameters: value and gradient
expect_same_objective <- function(o1, o0, par, tol = 1e-10) {
  v0 <- o0$fn(par)
  expect_lt(abs(o1$fn(par) - v0), tol * max(1, abs(v0)))
  # (the gradient's rounding follows the size of its summands, which the
  # bound's size measures; near an optimum the gradient itself is near 0)
  g0 <- o0$gr(par)
  expect_lt(max(abs(o1$gr(par) - g0)), tol * max(1, abs(v0), abs(g0)))
}

# the bound and gradient on the workers (at o0's parameters and moved by
# `shift`), and the fitted values and residuals at the workers' rows, of a
# fit f1 on the shards sh against one process's fit f0 with objective o0
expect_rows_on_workers <- function(f1, sh, f0, o0, shift = 0.1) {
  o1 <- objective(f1, cluster = sh)
  on.exit(o1$release())
  expect_same_objective(o1, o0, o0$par)
  expect_same_objective(o1, o0, o0$par + shift)
  expect_equal(fitted(f1, cluster = sh), unname(fitted(f0)), tolerance = 1e-10)
  expect_equal(residuals(f1, cluster = sh), unname(residuals(f0)), tolerance = 1e-10)
}
