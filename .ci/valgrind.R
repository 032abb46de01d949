# A short run of every model and likelihood under valgrind (.ci/run, with
# --leak-check=full): small problems, a few optimiser evaluations each,
# predictions and the summaries, so that every C entry point the models
# use runs under memcheck on every path that reaches it: one piece and
# chunks (control$memory), threads, kernel sums and products, natural
# gradients, Adam on minibatches, the bases of odvgp, multiclass
# likelihoods, selection, and a FORK cluster (its workers are forked from
# this process and so run under valgrind too). Not a test of results:
# .ci/run fails on any memcheck error or definitely lost block.
suppressMessages(library(sparsevgp))
set.seed(1)
x <- matrix(runif(60, -3, 3), 30, 2)
y <- sin(2 * x[, 1]) + 0.3 * x[, 2] + rnorm(30, sd = 0.1)
cls <- factor(ifelse(y > 0, "a", "b"))
cl3 <- factor(c("a", "b", "c")[1L + (y > -0.5) + (y > 0.5)])
ctl <- list(maxit = 15L)
combo <- kernel_rbf(1, 0.7) + kernel_matern32(2, 0.3)
prod_k <- kernel_matern52(1.2, 1) * kernel_rbf(c(2, 3))
run <- function(label, expr, newdata = x[1:5, , drop = FALSE], pred = TRUE) {
  t0 <- proc.time()[["elapsed"]]
  fit <- suppressWarnings(expr)
  ok <- TRUE
  if (pred) {
    p <- suppressWarnings(predict(fit, newdata))
    ok <- all(is.finite(unlist(p)))
  }
  s <- capture.output(summary(fit))
  cat(sprintf("%-18s bound %.6g, predictions %s, %.1f s\n", label, fit$bound,
              if (ok) "finite" else "NOT FINITE", proc.time()[["elapsed"]] - t0))
  invisible(fit)
}
small <- function(fit) sparsevgp:::.memory_for_rows(fit, 7)

# the exact GP and the collapsed models, noise kinds, bounds
run("gpr", gpr(x, y, control = ctl))
g <- run("sgpr", sgpr(x, y, inducing = 6, control = ctl))
run("sgpr-het", sgpr(x, y, inducing = 6, noise = ~ x1, control = ctl))
run("sgpr-known", sgpr(x, y, inducing = 6, noise = rep(0.05, 30), control = ctl))
run("sgpr-weights", sgpr(x, y, inducing = 6, weights = rep(1:3, 10), control = ctl))
run("sgpr-chunks", sgpr(x, y, inducing = 6, noise = ~ x1, control = c(ctl, list(memory = small(g)))))
run("sgpr-combo", sgpr(x, y, inducing = 6, kernel = combo, control = ctl))
run("sgpr-combo-chunks", sgpr(x, y, inducing = 6, kernel = prod_k,
                              control = c(ctl, list(memory = 32 * 6 * 7))))
for (tp in c("solve", "odvgp")) for (bd in c("family", "union")) {
  run(paste("osgpr", tp, bd), osgpr(x, y, inducing = 3, orthogonal = 3, type = tp, bound = bd,
                                    control = ctl))
}
o <- run("osgpr-chunks", osgpr(x, y, inducing = 3, orthogonal = 3, control = ctl))
run("osgpr-chunks", osgpr(x, y, inducing = 3, orthogonal = 3,
                          control = c(ctl, list(memory = small(g)))))
run("osgpr-combo", osgpr(x, y, inducing = 3, orthogonal = 3, kernel = combo, control = ctl))
pc <- c(ctl, list(inner_max = 2L, outer_max = 2L))
run("pgpr", pgpr(x, cls, inducing = 6, control = pc))
run("pgpr-chunks", pgpr(x, cls, inducing = 6, control = c(pc, list(memory = small(g)))))
run("pgpr-combo", pgpr(x, cls, inducing = 6, kernel = combo, control = pc))

