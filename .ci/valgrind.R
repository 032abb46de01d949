# A short run of every model under valgrind (.ci/run): small problems, a few
# optimiser evaluations each, predictions and the summaries, so that every C
# entry point the models use runs under memcheck. Not a test of results.
suppressMessages(library(sparsevgp))
set.seed(1)
x <- matrix(runif(60, -3, 3), 30, 2)
y <- sin(2 * x[, 1]) + 0.3 * x[, 2] + rnorm(30, sd = 0.1)
cls <- factor(ifelse(y > 0, "a", "b"))
ctl <- list(maxit = 15L)
run <- function(label, expr) {
  t0 <- proc.time()[["elapsed"]]
  fit <- suppressWarnings(expr)
  p <- predict(fit, x[1:5, , drop = FALSE])
  s <- capture.output(summary(fit))
  cat(sprintf("%-8s bound %.6g, predictions %s, %.1f s\n", label, fit$bound,
              if (all(is.finite(unlist(p)))) "finite" else "NOT FINITE",
              proc.time()[["elapsed"]] - t0))
}
run("gpr", gpr(x, y, control = ctl))
run("sgpr", sgpr(x, y, inducing = 6, control = ctl))
run("sgpr-het", sgpr(x, y, inducing = 6, noise = ~ x1, control = ctl))
run("osgpr", osgpr(x, y, inducing = 4, orthogonal = 3, control = ctl))
run("pgpr", pgpr(x, cls, inducing = 6, control = c(ctl, list(inner_max = 2L, outer_max = 2L))))
run("svgp", svgp(x, cls, inducing = 6, control = ctl))
run("svgp-ad", svgp(x, y, likelihood = "gaussian", inducing = 6, batch_size = 10,
                    control = list(maxit = 10L)))
invisible(select_inducing(x, kernel_rbf(1, 1), M = 8))
cat("valgrind run finished\n")
