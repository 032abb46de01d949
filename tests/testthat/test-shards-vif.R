# sgpr(neighbours = K) on data = shards() (R/shards_vif.R): each worker
# orders its rows and chooses their neighbours among its own rows. Against
# one process on the concatenated rows with the neighbour sets restricted to
# the shards (the option sparsevgp.neighbour_groups), whose likelihood is
# checked against the dense construction of its covariance (vif_dense(),
# helper-vif.R); predictions,
# fitted values and residuals on the workers; uneven shards; the trial of
# neighbours = "auto"; a dead worker and the resumption on a new cluster.

vif_shards_data <- function(N, seed = 1) {
  set.seed(seed)
  d <- data.frame(x1 = runif(N, -3, 3), x2 = runif(N, -3, 3))
  d$y <- sin(2 * d$x1) * cos(2 * d$x2) + 0.5 * d$x1 + rnorm(N, sd = 0.1)
  d
}

# the shard of each row for the split at `ends`
shard_of <- function(ends) rep(seq_along(ends), diff(c(0, ends)))

# a fit `expr` in one process with the neighbour sets restricted to `groups`
with_groups <- function(groups, expr) {
  old <- options(sparsevgp.neighbour_groups = groups)
  on.exit(options(old))
  expr
}

# the one-process fit f0 with the neighbour sets of the fit on shards f1:
# the same seeds of the orders, chosen where f1's workers chose them
with_sets_of <- function(f0, f1, groups) {
  ns <- asNamespace("sparsevgp")
  nb <- f0$neighbours
  nb$seeds <- f1$neighbours$seeds
  nb$orders <- lapply(seq_along(nb$seeds), function(i) ns$.nb_order(sum(nb$groups == i), nb$seeds[i]))
  f0$neighbours <- ns$.nb_choose(f0, f1$neighbours$at, nb)
  f0
}

# (expect_same_objective(): helper-shards.R)

test_that("neighbour sets restricted to groups: within the group, and the dense likelihood", {
  d <- vif_shards_data(120, seed = 3)
  groups <- rep(c(2, 5, 7), c(50, 66, 4))
  set.seed(1)
  f <- with_groups(groups, sgpr(y ~ x1 + x2, data = d, neighbours = 6, inducing = 8,
                                optimize = FALSE))
  idx <- f$neighbours$index
  col <- col(idx)
  expect_true(all(idx[idx > 0] > 0 & groups[idx[idx > 0]] == groups[col[idx > 0]]))
  # each group's first point has no neighbours; the group of 4 at most 3
  expect_equal(sum(colSums(idx > 0) == 0), 3L)
  expect_true(all(colSums(idx[, groups == 7] > 0) <= 3))
  expect_lt(abs(f$bound - vif_dense(f)$ll) / abs(f$bound), 1e-10)
  # the predictions of one group are those of .vif_predict() on its rows
  xn <- cbind(x1 = c(-1, 0.5), x2 = c(2, -0.3))
  r <- groups == 5
  loc <- sparsevgp:::.vif_local_fit(f, f$x[r, ], f$y[r])
  expect_equal(sparsevgp:::.vif_predict_groups(f, xn, groups, c(5, 5)),
               sparsevgp:::.vif_predict(loc, xn, FALSE), tolerance = 1e-12)
  # with one group the local fit is the fit
  g1 <- sparsevgp:::.vif_predict_groups(f, xn, rep(1, 120))
  p <- predict(f, as.data.frame(xn))
  expect_equal(g1$mean, unname(p$mean), tolerance = 1e-12)
  expect_equal(g1$var, unname(p$var), tolerance = 1e-12)
})

