# Data held by the workers of a cluster (R/shards.R): fits on shards()
# against one process on the concatenated rows, the selection in rounds
# against the dense greedy conditional variance, uneven shards, factor
# levels on one worker only, what the master keeps, a dead worker, and pgpr
# and svgp on shards (labels coded on the workers, the subsample path).

shards_data <- function(N, seed = 1) {
  set.seed(seed)
  d <- data.frame(x1 = runif(N, -3, 3), x2 = runif(N, -3, 3))
  d$y <- sin(d$x1) * cos(d$x2) + rnorm(N, sd = 0.1)
  d
}

# two classes from a smooth boundary, with a regression target alongside
shards_labels <- function(N, seed = 1) {
  d <- shards_data(N, seed)
  set.seed(seed + 100)
  d$cls <- factor(ifelse(sin(d$x1) + 0.5 * d$x2 + rnorm(N, sd = 0.5) > 0, "up", "down"))
  d
}

# (local_cluster(), make_shards(), expect_same_objective() and
# expect_rows_on_workers(): helper-shards.R)

# the bound and gradient of a fit on shards, evaluated on the workers,
# against one process on all rows d at the fit's parameters and near them
# (`...`: the one process's weights)
expect_workers_objective <- function(f1, sh, d, ...) {
  f0 <- sgpr(y ~ x1 + x2, data = d, ..., inducing = f1$params$Z, kernel = f1$kernel,
             optimize = FALSE)
  f0$params <- f1$params
  o0 <- objective(f0)
  o1 <- objective(f1, cluster = sh)
  on.exit(o1$release())
  expect_same_objective(o1, o0, o0$par)
  expect_same_objective(o1, o0, o0$par - 0.05)
  expect_lt(abs(-o0$fn(o0$par) - f1$bound), 1e-10 * abs(f1$bound))
  invisible(o0)
}

test_that("shards() loads each worker's rows and refuses bad loads clearly", {
  skip_on_cran()
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  d <- shards_data(40)
  sh <- make_shards(cl, d, c(15, 40))
  expect_s3_class(sh, "sparsevgp_shards")
  expect_equal(sh$n, c(15, 25))
  expect_output(print(sh), "40 rows \\(15, 25\\)")
  expect_error(shards(cl, 1), "'load' must be a function")
  expect_error(shards(list(), function(i) d), "'cl' must be a cluster")
  expect_error(shards(cl, function(i) if (i == 2) stop("no such file") else d),
               "load\\(2\\) failed on worker 2: no such file")
  expect_error(shards(cl, function(i) 1:3), "not a data frame")
  expect_error(osgpr(y ~ x1, data = sh, noise = ~ x1), "'noise' is one starting variance",
               class = "sparsevgp_shards_error")
  expect_error(sgpr(y ~ x1, data = sh, weights = x2), "'weights' must be positive finite")
  expect_error(sgpr(y ~ x1, data = sh, weights = wt), "'weights' .* wt is not a column")
  expect_error(sgpr(y ~ x1, data = sh, subset = x9 > 0), "'subset' .* x9 is not a column")
  expect_error(pgpr(y ~ x1, data = sh, weights = x1), "'weights' is not available .* in pgpr\\(\\)",
               class = "sparsevgp_shards_error")
  expect_error(svgp(y ~ x1, data = sh, offset = x2), "'offset' is not available .* in svgp\\(\\)",
               class = "sparsevgp_shards_error")
  expect_error(sgpr(y ~ x1, data = sh, noise = c(0.1, 0.2)), "one starting variance",
               class = "sparsevgp_shards_error")
  expect_error(sgpr(y ~ x1, data = sh, noise = ~ x1), "one starting variance")
  expect_error(sgpr(y ~ x1, data = sh, noise = rep(0.1, 40)), "known per-point variances")
  expect_error(sgpr(y ~ x1, data = sh, cluster = 1), "'cluster' must be a cluster")
})

test_that("a default sgpr fit on 2 and 3 shards is the fit of one process on the concatenated rows", {
  skip_on_cran()
  d <- shards_data(300)
  set.seed(5)
  f0 <- sgpr(y ~ x1 + x2, data = d)
  # (300 rows: from the exact GPs, R/kernel_choice.R)
  expect_true(f0$auto_kernel$exact)
  o0 <- objective(f0)
  for (ends in list(c(120, 300), c(100, 101, 300))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    set.seed(5)
    f1 <- sgpr(y ~ x1 + x2, data = sh)
    # the same start, selection and schedule (the few rows are fitted here,
    # as in one process), so the same parameters; the final bound is
    # evaluated on the workers
    expect_equal(f1$params, f0$params, tolerance = 1e-10)
    expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
    expect_equal(f1$auto_kernel, f0$auto_kernel, tolerance = 1e-10)
    expect_equal(nobs(f1), 300)
    expect_equal(f1$upper_bound, f0$upper_bound, tolerance = 1e-10)
    # bound and gradient at other parameters, evaluated on the workers
    o1 <- objective(f1, cluster = sh)
    expect_same_objective(o1, o0, o0$par + 0.1)
    o1$release()
    # predictions here, fitted values and residuals on the workers
    nd <- d[c(3, 150, 290), ]
    expect_equal(predict(f1, nd), predict(f0, nd), tolerance = 1e-10)
    expect_equal(fitted(f1, cluster = sh), unname(fitted(f0)), tolerance = 1e-10)
    expect_equal(residuals(f1, cluster = sh), unname(residuals(f0)), tolerance = 1e-10)
    parallel::stopCluster(cl)
  }
  expect_error(fitted(f1), "fitted\\(fit, cluster = sh\\)")
  expect_error(predict(f1), "give 'newdata'")
  expect_error(objective(f1), "objective\\(fit, cluster = sh\\)")
  # what reads the rows says so
  expect_error(plot(f1), "plot.*on the workers of its shards")
  expect_error(reinit_inducing(f1), "reinit_inducing\\(\\) reads the rows")
  expect_error(df.residual(f1), "df.residual\\(\\) reads the rows")
  expect_error(residuals(f0, cluster = 1), "'cluster' in residuals\\(\\) is for fits on shards")
})

