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

outcomes <- c("error", "finite", "warnings", "unclean error", "non-finite", "crash", "hang")
r$time <- suppressWarnings(as.numeric(sub(" s \\|.*", "", r$message)))
r$text <- sub("^[0-9.]+ s \\| ?", "", r$message)
tab <- table(factor(r$outcome, outcomes))
esc <- function(s) gsub("|", "\\|", gsub("\n", " ", s), fixed = TRUE)
out <- "inst/bench/results/scenarios_resources.md"
lines <- c(
  "# Resources and faults: user-level scenarios and what each gets",
  "",
  sprintf("sparsevgp %s, %s; written by `Rscript inst/bench/scenarios_resources.R` (%d scenarios, each in its own child R process with a 120 s limit, %.0f s in all).",
          format(utils::packageVersion("sparsevgp")), R.version.string, nrow(r), elapsed),
  "",
  paste0("Outcomes: ", paste(sprintf("%s %d", names(tab), as.integer(tab)), collapse = ", "), "."),
  "A clean error or a finite result (possibly with warnings) is what every scenario must give; a",
  "time limit or exhausted memory that the scenario itself causes is a clean error. The time is the",
  "elapsed time of the call in its child process.",
  "",
  "| # | model | input | outcome | time (s) | message or warnings |",
  "|---|---|---|---|---|---|",
  sprintf("| %d | %s | %s | %s | %s | %s |", r$id, r$model, esc(r$what), r$outcome,
          ifelse(is.na(r$time), "", sprintf("%.2f", r$time)), esc(r$text)),
  "",
  "The calls, by number:",
  "",
  sprintf("%d. `%s`", r$id, r$code))
writeLines(lines, out)
cat(sprintf("%d scenarios in %.0f s: %s\n", nrow(r), elapsed,
            paste(sprintf("%s %d", names(tab), as.integer(tab)), collapse = ", ")))
bad <- r[!(r$outcome %in% c("error", "finite", "warnings")), ]
if (nrow(bad)) print(bad[, c("id", "model", "what", "outcome", "text")], right = FALSE)
cat("table written to", out, "\n")