# the uncollapsed models: likelihoods, optimisers, bases, multiclass
run("svgp", svgp(x, cls, inducing = 6, control = ctl))
run("svgp-probit", svgp(x, cls, likelihood = "probit", inducing = 6, control = ctl))
run("svgp-gauss", svgp(x, y, likelihood = "gaussian", inducing = 6, control = ctl))
run("svgp-nonwhite", svgp(x, cls, inducing = 6, whiten = FALSE, control = ctl))
run("svgp-adam", svgp(x, y, likelihood = "gaussian", inducing = 6, batch_size = 10,
                      control = list(maxit = 10L)))
run("svgp-natgrad", svgp(x, cls, inducing = 6, control = list(optimizer = "natgrad",
                                                              maxit = 10L)))
run("svgp-combo", svgp(x, cls, inducing = 6, kernel = prod_k, control = ctl))
run("svgp-robustmax", svgp(x, cl3, inducing = 6, control = ctl))
run("svgp-softmax", svgp(x, cl3, likelihood = "softmax", inducing = 6,
                         control = list(maxit = 10L)))
for (b in c("orthogonal", "hybrid", "decoupled")) {
  run(paste("odvgp", b), odvgp(x, y, inducing = 4, orthogonal = 4, basis = b,
                               control = list(maxit = 10L)))
}
run("odvgp-bern", odvgp(x, cls, inducing = 4, orthogonal = 4, control = list(maxit = 10L)))
run("odvgp-multi", odvgp(x, cl3, inducing = 4, orthogonal = 4, control = list(maxit = 10L)))
run("odvgp-natgrad", odvgp(x, cls, inducing = 4, orthogonal = 4,
                           control = list(optimizer = "natgrad", maxit = 10L)))
run("odvgp-combo", odvgp(x, y, inducing = 4, orthogonal = 4, kernel = combo,
                         control = list(maxit = 10L)))

# threads (two, where OpenMP allows), selection, the methods
old <- options(sparsevgp.threads = 2L)
run("sgpr-threads", sgpr(x, y, inducing = 6, control = c(ctl, list(memory = small(g) + 5e4))))
run("osgpr-threads", osgpr(x, y, inducing = 3, orthogonal = 3, control = ctl))
options(old)
invisible(select_inducing(x, kernel_rbf(1, 1), M = 8))
invisible(select_inducing(x, combo, M = 8))
invisible(select_inducing(x, kernel_rbf(1, 1), threshold = 0.1, memory = "4KB"))
invisible(select_inducing(x, kernel_rbf(1, 1), M = 5, method = "kmeans"))
invisible(suppressWarnings(reinit_inducing(g, max_passes = 2L)))
invisible(simulate(g, nsim = 2))
invisible(kl_predictive(g, gpr(x, y, optimize = FALSE), x[1:4, , drop = FALSE]))
invisible(df.residual(g))
invisible(fitted(o))
ob <- objective(g)
invisible(ob$fn(ob$par))
invisible(ob$gr(ob$par))

# a fit stopped by an interrupt in every phase the hooks reach
for (ph in c("start", "selection", "reselection")) {
  old <- options(sparsevgp.interrupt_at = ph)
  run(paste("interrupt", ph), sgpr(x, y, inducing = "greedy", M = 6, control = ctl))
  options(old)
}
old <- options(sparsevgp.interrupt_after = 3L)
run("interrupt pgpr", pgpr(x, cls, inducing = 6, control = pc))
options(old)

# a FORK cluster of two workers (forked from this process, under valgrind)
if (.Platform$OS.type == "unix") {
  cl <- parallel::makeForkCluster(2L)
  run("sgpr-cluster", sgpr(x, y, inducing = 6, control = ctl, cluster = cl))
  run("pgpr-cluster", pgpr(x, cls, inducing = 6, control = pc, cluster = cl))
  run("osgpr-cluster", osgpr(x, y, inducing = 3, orthogonal = 3, control = ctl, cluster = cl))
  run("svgp-cluster", svgp(x, cls, inducing = 6, control = ctl, cluster = cl))
  oc <- objective(g, cluster = cl)
  invisible(oc$gr(oc$par))
  oc$release()
  invisible(predict(g, x, cluster = cl))
  parallel::stopCluster(cl)
}
cat("valgrind run finished\n")