test_that("uneven shards (one empty, one of one row) fit on a subsample and then on all rows", {
  skip_on_cran()
  d <- shards_data(400, seed = 2)
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(399, 399, 400))
  expect_equal(sh$n, c(399, 0, 1))
  # the path of large data: a subsample of 200 rows, then all 400 on the workers
  old <- options(sparsevgp.shards_subsample = 200L)
  on.exit(options(old), add = TRUE)
  set.seed(3)
  f1 <- sgpr(y ~ x1 + x2, data = sh, inducing = 12)
  expect_equal(names(f1$optim$stages)[length(f1$optim$stages)], "all_data")
  expect_equal(f1$optim$subsample, 200L)
  expect_equal(nrow(f1$params$Z), 12L)
  # bound and gradient of one process on all rows at the fit's parameters
  # and near them
  expect_workers_objective(f1, sh, d)
  # the residuals computed on the workers are y minus the predictions here
  expect_equal(residuals(f1, cluster = sh), unname(d$y - predict(f1, d)$mean),
               tolerance = 1e-10)
  # `.` stands for the workers' columns; the starting kernel (lengthscales
  # from 400 evenly spaced rows, variance from var(y)) is one process's
  f2 <- sgpr(y ~ ., data = sh, inducing = f1$params$Z, optimize = FALSE)
  f3 <- sgpr(y ~ ., data = d, inducing = f1$params$Z, optimize = FALSE)
  expect_identical(colnames(f2$x), c("x1", "x2"))
  expect_equal(f2$params, f3$params, tolerance = 1e-12)
  expect_equal(f2$bound, f3$bound, tolerance = 1e-10)
})

test_that("prior weights from a column of the workers' data give the weighted fit of one process", {
  skip_on_cran()
  d <- shards_data(300)
  set.seed(9)
  d$w <- runif(300, 0.3, 3)
  d$w[7] <- NA
  set.seed(5)
  f0 <- sgpr(y ~ x1 + x2, data = d, weights = w, na.action = na.omit)
  o0 <- objective(f0)
  expect_equal(nobs(f0), 299)
  for (ends in list(c(120, 300), c(100, 101, 300))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    set.seed(5)
    f1 <- sgpr(y ~ x1 + x2, data = sh, weights = w)
    # the same start, weighted selection and schedule: the same fit; the
    # row with a missing weight is dropped on its worker as in one process
    expect_equal(nobs(f1), 299)
    expect_output(print(f1), "weighted noise")
    expect_equal(f1$params, f0$params, tolerance = 1e-8)
    expect_lt(abs(f1$bound - f0$bound), 1e-8 * abs(f0$bound))
    expect_lt(abs(f1$upper_bound - f0$upper_bound), 1e-8 * abs(f0$upper_bound))
    # the master keeps no weights (they are per row)
    expect_null(f1$weights)
    expect_null(f1$noise_model$lambda)
    # bound and gradient on the workers with their weights, at the fit's
    # parameters and away from them; fitted values and residuals
    expect_rows_on_workers(f1, sh, f0, o0)
    parallel::stopCluster(cl)
  }
  # the weights matter: the unweighted fit is another one
  f2 <- sgpr(y ~ x1 + x2, data = d[-7, ], inducing = f0$params$Z, kernel = f0$kernel,
             optimize = FALSE)
  f2$params <- f0$params
  expect_gt(abs(objective(f2)$fn(o0$par) - o0$fn(o0$par)), 1)
})

