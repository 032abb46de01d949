# bench_shards_vif.R: what neighbours within a shard cost. sgpr(neighbours
# = K) on data = shards() chooses each row's neighbours among the rows of
# its own shard (R/shards_vif.R); this compares, on the volcano surface
# (datasets::volcano, 87 x 61 = 5307 cells, height in m against row and
# column), the test accuracy of
#   - one process: neighbours over all training rows;
#   - 2 spatial shards: the rows split into the north and south halves
#     (row <= 43 and row > 43), as hosts that each hold a region would;
#   - 2 random shards: the rows split at random into two halves;
#   - and, for scale, one process without neighbours (K = 0).
# The shards are fitted in one process with the neighbour sets restricted
# to the shards (the option sparsevgp.neighbour_groups), which gives the
# fit of shards() on 2 workers (tests/testthat/test-shards-vif.R checks
# this to 1e-8), and predicted as shards() predicts: each test point from
# the shard of its nearest training row (.vif_predict_groups()); one spatial
# case is also run on 2 PSOCK workers as a check (its likelihood and
# predictions against one process with the groups at its parameters). Each of `reps` random
# splits holds out 20% of the cells; reported: the test NLPD (mean negative
# log predictive density of the heights, nats) and RMSE (m), and the CPU
# seconds of each fit, for K neighbours and the automatic M.
#
# Usage (from the package root, with sparsevgp installed):
#   Rscript inst/bench/bench_shards_vif.R [--K=10] [--reps=3] [--lib=<library>]
# Results: inst/bench/results/bench_shards_vif.txt. Not run by R CMD check.

args <- commandArgs(trailingOnly = TRUE)
opt <- function(name, default) {
  a <- grep(sprintf("^--%s=", name), args, value = TRUE)
  if (length(a)) sub(sprintf("^--%s=", name), "", a[1L]) else default
}
lib <- opt("lib", "")
if (nzchar(lib)) .libPaths(c(lib, .libPaths()))
suppressPackageStartupMessages(library(sparsevgp))
K <- as.integer(opt("K", "10"))
reps <- as.integer(opt("reps", "3"))

v <- datasets::volcano
d <- data.frame(row = as.vector(row(v)), col = as.vector(col(v)), height = as.vector(v))
nlpd <- function(y, m, s2) mean(0.5 * log(2 * pi * s2) + 0.5 * (y - m)^2 / s2)

fit_grouped <- function(train, groups, ...) {
  old <- options(sparsevgp.neighbour_groups = groups)
  on.exit(options(old))
  sgpr(height ~ row + col, data = train, neighbours = K, ...)
}

score <- function(f, test, groups = NULL) {
  x <- as.matrix(test[, c("row", "col")])
  p <- if (is.null(groups)) predict(f, test) else sparsevgp:::.vif_predict_groups(f, x, groups)
  s2 <- pmax(p$var, 0) + f$params$noise
  c(nlpd = nlpd(test$height, p$mean, s2), rmse = sqrt(mean((test$height - p$mean)^2)))
}

cpu <- function(expr) {
  t <- system.time(r <- expr)
  list(value = r, cpu = t[["user.self"]] + t[["sys.self"]])
}

rows <- list()
for (r in seq_len(reps)) {
  set.seed(r)
  test_i <- sort(sample.int(nrow(d), round(0.2 * nrow(d))))
  train <- d[-test_i, ]
  test <- d[test_i, ]
  spatial <- ifelse(train$row <= 43, 1L, 2L)
  random <- sample(rep(1:2, length.out = nrow(train)))
  set.seed(100 + r)
  one <- cpu(sgpr(height ~ row + col, data = train, neighbours = K))
  set.seed(100 + r)
  k0 <- cpu(sgpr(height ~ row + col, data = train, neighbours = 0))
  set.seed(100 + r)
  sp <- cpu(fit_grouped(train, spatial))
  set.seed(100 + r)
  rn <- cpu(fit_grouped(train, random))
  rows[[length(rows) + 1L]] <- rbind(
    data.frame(split = r, layout = "one process", t(score(one$value, test)), cpu_s = one$cpu),
    data.frame(split = r, layout = "2 spatial shards", t(score(sp$value, test, spatial)),
               cpu_s = sp$cpu),
    data.frame(split = r, layout = "2 random shards", t(score(rn$value, test, random)),
               cpu_s = rn$cpu),
    data.frame(split = r, layout = "no neighbours (K = 0)", t(score(k0$value, test)),
               cpu_s = k0$cpu))
  if (r == 1L) {
    # the spatial layout on 2 PSOCK workers: the same fit and predictions
    cl <- parallel::makeCluster(2)
    parts <- split(train, spatial)
    sh <- shards(cl, function(i, parts) parts[[i]], parts = parts)
    set.seed(100 + r)
    fs <- sgpr(height ~ row + col, data = sh, neighbours = K)
    ps <- predict(fs, test, cluster = sh)
    # one process with the groups, at the shards fit's parameters and with
    # its neighbour sets (the seeds of the workers' orders); whole fits
    # agree only up to the choice among candidates at exactly equal
    # distances on the grid, which rounding at the 1e-12 level decides
    ns <- asNamespace("sparsevgp")
    gs <- rep(1:2, vapply(parts, nrow, 0L))
    fg <- fit_grouped(do.call(rbind, parts), gs, inducing = fs$params$Z, kernel = fs$kernel,
                      optimize = FALSE)
    fg$params <- fs$params
    nb <- fg$neighbours
    nb$seeds <- fs$neighbours$seeds
    nb$orders <- lapply(1:2, function(i) ns$.nb_order(sum(nb$groups == i), nb$seeds[i]))
    fg$neighbours <- ns$.nb_choose(fg, fs$neighbours$at, nb)
    fg <- ns$.build_or_fit(fg, FALSE)
    pg <- ns$.vif_predict_groups(fg, as.matrix(test[, c("row", "col")]), gs)
    check <- c(bound = abs(fs$bound - fg$bound) / abs(fg$bound),
               mean = max(abs(ps$mean - pg$mean)) / max(abs(pg$mean)))
    parallel::stopCluster(cl)
  }
}
res <- do.call(rbind, rows)
cat(sprintf("volcano, %d training and %d test cells per split, K = %d neighbours, automatic M\n",
            nrow(train), nrow(test), K))
cat(sprintf("R %s, BLAS: %s\n", getRversion(), extSoftVersion()[["BLAS"]]))
print(res, digits = 4, row.names = FALSE)
cat("\nmean over splits:\n")
print(aggregate(cbind(nlpd, rmse, cpu_s) ~ layout, res, mean), digits = 4, row.names = FALSE)
cat(sprintf("\nspatial shards on 2 PSOCK workers against one process with the groups at their parameters and neighbour sets (split 1): relative difference of the likelihood %.1e, of the predictive means %.1e\n",
            check[["bound"]], check[["mean"]]))
