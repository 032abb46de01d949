# The bad user-level inputs of helper-bad-inputs.R (NA/Inf, wrong dims and
# types, factors, M > N, duplicated and co-located inducing inputs, bad noise
# vectors, constant responses, one- and three-class labels, N = 1 and 2,
# singular K_uu, huge and tiny values, newdata with wrong columns or no rows),
# run in child R processes with a time limit. Each must end in a clean error
# that names the cause, or a finite result, possibly with warnings: never an
# error from R's internals, a NaN, a crash or a hang. The full table with
# every message is inst/bench/results/bad_inputs.md (inst/bench/bad_inputs.R).

test_that("every bad user-level input gets a clean error or a finite result", {
  skip_on_cran()
  sc <- bad_inputs_scenarios()
  expect_gt(nrow(sc), 400L)
  helpers <- normalizePath(c(test_path("helper-fuzz.R"), test_path("helper-bad-inputs.R")))
  r <- bad_inputs_run(sc, helpers, batch = 60L, timeout = 600)
  expect_equal(sum(!is.na(r$outcome)), nrow(sc))
  bad <- r[!(r$outcome %in% c("error", "finite", "warnings")), ]
  expect_equal(nrow(bad), 0L,
               info = paste(sprintf("%d %s %s: %s (%s)", bad$id, bad$model, bad$what,
                                    bad$outcome, bad$message), collapse = "\n"))
  # the scenarios are bad inputs: most must be refused, and those refused
  # say so in words, not through an internal argument check of the C layer
  expect_gt(mean(r$outcome == "error"), 0.5)
  expect_false(any(grepl("must be a double|LENGTH or similar|subscript out of bounds",
                         r$message)))
})

test_that("messages name the argument at fault, and nothing is accepted silently", {
  set.seed(1)
  x <- matrix(runif(80, -3, 3), 40, 2)
  y <- sin(2 * x[, 1]) + rnorm(40, sd = 0.1)
  lab <- factor(y > 0)
  # a number of inducing inputs beyond an integer: the number, not NA
  expect_error(sgpr(x, y, inducing = 2^31), "'inducing' asks for M = 2147483648 inducing")
  # jitter and its cap: each named
  expect_error(sgpr(x, y, inducing = 5, control = list(jitter = Inf)), "'control\\$jitter' must")
  expect_error(sgpr(x, y, inducing = 5, control = list(jitter = -1)), "'control\\$jitter' must")
  expect_error(sgpr(x, y, inducing = 5, control = list(jitter_cap = Inf)),
               "'control\\$jitter_cap' must be one finite number")
  expect_error(sgpr(x, y, inducing = 5, control = list(jitter = 1e-3, jitter_cap = 1e-4)),
               "must be at least 'control\\$jitter'")
  # maxit beyond an integer: ours, not optim's
  expect_error(sgpr(x, y, inducing = 5, control = list(maxit = 1e10)),
               "'control\\$maxit' must be a whole number from 1 to 2147483647")
  expect_error(pgpr(x, lab, inducing = 5, control = list(maxit = 1e10)),
               "'control\\$maxit' must be a whole number from 1 to 2147483647")
  # a warm start from a fit on other inputs names 'start'
  f <- sgpr(x, y, inducing = 5, optimize = FALSE)
  expect_error(sgpr(cbind(x, 1), y, start = f), "'start' is a fit on 2 input columns")
  expect_error(gpr(x[, 1], y, start = gpr(x, y, optimize = FALSE)), "'start' is a fit on 2")
  # a start with more inducing inputs than the new data has rows: the
  # default selection instead
  big <- sgpr(x, y, inducing = 30, optimize = FALSE)
  g <- sgpr(x[1:20, ], y[1:20], start = big, optimize = FALSE)
  expect_lte(nrow(g$params$Z), 20L)
  # variances whose product overflows: the parts named, no "Inf times"
  expect_error(sgpr(x, y, inducing = 5,
                    kernel = kernel_rbf(1, 1e200) * (kernel_rbf(1, 1e200) + kernel_rbf(2, 1))),
               "variances of the kernel's parts .* combine to k\\(x, x\\) = Inf")
  # plot's grid size
  expect_error(plot(f, n = -1), "'n' must be a whole number of grid points")
  expect_error(plot(pgpr(x, lab, inducing = 5, optimize = FALSE), n = 1.5),
               "'n' must be a whole number of grid points")
  # objective(): one finite number per free parameter, no recycling
  o <- objective(f)
  expect_error(o$fn(NA), "'par' must be 15 finite numbers")
  expect_error(o$fn(1), "'par' must be 15 finite numbers, one per free parameter .* not 1 number")
  expect_error(o$gr(c(o$par, 1)), "'par' must be 15 finite numbers")
  expect_error(o$fn(replace(o$par, 2, Inf)), "1 of them NA, NaN or infinite")
  expect_equal(-o$fn(o$par), f$bound, tolerance = 1e-10)
  # unnamed control entries are an error, not ignored
  expect_error(sgpr(x, y, inducing = 5, control = list(10)), "every entry of 'control' must be named")
  expect_error(pgpr(x, lab, inducing = 5, control = list(3)), "every entry of 'control' must be named")
  expect_error(svgp(x, lab, inducing = 5, control = list(maxit = 5, 2)),
               "every entry of 'control' must be named")
  # several lengthscales with ard = FALSE: an error, not ARD
  expect_error(kernel_rbf(lengthscale = 1:3, ard = FALSE), "'lengthscale' has 3 values, but ard = FALSE")
  expect_true(kernel_rbf(lengthscale = 1:3)$ard)
  # simulate() on a multiclass fit: labels, and a message about what it does
  cl3 <- factor(c("a", "b", "c")[1L + (y > -0.5) + (y > 0.5)])
  m <- suppressWarnings(svgp(x, cl3, inducing = 5, control = list(maxit = 5)))
  s <- simulate(m, nsim = 3, seed = 1)
  expect_identical(dim(s), c(40L, 3L))
  expect_true(all(vapply(s, function(v) identical(levels(v), levels(cl3)), TRUE)))
  # latent draws: one column per draw and class
  expect_identical(dim(simulate(m, nsim = 2, type = "latent", seed = 1)), c(40L, 6L))
  expect_error(simulate(m, joint = TRUE), "joint draws are not available for multiclass fits")
  # simulate(): sizes and seeds in its own words
  expect_error(simulate(f, nsim = 2^31), "'nsim' must be a whole number from 1 to 2147483647")
  expect_error(simulate(f, nsim = 1e9), "draw in several calls")
  expect_error(simulate(f, seed = NA), "'seed' must be NULL or one number")
  expect_error(objective(list(a = 1)), "'fit' must be a model fit of this package")
  expect_error(sgpr(x, y, inducing = 5, control = list(memory = 1)), "\\(1 byte\\)")
  # a cluster argument that is not a cluster, also with optimize = FALSE
  expect_error(sgpr(x, y, inducing = 5, optimize = FALSE, cluster = 3), "'cluster' must be a cluster")
  expect_error(objective(gpr(x, y, optimize = FALSE), cluster = structure(list(1), class = "cluster")),
               "gpr\\(\\) fits do not run on a cluster")
})