test_that("prior weights on uneven shards: weighted selection over the workers, the subsample and all rows", {
  skip_on_cran()
  d <- shards_data(400, seed = 2)
  set.seed(8)
  d$w <- exp(rnorm(400, sd = 0.7))
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(250, 250, 400))
  expect_equal(sh$n, c(250, 0, 150))
  old <- options(sparsevgp.shards_subsample = 200L)
  on.exit(options(old), add = TRUE)
  # the start and the selection weighted by w / sigma^2 over all rows (no
  # ties: the first point is the row of largest weight) are one process's
  f2 <- sgpr(y ~ x1 + x2, data = sh, weights = w, inducing = 10, optimize = FALSE)
  f3 <- sgpr(y ~ x1 + x2, data = d, weights = w, inducing = 10, optimize = FALSE)
  expect_equal(f2$params, f3$params, tolerance = 1e-12)
  expect_equal(f2$bound, f3$bound, tolerance = 1e-10)
  X <- as.matrix(d[, c("x1", "x2")])
  k <- sparsevgp:::.kernel_at(f3$kernel, f3$params)
  s3 <- select_inducing(X, k, M = 10, weights = d$w / f3$params$noise)
  expect_equal(unname(f2$params$Z), unname(X[s3$index, ]))
  # the path of large data: the schedule on a subsample of 200 rows with
  # their weights, then all rows on the workers with theirs
  set.seed(3)
  f1 <- sgpr(y ~ x1 + x2, data = sh, weights = w, inducing = 12)
  expect_equal(names(f1$optim$stages)[length(f1$optim$stages)], "all_data")
  expect_equal(f1$optim$subsample, 200L)
  o0 <- expect_workers_objective(f1, sh, d, weights = d$w)
  # the last stage ended at a stationary point of the weighted bound of
  # all rows (the kernel, noise and mean; the inducing inputs held)
  g <- o0$gr(o0$par)
  free <- !grepl("^Z", names(o0$par))
  expect_lt(max(abs(g[free])), 1e-2 * max(1, abs(o0$fn(o0$par))))
  # the subsample's fit carries the weights of its rows
  h <- sparsevgp:::.shards_design(sh, y ~ x1 + x2, weights = quote(w))$h
  on.exit(sparsevgp:::.cluster_release(h), add = TRUE, after = FALSE)
  f4 <- f1
  f4$cluster <- h
  set.seed(11)
  ss <- sparsevgp:::.shards_subsample(f4, 200L)
  set.seed(11)
  rows <- sort(sample.int(400, 200, useHash = TRUE))
  expect_equal(ss$fit$weights, d$w[rows])
  expect_equal(ss$fit$noise_model$lambda, 1 / d$w[rows])
  expect_equal(unname(ss$fit$y), d$y[rows])
})

test_that("greedy selection in rounds over the workers is the greedy conditional variance selection of all rows", {
  skip_on_cran()
  d <- shards_data(200, seed = 4)
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(70, 71, 200))
  h <- sparsevgp:::.shards_design(sh, y ~ x1 + x2)$h
  on.exit(sparsevgp:::.cluster_release(h), add = TRUE, after = FALSE)
  k <- kernel_rbf(lengthscale = c(0.8, 1.3), variance = 1.5)
  set.seed(1)
  Z <- sparsevgp:::.shards_greedy(h, k, list(M = 12L, threshold = NULL), 1, 2^30,
                                  c("x1", "x2"))
  X <- as.matrix(d[, 1:2])
  idx <- vapply(seq_len(nrow(Z)), function(m) which(X[, 1] == Z[m, 1] & X[, 2] == Z[m, 2]), 1L)
  # the dense route: each point has the largest conditional variance given
  # the earlier ones
  K <- 1.5 * exp(-0.5 * as.matrix(dist(sweep(X, 2, c(0.8, 1.3), "/")))^2)
  for (m in seq_along(idx)) {
    S <- idx[seq_len(m - 1L)]
    cv <- if (m == 1L) diag(K) else
      diag(K) - rowSums((K[, S, drop = FALSE] %*% solve(K[S, S])) * K[, S, drop = FALSE])
    expect_lt(max(cv) - cv[idx[m]], 1e-10)
  }
  # one process's selection with the same first point (the RBF ties all
  # rows at the start) and its tie-breaking order over the concatenated
  # rows (with a lengthscale long enough that no two residual variances
  # tie in double precision) is the same
  k2 <- kernel_rbf(lengthscale = c(2.5, 3), variance = 1.5)
  set.seed(2)
  Z2 <- sparsevgp:::.shards_greedy(h, k2, list(M = 8L, threshold = NULL), 1, 2^30,
                                   c("x1", "x2"))
  i2 <- vapply(1:8, function(m) which(X[, 1] == Z2[m, 1] & X[, 2] == Z2[m, 2]), 1L)
  s1 <- select_inducing(X, k2, M = 8, perm = c(i2[1], setdiff(seq_len(200), i2[1])))
  expect_equal(s1$index, i2)
  # a threshold on the trace: the shortest prefix below it, as in one process
  tr <- sparsevgp:::.ffi_select_trace(k, X, rep(1, 200), Z, 1e-10, FALSE)$trace
  set.seed(1)
  Zt <- sparsevgp:::.shards_greedy(h, k, list(M = 12L, threshold = tr[8] * 1.0001), 1, 2^30,
                                   c("x1", "x2"))
  expect_equal(unname(Zt), unname(Z[1:8, ]))
})

test_that("factor levels present on one worker only are agreed before the inputs are built", {
  skip_on_cran()
  d <- shards_data(120, seed = 6)
  d$g <- rep(c("a", "b", "c"), each = 40)
  d$y <- d$y + c(a = 0, b = 1, c = -1)[d$g]
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(80, 120))   # "c" only on worker 2, "a" only on worker 1
  Z <- model.matrix(~ x1 + g - 1, d)[seq(1, 120, by = 8), ]
  f1 <- sgpr(y ~ x1 + g, data = sh, inducing = Z, optimize = FALSE)
  f0 <- sgpr(y ~ x1 + g, data = d, inducing = Z, optimize = FALSE)
  expect_equal(f1$xlevels, list(g = c("a", "b", "c")))
  expect_equal(colnames(f1$x), colnames(f0$x))
  expect_same_objective(objective(f1, cluster = sh), objective(f0), objective(f0)$par + 0.1)
  # a variable numeric on one worker and text on another is refused
  bad <- shards(cl, function(i) if (i == 1) data.frame(y = 1:3, g = c("a", "b", "a")) else
    data.frame(y = 1:3, g = 1:3))
  expect_error(sgpr(y ~ g, data = bad), "'g' is character and integer on different workers")
  # terms whose coefficients come from each worker's rows are refused
  expect_error(sgpr(y ~ poly(x1, 2), data = sh), "terms computed from the data")
})

