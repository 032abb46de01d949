# Accuracy per CPU second against the R packages a statistician would use
# instead, in one run: sparsevgp's default sgpr() (neighbours = "auto") and
# sgpr(neighbours = 0) (the collapsed bound alone, the former default)
# against GpGp (Vecchia; fit_model with an anisotropic Matern 5/2
# covariance), GPBoost (fitGPModel with a Vecchia approximation,
# gp_approx = "vecchia", and with its Vecchia-inducing-points full-scale
# approximation, gp_approx = "full_scale_vecchia", both anisotropic Matern
# 5/2), laGP (local approximate GPs, aGPsep), on the volcano surface mgcv's
# gam(s(row, col, k = 300)) and, on the small sets (concrete, energy, yacht,
# bostonHousing, rainfall), the exact GP (sparsevgp's gpr() with an
# anisotropic Matern 5/2 kernel: method "exact").
#
# Data and splits:
#   kin8nm, power    the standard UCI splits (index_train_k / index_test_k in
#                    data_dir, 0-based; the copies used across the GP
#                    literature), N = 7373 and 8611 training rows;
#   volcano          R's 87 x 61 grid of heights, 1000 random test points
#                    (seed 100 + k), 4307 training rows;
#   argo             GpGp's argo2016 (ocean temperature at 100 dbar against
#                    longitude, latitude and day of year), a random 10% test
#                    split (seed 200 + k), 29192 training rows;
# and sets that the rule of neighbours = "auto" was not developed on:
#   concrete, energy, yacht, bostonHousing
#                    the standard UCI splits as for kin8nm (927, 691, 277
#                    and 455 training rows; 8, 8, 6 and 13 inputs);
#   rainfall         fields' NorthAmericanRainfall (old version): log summer (JJA)
#                    precipitation against longitude and latitude at 1720
#                    stations, a random 10% test split (seed 400 + k);
#   jason3           GpGp's jason3 (satellite wind speed against longitude,
#                    latitude and time), all 18973 rows, a random 10% test
#                    split (seed 300 + k);
#   ato              hetGP's ato (8 inputs, 2000 designs with 10 replicates
#                    each, one row per replicate: 20000 rows with
#                    heteroscedastic noise), a random 10% test split of the
#                    rows (seed 500 + k);
#   diamonds         ggplot2's diamonds (log price against nine inputs, the
#                    ordered factors as their level numbers), a random 10%
#                    test split (seed 800 + k), 48546 training rows;
#   lidar            MBA's LIDAR (ground elevation against easting and
#                    northing), a random 10% test split (seed 900 + k), 9120
#                    training rows;
#   bcef             spNNGP's BCEF (forest canopy height against easting and
#                    northing), 5000 random test points (seed 1000 + k),
#                    183717 training rows;
#   hourly           a synthetic long series (see load_split()), 20000
#                    training rows: dense data, one observation per hour.
# and, with R (base R's datasets and the recommended package MASS), five
# sets of the kind a statistician has at hand, each with a random 10% test
# split (seeds 1100 + k to 1500 + k; see load_split()):
#   sunspots (2859 training rows, 1-D), treering (7182, 1-D), dax (1674,
#   1-D), quakes (900, 3-D), nlschools (2058, 4-D).
# Every method gets the same inputs and targets, both standardised with the
# training split's means and standard deviations; metrics are on the test
# split in the target's units: RMSE and NLPD = -mean log N(y*; mean, var)
# with the predictive variance of y (noise included).
#
# Each (data set, split, method) runs in a fresh Rscript process, which
# reports fit and predict CPU seconds (user + system, so that threads count
# every core they use) and the peak resident memory of the process (VmHWM,
# data and R included). GPBoost runs with one OpenMP thread
# (num_parallel_threads = 1), laGP with one; run the whole script with one
# BLAS thread, e.g. OpenBLAS:
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_peers.R \
#     --lib=<sparsevgp library> --peers=<library of the peers> \
#     [--data=../shared/data/regression] [--splits=0,1,2] \
#     [--sets=kin8nm,power,volcano,argo] [--methods=...] [--out=results.csv]
# (the further sets: --sets=concrete,energy,yacht,bostonHousing,rainfall,
# jason3,ato,diamonds,lidar,bcef,hourly,sunspots,treering,dax,quakes,
# nlschools, and the synthetic twoscale,rough2,bumps3,step2,series1,
# field2,towns2,rough3;
# rainfall needs fields, ato hetGP,
# jason3 GpGp, diamonds ggplot2, lidar MBA and bcef spNNGP, installed or,
# for diamonds and bcef, --sources=<directory> holding the package's source
# unpacked, whose data/<name>.rda is read)
# The peers are never dependencies of sparsevgp; a peer that is not
# installed is skipped.
#
# GpGp's predictions() gives the mean only. Its predictive variance here is
# that of kriging from the 60 nearest training inputs (in the fitted
# scaled-distance metric) with the fitted covariance parameters: the
# conditional variance that GpGp's Vecchia prediction approximates.
# Not run by R CMD check.

