# The long run of the fuzzer of the .Call entry points: the engine of
# tests/testthat/helper-fuzz.R (templates, mutations, child processes with a
# time limit) on a larger seeded corpus. tests/testthat/test-fuzz.R runs 25
# mutated calls per entry point; this script runs `n` per entry point (700
# by default: 15 entry points give 10 500 calls, plus the valid templates).
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/fuzz.R          # 700 calls per entry point
#   Rscript inst/bench/fuzz.R 2000     # 2000 calls per entry point
# The output of the default run is in inst/bench/results/fuzz.txt.
#
# Outcomes: "error" (a clean R error from the entry point's checks),
# "finite" (a result whose numbers are all finite; for the elementwise
# Polya-Gamma maps, finite wherever the input is), and the failures:
# "non-finite", "unclean error" (R's C API refusing an object, a BLAS
# argument error: a missing check), "crash" and "hang" (the child process
# died, or did not finish its batch within the time limit).
suppressMessages(library(sparsevgp))
source("tests/testthat/helper-fuzz.R")

args <- commandArgs(trailingOnly = TRUE)
n <- if (length(args)) as.integer(args[1L]) else 700L
registered <- names(getDLLRegisteredRoutines("sparsevgp")$.Call)
calls <- fuzz_corpus(registered, n = n)

cat("sparsevgp", format(utils::packageVersion("sparsevgp")), "on", R.version.string, "\n")
cat("BLAS:  ", extSoftVersion()[["BLAS"]], "\n")
cat(sprintf("%d entry points, %d mutated calls each plus the valid template: %d calls\n",
            length(registered), n, nrow(calls)))
start <- proc.time()[["elapsed"]]
r <- fuzz_run(calls, helper = normalizePath("tests/testthat/helper-fuzz.R"), batch = 500L,
              timeout = 600)
elapsed <- proc.time()[["elapsed"]] - start

outcomes <- c("finite", "error", "non-finite", "unclean error", "crash", "hang")
tab <- table(factor(r$name, registered), factor(r$outcome, outcomes))
cat(sprintf("\n%d calls in %.0f s\n\n", nrow(r), elapsed))
print(addmargins(tab, 1L))
bad <- r[!(r$outcome %in% c("finite", "error")), ]
cat(sprintf("\nfailures (non-finite, unclean error, crash, hang): %d\n", nrow(bad)))
if (nrow(bad)) writeLines(fuzz_describe(bad))
msgs <- sort(table(r$message[r$outcome == "error"]), decreasing = TRUE)
cat(sprintf("\n%d distinct error messages; the 15 most frequent:\n", length(msgs)))
print(utils::head(as.data.frame(msgs, stringsAsFactors = FALSE), 15L), right = FALSE)
invisible(r)