test_that("the master keeps O(M^2 + M D) numbers of a fit on shards", {
  skip_on_cran()
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sizes <- vapply(c(200, 1600), function(N) {
    d <- shards_data(N, seed = 7)
    sh <- make_shards(cl, d, c(N / 2, N))
    Z <- as.matrix(d[1:10, 1:2])
    f <- sgpr(y ~ x1 + x2, data = sh, inducing = Z, optimize = FALSE)
    expect_equal(nrow(f$x), 0L)
    expect_length(f$y, 0L)
    # no member longer than M^2 numbers
    leaves <- unlist(rapply(unclass(f), length, how = "unlist"))
    expect_lte(max(leaves), 10^2)
    as.numeric(object.size(f))
  }, 0)
  # and its size does not grow with N
  expect_lt(abs(diff(sizes)), 512)
  # nor do pgpr's and svgp's (no labels, local parameters or tie orders)
  d <- shards_labels(400, seed = 7)
  sh <- make_shards(cl, d, c(200, 400))
  Z <- as.matrix(d[1:10, 1:2])
  for (f in list(pgpr(cls ~ x1 + x2, data = sh, inducing = Z, optimize = FALSE),
                 svgp(cls ~ x1 + x2, data = sh, inducing = Z, optimize = FALSE))) {
    leaves <- unlist(rapply(unclass(f), length, how = "unlist"))
    expect_lte(max(leaves), 10^2)
    expect_equal(nobs(f), 400)
  }
})

test_that("a dead worker gives the classed cluster error, and the fit resumes on a new cluster", {
  skip_on_cran()
  d <- shards_data(300, seed = 8)
  load <- function(i, d) d[if (i == 1) 1:150 else 151:300, ]
  cl <- local_cluster(2)
  sh <- shards(cl, load, d = d)
  pids <- unlist(parallel::clusterCall(cl, Sys.getpid))
  killed <- FALSE
  # the worker dies during the stage on all rows, after the subsample's schedule
  old <- options(sparsevgp.shards_subsample = 150L, sparsevgp.evaluation_hook = function(i) {
    f <- dynGet("fit", ifnotfound = NULL)
    if (!killed && !is.null(f$shards)) {
      tools::pskill(pids[2])
      Sys.sleep(0.5)
      killed <<- TRUE
    }
  })
  set.seed(9)
  e <- tryCatch(sgpr(y ~ x1 + x2, data = sh, inducing = 10), error = function(e) e)
  options(old)
  try(parallel::stopCluster(cl), silent = TRUE)
  expect_true(killed)
  expect_s3_class(e, "sparsevgp_cluster_error")
  expect_match(conditionMessage(e), "update\\(e\\$fit")
  # the master stays usable, and the fit resumes from the subsample's parameters
  expect_s3_class(e$fit, "sgpr")
  expect_equal(nrow(e$fit$params$Z), 10L)
  cl2 <- parallel::makeCluster(2)
  on.exit(parallel::stopCluster(cl2))
  sh2 <- shards(cl2, load, d = d)
  old <- options(sparsevgp.shards_subsample = 150L)
  on.exit(options(old), add = TRUE)
  at <- update(e$fit, data = sh2, optimize = FALSE)
  expect_equal(at$params, e$fit$params)
  set.seed(10)
  f <- update(e$fit, data = sh2)
  # or with the load function the shards keep, on the new cluster
  set.seed(10)
  f2 <- update(e$fit, cluster = cl2)
  expect_equal(f2$params, f$params, tolerance = 1e-10)
  expect_equal(length(parallel::clusterCall(cl2, function() ls(sparsevgp:::.shards))[[1]]), 1L)
  expect_true(is.finite(f$bound))
  expect_gt(f$bound, at$bound - 0.01 * abs(at$bound))
  expect_equal(nobs(f), 300)
  # a worker that lost its rows (restarted, say): the same error class
  parallel::clusterCall(cl2[2], function(key) sparsevgp:::.shard_drop(key), sh2$key)
  expect_error(sgpr(y ~ x1 + x2, data = sh2, inducing = 10),
               "a worker holds no share of the data", class = "sparsevgp_cluster_error")
  # a worker that is gone when the fit starts: the same error class
  parallel::stopCluster(cl2)
  on.exit(options(old))
  expect_error(sgpr(y ~ x1 + x2, data = sh2, inducing = 10), class = "sparsevgp_cluster_error")
})