here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "bench_child.R"))
peers <- opt("peers", "")
if (nzchar(peers)) .libPaths(c(peers, .libPaths()))
data_dir <- opt("data", file.path("..", "shared", "data", "regression"))
splits <- as.integer(strsplit(opt("splits", "0,1,2"), ",")[[1L]])
sets <- strsplit(opt("sets", "kin8nm,power,volcano,argo"), ",")[[1L]]
uci_small <- c("concrete", "energy", "yacht", "bostonHousing")
all_methods <- c("sgpr_default", "sgpr_K0", "GpGp", "GPBoost_vecchia", "GPBoost_VIF", "laGP",
                 "gam300", "exact")
methods <- strsplit(opt("methods", paste(all_methods, collapse = ",")), ",")[[1L]]

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]] + t[["user.child"]] + t[["sys.child"]]
}

# A data set shipped with package `pkg` (or, with all = TRUE, the
# environment with every object its file holds). Where `pkg` is not
# installed, its file data/<name>.rda in the unpacked source of the package
# under --sources (a directory holding e.g. spNNGP/ from CRAN's tarball).
source_data <- function(name, pkg) {
  dir <- opt("sources", "")
  if (nzchar(dir)) file.path(dir, pkg, "data", paste0(name, ".rda")) else ""
}
pkg_data <- function(name, pkg, all = FALSE) {
  e <- new.env()
  src <- source_data(name, pkg)
  if (!nzchar(system.file(package = pkg)) && file.exists(src)) {
    load(src, envir = e)
  } else {
    utils::data(list = name, package = pkg, envir = e)
  }
  if (all) e else e[[name]]
}
# whether the data set `name` of `pkg` can be read (the package's namespace
# need not load: only its data are read)
have_data <- function(name, pkg) {
  nzchar(system.file(package = pkg)) || file.exists(source_data(name, pkg))
}

