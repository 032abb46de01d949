# Multiclass classification with defaults against the methods a
# statistician would otherwise use, in one run: sparsevgp's svgp() and
# odvgp() with the robust-max and the softmax likelihoods, called as a new
# user calls them (raw inputs, a factor, no settings but the likelihood),
# nnet::multinom(), kernlab's ksvm(prob.model = TRUE) and gausspr().
# Accuracy, test NLL (mean -log p(y*) with the predictive probabilities each
# method gives, floored at 1e-12) and CPU seconds (user + system) per fit.
#
# Data:
#   - iris (3 classes, 4 inputs, 150 rows) and MASS::fgl (forensic glass,
#     6 classes of 9 to 76 rows, 9 inputs, 214 rows): 5-fold
#     cross-validation with folds fixed by a seed, so that every row is
#     predicted once;
#   - waveform (Breiman et al. 1984, section 2.6.2): 3 classes, 21 inputs,
#     each a random convex combination of two of three triangular waves
#     plus N(0, 1) noise (Bayes accuracy about 0.86); 5000 training and
#     5000 test rows.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_multiclass.R [sets=a,b,...] [methods=a,b,...]
#       [out=inst/bench/results/bench_multiclass.txt] [lib=path]
# lib: a library to put first on .libPaths() (the peers kernlab, nnet and
# MASS are never dependencies of sparsevgp).
# Run it under the shared CPU lock; the figures are CPU seconds on a machine
# that may be shared, with the BLAS printed at the top.

args <- commandArgs(trailingOnly = TRUE)
opt <- list(sets = "iris,fgl,waveform",
            methods = "svgp_robustmax,svgp_softmax,odvgp_robustmax,odvgp_softmax,multinom,ksvm,gausspr",
            out = file.path("inst", "bench", "results", "bench_multiclass.txt"), lib = "")
for (a in args) {
  kv <- strsplit(a, "=", fixed = TRUE)[[1L]]
  if (length(kv) == 1L && grepl("=$", a)) kv <- c(kv, "")
  if (length(kv) != 2L || !kv[1L] %in% names(opt)) stop("unknown argument: ", a)
  opt[[kv[1L]]] <- kv[2L]
}
if (nzchar(opt$lib)) .libPaths(c(opt$lib, .libPaths()))
suppressMessages(library(sparsevgp))
have <- function(p) requireNamespace(p, quietly = TRUE)
sets <- strsplit(opt$sets, ",", fixed = TRUE)[[1L]]
methods <- strsplit(opt$methods, ",", fixed = TRUE)[[1L]]

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]] + t[["user.child"]] + t[["sys.child"]]
}

# ---- data ----------------------------------------------------------------------

waveform <- function(n) {
  h <- list(pmax(6 - abs(1:21 - 11), 0), pmax(6 - abs(1:21 - 15), 0),
            pmax(6 - abs(1:21 - 7), 0))
  pairs <- list(c(1, 2), c(1, 3), c(2, 3))
  cls <- sample.int(3, n, replace = TRUE)
  u <- stats::runif(n)
  x <- t(vapply(seq_len(n), function(i) {
    p <- pairs[[cls[i]]]
    u[i] * h[[p[1]]] + (1 - u[i]) * h[[p[2]]]
  }, numeric(21))) + matrix(stats::rnorm(21 * n), n, 21)
  colnames(x) <- paste0("x", 1:21)
  list(x = x, y = factor(cls, labels = c("a", "b", "c")))
}

splits_of <- function(ds) {
  if (ds == "waveform") {
    set.seed(20261125)
    tr <- waveform(5000)
    te <- waveform(5000)
    return(list(list(x = tr$x, y = tr$y, xt = te$x, yt = te$y)))
  }
  d <- switch(ds,
    iris = list(x = as.matrix(datasets::iris[, 1:4]), y = datasets::iris$Species),
    fgl = {
      if (!have("MASS")) return(NULL)
      g <- MASS::fgl
      list(x = as.matrix(g[, 1:9]), y = droplevels(g$type))
    })
  set.seed(7)
  fold <- sample(rep_len(1:5, nrow(d$x)))
  lapply(1:5, function(k) list(x = d$x[fold != k, , drop = FALSE], y = d$y[fold != k],
                               xt = d$x[fold == k, , drop = FALSE], yt = d$y[fold == k]))
}

# ---- methods: each takes (x, y, xt) and returns the probability matrix -----------