test_that("pgpr on 2 and 3 shards is the fit of one process on the concatenated rows", {
  skip_on_cran()
  d <- shards_labels(300)
  set.seed(5)
  f0 <- pgpr(cls ~ x1 + x2, data = d)
  nd <- d[c(3, 150, 290), ]
  for (ends in list(c(120, 300), c(100, 101, 300))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    set.seed(5)
    f1 <- pgpr(cls ~ x1 + x2, data = sh)
    # the same start, selection and schedule; every evaluation on the workers
    expect_equal(f1$params, f0$params, tolerance = 1e-8)
    expect_lt(abs(f1$bound - f0$bound), 1e-8 * abs(f0$bound))
    expect_equal(nobs(f1), 300)
    expect_equal(predict(f1, nd, type = "prob"), predict(f0, nd, type = "prob"), tolerance = 1e-8)
    # the master keeps no rows and no local parameters
    expect_equal(nrow(f1$x), 0L)
    expect_length(f1$c, 0L)
    # objective(fit, cluster = sh): c from the fit's q(f), as set in one process
    o1 <- objective(f1, cluster = sh)
    f0c <- f0
    f0c[c("params", "posterior")] <- f1[c("params", "posterior")]
    p <- predict(f0c, d)
    f0c$c <- sqrt(p$mean^2 + p$var)
    expect_same_objective(o1, objective(f0c), o1$par + 0.05)
    o1$release()
    parallel::stopCluster(cl)
  }
  expect_error(fitted(f1), "fitted\\(fit, cluster = sh\\) computes the values there")
  expect_error(plot(f1), "on the workers of its shards")
})

test_that("svgp on shards: two classes, a Gaussian likelihood, minibatches and several classes", {
  skip_on_cran()
  d <- shards_labels(300, seed = 2)
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  # the even split of cluster = cl: the same sums in the same order
  sh <- make_shards(cl, d, c(150, 300))
  nd <- d[c(3, 150, 290), ]
  for (lik in c("bernoulli", "gaussian")) {
    f <- if (lik == "gaussian") y ~ x1 + x2 else cls ~ x1 + x2
    set.seed(4)
    a <- svgp(f, data = d, likelihood = lik, inducing = 8, cluster = cl)
    set.seed(4)
    b <- svgp(f, data = sh, likelihood = lik, inducing = 8)
    expect_equal(b$params, a$params, tolerance = 1e-10)
    expect_equal(b$bound, a$bound, tolerance = 1e-10)
    expect_equal(predict(b, nd), predict(a, nd), tolerance = 1e-10)
    # the bound and gradient on the workers are those of one process
    o1 <- objective(b, cluster = sh)
    fa <- svgp(f, data = d, likelihood = lik, inducing = b$params$Z, optimize = FALSE)
    fa$params <- b$params
    expect_same_objective(o1, objective(fa), o1$par + 0.05)
    o1$release()
  }
  # Adam on minibatches drawn by the master: the fit of one process
  set.seed(4)
  a <- svgp(cls ~ x1 + x2, data = d, inducing = 8, batch_size = 40,
            control = list(maxit = 60, lr = 0.05))
  set.seed(4)
  b <- svgp(cls ~ x1 + x2, data = sh, inducing = 8, batch_size = 40,
            control = list(maxit = 60, lr = 0.05))
  expect_equal(b$params, a$params, tolerance = 1e-10)
  expect_equal(b$bound, a$bound, tolerance = 1e-10)
  # several classes: the gathered rows fitted here, the fit of one process
  ir <- shards(cl, function(i) iris[if (i == 1) 1:70 else 71:150, ])
  set.seed(2)
  # (a few iterations: the same path, stopped at the cap in both)
  expect_warning(m0 <- svgp(Species ~ ., data = iris, inducing = 6, control = list(maxit = 30)),
                 "limit of 30 iterations")
  set.seed(2)
  expect_warning(m1 <- svgp(Species ~ ., data = ir, inducing = 6, control = list(maxit = 30)),
                 "limit of 30 iterations")
  expect_equal(m1$params, m0$params, tolerance = 1e-10)
  expect_equal(predict(m1, iris[c(1, 60, 140), ], type = "prob"),
               predict(m0, iris[c(1, 60, 140), ], type = "prob"), tolerance = 1e-10)
  expect_equal(nrow(m1$x), 0L)
  expect_error(fitted(b), "fitted\\(fit, cluster = sh\\) computes the values there")
  # a warm start on the same shards reproduces the fit
  at <- update(a, optimize = FALSE)
  bt <- update(b, optimize = FALSE)
  expect_equal(bt$params, b$params, tolerance = 1e-12)
  expect_equal(bt$bound, at$bound, tolerance = 1e-10)
})

test_that("labels split over the workers: one class on a worker, 0/1 and logical labels", {
  skip_on_cran()
  d <- shards_labels(200, seed = 3)
  d <- d[order(d$cls), ]
  d$num <- as.numeric(d$cls == "up")
  d$lgl <- d$cls == "up"
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  # worker 1 holds only "down", worker 2 mostly "up"
  n1 <- sum(d$cls == "down")
  sh <- make_shards(cl, d, c(n1, 200))
  Z <- as.matrix(d[seq(1, 200, by = 25), c("x1", "x2")])
  ref <- pgpr(cls ~ x1 + x2, data = d, inducing = Z, optimize = FALSE)
  for (f in list(cls ~ x1 + x2, num ~ x1 + x2, lgl ~ x1 + x2)) {
    p1 <- pgpr(f, data = sh, inducing = Z, optimize = FALSE)
    expect_equal(p1$bound, ref$bound, tolerance = 1e-10)
    s0 <- svgp(f, data = d, inducing = Z, optimize = FALSE)
    s1 <- svgp(f, data = sh, inducing = Z, optimize = FALSE)
    expect_equal(s1$bound, s0$bound, tolerance = 1e-10)
  }
  # a class that the fit does not know is refused on the worker
  bad <- shards(cl, function(i) data.frame(x1 = 1:3 / 3, cls = if (i == 1) c("a", "b", "a") else
    c("a", "c", "b")))
  expect_error(pgpr(cls ~ x1, data = bad, inducing = 2), "exactly two classes")
})

