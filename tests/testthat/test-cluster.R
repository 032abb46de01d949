# pgpr, svgp and prediction on a two-worker PSOCK cluster (R/cluster.R)
# against the same computations in one process (themselves checked against
# dense formulas and finite differences elsewhere). One cluster serves the
# file; the last test kills one of its workers.

cl_shared <- new.env()

# The file's cluster, started at its first use (skips where none can start).
cl_get <- function() {
  skip_on_cran()
  if (is.null(cl_shared$cl)) {
    cl_shared$cl <- tryCatch(parallel::makePSOCKcluster(2L), error = function(e) NULL)
  }
  if (is.null(cl_shared$cl)) skip("a PSOCK cluster cannot start here")
  cl_shared$cl
}

# The bound and gradient of a fit through objective() (optionally on a
# minibatch): value and every free component.
cl_value_grad <- function(fit, batch = NULL) {
  o <- objective(fit)
  r <- if (is.null(batch)) list(value = -o$fn(o$par), grad = -o$gr(o$par)) else
    o$value_grad(o$par, batch = batch)
  c(value = r$value, r$grad)
}

# The largest relative difference over the components, each relative to its
# own size (floored at 1e-6 of the largest).
cl_rel <- function(a, b) {
  expect_identical(names(a), names(b))
  max(abs(a - b) / pmax(abs(a), 1e-6 * max(abs(a))))
}

# `fit` with its data on the workers of cl (as the model functions do).
cl_on <- function(fit, cl, share) {
  fit$cluster <- sparsevgp:::.cluster_setup(cl, fit, share(fit))
  fit
}

cl_data <- function(N = 91, seed = 5) {
  set.seed(seed)
  x <- matrix(runif(2 * N, -2, 2), N, 2)
  f <- sin(2 * x[, 1]) + 0.5 * x[, 2]
  list(x = x, f = f, y = f + rnorm(N, sd = 0.3), lab = factor(f + rnorm(N, sd = 0.5) > 0))
}

cl_left <- function(cl) {
  unlist(parallel::clusterCall(cl, function() ls(asNamespace("sparsevgp")$.shards)))
}

test_that("pgpr on a cluster: the bound, its gradient and the c updates equal one process", {
  cl <- cl_get()
  d <- cl_data()
  N <- nrow(d$x)
  fit <- pgpr(d$x, d$lab, inducing = d$x[c(2, 11, 30, 47, 63, 80), ], mean = "constant",
              optimize_inducing = TRUE, optimize = FALSE)
  set.seed(1)
  fit$c <- runif(N, 0.05, 3)
  ref <- cl_value_grad(fit)
  for (rows in c(N, 7)) {
    # in one piece and in chunks of 7 rows on each worker
    fit$control$memory <- sparsevgp:::.memory_for_rows(fit, rows)
    on <- cl_on(fit, cl, sparsevgp:::.share)
    expect_lt(cl_rel(ref, cl_value_grad(on)), 1e-10)
    # the closed-form c updates on the workers' own rows
    a <- sparsevgp:::.pgpr_update_c(fit, 3L)
    b <- sparsevgp:::.pgpr_sync_c(sparsevgp:::.pgpr_update_c(on, 3L))
    expect_equal(b$c, a$c, tolerance = 1e-10)
    expect_equal(b$bound, a$bound, tolerance = 1e-10)
    # pushing c back sets the workers' state
    b$c <- fit$c
    sparsevgp:::.pgpr_sync_c(b, push = TRUE)
    expect_lt(cl_rel(ref, cl_value_grad(b)), 1e-10)
    sparsevgp:::.cluster_release(on$cluster)
  }
  expect_length(cl_left(cl), 0L)
})

