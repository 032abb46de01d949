# Helpers of the tests of data on shards() (test-shards.R, test-shards-vif.R).

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