test_that("more rows than the subsample: pgpr and svgp start on a subsample and end on all rows on the workers", {
  skip_on_cran()
  d <- shards_labels(400, seed = 4)
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(399, 399, 400))
  old <- options(sparsevgp.shards_subsample = 200L)
  on.exit(options(old), add = TRUE)
  set.seed(3)
  p1 <- pgpr(cls ~ x1 + x2, data = sh)
  expect_equal(p1$optim$subsample, 200L)
  expect_equal(p1$subsample$rows, 200L)
  expect_equal(nobs(p1), 400)
  # the bound at the fit's parameters and c from its q(f) is one process's
  f0 <- pgpr(cls ~ x1 + x2, data = d, inducing = p1$params$Z, kernel = p1$kernel,
             optimize = FALSE)
  f0$params <- p1$params
  f0$posterior <- p1$posterior
  p <- predict(f0, d)
  f0$c <- sqrt(p$mean^2 + p$var)
  o1 <- objective(p1, cluster = sh)
  expect_same_objective(o1, objective(f0), o1$par)
  o1$release()
  # svgp: q(u) at its optimum on all rows (the ELBO of one process there)
  set.seed(3)
  s1 <- svgp(cls ~ x1 + x2, data = sh, inducing = 10)
  expect_equal(s1$optim$subsample, 200L)
  expect_true("all_data_q" %in% names(s1$optim$stages))
  s0 <- svgp(cls ~ x1 + x2, data = d, inducing = s1$params$Z, optimize = FALSE)
  s0$params <- s1$params
  o0 <- objective(s0)
  expect_lt(abs(-o0$fn(o0$par) - s1$bound), 1e-10 * abs(s1$bound))
  # and q(u) is at its optimum there, within the tolerance of its steps
  # (1e-4 nats per observation)
  q <- sparsevgp:::.uc_q_optimum(s0, s0$params, tol = 0, iters = 3L)
  expect_lt(q$value - s1$bound, 1e-4 * 400)
  # minibatches: Adam on all rows from the subsample's starts
  set.seed(3)
  b1 <- svgp(cls ~ x1 + x2, data = sh, inducing = 10, batch_size = 50,
             control = list(maxit = 30, lr = 0.05))
  expect_equal(b1$optim$subsample, 200L)
  expect_true(is.finite(b1$bound))
  # what has no path on the workers says so
  # several classes: the subsample's fit, then q(u) at its optimum on all
  # rows on the workers (the ELBO of one process there, with the fit's
  # Monte Carlo draws of the softmax)
  ir <- shards(cl, function(i) iris[rep(1:150, 2)[(i - 1) * 100 + 1:100], ])
  set.seed(2)
  expect_warning(m1 <- svgp(Species ~ ., data = ir, inducing = 6, control = list(maxit = 30)),
                 "limit of 30 iterations")
  expect_equal(m1$optim$subsample, 200L)
  expect_true("all_data_q" %in% names(m1$optim$stages))
  expect_equal(nobs(m1), 300)
  expect_equal(nrow(m1$x), 0L)
  i2 <- iris[rep(1:150, 2), ]
  m0 <- svgp(Species ~ ., data = i2, inducing = m1$params$Z, optimize = FALSE)
  m0$params <- m1$params
  m0$lik <- m1$lik
  o0 <- objective(m0)
  expect_lt(abs(-o0$fn(o0$par) - m1$bound), 1e-10 * abs(m1$bound))
  o1 <- objective(m1, cluster = ir)
  expect_same_objective(o1, o0, o0$par + 0.01)
  o1$release()
  q <- sparsevgp:::.uc_q_optimum(m0, m0$params, tol = 0, iters = 3L)
  expect_lt(q$value - m1$bound, 1e-4 * 300)
  m0$posterior <- m1$posterior
  p1 <- fitted(m1, cluster = ir)
  expect_equal(colnames(p1), levels(iris$Species))
  expect_equal(unname(p1), unname(fitted(m0)), tolerance = 1e-10)
  # Adam on minibatches of all rows
  set.seed(2)
  b2 <- svgp(Species ~ ., data = ir, inducing = 6, batch_size = 30,
             control = list(maxit = 20, lr = 0.05))
  expect_equal(b2$optim$subsample, 200L)
  expect_true(is.finite(b2$bound))
  expect_error(svgp(cls ~ x1, data = sh, inducing = 5, control = list(optimizer = "natgrad")),
               "do not run on the workers")
})