test_that("a pgpr fit on a cluster ends where the fit in one process does", {
  cl <- cl_get()
  d <- cl_data()
  ctl <- list(outer_max = 2, inner_max = 2)
  set.seed(2)
  a <- pgpr(d$x, d$lab, M = 8, control = ctl)
  set.seed(2)
  b <- pgpr(d$x, d$lab, M = 8, control = ctl, cluster = cl)
  expect_null(b$cluster)
  expect_length(cl_left(cl), 0L)
  # the same path (optimiser evaluations, passes) to rounding; L-BFGS-B
  # can amplify rounding along flat directions of the bound, so the
  # parameters are held to less than the bound
  expect_equal(b$bound, a$bound, tolerance = 1e-10)
  expect_equal(b$history, a$history, tolerance = 1e-10)
  expect_length(b$c, nrow(d$x))
  expect_equal(b$c, a$c, tolerance = 1e-8)
  expect_equal(b$params, a$params, tolerance = 1e-8)
  # the fit's c and parameters give its bound
  expect_equal(sparsevgp:::.evaluate(b, b$params, grad = FALSE)$value, b$bound,
               tolerance = 1e-10)
  # without optimisation: the same bound at the same state
  a0 <- pgpr(d$x, d$lab, inducing = a$params$Z, start = a, optimize = FALSE)
  b0 <- pgpr(d$x, d$lab, inducing = a$params$Z, start = a, optimize = FALSE, cluster = cl)
  expect_equal(b0$bound, a0$bound, tolerance = 1e-10)
})

test_that("svgp with counts and heavy tails on a cluster equals one process", {
  cl <- cl_get()
  d <- cl_data(N = 61)
  N <- nrow(d$x)
  Z <- d$x[c(4, 19, 33, 52), ]
  set.seed(3)
  for (lik in c("poisson", "student_t")) {
    y <- if (lik == "poisson") rpois(N, exp(d$f)) else d$y
    fit <- svgp(d$x, y, likelihood = lik, inducing = Z, optimize = FALSE)
    fit$params$q_mu <- rnorm(4, sd = 0.5)
    fit$params$q_sqrt_lower <- rnorm(6, sd = 0.1)
    on <- cl_on(fit, cl, sparsevgp:::.shard_svgp_data)
    expect_lt(cl_rel(cl_value_grad(fit), cl_value_grad(on)), 1e-10, label = lik)
    batch <- sort(sample.int(N, 13))
    expect_lt(cl_rel(cl_value_grad(fit, batch), cl_value_grad(on, batch)), 1e-10, label = lik)
    sparsevgp:::.cluster_release(on$cluster)
  }
})

test_that("svgp on a cluster: full batch and minibatches equal one process", {
  cl <- cl_get()
  d <- cl_data(N = 83)
  N <- nrow(d$x)
  Z <- d$x[c(4, 19, 33, 52, 70), ]
  set.seed(3)
  for (lik in c("bernoulli", "probit", "gaussian")) for (wh in c(TRUE, FALSE)) {
    y <- if (lik == "gaussian") d$y else d$lab
    fit <- svgp(d$x, y, likelihood = lik, inducing = Z, whiten = wh, optimize = FALSE)
    fit$params$q_mu <- rnorm(5, sd = 0.5)
    fit$params$q_sqrt_lower <- rnorm(10, sd = 0.1)
    on <- cl_on(fit, cl, sparsevgp:::.share)
    lab <- sprintf("%s, whiten = %s", lik, wh)
    expect_lt(cl_rel(cl_value_grad(fit), cl_value_grad(on)), 1e-10, label = lab)
    # a minibatch across both shares, and one within the first share only
    for (batch in list(sort(sample.int(N, 17)), c(3L, 8L, 20L))) {
      expect_lt(cl_rel(cl_value_grad(fit, batch), cl_value_grad(on, batch)), 1e-10,
                label = sprintf("%s, batch of %d", lab, length(batch)))
    }
    sparsevgp:::.cluster_release(on$cluster)
  }
  # full-batch L-BFGS-B (in two stages): the same fit
  set.seed(4)
  a <- svgp(d$x, d$lab, inducing = 5)
  set.seed(4)
  b <- svgp(d$x, d$lab, inducing = 5, cluster = cl)
  # (sums in another order: the optimiser amplifies their rounding along
  # flat directions, here to about 2e-10 of the bound with R's reference
  # BLAS and 2e-7 with OpenBLAS; the objective at given parameters is the
  # same to 1e-10 above)
  expect_equal(b$bound, a$bound, tolerance = 1e-6)
  expect_equal(b$optim$counts, a$optim$counts)
  # (flat directions: inducing inputs and q(u) move together; 1e-6 with
  # the reference BLAS, 7e-4 in the kernel variance with OpenBLAS)
  expect_equal(b$params, a$params, tolerance = 5e-3)
  # Adam on minibatches drawn by the master: the same fit under set.seed()
  set.seed(4)
  a <- svgp(d$x, d$lab, inducing = 5, batch_size = 20, control = list(maxit = 40, lr = 0.05))
  set.seed(4)
  b <- svgp(d$x, d$lab, inducing = 5, batch_size = 20, control = list(maxit = 40, lr = 0.05),
            cluster = cl)
  expect_equal(b$params, a$params, tolerance = 1e-10)
  expect_equal(b$optim$trace, a$optim$trace, tolerance = 1e-10)
  expect_equal(b$bound, a$bound, tolerance = 1e-10)
  expect_null(b$cluster)
  expect_length(cl_left(cl), 0L)
  expect_error(svgp(d$x, d$lab, inducing = 5, batch_size = 20, control = list(optimizer = "natgrad"),
                    cluster = cl), "do not run on a 'cluster'")
})

