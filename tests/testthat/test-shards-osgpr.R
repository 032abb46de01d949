# osgpr() on data held by the workers of a cluster (R/shards_osgpr.R):
# the fit of one process on the concatenated rows for both types, prior
# weights from the workers' columns, the subsample path, what is refused,
# and a dead worker.

osgpr_data <- function(N, seed = 1) {
  set.seed(seed)
  d <- data.frame(x1 = runif(N, -3, 3), x2 = runif(N, -3, 3))
  d$y <- sin(d$x1) * cos(d$x2) + rnorm(N, sd = 0.1)
  d$w <- runif(N, 0.5, 2)
  d
}

# (local_cluster(), make_shards(), shards_kill_during(),
# expect_same_objective() and expect_rows_on_workers(): helper-shards.R)

test_that("osgpr on 2 and 3 shards is the fit of one process on the concatenated rows, for both types", {
  skip_on_cran()
  d <- osgpr_data(240)
  for (ends in list(c(100, 240), c(150, 151, 240))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    for (type in c("solve", "odvgp")) {
      # the second split with prior weights from a column of the workers' data
      weighted <- length(ends) == 3L
      set.seed(5)
      f0 <- if (weighted) osgpr(y ~ x1 + x2, data = d, inducing = 4, orthogonal = 4, type = type,
                                weights = w) else
        osgpr(y ~ x1 + x2, data = d, inducing = 4, orthogonal = 4, type = type)
      set.seed(5)
      f1 <- if (weighted) osgpr(y ~ x1 + x2, data = sh, inducing = 4, orthogonal = 4, type = type,
                                weights = w) else
        osgpr(y ~ x1 + x2, data = sh, inducing = 4, orthogonal = 4, type = type)
      expect_s3_class(f1, "osgpr")
      expect_equal(f1$params, f0$params, tolerance = 1e-8)
      expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
      expect_equal(f1$bounds, f0$bounds, tolerance = 1e-10)
      expect_equal(nobs(f1), 240)
      expect_equal(nrow(f1$x), 0L)
      # bound and gradient on the workers at the fit's parameters and
      # moved, fitted values and residuals on the workers, predictions here
      expect_rows_on_workers(f1, sh, f0, objective(f0))
      nd <- d[c(3, 150, 151, 239), ]
      expect_equal(predict(f1, nd), predict(f0, nd), tolerance = 1e-10)
    }
    parallel::stopCluster(cl)
  }
  expect_error(fitted(f1), "fitted\\(fit, cluster = sh\\)")
  expect_error(objective(f1), "objective\\(fit, cluster = sh\\)")
})

test_that("osgpr on shards refuses what it cannot do there with the classed error", {
  skip_on_cran()
  d <- osgpr_data(60)
  d$s2 <- 0.01
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(20, 60))
  expect_error(osgpr(y ~ x1, data = sh, noise = ~ x1), "'noise' is one starting variance",
               class = "sparsevgp_shards_error")
  expect_error(osgpr(y ~ x1, data = sh, noise = s2), "weights = 1 / s2",
               class = "sparsevgp_shards_error")
  expect_error(osgpr(y ~ x1, data = sh, noise = rep(0.1, 60)), "one starting variance",
               class = "sparsevgp_shards_error")
  expect_error(osgpr(y ~ x1, data = sh, offset = x2), "offset is not available",
               class = "sparsevgp_shards_error")
  expect_error(osgpr(y ~ x1 + offset(x2), data = sh), "offset is not available",
               class = "sparsevgp_shards_error")
  expect_error(osgpr(y ~ x1, data = sh, weights = x1), "'weights' must be positive finite")
  # `.` stands for the workers' columns
  f <- osgpr(y ~ . - w - s2, data = sh, inducing = 2, orthogonal = 2, optimize = FALSE)
  expect_equal(colnames(f$params$Z), c("x1", "x2"))
  # nothing is left on the workers but the shards' own data
  expect_equal(lengths(parallel::clusterCall(cl, function() ls(sparsevgp:::.shards))), c(1L, 1L))
  # subset selects rows on the workers, as in one process
  set.seed(2)
  f0 <- osgpr(y ~ x1 + x2, data = d, subset = x1 > -2, inducing = 3, orthogonal = 3,
              optimize = FALSE)
  set.seed(2)
  f1 <- osgpr(y ~ x1 + x2, data = sh, subset = x1 > -2, inducing = 3, orthogonal = 3,
              optimize = FALSE)
  expect_equal(nobs(f1), nobs(f0))
  expect_equal(f1$params, f0$params, tolerance = 1e-10)
  expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
})