test_that("fitted() and residuals() of classifiers on shards are computed on the workers", {
  skip_on_cran()
  d <- shards_labels(300)
  set.seed(5)
  f0 <- pgpr(cls ~ x1 + x2, data = d)
  for (ends in list(c(120, 300), c(100, 101, 300))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    set.seed(5)
    f1 <- pgpr(cls ~ x1 + x2, data = sh)
    # one process at the parameters and q(f) of the fit on shards
    f0c <- f0
    f0c[c("params", "posterior")] <- f1[c("params", "posterior")]
    for (m in c("quadrature", "probit", "plugin")) {
      expect_equal(fitted(f1, method = m, cluster = sh), unname(fitted(f0c, method = m)),
                   tolerance = 1e-10)
    }
    for (type in c("response", "pearson")) {
      expect_equal(residuals(f1, type = type, cluster = sh),
                   unname(residuals(f0c, type = type)), tolerance = 1e-10)
    }
    # (the values differ from those of another fit: the test can fail)
    expect_gt(max(abs(fitted(f1, cluster = sh) - 0.5)), 0.1)
    parallel::stopCluster(cl)
  }
  expect_error(residuals(f1), "residuals\\(fit, cluster = sh\\) computes the values there")
  expect_error(residuals(f0, cluster = sh), "'cluster' in residuals\\(\\) is for fits on shards")
  # svgp: two classes, a Gaussian likelihood, several classes
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(150, 150, 300))
  for (lik in c("bernoulli", "gaussian")) {
    f <- if (lik == "gaussian") y ~ x1 + x2 else cls ~ x1 + x2
    set.seed(4)
    b <- svgp(f, data = sh, likelihood = lik, inducing = 8)
    a <- svgp(f, data = d, likelihood = lik, inducing = b$params$Z, optimize = FALSE)
    a[c("params", "posterior")] <- b[c("params", "posterior")]
    expect_equal(fitted(b, cluster = sh), unname(fitted(a)), tolerance = 1e-10)
    for (type in c("response", "pearson")) {
      expect_equal(residuals(b, type = type, cluster = sh), unname(residuals(a, type = type)),
                   tolerance = 1e-10)
    }
  }
  ir <- shards(cl, function(i) iris[list(1:70, integer(0), 71:150)[[i]], ])
  set.seed(2)
  m0 <- suppressWarnings(svgp(Species ~ ., data = iris, inducing = 6, control = list(maxit = 30)))
  set.seed(2)
  m1 <- suppressWarnings(svgp(Species ~ ., data = ir, inducing = 6, control = list(maxit = 30)))
  p1 <- fitted(m1, cluster = ir)
  expect_equal(dim(p1), c(150L, 3L))
  expect_equal(unname(p1), unname(fitted(m0)), tolerance = 1e-10)
  expect_error(residuals(m1, cluster = ir), "not defined for multiclass fits")
})

test_that("known per-point noise variances from a column of the workers' data", {
  skip_on_cran()
  d <- shards_data(300)
  set.seed(9)
  d$s2 <- runif(300, 0.005, 0.05)
  d$w <- runif(300, 0.5, 2)
  d$s2[11] <- NA
  dd <- d[-11, ]
  set.seed(5)
  f0 <- sgpr(y ~ x1 + x2, data = dd, noise = dd$s2)
  o0 <- objective(f0)
  for (ends in list(c(120, 300), c(100, 101, 300), c(150, 150, 300))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    set.seed(5)
    f1 <- sgpr(y ~ x1 + x2, data = sh, noise = s2)
    # the row of a missing variance is dropped on its worker
    expect_equal(nobs(f1), 299)
    expect_equal(f1$params, f0$params, tolerance = 1e-8)
    expect_lt(abs(f1$bound - f0$bound), 1e-8 * abs(f0$bound))
    expect_equal(f1$noise_model$kind, "known")
    expect_null(f1$noise_model$lambda)
    expect_output(print(f1), "variances from 0.005.* to 0.0499.* \\(known\\)")
    expect_rows_on_workers(f1, sh, f0, o0, shift = -0.1)
    # with prior weights too: variances s2 / w, as in one process
    if (length(ends) == 2L) {
      set.seed(5)
      g0 <- sgpr(y ~ x1 + x2, data = dd, noise = dd$s2, weights = w)
      set.seed(5)
      g1 <- sgpr(y ~ x1 + x2, data = sh, noise = s2, weights = w)
      # (the optimiser's path follows the order of the sums: its end agrees
      # to about 1e-7 here; the bound and gradient at given parameters to
      # 1e-10)
      expect_equal(g1$params, g0$params, tolerance = 1e-6)
      expect_lt(abs(g1$bound - g0$bound), 1e-8 * abs(g0$bound))
      expect_workers_objective(g1, sh, dd, noise = dd$s2, weights = dd$w)
      expect_gt(abs(g1$bound - f1$bound), 1)
      # an expression in the columns: the variances of noise = s^2
      sh2 <- shards(cl, function(i, d, ends) {
        d$s <- sqrt(d$s2)
        d[seq_len(ends[i] - c(0, ends)[i]) + c(0, ends)[i], ]
      }, d = d, ends = ends)
      set.seed(5)
      h1 <- sgpr(y ~ x1 + x2, data = sh2, noise = s^2)
      # (an optimiser's end, as above: 1e-8 with R's reference BLAS, about
      # 1e-8 relative off with OpenBLAS, whose sums are ordered otherwise)
      expect_equal(h1$params, f0$params, tolerance = 1e-6)
    }
    parallel::stopCluster(cl)
  }
  # more rows than the subsample: selection weighted by 1 / s2 over all
  # rows on the workers, then the kernel and mean on all rows there
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(150, 300))
  old <- options(sparsevgp.shards_subsample = 120)
  on.exit(options(old), add = TRUE)
  set.seed(3)
  f2 <- sgpr(y ~ x1 + x2, data = sh, noise = s2, inducing = 15)
  expect_equal(nrow(f2$params$Z), 15L)
  expect_workers_objective(f2, sh, dd, noise = dd$s2)
})