# The split k of a data set, standardised on its training part.
# Synthetic cases of the problem class, each a function of n returning the
# inputs x, the function f at them and the noise sd:
#   twoscale  a smooth trend and weaker variation on a much shorter scale,
#             sin(3a) + 0.3 sin(40a) cos(35b) (2 inputs uniform on the unit
#             square; noise variance 0.0675)
#   rough2    sin(8a) cos(6b) + 0.5 sin(25a + 20b) (noise sd 0.2)
#   bumps3    a linear trend and three narrow Gaussian bumps (sd 0.05) in 3
#             inputs (noise sd 0.1): structure in a small part of the space
#   step2     a jump of 1 along a wavy line, plus a gentle slope (noise sd
#             0.1): not stationary
#   series1   sin(t/8) + 0.4 sin(1.7 t) on (0, 100) (noise sd 0.3): smooth,
#             two periods
#   field2    a draw of a Matern 5/2 field (lengthscale 0.6) plus one of a
#             Matern 3/2 field (lengthscale 0.03, sd 0.5) on the unit square
#             (noise sd 0.1): structure shorter than any inducing inputs'
#             spacing
#   towns2    two Matern 5/2 fields (lengthscales 0.3 and 0.02, sd 1 and
#             0.6), two thirds of the inputs in 40 towns (sd 0.02 about
#             random centres), a third spread over the unit square (noise
#             sd 0.1): dense and sparse parts
#   rough3    a Matern 5/2 field (lengthscale 0.5) plus a Matern 1/2 one
#             (lengthscale 0.1, five times longer along the third input, sd
#             0.7) in 3 inputs (noise sd 0.05)
# (The fields are drawn by 3000 random Fourier features: frequencies from
# the Student t with 2 nu degrees of freedom, the Matern kernel's spectral
# density.)
rff_draw <- function(x, ell, nu, sd, J = 3000L) {
  W <- matrix(stats::rnorm(J * ncol(x)), J) / sqrt(stats::rchisq(J, 2 * nu) / (2 * nu)) / ell
  b <- stats::runif(J, 0, 2 * pi)
  drop(cos(x %*% t(W) + rep(b, each = nrow(x))) %*% stats::rnorm(J)) * sd * sqrt(2 / J)
}
synthetic_cases <- list(
  twoscale = function(n) {
    x <- matrix(stats::runif(2 * n), n)
    list(x = x, f = sin(3 * x[, 1]) + 0.3 * sin(40 * x[, 1]) * cos(35 * x[, 2]), sd = sqrt(0.0675))
  },
  rough2 = function(n) {
    x <- matrix(stats::runif(2 * n), n)
    list(x = x, f = sin(8 * x[, 1]) * cos(6 * x[, 2]) + 0.5 * sin(25 * x[, 1] + 20 * x[, 2]),
         sd = 0.2)
  },
  bumps3 = function(n) {
    x <- matrix(stats::runif(3 * n), n)
    ctr <- rbind(c(0.2, 0.7, 0.5), c(0.3, 0.6, 0.8), c(0.5, 0.4, 0.2))
    b <- rowSums(sapply(1:3, function(j) exp(-colSums((t(x) - ctr[j, ])^2) / 0.005)))
    list(x = x, f = x[, 1] + b, sd = 0.1)
  },
  step2 = function(n) {
    x <- matrix(stats::runif(2 * n), n)
    list(x = x, f = ifelse(x[, 1] + 0.3 * sin(6 * x[, 2]) > 0.5, 1, 0) + 0.2 * x[, 2], sd = 0.1)
  },
  series1 = function(n) {
    x <- matrix(stats::runif(n) * 100, n)
    list(x = x, f = sin(x[, 1] / 8) + 0.4 * sin(x[, 1] * 1.7), sd = 0.3)
  },
  field2 = function(n) {
    x <- matrix(stats::runif(2 * n), n)
    list(x = x, f = rff_draw(x, 0.6, 2.5, 1) + rff_draw(x, 0.03, 1.5, 0.5), sd = 0.1)
  },
  towns2 = function(n) {
    nt <- round(2 * n / 3)
    ctr <- matrix(stats::runif(80), 40)
    x <- rbind(ctr[sample.int(40L, nt, TRUE), ] + matrix(stats::rnorm(2 * nt, sd = 0.02), nt),
               matrix(stats::runif(2 * (n - nt)), n - nt))
    # (the towns' and the spread rows shuffled, so that train and test
    # splits take both)
    x <- x[sample.int(n), ]
    list(x = x, f = rff_draw(x, 0.3, 2.5, 1) + rff_draw(x, 0.02, 2.5, 0.6), sd = 0.1)
  },
  rough3 = function(n) {
    x <- matrix(stats::runif(3 * n), n)
    list(x = x, f = rff_draw(x, 0.5, 2.5, 1) + rff_draw(sweep(x, 2L, c(1, 1, 0.2), "*"), 0.1, 0.5, 0.7),
         sd = 0.05)
  }
)