test_that("predict() and fitted() on a cluster equal one process", {
  cl <- cl_get()
  d <- cl_data(N = 60)
  set.seed(6)
  nd <- matrix(runif(2 * 45, -2, 2), 45, 2)
  fits <- list(sgpr = sgpr(d$x, d$y, inducing = 6, noise = ~ x1),
               gpr = gpr(d$x[1:30, ], d$y[1:30]),
               pgpr = pgpr(d$x, d$lab, M = 6, control = list(outer_max = 1, inner_max = 1)),
               # short runs: any q(u) serves
               svgp = suppressWarnings(svgp(d$x, d$lab, inducing = 5, control = list(maxit = 30))),
               svgp_gauss = suppressWarnings(svgp(d$x, d$y, likelihood = "gaussian", inducing = 5,
                                                  control = list(maxit = 30))))
  for (m in names(fits)) {
    f <- fits[[m]]
    expect_equal(predict(f, nd, cluster = cl), predict(f, nd), tolerance = 1e-12, label = m)
    expect_equal(fitted(f, cluster = cl), fitted(f), tolerance = 1e-12, label = m)
  }
  # intervals, classes, missing rows, and fewer rows than workers
  expect_equal(predict(fits$sgpr, nd, interval = "prediction", cluster = cl),
               predict(fits$sgpr, nd, interval = "prediction"), tolerance = 1e-12)
  expect_identical(predict(fits$pgpr, nd, type = "class", cluster = cl),
                   predict(fits$pgpr, nd, type = "class"))
  na <- data.frame(x1 = c(0.5, NA, -1), x2 = c(1, 0, NA))
  expect_equal(predict(fits$svgp, na, type = "prob", cluster = cl),
               predict(fits$svgp, na, type = "prob"), tolerance = 1e-12)
  expect_equal(predict(fits$pgpr, nd[1, , drop = FALSE], cluster = cl),
               predict(fits$pgpr, nd[1, , drop = FALSE]), tolerance = 1e-12)
  expect_error(predict(fits$sgpr, nd, cluster = "cl"), "'cluster' must be a cluster")
  expect_error(gpr(d$x, d$y, cluster = cl), "'cluster' is only for sgpr\\(\\), pgpr\\(\\)")
  expect_error(odvgp(d$x, d$lab, cluster = cl), "this model fits in one process")
})