test_that("from 300 rows the default's exact-GP start on shards keeps the subset and offset", {
  skip_on_cran()
  d <- shards_data(340)
  d$o <- d$x1 / 3
  d$keep <- d$x2 > -2.5
  set.seed(5)
  f0 <- sgpr(y ~ x1 + x2 + offset(x2 / 4), data = d, subset = keep, offset = o)
  expect_gte(nobs(f0), 300)
  expect_lt(nobs(f0), 340)
  expect_true(f0$auto_kernel$exact)
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(150, 340))
  set.seed(5)
  f1 <- sgpr(y ~ x1 + x2 + offset(x2 / 4), data = sh, subset = keep, offset = o)
  expect_equal(nobs(f1), nobs(f0))
  expect_equal(f1$auto_kernel, f0$auto_kernel, tolerance = 1e-10)
  expect_equal(f1$params, f0$params, tolerance = 1e-10)
  expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
  expect_equal(predict(f1, d[1:5, ]), predict(f0, d[1:5, ]), tolerance = 1e-10)
})

test_that("subset and offset on shards are evaluated on the workers", {
  skip_on_cran()
  d <- shards_labels(300)
  d$o <- d$x1 / 3
  d$keep <- d$x2 > -2
  set.seed(5)
  f0 <- sgpr(y ~ x1 + x2 + offset(x2 / 4), data = d, subset = keep & x1 > -2.5, offset = o)
  o0 <- objective(f0)
  set.seed(5)
  p0 <- pgpr(cls ~ x1 + x2, data = d, subset = keep)
  for (ends in list(c(120, 300), c(100, 101, 300))) {
    cl <- local_cluster(length(ends))
    sh <- make_shards(cl, d, ends)
    set.seed(5)
    f1 <- sgpr(y ~ x1 + x2 + offset(x2 / 4), data = sh, subset = keep & x1 > -2.5, offset = o)
    expect_equal(nobs(f1), nobs(f0))
    expect_lt(nobs(f1), 300)
    # the scaling statistics count the kept rows only, of y minus the offset
    expect_equal(f1$shards$x, sparsevgp:::.col_stats(f0$x), tolerance = 1e-12)
    expect_equal(unname(f1$shards$y), c(mean(f0$y), var(f0$y)), tolerance = 1e-12)
    expect_equal(f1$params, f0$params, tolerance = 1e-8)
    expect_lt(abs(f1$bound - f0$bound), 1e-8 * abs(f0$bound))
    expect_rows_on_workers(f1, sh, f0, o0)
    # predictions at new data add the offset there, as in one process
    expect_equal(predict(f1, d[1:5, ]), predict(f0, d[1:5, ]), tolerance = 1e-10)
    # pgpr with a subset
    set.seed(5)
    p1 <- pgpr(cls ~ x1 + x2, data = sh, subset = keep)
    expect_equal(nobs(p1), nobs(p0))
    expect_equal(p1$params, p0$params, tolerance = 1e-8)
    p0c <- p0
    p0c[c("params", "posterior")] <- p1[c("params", "posterior")]
    expect_equal(fitted(p1, cluster = sh), unname(fitted(p0c)), tolerance = 1e-10)
    # svgp with a subset: the kept rows' statistics
    set.seed(5)
    v1 <- svgp(cls ~ x1 + x2, data = sh, subset = keep, inducing = 8, optimize = FALSE)
    expect_equal(nobs(v1), nobs(p0))
    expect_equal(v1$shards$x, sparsevgp:::.col_stats(p0$x), tolerance = 1e-12)
    parallel::stopCluster(cl)
  }
  # without the offset the fit is another one
  expect_gt(abs(sgpr(y ~ x1 + x2, data = d, subset = keep & x1 > -2.5)$bound - f0$bound), 1)
})

test_that("the workers of one host share control$memory", {
  skip_on_cran()
  cl <- local_cluster(3)
  on.exit(parallel::stopCluster(cl))
  d <- shards_labels(200)
  # all on this machine: one host of three workers
  sh <- make_shards(cl, d, c(70, 140, 200))
  expect_equal(sh$per_host, c(3, 3, 3))
  # a stand-in for two hosts: workers 1 and 2 on "a", worker 3 on "b"
  parallel::clusterApply(cl, c("a", "a", "b"), function(h) options(sparsevgp.nodename = h))
  sh <- make_shards(cl, d, c(70, 140, 200))
  expect_equal(sh$hosts, c("a", "a", "b"))
  expect_equal(sh$per_host, c(2, 2, 1))
  expect_output(print(sh), "Hosts: a \\(2 workers\\), b \\(1 worker\\)")
  budget <- function(h) {
    unlist(parallel::clusterCall(h$cl, function(key) {
      get(key, envir = sparsevgp:::.shards)$fit$control$memory
    }, h$key))
  }
  for (model in c("sgpr", "pgpr")) {
    f <- if (model == "sgpr") y ~ x1 + x2 else cls ~ x1 + x2
    fit <- do.call(model, list(f, data = sh, inducing = 10, control = list(memory = 6e8)))
    h <- sparsevgp:::.shards_attach(fit, sh)
    expect_equal(budget(h), c(3e8, 3e8, 6e8))
    sparsevgp:::.cluster_release(h)
  }
  expect_equal(sparsevgp:::.host_memory(6e8, 4), 1.5e8)
  expect_equal(sparsevgp:::.host_memory(6e8, NULL), 6e8)
})
