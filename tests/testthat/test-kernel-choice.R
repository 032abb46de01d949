test_that("on small data the default kernel is RBF or Matern 5/2 by the fitted bound", {
  # a rough path (Brownian motion): Matern 5/2's bound is far ahead
  set.seed(3)
  x <- sort(runif(150))
  y <- cumsum(rnorm(150)) / 10 + rnorm(150, sd = 0.05)
  set.seed(1)
  f <- sgpr(x, y)
  after <- runif(1)
  # the two fits it compares, run as their own fits from the same stream
  set.seed(1)
  r <- sgpr(x, y, kernel = kernel_rbf())
  after_r <- runif(1)
  m <- sgpr(x, y, kernel = kernel_matern52())
  expect_equal(unname(f$auto_kernel$bounds), c(r$bound, m$bound), tolerance = 1e-10)
  expect_gt(m$bound - r$bound, sparsevgp:::.family_margin)
  expect_identical(f$auto_kernel$chosen, "Matern 5/2")
  expect_identical(f$kernel$family, "matern52")
  expect_equal(f$bound, m$bound, tolerance = 1e-10)
  expect_equal(predict(f, c(0.25, 0.5))$mean, predict(m, c(0.25, 0.5))$mean, tolerance = 1e-8)
  # the stream of random numbers goes on as after the RBF fit
  expect_identical(after, after_r)
  # the call is the user's, and summary() names the choice and both bounds
  expect_identical(f$call, quote(sgpr(x = x, y = y)))
  line <- summary(f)$extra[["Kernel"]]
  expect_match(line, "Matern 5/2, chosen by the fitted bound")
  expect_match(line, format(r$bound, digits = 7L), fixed = TRUE)
  # the formula interface gives the same fit
  set.seed(1)
  g <- sgpr(y ~ x, data = data.frame(x = x, y = y))
  expect_equal(g$bound, f$bound, tolerance = 1e-10)
  expect_identical(g$auto_kernel$chosen, "Matern 5/2")
  # a smooth function: RBF's bound is the higher, RBF is kept
  set.seed(4)
  xs <- runif(150)
  ys <- sin(3 * xs) + rnorm(150, sd = 0.1)
  set.seed(1)
  fs <- sgpr(xs, ys)
  set.seed(1)
  rs <- sgpr(xs, ys, kernel = kernel_rbf())
  expect_identical(fs$auto_kernel$chosen, "RBF")
  expect_lte(fs$auto_kernel$bounds[[2L]] - fs$auto_kernel$bounds[[1L]],
             sparsevgp:::.family_margin)
  expect_identical(fs$kernel$family, "rbf")
  expect_equal(fs$params, rs$params, tolerance = 1e-12)
})

test_that("the kernel family is chosen only for the fully automatic default", {
  set.seed(3)
  x <- sort(runif(120))
  y <- cumsum(rnorm(120)) / 10 + rnorm(120, sd = 0.05)
  # a kernel, M, inducing inputs, a number of neighbours or no optimisation given: RBF
  # as before, no choice
  for (f in list(sgpr(x, y, kernel = kernel_rbf()), sgpr(x, y, M = 20),
                 sgpr(x, y, inducing = 20), sgpr(x, y, neighbours = 0),
                 sgpr(x, y, optimize = FALSE))) {
    expect_null(f$auto_kernel)
  }
  expect_identical(sgpr(x, y, M = 20)$kernel$family, "rbf")
  # a warm start keeps its kernel
  f <- sgpr(x, y)
  expect_identical(f$auto_kernel$chosen, "Matern 5/2")
  u <- update(f, start = f)
  expect_null(u$auto_kernel)
  expect_identical(u$kernel$family, "matern52")
  # beyond the small path (the automatic M cannot cover every observation)
  expect_false(sparsevgp:::.family_by_bound(NULL, NULL, "auto", "greedy", NULL, NULL, TRUE,
                                            NULL, 700L))
  expect_true(sparsevgp:::.family_by_bound(NULL, NULL, "auto", "greedy", NULL, NULL, TRUE,
                                           NULL, 669L))
})

test_that("on shards the default chooses the kernel family as one process does", {
  skip_on_cran()
  set.seed(3)
  d <- data.frame(x = sort(runif(150)))
  d$y <- cumsum(rnorm(150)) / 10 + rnorm(150, sd = 0.05)
  set.seed(5)
  f0 <- sgpr(y ~ x, data = d)
  expect_identical(f0$auto_kernel$chosen, "Matern 5/2")
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  sh <- make_shards(cl, d, c(70, 150))
  set.seed(5)
  f1 <- sgpr(y ~ x, data = sh)
  expect_identical(f1$auto_kernel$chosen, "Matern 5/2")
  expect_equal(f1$auto_kernel$bounds, f0$auto_kernel$bounds, tolerance = 1e-10)
  expect_equal(f1$params, f0$params, tolerance = 1e-10)
  expect_lt(abs(f1$bound - f0$bound), 1e-10 * abs(f0$bound))
  expect_equal(predict(f1, d[c(3, 90), ]), predict(f0, d[c(3, 90), ]), tolerance = 1e-10)
  expect_match(summary(f1)$extra[["Kernel"]], "chosen by the fitted bound")
})