test_that("objective(fit, cluster = cl) evaluates on the workers; optimize = FALSE sends nothing", {
  cl <- cl_get()
  d <- cl_data()
  parallel::clusterCall(cl, function() {
    if ("sparsevgp" %in% loadedNamespaces()) rm(list = ls(asNamespace("sparsevgp")$.shards),
                                                 envir = asNamespace("sparsevgp")$.shards)
    TRUE
  })
  fits <- list(
    sgpr = sgpr(d$x, d$y, inducing = d$x[1:7, ], noise = ~ x1, optimize = FALSE),
    osgpr = osgpr(d$x, d$y, inducing = d$x[1:4, ], orthogonal = d$x[5:8, ], optimize = FALSE),
    pgpr = pgpr(d$x, d$lab, inducing = d$x[1:6, ], mean = "constant", optimize = FALSE),
    svgp = svgp(d$x, d$lab, inducing = d$x[1:6, ], optimize = FALSE))
  for (m in names(fits)) {
    # built with a cluster and optimize = FALSE: no share on any worker
    f <- switch(m,
      sgpr = sgpr(d$x, d$y, inducing = d$x[1:7, ], noise = ~ x1, optimize = FALSE, cluster = cl),
      osgpr = osgpr(d$x, d$y, inducing = d$x[1:4, ], orthogonal = d$x[5:8, ], optimize = FALSE,
                    cluster = cl),
      pgpr = pgpr(d$x, d$lab, inducing = d$x[1:6, ], mean = "constant", optimize = FALSE,
                  cluster = cl),
      svgp = svgp(d$x, d$lab, inducing = d$x[1:6, ], optimize = FALSE, cluster = cl))
    expect_length(cl_left(cl), 0L)
    expect_equal(f$bound, fits[[m]]$bound, tolerance = 1e-12)
    o <- objective(fits[[m]])
    oc <- objective(fits[[m]], cluster = cl)
    expect_length(cl_left(cl), length(cl))
    p <- o$par + 0.05
    expect_equal(oc$fn(p), o$fn(p), tolerance = 1e-10, label = m)
    expect_lt(cl_rel(o$gr(p), oc$gr(p)), 1e-9, label = m)
    oc$release()
    oc$release()
    expect_length(cl_left(cl), 0L)
  }
  # an osgpr fit on the cluster ends where the one in one process does
  a <- osgpr(d$x, d$y, inducing = d$x[1:4, ], orthogonal = d$x[5:8, ],
             control = list(schedule = "joint"))
  b <- osgpr(d$x, d$y, inducing = d$x[1:4, ], orthogonal = d$x[5:8, ],
             control = list(schedule = "joint"), cluster = cl)
  expect_equal(b$bound, a$bound, tolerance = 1e-6)
  expect_null(b$cluster)
  expect_length(cl_left(cl), 0L)
})

test_that("an interrupted fit on a cluster keeps its fit and leaves the cluster usable", {
  cl <- cl_get()
  d <- cl_data()
  old <- options(sparsevgp.interrupt_after = 5L)
  on.exit(options(old))
  expect_warning(f <- sgpr(d$x, d$y, inducing = 8, cluster = cl), "interrupted during")
  expect_true(isTRUE(f$optim$interrupted))
  expect_true(is.finite(f$bound))
  expect_warning(p <- pgpr(d$x, d$lab, inducing = 6, cluster = cl), "interrupted during")
  expect_s3_class(p, "pgpr")
  options(old)
  # every answer was read: the next call on the cluster gets its own result
  expect_identical(unlist(parallel::clusterCall(cl, function() 42)), c(42, 42))
  expect_length(cl_left(cl), 0L)
})

test_that("workers that lose their share or die give the cluster error, never a value", {
  cl <- cl_get()
  on.exit({
    try(parallel::stopCluster(cl), silent = TRUE)
    cl_shared$cl <- NULL
  })
  d <- cl_data(N = 50)
  pf <- pgpr(d$x, d$lab, inducing = d$x[1:5, ], optimize = FALSE)
  sf <- svgp(d$x, d$lab, inducing = d$x[1:5, ], optimize = FALSE)
  pon <- cl_on(pf, cl, sparsevgp:::.share)
  son <- cl_on(sf, cl, sparsevgp:::.share)
  expect_equal(cl_value_grad(pon)[["value"]], pf$bound, tolerance = 1e-10)
  # a worker that lost its share
  parallel::clusterCall(cl[2], function(key) {
    rm(list = key, envir = asNamespace("sparsevgp")$.shards)
  }, pon$cluster$key)
  expect_error(cl_value_grad(pon), "holds no share", class = "sparsevgp_cluster_error")
  expect_error(sparsevgp:::.pgpr_update_c(pon, 1L), "holds no share",
               class = "sparsevgp_cluster_error")
  # a worker that is gone: in the fitting loops too, which otherwise step
  # back from failed evaluations
  try(parallel::clusterCall(cl[2], function() quit(save = "no", runLast = FALSE)),
      silent = TRUE)
  on.exit(try(close(cl[[2L]]$con), silent = TRUE), add = TRUE, after = FALSE)
  son$fixed[] <- FALSE
  expect_error(sparsevgp:::.fit_lbfgsb(son), "the cluster failed",
               class = "sparsevgp_cluster_error")
  son$batch_size <- 10L
  son$control$maxit <- 3L
  expect_error(sparsevgp:::.fit_adam(son), "the cluster failed",
               class = "sparsevgp_cluster_error")
  expect_error(predict(sf, d$x, cluster = cl), "the cluster failed",
               class = "sparsevgp_cluster_error")
})
