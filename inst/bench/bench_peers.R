# Accuracy per CPU second against the R packages a statistician would use
# instead: sparsevgp's default sgpr() (and the settings given by `variants`
# below) against GpGp (Vecchia approximation, fit_model with an anisotropic
# Matern 5/2 covariance; its free-smoothness "matern_scaledim" overflows in
# boost::tgamma on these data) and laGP (local approximate GPs, aGPsep), on the
# standard splits of kin8nm and power, in one run.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_peers.R [data_dir] [splits] [peer_lib]
# data_dir holds one folder per data set with data.txt, index_features.txt,
# index_target.txt, index_train_k.txt and index_test_k.txt (0-based), the
# copies used across the GP literature; default ../shared/data/regression.
# splits: e.g. 0:2 (default "0,1,2"). peer_lib: a library holding GpGp and
# laGP (they are never dependencies of sparsevgp; a peer that is not
# installed is skipped).
#
# Every method gets the raw data (inputs and response in their own units):
# defaults must cope with that. Metrics on the test split, in y's units:
# RMSE and NLPD = -mean log N(y*; mean, var) with the predictive variance of
# y (noise included); fit and predict CPU seconds (user + system, so that a
# threaded BLAS counts every core it uses).
#
# GpGp's predictions() gives the mean only. Its predictive variance here is
# that of kriging from the m = 60 nearest training inputs (in the fitted
# scaled-distance metric) with the fitted covariance parameters: the
# conditional variance that GpGp's Vecchia prediction approximates.
args <- commandArgs(trailingOnly = TRUE)
data_dir <- if (length(args) >= 1L) args[1L] else file.path("..", "shared", "data", "regression")
splits <- if (length(args) >= 2L) as.integer(strsplit(args[2L], ",")[[1L]]) else 0:2
if (length(args) >= 3L) .libPaths(c(args[3L], .libPaths()))
suppressMessages(library(sparsevgp))
have <- function(p) requireNamespace(p, quietly = TRUE)

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]] + t[["user.child"]] + t[["sys.child"]]
}

read_split <- function(dir, k) {
  rd <- function(f) scan(file.path(dir, f), quiet = TRUE) + 1L
  dat <- as.matrix(utils::read.table(file.path(dir, "data.txt")))
  fx <- rd("index_features.txt")
  fy <- rd("index_target.txt")
  tr <- rd(sprintf("index_train_%d.txt", k))
  te <- rd(sprintf("index_test_%d.txt", k))
  x <- dat[, fx, drop = FALSE]
  colnames(x) <- paste0("x", seq_len(ncol(x)))
  list(x = x[tr, , drop = FALSE], y = dat[tr, fy], xt = x[te, , drop = FALSE], yt = dat[te, fy])
}

metrics <- function(yt, mu, v) {
  c(rmse = sqrt(mean((yt - mu)^2)), nlpd = -mean(stats::dnorm(yt, mu, sqrt(v), log = TRUE)))
}

# ---- the methods: each returns c(rmse, nlpd, fit_cpu, predict_cpu, extra) ----

run_sgpr <- function(s, ...) {
  t0 <- cpu()
  fit <- sgpr(s$x, s$y, ...)
  t1 <- cpu()
  p <- predict(fit, s$xt, type = "response")
  t2 <- cpu()
  c(metrics(s$yt, p$mean, p$var), fit = t1 - t0, predict = t2 - t1,
    evals = fit$optim$counts[[1L]], M = nrow(fit$params$Z))
}

run_gpgp <- function(s) {
  t0 <- cpu()
  fit <- GpGp::fit_model(s$y, s$x, X = matrix(1, nrow(s$x), 1), covfun_name = "matern25_scaledim",
                         silent = TRUE)
  t1 <- cpu()
  mu <- GpGp::predictions(fit, s$xt, X_pred = matrix(1, nrow(s$xt), 1))
  # kriging variance from the 60 nearest neighbours in the scaled metric
  D <- ncol(s$x)
  cp <- fit$covparms
  ranges <- cp[1L + seq_len(D)]
  xs <- sweep(s$x, 2L, ranges, "/")
  xts <- sweep(s$xt, 2L, ranges, "/")
  v <- numeric(nrow(s$xt))
  for (i in seq_len(nrow(s$xt))) {
    d2 <- colSums((t(xs) - xts[i, ])^2)
    nn <- order(d2)[1:60]
    K <- GpGp::matern25_scaledim(cp, rbind(s$x[nn, , drop = FALSE], s$xt[i, , drop = FALSE]))
    k <- K[1:60, 61]
    v[i] <- K[61, 61] - sum(k * solve(K[1:60, 1:60], k))
  }
  t2 <- cpu()
  c(metrics(s$yt, mu, v), fit = t1 - t0, predict = t2 - t1, evals = NA, M = NA)
}

run_lagp <- function(s) {
  t0 <- cpu()
  d <- laGP::darg(list(mle = TRUE), s$x)
  g <- laGP::garg(list(mle = TRUE), s$y)
  p <- laGP::aGPsep(s$x, s$y, s$xt, d = d, g = g, verb = 0, omp.threads = 1)
  t1 <- cpu()
  # local approximate GPs fit at prediction time: all of it counts as fit
  c(metrics(s$yt, p$mean, p$var), fit = t1 - t0, predict = 0, evals = NA, M = NA)
}

# sparsevgp settings besides the default (name = list of sgpr() arguments)
variants <- list(default = list(),
                 staged = list(control = list(schedule = "staged")),
                 former = list(control = list(schedule = "joint")),
                 M300 = list(inducing = 300))

methods <- c(lapply(variants, function(a) function(s) do.call(run_sgpr, c(list(s), a))),
             if (have("GpGp")) list(GpGp = run_gpgp),
             if (have("laGP")) list(laGP = run_lagp))
names(methods)[seq_along(variants)] <- paste0("sgpr_", names(variants))

cat("BLAS:", extSoftVersion()[["BLAS"]], "\n")
cat("LAPACK:", La_library(), "\n")
cat("peers:", paste(c(if (have("GpGp")) paste("GpGp", utils::packageVersion("GpGp")),
                      if (have("laGP")) paste("laGP", utils::packageVersion("laGP"))),
                    collapse = ", "), "\n")
rows <- list()
for (ds in c("kin8nm", "power-plant")) {
  dir <- file.path(data_dir, ds)
  if (!dir.exists(dir)) next
  for (k in splits) {
    s <- read_split(dir, k)
    # methods interleaved within a split, so that machine load hits all alike
    for (m in names(methods)) {
      set.seed(k)
      r <- tryCatch(methods[[m]](s), error = function(e) {
        message(sprintf("%s on %s split %d failed: %s", m, ds, k, conditionMessage(e)))
        c(rmse = NA, nlpd = NA, fit = NA, predict = NA, evals = NA, M = NA)
      })
      rows[[length(rows) + 1L]] <- data.frame(data = ds, split = k, method = m, t(r))
      print(utils::tail(rows[[length(rows)]], 1), digits = 4, row.names = FALSE)
    }
  }
}
res <- do.call(rbind, rows)
cat("\nMeans over splits:\n")
agg <- stats::aggregate(cbind(rmse, nlpd, fit, predict, evals, M) ~ data + method, res,
                        mean, na.action = stats::na.pass)
print(agg[order(agg$data, agg$nlpd), ], digits = 4, row.names = FALSE)