load_split <- function(set, k) {
  # the sets without standard splits: a random test split of n_test rows
  # (10% unless set) drawn with seed `seed`
  tr <- NULL
  n_test <- NULL
  if (set %in% c("kin8nm", "power", uci_small)) {
    dir <- file.path(data_dir, if (set == "power") "power-plant" else set)
    rd <- function(f) scan(file.path(dir, f), quiet = TRUE) + 1L
    dat <- as.matrix(utils::read.table(file.path(dir, "data.txt")))
    X <- dat[, rd("index_features.txt"), drop = FALSE]
    Y <- dat[, rd("index_target.txt")]
    tr <- rd(sprintf("index_train_%d.txt", k))
    te <- rd(sprintf("index_test_%d.txt", k))
  } else if (set == "volcano") {
    X <- cbind(row = c(row(datasets::volcano)), col = c(col(datasets::volcano))) + 0
    Y <- c(datasets::volcano) + 0
    seed <- 100 + k
    n_test <- 1000L
  } else if (set == "argo") {
    d <- pkg_data("argo2016", "GpGp")
    X <- as.matrix(d[, c("lon", "lat", "day")])
    Y <- d$temp100
    seed <- 200 + k
  } else if (set == "jason3") {
    # all 18973 rows (no subsample needed: every peer manages them)
    d <- pkg_data("jason3", "GpGp")
    X <- as.matrix(d[, c("lon", "lat", "time")])
    Y <- d$windspeed
    seed <- 300 + k
  } else if (set == "rainfall") {
    d <- pkg_data("NorthAmericanRainfall", "fields")
    X <- cbind(lon = d$longitude, lat = d$latitude)
    Y <- log(d$precip)
    seed <- 400 + k
  } else if (set == "ato") {
    # 2000 designs x 10 replicates: 20000 rows, each replicate its own row
    e <- pkg_data("ato", "hetGP", all = TRUE)
    X <- e$X[rep(seq_len(nrow(e$X)), ncol(e$Z)), , drop = FALSE]
    Y <- c(as.matrix(e$Z))
    seed <- 500 + k
  } else if (set == "diamonds") {
    # ggplot2's diamonds: log price against carat, cut, colour, clarity (their
    # level numbers), depth, table and the three dimensions x, y, z; 53940 rows
    # (48546 train), tabular data with discrete inputs and a few gross outliers
    # in the dimensions, left as they are
    d <- pkg_data("diamonds", "ggplot2")
    X <- cbind(carat = d$carat, cut = as.integer(d$cut), color = as.integer(d$color),
               clarity = as.integer(d$clarity), depth = d$depth, table = d$table,
               x = d$x, y = d$y, z = d$z)
    Y <- log(d$price)
    seed <- 800 + k
  } else if (set == "lidar") {
    # MBA's LIDAR: ground elevation (m) against easting and northing at 10133
    # points of a forest (9120 train); 2-D, rough at short range
    d <- pkg_data("LIDAR", "MBA")
    X <- cbind(x = d$x, y = d$y)
    Y <- d$z
    seed <- 900 + k
  } else if (set == "bcef") {
    # spNNGP's BCEF: forest canopy height (m) from LiDAR against easting and
    # northing (km) at 188717 points of the Bonanza Creek Experimental
    # Forest (183717 train; 5000 test points, which keeps the peers'
    # predictive variances affordable); 2-D, large N
    d <- pkg_data("BCEF", "spNNGP")
    X <- cbind(x = d$x, y = d$y)
    Y <- d$FCH
    seed <- 1000 + k
    n_test <- 5000L
  } else if (set == "hourly") {
    # synthetic, not a set of the literature: 21000 observations at random
    # times over 21000 hours (one per hour on average) of a slow trend, a
    # daily cycle, rough periods of 4-20 hours (200 random sinusoids) and
    # noise of sd 0.2, drawn with seed 600 + k; dense data, where rows
    # spread over the series are 20 hours apart
    set.seed(600 + k)
    n <- 21000L
    t <- stats::runif(n, 0, n)
    fr <- 1 / stats::runif(200L, 4, 20)
    ph <- stats::runif(200L, 0, 2 * pi)
    a <- stats::rnorm(200L) * sqrt(2 / 200) * 0.5
    rough <- drop(cos(outer(t, 2 * pi * fr) + matrix(ph, n, 200L, byrow = TRUE)) %*% a)
    X <- cbind(t = t)
    Y <- 2 * sin(2 * pi * t / n) + t / n + sin(2 * pi * t / 24) + rough + 0.2 * stats::rnorm(n)
    seed <- 700 + k
    n_test <- 1000L
  } else if (set == "sunspots") {
    # R's sunspot.month: the square root of the monthly mean sunspot number
    # (a common variance-stabilising scale) against time in years, 1749-2013;
    # 1-D, quasi-periodic (about 11 years) and rough from month to month
    X <- cbind(t = as.numeric(stats::time(datasets::sunspot.month)))
    Y <- sqrt(as.numeric(datasets::sunspot.month))
    seed <- 1100 + k
  } else if (set == "treering") {
    # R's treering: normalised tree-ring widths against year, 7980 years;
    # 1-D, mostly noise with weak short-range dependence
    X <- cbind(t = as.numeric(stats::time(datasets::treering)))
    Y <- as.numeric(datasets::treering)
    seed <- 1200 + k
  } else if (set == "dax") {
    # R's EuStockMarkets: the log DAX index against time (1860 trading days,
    # 1991-1998); 1-D, a random walk (rough at every scale)
    X <- cbind(t = as.numeric(stats::time(datasets::EuStockMarkets)))
    Y <- log(as.numeric(datasets::EuStockMarkets[, "DAX"]))
    seed <- 1300 + k
  } else if (set == "quakes") {
    # R's quakes: magnitude against latitude, longitude and depth of 1000
    # earthquakes near Fiji; 3-D, mostly noise
    X <- as.matrix(datasets::quakes[, c("lat", "long", "depth")])
    Y <- datasets::quakes$mag
    seed <- 1400 + k
  } else if (set == "nlschools") {
    # MASS's nlschools: language test score of 2287 pupils against IQ, class
    # size, family SES and multi-grade class (0/1); 4-D tabular data with
    # many repeated inputs (IQ and SES take few values)
    d <- pkg_data("nlschools", "MASS")
    X <- cbind(IQ = d$IQ, GS = d$GS, SES = d$SES, COMB = as.integer(d$COMB) - 1L)
    Y <- d$lang
    seed <- 1500 + k
  } else if (set %in% names(synthetic_cases)) {
    # synthetic, not sets of the literature: 3000 training and 2000 test
    # rows of a function of the problem class (low-dimensional, structure
    # on a short range), drawn with seed 1600 + 10 i + k for the i-th case
    # (see synthetic_cases)
    set.seed(1600L + 10L * match(set, names(synthetic_cases)) + k)
    g <- synthetic_cases[[set]](5000L)
    X <- g$x
    Y <- g$f + g$sd * stats::rnorm(nrow(X))
    tr <- seq_len(3000L)
    te <- 3000L + seq_len(2000L)
  } else {
    stop("unknown data set ", set)
  }
  if (is.null(tr)) {
    set.seed(seed)
    te <- sample(nrow(X), if (is.null(n_test)) round(0.1 * nrow(X)) else n_test)
    tr <- setdiff(seq_len(nrow(X)), te)
  }
  x <- X[tr, , drop = FALSE]
  mx <- colMeans(x)
  sx <- apply(x, 2L, stats::sd)
  my <- mean(Y[tr])
  sy <- stats::sd(Y[tr])
  std <- function(m) {
    m <- sweep(sweep(m, 2L, mx), 2L, sx, "/")
    colnames(m) <- paste0("x", seq_len(ncol(m)))
    m
  }
  list(x = std(x), y = (Y[tr] - my) / sy, xt = std(X[te, , drop = FALSE]),
       yt = (Y[te] - my) / sy, sy = sy)
}