test_that("sgpr with neighbours on 2 and 3 shards (uneven, one empty) is one process with sets within the shards", {
  skip_on_cran()
  d <- vif_shards_data(200)
  d$w <- runif(200, 0.5, 2)
  xn <- data.frame(x1 = c(-2.5, 0, 1.3, 2.9), x2 = c(0.4, -1, 2.2, -2.9))
  # (the uneven split with prior weights from a column of the workers' data)
  for (ends in list(c(80, 200), c(195, 195, 200))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    groups <- shard_of(ends)
    w <- if (length(ends) == 3L) quote(w)
    set.seed(5)
    f1 <- eval(bquote(sgpr(y ~ x1 + x2, data = sh, neighbours = 5, inducing = 10, weights = .(w))))
    set.seed(5)
    f0 <- with_groups(groups, eval(bquote(sgpr(y ~ x1 + x2, data = d, neighbours = 5,
                                               inducing = 10, weights = .(w)))))
    expect_equal(is.null(f0$weights), is.null(w))
    expect_match(f1$model, "K = 5 neighbours from the same shard")
    expect_match(summary(f1)$extra$Neighbours, "earlier points of its shard")
    # (the last run, from fitted values, is stopped by the min_gain rule
    # after 11 evaluations: there the order of the sums over the workers
    # moves the mean, near 0, by about 1e-9, 1e-8 relative)
    expect_equal(f1$params, f0$params, tolerance = 1e-7)
    expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
    expect_equal(nobs(f1), 200)
    # value and gradient on the workers at the fit's parameters and near them
    o0 <- objective(f0)
    o1 <- objective(f1, cluster = sh)
    expect_same_objective(o1, o0, o0$par)
    expect_same_objective(o1, o0, o0$par - 0.05)
    o1$release()
    # each worker conditions its rows on its own rows; new points take the
    # prediction of the shard with the nearest row
    own <- sparsevgp:::.vif_predict_groups(f0, f0$x, groups, groups)
    expect_equal(fitted(f1, cluster = sh), own$mean, tolerance = 1e-9)
    expect_equal(residuals(f1, cluster = sh), d$y - own$mean, tolerance = 1e-9)
    p0 <- sparsevgp:::.vif_predict_groups(f0, as.matrix(xn), groups)
    p1 <- predict(f1, xn, cluster = sh)
    expect_equal(unname(p1$mean), p0$mean, tolerance = 1e-9)
    expect_equal(unname(p1$var), p0$var, tolerance = 1e-9)
    expect_error(predict(f1, xn, full_cov = TRUE, cluster = sh), "full_cov = TRUE is not available")
    # predict(neighbours =) reaches the workers
    f0k <- f0
    f0k$neighbours$predict <- 3L
    p0k <- sparsevgp:::.vif_predict_groups(f0k, as.matrix(xn), groups)
    p1k <- predict(f1, xn, cluster = sh, neighbours = 3)
    expect_equal(unname(p1k$mean), p0k$mean, tolerance = 1e-9)
    expect_gt(max(abs(p1k$mean - p1$mean)), 1e-6)
    # a warm start keeps the workers' orders and sets: the same fit
    f2 <- update(f1, optimize = FALSE)
    expect_equal(f2$neighbours$seeds, f1$neighbours$seeds)
    expect_lt(abs(f2$bound - f1$bound), 1e-10 * abs(f1$bound))
    expect_error(sgpr(y ~ x1 + x2, data = sh, neighbours = 200), "must be less than N = 200")
    parallel::stopCluster(cl)
  }
  expect_error(predict(f1, xn), "predict\\(fit, newdata, cluster = sh\\)")
  expect_error(predict(f1, xn, cluster = cl), "predict\\(fit, newdata, cluster = sh\\)")
  expect_error(fitted(f1), "fitted\\(fit, cluster = sh\\)")
})

test_that("on shards, neighbour sets chosen anew that do not raise the likelihood are dropped, and the workers keep the former sets", {
  skip_on_cran()
  # with these data the sets chosen at the fitted lengthscales lower the
  # likelihood (in one process with the sets of the shards too)
  d <- vif_shards_data(200, seed = 4)
  ends <- c(80, 200)
  cl <- local_cluster(2L)
  sh <- make_shards(cl, d, ends)
  k <- kernel_matern52(c(3, 3), 1)
  set.seed(5)
  f1 <- sgpr(y ~ x1 + x2, data = sh, neighbours = 5, inducing = 10, kernel = k)
  set.seed(5)
  f0 <- with_groups(shard_of(ends), sgpr(y ~ x1 + x2, data = d, neighbours = 5,
                                         inducing = 10, kernel = k))
  expect_identical(f0$optim$neighbour_rounds, 0L)
  expect_identical(f1$optim$neighbour_rounds, 0L)
  # the sets chosen at the starting lengthscales, on the workers too: the
  # objective there is that of one process with those sets
  expect_equal(f1$neighbours$lengthscale, c(3, 3), ignore_attr = TRUE)
  expect_equal(f1$params, f0$params, tolerance = 1e-7)
  expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
  o0 <- objective(f0)
  o1 <- objective(f1, cluster = sh)
  expect_same_objective(o1, o0, o0$par)
  o1$release()
  parallel::stopCluster(cl)
})

