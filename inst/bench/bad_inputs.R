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

outcomes <- c("error", "finite", "warnings", "unclean error", "non-finite", "crash", "hang")
r$time <- suppressWarnings(as.numeric(sub(" s \\|.*", "", r$message)))
r$text <- sub("^[0-9.]+ s \\| ?", "", r$message)
tab <- table(factor(r$outcome, outcomes))
esc <- function(s) gsub("|", "\\|", gsub("\n", " ", s), fixed = TRUE)
out <- "inst/bench/results/bad_inputs.md"
lines <- c(
  "# Bad user-level inputs and what each gets",
  "",
  sprintf("sparsevgp %s, %s; written by `Rscript inst/bench/bad_inputs.R` (%d scenarios, each in its own child R process with a 60 s limit, %.0f s in all).",
          format(utils::packageVersion("sparsevgp")), R.version.string, nrow(r), elapsed),
  "",
  paste0("Outcomes: ", paste(sprintf("%s %d", names(tab), as.integer(tab)), collapse = ", "), "."),
  "A clean error or a finite result (possibly with warnings) is what every scenario must give;",
  "the time is the elapsed time of the call in its child process.",
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