# Test metrics in the target's units from a predictive mean and variance on
# the standardised scale.
metrics <- function(s, mu, v) {
  c(rmse = sqrt(mean((s$yt - mu)^2)) * s$sy,
    nlpd = -mean(stats::dnorm(s$yt, mu, sqrt(v), log = TRUE)) + log(s$sy))
}

# ---- the methods: each returns c(rmse, nlpd, fit, predict, M, K) ----------------

run_sgpr <- function(s, ...) {
  suppressMessages(library(sparsevgp))
  t0 <- cpu()
  fit <- sgpr(s$x, s$y, ...)
  t1 <- cpu()
  p <- predict(fit, s$xt, type = "response")
  t2 <- cpu()
  c(metrics(s, p$mean, p$var), fit = t1 - t0, predict = t2 - t1, M = nrow(fit$params$Z),
    K = if (is.null(fit$neighbours)) 0 else fit$neighbours$K)
}

run_gpgp <- function(s) {
  t0 <- cpu()
  fit <- GpGp::fit_model(s$y, s$x, X = matrix(1, nrow(s$x), 1),
                         covfun_name = "matern25_scaledim", silent = TRUE)
  t1 <- cpu()
  mu <- GpGp::predictions(fit, s$xt, X_pred = matrix(1, nrow(s$xt), 1))
  D <- ncol(s$x)
  cp <- fit$covparms
  xs <- sweep(s$x, 2L, cp[1L + seq_len(D)], "/")
  xts <- sweep(s$xt, 2L, cp[1L + seq_len(D)], "/")
  v <- numeric(nrow(s$xt))
  for (i in seq_len(nrow(s$xt))) {
    d2 <- colSums((t(xs) - xts[i, ])^2)
    nn <- order(d2)[1:60]
    K <- GpGp::matern25_scaledim(cp, rbind(s$x[nn, , drop = FALSE], s$xt[i, , drop = FALSE]))
    k <- K[1:60, 61]
    v[i] <- K[61, 61] - sum(k * solve(K[1:60, 1:60], k))
  }
  t2 <- cpu()
  c(metrics(s, mu, v), fit = t1 - t0, predict = t2 - t1, M = NA, K = 30)
}

