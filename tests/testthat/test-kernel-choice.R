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