test_that("from 300 rows on small data the default starts from the exact GP of the better family", {
  # a rough path with a short cycle, 320 rows
  set.seed(3)
  x <- sort(runif(320))
  y <- sin(25 * x) + cumsum(rnorm(320)) / 20 + rnorm(320, sd = 0.05)
  set.seed(1)
  f <- sgpr(x, y)
  # the two exact GPs it compares, fitted on their own
  r <- gpr(x, y, kernel = kernel_rbf())
  m <- gpr(x, y, kernel = kernel_matern52())
  expect_true(f$auto_kernel$exact)
  expect_equal(unname(f$auto_kernel$bounds), c(r$bound, m$bound), tolerance = 1e-10)
  expect_gt(m$bound - r$bound, sparsevgp:::.family_margin)
  expect_identical(f$auto_kernel$chosen, "Matern 5/2")
  expect_identical(f$kernel$family, "matern52")
  # the chosen exact GP's hyperparameters, and its optimiser's report
  for (b in c("variance", "lengthscale", "noise", "mean")) {
    expect_equal(f$params[[b]], m$params[[b]], tolerance = 1e-12)
  }
  expect_identical(f$optim$counts, m$optim$counts)
  expect_equal(f$optim$value, f$bound, tolerance = 1e-12)
  # greedy inducing inputs for the automatic M's target there, held: the
  # bound is below the exact log marginal likelihood and close to it
  z_fixed <- f$fixed[grepl("^Z", names(f$fixed))]
  expect_true(length(z_fixed) > 0L && all(z_fixed))
  expect_lt(nrow(f$params$Z), 320L)
  expect_lt(f$bound, m$bound)
  expect_lt(m$bound - f$bound, 0.002 * 320)
  # its bound at its parameters, evaluated as a fit of its own
  g <- sgpr(x, y, kernel = sparsevgp:::.kernel_at(f$kernel, f$params), inducing = f$params$Z,
            noise = f$params$noise, mean = f$params$mean, optimize = FALSE)
  expect_equal(g$bound, f$bound, tolerance = 1e-10)
  # predictions close to the exact GP's (noise sd 0.05)
  xs <- c(0.1, 0.5, 0.9)
  expect_equal(predict(f, xs)$mean, predict(m, xs)$mean, tolerance = 1e-3)
  # the user's call; summary() says how the family and hyperparameters came about
  expect_identical(f$call, quote(sgpr(x = x, y = y)))
  line <- summary(f)$extra[["Kernel"]]
  expect_match(line, "Matern 5/2, chosen by the exact GP's log marginal likelihood")
  expect_match(line, format(r$bound, digits = 7L), fixed = TRUE)
  expect_match(line, "the hyperparameters are that exact GP's")
  # with a cluster the same fit (the exact GPs and the model are built here)
  skip_on_cran()
  cl <- local_cluster(2)
  on.exit(parallel::stopCluster(cl))
  set.seed(1)
  fc <- sgpr(x, y, cluster = cl)
  expect_equal(fc$params, f$params, tolerance = 1e-12)
  expect_equal(fc$bound, f$bound, tolerance = 1e-12)
})

test_that("from 300 rows a smooth function keeps RBF, chosen by the exact GPs", {
  set.seed(4)
  xs2 <- runif(300)
  ys2 <- sin(3 * xs2) + rnorm(300, sd = 0.1)
  fs <- sgpr(xs2, ys2)
  rs <- gpr(xs2, ys2, kernel = kernel_rbf())
  ms <- gpr(xs2, ys2, kernel = kernel_matern52())
  expect_true(fs$auto_kernel$exact)
  expect_lte(ms$bound - rs$bound, sparsevgp:::.family_margin)
  expect_identical(fs$auto_kernel$chosen, "RBF")
  expect_identical(fs$kernel$family, "rbf")
  expect_equal(fs$params$lengthscale, rs$params$lengthscale, tolerance = 1e-12)
})

test_that("the exact GP starts the default only where it applies", {
  ok <- function(N = 300L, noise = NULL, weights = NULL, fixed = NULL,
                 optimize_inducing = NULL, mean = "constant") {
    sparsevgp:::.small_exact(N, noise, weights, fixed, optimize_inducing, mean)
  }
  expect_true(ok())
  expect_false(ok(N = 299L))
  expect_false(ok(noise = 0.1))
  expect_false(ok(noise = ~ x))
  expect_false(ok(weights = rep(1, 300)))
  expect_false(ok(fixed = "noise"))
  expect_false(ok(optimize_inducing = TRUE))
  expect_false(ok(mean = 0))
  # with the noise given, the fit is the bound route's (no exact GP)
  set.seed(4)
  x <- runif(300)
  y <- sin(3 * x) + rnorm(300, sd = 0.1)
  f <- sgpr(x, y, noise = 0.01)
  expect_false(isTRUE(f$auto_kernel$exact))
  expect_match(summary(f)$extra[["Kernel"]], "chosen by the fitted bound")
  # bad input gets sgpr()'s own errors, naming the argument
  expect_error(sgpr(x, replace(y, 5, NA)), "'y' contains NA")
  expect_error(sgpr(cbind(x, NA), y), "'x' contains NA")
  expect_error(sgpr(x, y[-1]), "'y' has length 299 but the inputs have 300 rows")
})