run_gpboost <- function(s, approx) {
  suppressMessages(library(gpboost))
  t0 <- cpu()
  fit <- gpboost::fitGPModel(gp_coords = s$x, y = s$y, X = matrix(1, nrow(s$x), 1),
                             cov_function = "matern_ard", cov_fct_shape = 2.5,
                             gp_approx = approx, num_parallel_threads = 1L, seed = 1L)
  t1 <- cpu()
  p <- predict(fit, gp_coords_pred = s$xt, X_pred = matrix(1, nrow(s$xt), 1),
               predict_var = TRUE, predict_response = TRUE)
  t2 <- cpu()
  c(metrics(s, p$mu, p$var), fit = t1 - t0, predict = t2 - t1,
    M = if (approx == "full_scale_vecchia") 200 else NA,
    K = if (approx == "full_scale_vecchia") 30 else 20)
}

run_lagp <- function(s) {
  t0 <- cpu()
  d <- laGP::darg(list(mle = TRUE), s$x)
  g <- laGP::garg(list(mle = TRUE), s$y)
  p <- laGP::aGPsep(s$x, s$y, s$xt, d = d, g = g, verb = 0, omp.threads = 1)
  t1 <- cpu()
  # local approximate GPs fit at prediction time: all of it counts as fit
  c(metrics(s, p$mean, p$var), fit = t1 - t0, predict = 0, M = NA, K = NA)
}

run_gam <- function(s) {
  d <- data.frame(y = s$y, row = s$x[, 1], col = s$x[, 2])
  t0 <- cpu()
  fit <- mgcv::gam(y ~ s(row, col, k = 300), data = d)
  t1 <- cpu()
  p <- mgcv::predict.gam(fit, data.frame(row = s$xt[, 1], col = s$xt[, 2]), se.fit = TRUE)
  t2 <- cpu()
  c(metrics(s, p$fit, p$se.fit^2 + fit$sig2), fit = t1 - t0, predict = t2 - t1, M = NA, K = NA)
}