# the probabilities in the order of levels(y), with a column of zeros for a
# class absent from a training fold
align <- function(P, lev) {
  out <- matrix(0, nrow(P), length(lev), dimnames = list(NULL, lev))
  out[, intersect(colnames(P), lev)] <- P[, intersect(colnames(P), lev)]
  out
}
gp <- function(model, lik) function(x, y, xt) {
  fit <- do.call(model, list(x, droplevels(y), likelihood = lik))
  list(P = align(predict(fit, xt, type = "prob"), levels(y)), M = nrow(fit$params$Z),
       bound = fit$bound,
       const = sum(table(droplevels(y)) * log(table(droplevels(y)) / length(y))))
}
runners <- list(
  svgp_robustmax = gp("svgp", "robustmax"), svgp_softmax = gp("svgp", "softmax"),
  odvgp_robustmax = gp("odvgp", "robustmax"), odvgp_softmax = gp("odvgp", "softmax"),
  multinom = function(x, y, xt) {
    d <- data.frame(x, y = y)
    fit <- nnet::multinom(y ~ ., data = d, trace = FALSE, maxit = 500)
    P <- stats::predict(fit, data.frame(xt), type = "probs")
    list(P = align(P, levels(y)))
  },
  ksvm = function(x, y, xt) {
    fit <- kernlab::ksvm(x, droplevels(y), prob.model = TRUE)
    list(P = align(kernlab::predict(fit, xt, type = "probabilities"), levels(y)))
  },
  gausspr = function(x, y, xt) {
    fit <- kernlab::gausspr(x, droplevels(y))
    list(P = align(kernlab::predict(fit, xt, type = "probabilities"), levels(y)))
  })
needs <- c(ksvm = "kernlab", gausspr = "kernlab", multinom = "nnet")
methods <- methods[vapply(methods, function(m) is.na(needs[m]) || have(needs[[m]]), TRUE)]

nll <- function(P, y) {
  -mean(log(pmax(P[cbind(seq_along(y), as.integer(y))], 1e-12)))
}

# ---- run ------------------------------------------------------------------------

blas <- extSoftVersion()[["BLAS"]]
header <- c(sprintf("bench_multiclass.R, %s", format(Sys.time(), "%Y-%m-%d %H:%M")),
            sprintf("BLAS: %s", blas), sprintf("R: %s", R.version.string),
            sprintf("sparsevgp %s, kernlab %s, nnet %s", utils::packageVersion("sparsevgp"),
                    if (have("kernlab")) utils::packageVersion("kernlab") else "-",
                    if (have("nnet")) utils::packageVersion("nnet") else "-"),
            "CPU seconds (user + system) per fit; the machine may have been shared.")
cat(header, sep = "\n")
rows <- list()
for (ds in sets) {
  sp <- splits_of(ds)
  if (is.null(sp)) next
  for (k in seq_along(sp)) {
    s <- sp[[k]]
    for (m in methods) {
      set.seed(k)
      warn <- character()
      t0 <- cpu()
      r <- withCallingHandlers(tryCatch(runners[[m]](s$x, s$y, s$xt), error = function(e) {
        message(sprintf("%s on %s fold %d failed: %s", m, ds, k, conditionMessage(e)))
        NULL
      }), warning = function(w) {
        warn <<- c(warn, conditionMessage(w))
        invokeRestart("muffleWarning")
      })
      t1 <- cpu()
      if (is.null(r)) next
      acc <- mean(max.col(r$P, ties.method = "first") == as.integer(s$yt))
      rows[[length(rows) + 1L]] <- data.frame(
        set = ds, fold = k, method = m, N = nrow(s$x), K = nlevels(s$y), n_test = length(s$yt),
        correct = acc * length(s$yt), nll_sum = nll(r$P, s$yt) * length(s$yt), cpu = t1 - t0,
        M = if (is.null(r$M)) NA else r$M, bound = if (is.null(r$bound)) NA else r$bound,
        const = if (is.null(r$const)) NA else r$const, warnings = length(warn))
      cat(sprintf("%-9s fold %d %-16s acc %.4f nll %.4f cpu %7.2f%s%s\n", ds, k, m, acc,
                  nll(r$P, s$yt), t1 - t0,
                  if (!is.null(r$M)) sprintf("  M %d, ELBO %.1f (constant %.1f)", r$M, r$bound,
                                             r$const) else "",
                  if (length(warn)) paste0("  [warning: ", substr(warn[1L], 1, 60), "]") else ""))
      flush(stdout())
    }
  }
}
res <- do.call(rbind, rows)
agg <- do.call(rbind, lapply(split(res, list(res$set, res$method), drop = TRUE), function(d) {
  data.frame(set = d$set[1L], method = d$method[1L], N = round(mean(d$N)), K = d$K[1L],
             acc = sum(d$correct) / sum(d$n_test), nll = sum(d$nll_sum) / sum(d$n_test),
             cpu = mean(d$cpu), cpu_max = max(d$cpu), M = mean(d$M),
             elbo_above_const = if (all(is.na(d$bound))) NA else mean(d$bound > d$const),
             warnings = sum(d$warnings))
}))
agg <- agg[order(match(agg$set, sets), match(agg$method, methods)), ]
out <- utils::capture.output(print(agg, digits = 4, row.names = FALSE))
cat("", out, sep = "\n")
if (nzchar(opt$out)) {
  dir.create(dirname(opt$out), showWarnings = FALSE, recursive = TRUE)
  writeLines(c(header, "", "Per fit:", utils::capture.output(print(res, digits = 4,
                                                                   row.names = FALSE)),
               "", "Per set and method (accuracy and NLL over all test points; CPU per fit, mean and max; elbo_above_const: share of fits whose ELBO exceeds that of the best constant predictor):",
               out), opt$out)
}