test_that("with neighbours, large data on shards fit a subsample first; a dead worker gives the classed error and the fit resumes", {
  skip_on_cran()
  d <- vif_shards_data(300, seed = 8)
  load <- function(i, d) d[if (i == 1) 1:150 else 151:300, ]
  cl <- local_cluster(2)
  sh <- shards(cl, load, d = d)
  # the worker dies during the runs on all rows, after the subsample's fit
  set.seed(9)
  k <- shards_kill_during(cl, sgpr(y ~ x1 + x2, data = sh, neighbours = 4, inducing = 10), 150L)
  e <- k$result
  expect_true(k$killed)
  expect_s3_class(e, "sparsevgp_cluster_error")
  expect_match(conditionMessage(e), "update\\(e\\$fit")
  expect_equal(e$fit$neighbours$K, 4L)
  cl2 <- local_cluster(2)
  on.exit(parallel::stopCluster(cl2))
  old <- options(sparsevgp.shards_subsample = 150L)
  on.exit(options(old), add = TRUE)
  set.seed(10)
  f <- update(e$fit, cluster = cl2)
  expect_equal(f$neighbours$K, 4L)
  expect_equal(f$optim$subsample, 150L)
  expect_equal(nrow(f$params$Z), 10L)
  expect_equal(length(parallel::clusterCall(cl2, function() ls(sparsevgp:::.shards))[[1]]), 0L)
  # the bound is one process's with the same sets at the fit's parameters
  sh2 <- shards(cl2, load, d = d)
  groups <- rep(1:2, each = 150)
  f0 <- with_groups(groups, sgpr(y ~ x1 + x2, data = d, neighbours = 4, inducing = f$params$Z,
                                 kernel = f$kernel, optimize = FALSE))
  f0$params <- f$params
  f0 <- with_sets_of(f0, f, groups)
  o0 <- objective(f0)
  expect_lt(abs(-o0$fn(o0$par) - f$bound), 1e-10 * abs(f$bound))
  o1 <- objective(f, cluster = sh2)
  expect_same_objective(o1, o0, o0$par + 0.05)
  o1$release()
  expect_lt(abs(vif_dense(f0)$ll + o0$fn(o0$par)), 1e-9 * abs(f$bound))
})

test_that("neighbours = \"auto\" on shards runs the trial of one process on the gathered rows", {
  skip_on_cran()
  # a rough surface, where the trial keeps K = 20 neighbours (N > 669: the
  # inducing points the budget allows cannot be as many as the rows)
  set.seed(11)
  N <- 700
  d <- data.frame(x1 = runif(N), x2 = runif(N))
  d$y <- sin(40 * d$x1) * cos(40 * d$x2) + rnorm(N, sd = 0.05)
  ends <- c(350, 700)
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, ends)
  set.seed(12)
  f1 <- suppressWarnings(sgpr(y ~ x1 + x2, data = sh, control = list(maxit = 15)))
  set.seed(12)
  f0 <- suppressWarnings(with_groups(shard_of(ends), sgpr(y ~ x1 + x2, data = d,
                                                           control = list(maxit = 15))))
  expect_equal(f0$neighbours$K, 20L)
  expect_gt(f0$auto_neighbours$gain, 0.01)
  expect_equal(f1$auto_neighbours, f0$auto_neighbours, tolerance = 1e-10)
  expect_equal(f1$neighbours$K, 20L)
  # (the run stops at its cap of 15 iterations, where the order of the sums
  # over the workers moves the parameters by about 1e-8 relative, the small
  # noise variance by 2e-6)
  expect_equal(f1$params, f0$params, tolerance = 1e-5)
  expect_lt(abs(f1$bound - f0$bound), 1e-9 * abs(f0$bound))
})

test_that("with neighbours on shards, known noise variances and an offset are those of one process", {
  skip_on_cran()
  d <- vif_shards_data(150, seed = 7)
  d$s2 <- runif(150, 0.005, 0.03)
  d$o <- 0.3 * d$x2
  d$y <- d$y + d$o
  ends <- c(70, 150)
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, ends)
  groups <- shard_of(ends)
  set.seed(2)
  f1 <- sgpr(y ~ x1 + x2, data = sh, neighbours = 5, inducing = 8, noise = s2, offset = o,
             optimize = FALSE)
  set.seed(2)
  f0 <- with_groups(groups, sgpr(y ~ x1 + x2, data = d, neighbours = 5, inducing = 8,
                                 noise = d$s2, offset = o, optimize = FALSE))
  expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
  o0 <- objective(f0)
  o1 <- objective(f1, cluster = sh)
  expect_same_objective(o1, o0, o0$par)
  o1$release()
  # fitted values condition each row on its shard and add the offset back
  own <- sparsevgp:::.vif_predict_groups(f0, f0$x, groups, groups)
  expect_equal(fitted(f1, cluster = sh), own$mean + d$o, tolerance = 1e-9)
  expect_equal(residuals(f1, cluster = sh), d$y - own$mean - d$o, tolerance = 1e-9)
})
