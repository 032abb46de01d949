# The cost of one evaluation (the ELBO and its gradient in every free
# parameter) of the uncollapsed models, svgp() and odvgp(), at fixed
# parameters on the full batch: CPU seconds (user + system) per evaluation,
# the median of `reps` evaluations after one warm-up, with the BLAS this
# process loaded. The sizes are those of the orthogonally decoupled model of
# Salimbeni et al. (2018): |beta| = 150, |gamma| = 350 against a non-whitened
# svgp with M = 500 on N = 20 000 points with D = 4 inputs, plus a small
# problem where per-call overhead dominates. Not run by R CMD check.
#
#   Rscript inst/bench/bench_uncollapsed.R [--lib=path] [--reps=5] [--out=file]
#
# For the figures in NEWS.md: OpenBLAS on one thread, under the shared lock:
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 flock /work/locks/cpu.lock \
#     Rscript inst/bench/bench_uncollapsed.R --lib=/path/to/library

# options, the library and blas_name() (this script runs in one process)
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))
reps <- as.integer(opt("reps", "5"))
out <- opt("out", "")
suppressPackageStartupMessages(library(sparsevgp))

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}

# CPU seconds of one full-batch evaluation with gradient: the median over
# `reps` timings, each of as many evaluations as take about 0.2 s (small
# problems are timed in batches, since the clock ticks in milliseconds).
eval_cost <- function(fit) {
  ev <- function() sparsevgp:::.evaluate(fit, fit$params, grad = TRUE)
  t0 <- cpu()
  ev()
  inner <- max(1L, ceiling(0.2 / max(cpu() - t0, 1e-4)))
  s <- vapply(seq_len(reps), function(i) {
    t0 <- cpu()
    for (j in seq_len(inner)) ev()
    (cpu() - t0) / inner
  }, 1)
  stats::median(s)
}

make_data <- function(N, D, seed = 1) {
  set.seed(seed)
  x <- matrix(runif(N * D, -2, 2), N, D)
  f <- sin(2 * x[, 1]) + cos(x[, 2]) * x[, D] / 2
  list(x = x, y = f + rnorm(N, sd = 0.2), lab = factor(f + rnorm(N, sd = 0.3) > 0))
}

configs <- list(
  list(label = "svgp non-whitened, M = 500", model = "svgp", M = 500L, G = 0L, whiten = FALSE),
  list(label = "svgp whitened, M = 500", model = "svgp", M = 500L, G = 0L, whiten = TRUE),
  list(label = "odvgp |beta| = 150, |gamma| = 350", model = "odvgp", M = 150L, G = 350L),
  list(label = "odvgp |beta| = 500, |gamma| = 0", model = "odvgp", M = 500L, G = 0L))
small <- list(
  list(label = "small: svgp whitened, M = 20", model = "svgp", M = 20L, G = 0L, whiten = TRUE),
  list(label = "small: odvgp 20 + 40", model = "odvgp", M = 20L, G = 40L))

build <- function(cf, d, lik) {
  set.seed(2)
  idx <- sample.int(nrow(d$x), cf$M + cf$G)
  Z <- d$x[idx[seq_len(cf$M)], , drop = FALSE]
  y <- if (lik == "gaussian") d$y else d$lab
  k <- kernel_rbf(rep(1, ncol(d$x)), 1)
  if (cf$model == "svgp") {
    return(svgp(d$x, y, kernel = k, inducing = Z, likelihood = lik, whiten = cf$whiten,
                mean = 0, noise = if (lik == "gaussian") 0.1, optimize = FALSE))
  }
  O <- if (cf$G > 0L) d$x[idx[cf$M + seq_len(cf$G)], , drop = FALSE] else 0
  odvgp(d$x, y, kernel = k, inducing = Z, orthogonal = O, likelihood = lik, mean = 0,
        noise = if (lik == "gaussian") 0.1, optimize = FALSE)
}

rows <- list()
run <- function(cfs, N, D) {
  d <- make_data(N, D)
  for (cf in cfs) for (lik in c("gaussian", "bernoulli")) {
    fit <- build(cf, d, lik)
    s <- eval_cost(fit)
    r <- data.frame(config = cf$label, likelihood = lik, N = N, D = D, cpu_s = s)
    print(r, row.names = FALSE)
    rows[[length(rows) + 1L]] <<- r
  }
}
run(configs, 20000L, 4L)
run(small, 500L, 2L)
res <- do.call(rbind, rows)
ref <- res$cpu_s[res$config == configs[[1L]]$label]
names(ref) <- res$likelihood[res$config == configs[[1L]]$label]
res$ratio_to_svgp_nw_500 <- ifelse(res$N == 20000L, res$cpu_s / ref[res$likelihood], NA)
cat(sprintf("\nsparsevgp %s, %s, %s; median of %d evaluations\n",
            utils::packageVersion("sparsevgp"), R.version.string, blas_name(), reps))
print(res, row.names = FALSE, digits = 3)
if (nzchar(out)) {
  writeLines(c(sprintf("# bench_uncollapsed.R: sparsevgp %s, %s, %s, median of %d, %s",
                       utils::packageVersion("sparsevgp"), R.version.string, blas_name(),
                       reps, format(Sys.time(), "%Y-%m-%d")),
               utils::capture.output(print(res, row.names = FALSE, digits = 3))), out)
}
