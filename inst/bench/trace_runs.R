# Every optimiser run and greedy selection of one default sgpr(x, y) fit, with
# its evaluations, CPU seconds and bound, those of the trial of
# neighbours = "auto" marked [trial]: where a fit's evaluations go.
#
# Usage: Rscript inst/bench/trace_runs.R <library> <split> <set> [data_dir]
#   set: a UCI set with standard splits under data_dir (concrete, energy,
#   kin8nm, power-plant, ...; data_dir defaults to ../shared/data/regression)
#   or volcano (R's volcano grid, 1000 random test points drawn with seed
#   100 + split). Inputs and target are standardised on the training part.
# The run wraps internal functions of the installed package (a diagnostic,
# not an interface).
args <- commandArgs(TRUE)
lib <- args[1]
k <- as.integer(args[2])
set <- if (length(args) > 2) args[3] else "concrete"
data_dir <- if (length(args) > 3) args[4] else "../shared/data/regression"
.libPaths(c(lib, .libPaths()))
library(sparsevgp)
if (set == "volcano") {
  X <- cbind(row = c(row(datasets::volcano)), col = c(col(datasets::volcano))) + 0
  Y <- c(datasets::volcano) + 0
  set.seed(100 + k)
  te <- sample(length(Y), 1000)
  tr <- setdiff(seq_along(Y), te)
} else {
  dir <- file.path(data_dir, set)
  d <- read.table(file.path(dir, "data.txt"))
  tr <- scan(file.path(dir, sprintf("index_train_%d.txt", k)), quiet = TRUE) + 1
  te <- scan(file.path(dir, sprintf("index_test_%d.txt", k)), quiet = TRUE) + 1
  p <- ncol(d)
  X <- as.matrix(d[, -p])
  Y <- d[, p]
}
mx <- colMeans(X[tr, ])
sx <- apply(X[tr, ], 2, sd)
my <- mean(Y[tr])
sy <- sd(Y[tr])
x <- scale(X[tr, ], mx, sx)
y <- (Y[tr] - my) / sy
xt <- scale(X[te, ], mx, sx)
yt <- (Y[te] - my) / sy
cpu <- function() sum(proc.time()[1:2])
ns <- asNamespace("sparsevgp")
state <- new.env()
state$trial <- FALSE
tag <- function() if (state$trial) "[trial]" else "[fit]  "
orig_fit <- get(".fit_lbfgsb", ns)
orig_trial <- get(".vif_trial", ns)
orig_sel <- get(".select_by_spec", ns)
for (nm in c(".fit_lbfgsb", ".vif_trial", ".select_by_spec")) unlockBinding(nm, ns)
assign(".fit_lbfgsb", function(fit, stage = NULL, ...) {
  t0 <- cpu()
  r <- orig_fit(fit, stage, ...)
  cat(sprintf("  %s run %-30s N %5d M %4d K %2s evaluations %4d CPU %5.2f bound %10.2f\n", tag(),
              if (is.null(stage)) "-" else stage, nrow(fit$x), nrow(fit$params$Z),
              format(if (is.null(fit$neighbours)) 0 else fit$neighbours$K),
              r$optim$counts[[1]], cpu() - t0, r$optim$value))
  r
}, ns)
assign(".select_by_spec", function(...) {
  t0 <- cpu()
  r <- orig_sel(...)
  cat(sprintf("  %s greedy selection: M %d, CPU %.2f\n", tag(), nrow(r), cpu() - t0))
  r
}, ns)
assign(".vif_trial", function(...) {
  state$trial <- TRUE
  on.exit(state$trial <- FALSE)
  orig_trial(...)
}, ns)
set.seed(k)
t0 <- cpu()
f <- suppressWarnings(sgpr(x, y))
total <- cpu() - t0
pr <- predict(f, xt)
nlpd <- -mean(dnorm(yt, pr$mean, sqrt(pr$var + f$params$noise), log = TRUE)) + log(sy)
cat(sprintf("%s split %d: CPU %.2f s, K %s, M %d, rounds %s, test NLPD %.4f\n", set, k, total,
            format(if (is.null(f$neighbours)) 0 else f$neighbours$K), nrow(f$params$Z),
            format(f$selection$rounds), nlpd))
r <- f$auto_neighbours
if (identical(r$reason, "trial")) {
  cat(sprintf("trial: held-out gain of the neighbours %.4f nats per observation, standard error %.4f\n",
              r$gain, r$gain_se))
}
