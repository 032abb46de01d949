# The table of bad user-level inputs: every scenario of
# tests/testthat/helper-bad-inputs.R (NA/Inf, wrong dims and types, factors,
# M > N, duplicated and co-located inducing inputs, bad noise vectors,
# constant responses, one- and three-class labels, N = 1 and 2, singular
# K_uu, huge and tiny values, newdata with wrong columns or no rows) run in
# its own child R process with a time limit, classified as
#   error       a clean error, with its message;
#   finite      a finite result (a fit: finite bound, parameters and
#               predictions);
#   warnings    a finite result with warnings (shown);
# or as a failure: unclean error (a message of R internals or of the C
# entry points' argument checks), non-finite, crash, hang.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bad_inputs.R     # writes inst/bench/results/bad_inputs.md
# tests/testthat/test-hardening.R checks a subset in every CI run.
suppressMessages(library(sparsevgp))
source("tests/testthat/helper-fuzz.R")         # child_batches()
source("tests/testthat/helper-bad-inputs.R")

sc <- bad_inputs_scenarios()
helpers <- normalizePath(c("tests/testthat/helper-fuzz.R", "tests/testthat/helper-bad-inputs.R"))
start <- proc.time()[["elapsed"]]
r <- bad_inputs_run(sc, helpers, batch = 1L, timeout = 60)
elapsed <- proc.time()[["elapsed"]] - start

scenario_table(r, "inst/bench/results/bad_inputs.md", "Bad user-level inputs and what each gets",
               "inst/bench/bad_inputs.R", 60L, elapsed)
