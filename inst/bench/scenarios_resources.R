# A fresh table of user-level scenarios about resources and faults (the
# calls of inst/bench/scenarios_resources_helper.R: memory budgets, jitter,
# the forms of control, kernel trees, objective() and clusters, interrupts
# in every phase, time limits and exhausted memory, warm starts, plots,
# simulations, sizes of the inducing set), each in its own child R process
# with a time limit, classified as the bad inputs of bad_inputs.R are:
# error, finite, warnings, or a failure (unclean error, non-finite, crash,
# hang).
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/scenarios_resources.R
# writes inst/bench/results/scenarios_resources.md.
suppressMessages(library(sparsevgp))
source("tests/testthat/helper-fuzz.R")          # child_batches()
source("tests/testthat/helper-bad-inputs.R")    # .bad_unclean, .bad_finite
source("inst/bench/scenarios_resources_helper.R")

sc <- res_scenarios()
helpers <- normalizePath(c("tests/testthat/helper-fuzz.R", "tests/testthat/helper-bad-inputs.R",
                           "inst/bench/scenarios_resources_helper.R"))
start <- proc.time()[["elapsed"]]
r <- child_batches(sc, "code", helpers, "res_run_batch", batch = 1L, timeout = 120)
elapsed <- proc.time()[["elapsed"]] - start

scenario_table(r, "inst/bench/results/scenarios_resources.md",
               "Resources and faults: user-level scenarios and what each gets",
               "inst/bench/scenarios_resources.R", 120L, elapsed,
               "a time limit or exhausted memory that the scenario itself causes is a clean error;")
