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