test_that("osgpr beyond the subsample: Z and O from the subsample, the bound of one process on all rows", {
  skip_on_cran()
  d <- osgpr_data(300, seed = 3)
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(200, 201, 300))
  old <- options(sparsevgp.shards_subsample = 150L)
  on.exit(options(old), add = TRUE)
  for (type in c("solve", "odvgp")) {
    set.seed(4)
    f1 <- osgpr(y ~ x1 + x2, data = sh, inducing = 4, orthogonal = 4, type = type, weights = w)
    expect_equal(f1$optim$subsample, 150L)
    expect_true("all_data" %in% names(f1$optim$stages))
    # Z and O were chosen among the rows (greedy selection on the subsample)
    W <- rbind(f1$params$Z, f1$params$O)
    expect_equal(dim(W), c(8L, 2L))
    # the bound and gradient at the fit's parameters are one process's on all rows
    f0 <- osgpr(y ~ x1 + x2, data = d, weights = w, inducing = f1$params$Z,
                orthogonal = f1$params$O, kernel = f1$kernel, type = type, optimize = FALSE)
    f0$params <- f1$params
    o0 <- objective(f0)
    expect_lt(abs(-o0$fn(o0$par) - f1$bound), 1e-10 * abs(f1$bound))
    o1 <- objective(f1, cluster = sh)
    expect_same_objective(o1, o0, o0$par)
    o1$release()
    # and so are the residuals, from one process's posterior at those parameters
    p <- f1$params
    fr <- osgpr(y ~ x1 + x2, data = d, weights = w, inducing = p$Z, orthogonal = p$O,
                kernel = kernel_rbf(p$lengthscale, p$variance), noise = p$noise, mean = p$mean,
                type = type, optimize = FALSE)
    expect_lt(abs(fr$bound - f1$bound), 1e-10 * abs(f1$bound))
    expect_equal(residuals(f1, cluster = sh), unname(residuals(fr)), tolerance = 1e-10)
  }
  # set.seed() reproduces the subsample and so the fit
  set.seed(4)
  f2 <- osgpr(y ~ x1 + x2, data = sh, inducing = 4, orthogonal = 4, type = "odvgp", weights = w)
  expect_equal(f2$params, f1$params, tolerance = 1e-12)
})

test_that("a dead worker gives the classed cluster error, and the osgpr fit resumes on a new cluster", {
  skip_on_cran()
  d <- osgpr_data(300, seed = 8)
  load <- function(i, d) d[if (i == 1) 1:150 else 151:300, ]
  cl <- local_cluster(2)
  sh <- shards(cl, load, d = d)
  # the worker dies during the stage on all rows, after the subsample's schedule
  set.seed(9)
  k <- shards_kill_during(cl, osgpr(y ~ x1 + x2, data = sh, inducing = 3, orthogonal = 3), 150L)
  e <- k$result
  expect_true(k$killed)
  expect_s3_class(e, "sparsevgp_cluster_error")
  expect_match(conditionMessage(e), "update\\(e\\$fit")
  expect_s3_class(e$fit, "osgpr")
  expect_equal(c(nrow(e$fit$params$Z), nrow(e$fit$params$O)), c(3L, 3L))
  cl2 <- local_cluster(2)
  on.exit(parallel::stopCluster(cl2))
  old <- options(sparsevgp.shards_subsample = 150L)
  on.exit(options(old), add = TRUE)
  # the fit resumes from the parameters of the subsample's schedule
  at <- update(e$fit, cluster = cl2, optimize = FALSE)
  expect_equal(at$params, e$fit$params)
  set.seed(10)
  f <- update(e$fit, cluster = cl2)
  expect_s3_class(f, "osgpr")
  expect_equal(c(nrow(f$params$Z), nrow(f$params$O)), c(3L, 3L))
  expect_true(is.finite(f$bound))
  expect_gt(f$bound, at$bound - 0.01 * abs(at$bound))
  expect_equal(f$optim$subsample, 150L)
  expect_equal(nobs(f), 300)
  expect_equal(length(parallel::clusterCall(cl2, function() ls(sparsevgp:::.shards))[[1]]), 0L)
  # its bound is one process's on all rows at its parameters
  f0 <- osgpr(y ~ x1 + x2, data = d, inducing = f$params$Z, orthogonal = f$params$O,
              kernel = f$kernel, optimize = FALSE)
  f0$params <- f$params
  expect_lt(abs(-objective(f0)$fn(objective(f0)$par) - f$bound), 1e-10 * abs(f$bound))
})
