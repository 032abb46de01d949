# osgpr() on data held by the workers of a cluster (shards(), R/shards.R).
# The formula is applied on the workers (.shards_design()), and the fit
# runs as sgpr's does on shards (.shards_sgpr()): each worker keeps its
# rows as its share of the fit, and every evaluation of the orthogonal
# bounds on all rows runs there through the collapsed cluster path of
# R/cluster.R (.shard_collapsed(); the workers' targets are sgpr's, and the
# block factor of K(W, W), W = rbind(Z, O), is computed here). What the fit
# needs from the rows:
#   - with at most .shards_subsample_rows() rows in all, this process
#     gathers them and starts, chooses Z and O (.osgpr_sets()) and runs the
#     schedule as one process does on the rows concatenated in worker
#     order: the fit of one process;
#   - with more rows, a random subsample of that many rows (global row
#     numbers drawn from R's random numbers here, so set.seed() reproduces
#     it) gives the start and Z and O, as one process would choose them on
#     those rows; the schedule runs on the same subsample
#     (.shards_subsample() reuses it), and then the kernel, noise and mean
#     on all rows on the workers with Z and O held (.train_large()).
# Prior weights (weights = w in the workers' columns) stay on the workers
# (.shard_configure()) and come with the gathered rows. Known per-row
# noise variances, noise formulas and offsets are refused.

.shards_osgpr <- function(formula, sh, kernel = kernel_rbf(), inducing = NULL,
                          orthogonal = NULL, type = c("solve", "odvgp"),
                          bound = c("family", "union"), noise = NULL, mean = "constant",
                          optimize = TRUE, optimize_inducing = TRUE, fixed = NULL,
                          control = list(), start = NULL, .call = NULL, .weights = NULL,
                          .extra = NULL) {
  if (!is.null(.extra$noise) || (!is.null(noise) &&
      !(is.numeric(noise) && length(noise) == 1L && is.finite(noise) && noise > 0))) {
    .shards_stop("with data = shards() osgpr()'s 'noise' is one starting variance: known per-point variances and noise formulas are not available (for known variances, weights = 1 / s2 with the noise fixed at 1 gives the same model)")
  }
  if (!is.null(.extra$offset) || "offset" %in% all.names(formula)) {
    .shards_stop("an offset is not available with data = shards() in osgpr() (sgpr() takes it): offset the response in 'load'")
  }
  type <- match.arg(type)
  bound <- match.arg(bound)
  kernel <- .check_kernel(kernel)
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  optimize <- .check_flag(optimize, "optimize")
  control <- .collapsed_control(control)
  .check_start(start, "osgpr")
  dz <- .shards_design(sh, formula, weights = .weights, extra = .extra)
  h <- dz$h
  on.exit(.cluster_release(h), add = TRUE)
  N <- dz$N
  D <- length(dz$colnames)
  x0 <- matrix(0, 0L, D, dimnames = list(NULL, dz$colnames))
  # the rows this process starts and selects on: all of them when they are
  # few, else a random subsample, which the schedule reuses (.shards_subsample())
  n_sub <- .shards_subsample_rows()
  small <- N <= n_sub
  rows <- if (small) seq_len(N) else .shards_draw_rows(N, n_sub)
  g <- .shards_gather(h, rows)
  colnames(g$x) <- dz$colnames
  h$checkpoint <- new.env(parent = emptyenv())
  h$checkpoint$rows <- g
  if (small) {
    dz$x <- .col_stats(g$x)
    dz$y <- c(mean = mean(g$y), var = stats::var(g$y))
  }
  # as osgpr.default() on the gathered rows, the fit without rows
  fit <- .osgpr_build(.call, g$x, g$y, kernel, inducing, orthogonal, type, bound, noise, mean,
                      optimize, optimize_inducing, fixed, control, start, weights = g$w, N = N,
                      mean_y = dz$y[["mean"]], keep = list(x = x0, y = numeric(0)),
                      extra = list(shards = list(N = N, n = h$n, x = dz$x, y = dz$y,
                                                 weights = .weights, extra = .extra)))
  # the rows' factors 1 / w stay on the workers (.shard_configure()); the
  # master keeps their minimum, mean and maximum
  fit$noise_model$lambda <- NULL
  fit$noise_model$rows <- dz$rel
  fit$terms <- dz$terms
  fit$xlevels <- dz$xlevels
  .cluster_call(h, ".shard_configure",
                list(kernel = fit$kernel, control = fit$control, noise_model = fit$noise_model))
  .shards_run_fit(fit, h, optimize)
}