method_fun <- list(
  sgpr_default = function(s) run_sgpr(s),
  sgpr_K0 = function(s) run_sgpr(s, neighbours = 0),
  GpGp = run_gpgp,
  GPBoost_vecchia = function(s) run_gpboost(s, "vecchia"),
  GPBoost_VIF = function(s) run_gpboost(s, "full_scale_vecchia"),
  laGP = run_lagp,
  gam300 = run_gam,
  exact = function(s) {
    suppressMessages(library(sparsevgp))
    t0 <- cpu()
    fit <- gpr(s$x, s$y, kernel = kernel_matern52())
    t1 <- cpu()
    p <- predict(fit, s$xt, type = "response")
    t2 <- cpu()
    c(metrics(s, p$mean, p$var), fit = t1 - t0, predict = t2 - t1, M = nrow(s$x), K = 0)
  })
needs <- c(GpGp = "GpGp", GPBoost_vecchia = "gpboost", GPBoost_VIF = "gpboost", laGP = "laGP",
           gam300 = "mgcv")
cols <- c("data", "split", "method", "rmse", "nlpd", "fit", "predict", "M", "K", "peak_mb",
          "blas")

# ---- a child: one data set, split and method --------------------------------------

if ("--child" %in% args) {
  set <- opt("set", "")
  k <- as.integer(opt("split", "0"))
  m <- opt("method", "")
  s <- load_split(set, k)
  set.seed(k)
  r <- tryCatch(method_fun[[m]](s), error = function(e) {
    message(sprintf("%s on %s split %d failed: %s", m, set, k, conditionMessage(e)))
    NULL
  })
  if (!is.null(r)) {
    cat("RESULT", set, k, m, format(r[c("rmse", "nlpd")], digits = 6),
        format(r[c("fit", "predict")], digits = 4), r[["M"]], r[["K"]],
        format(vm_hwm_mb(), digits = 5), blas_name(), sep = "\t")
    cat("\n")
  }
  quit(save = "no")
}

# ---- the parent: every configuration in its own process ---------------------------

have <- function(p) requireNamespace(p, quietly = TRUE)
cat("BLAS:", extSoftVersion()[["BLAS"]], "\n")
cat("peers:", paste(vapply(unique(needs), function(p) {
  if (have(p)) paste(p, utils::packageVersion(p)) else paste(p, "(not installed)")
}, ""), collapse = ", "), "\n")
configs <- list()
labels <- character()
for (set in sets) {
  if (set %in% c("argo", "jason3") && !have("GpGp")) next
  if (set == "rainfall" && !have("fields")) next
  if (set == "ato" && !have("hetGP")) next
  # (only the data of ggplot2 is read: its namespace need not load)
  if (set == "diamonds" && !have_data("diamonds", "ggplot2")) next
  if (set == "lidar" && !have_data("LIDAR", "MBA")) next
  if (set == "bcef" && !have_data("BCEF", "spNNGP")) next
  for (k in splits) {
    for (m in methods) {
      if (m %in% names(needs) && !have(needs[[m]])) next
      if (m == "gam300" && set != "volcano") next
      # the exact GP (gpr(), Matern 5/2): small sets only
      if (m == "exact" && !(set %in% c(uci_small, "rainfall"))) next
      configs[[length(configs) + 1L]] <- c(sprintf("--set=%s", set), sprintf("--split=%d", k),
                                           sprintf("--method=%s", m),
                                           if (nzchar(peers)) sprintf("--peers=%s", peers),
                                           sprintf("--data=%s", data_dir),
                                           if (nzchar(opt("sources", "")))
                                             sprintf("--sources=%s", opt("sources", "")))
      labels <- c(labels, sprintf("%s split %d %s", set, k, m))
    }
  }
}
res <- run_children(configs, labels, cols, text = c("data", "method", "blas"))
out <- opt("out", "")
if (nzchar(out)) utils::write.csv(res, out, row.names = FALSE)
cat("\nMeans over splits (CPU seconds, user + system; peak resident MB of the process):\n")
agg <- stats::aggregate(cbind(rmse, nlpd, fit, predict, M, K, peak_mb) ~ data + method, res,
                        mean, na.action = stats::na.pass)
print(agg[order(agg$data, agg$nlpd), ], digits = 4, row.names = FALSE)
