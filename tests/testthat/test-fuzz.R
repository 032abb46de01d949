# The fuzzer of the .Call entry points (helper-fuzz.R): a seeded corpus of
# malformed calls, derived from a valid template per registered entry point,
# run in child R processes with a time limit. Every call must end in a clean
# R error or a finite result: never a crash, a hang or a silent NaN. The
# long run (over 10 000 calls) is inst/bench/fuzz.R.

test_that("every registered .Call entry point has a fuzz template", {
  registered <- names(getDLLRegisteredRoutines("sparsevgp")$.Call)
  templates <- fuzz_templates()
  expect_setequal(names(templates), registered)
  expect_equal(setdiff(registered, names(templates)), character(0),
               label = "entry points without a template")
})

test_that("a seeded corpus of malformed calls gives clean errors or finite results", {
  skip_on_cran()
  registered <- names(getDLLRegisteredRoutines("sparsevgp")$.Call)
  calls <- fuzz_corpus(registered, n = 25L)
  r <- fuzz_run(calls, helper = normalizePath(test_path("helper-fuzz.R")), batch = 100L,
                timeout = 300)
  # no call crashed R, hung, returned NaN/Inf or failed a check of R's C API
  bad <- r[!(r$outcome %in% c("finite", "error")), ]
  expect_equal(nrow(bad), 0L, info = paste(fuzz_describe(bad), collapse = "\n"))
  expect_equal(sum(!is.na(r$outcome)), nrow(calls))
  # the valid templates give finite results, and every entry point sees both
  # errors and finite results among its mutations
  expect_true(all(r$outcome[r$seed == 0L] == "finite"))
  tab <- table(factor(r$name, registered), factor(r$outcome, c("finite", "error")))
  expect_true(all(tab[, "error"] > 0L))
  expect_true(all(tab[, "finite"] > 0L))
})
