# The grid of starting values of the regression models (R/start.R): its CPU
# time and its choice, with and without neighbours, on the benchmark sets
# of bench_peers.R (split 0, standardised on the training part). Run it
# once per library to compare two versions of the package on the same
# machine, alternating the libraries with --reps:
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_start_grid.R \
#     --libs=<library A>,<library B> [--peers=<library of fields>] \
#     [--data=../shared/data/regression] \
#     [--sets=kin8nm,power,volcano,concrete] [--reps=3]
# Each (library, set, repetition) runs in a fresh Rscript process. The grid
# is called as a fit calls it: without neighbours with RBF and the fit's
# automatic M (the grid caps its inducing inputs at 200), with 20
# neighbours with Matern 5/2 and the M of the trial's model with neighbours
# (30 here).
# Reports CPU seconds (user + system) of each grid and the multiplier and
# noise share it chose. Not run by R CMD check.

here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "bench_child.R"))
data_dir <- opt("data", file.path("..", "shared", "data", "regression"))
sets <- strsplit(opt("sets", "kin8nm,power,volcano,concrete"), ",")[[1L]]

cpu <- function() {
  t <- proc.time()
  t[["user.self"]] + t[["sys.self"]]
}

# (rainfall needs fields, from the library of the peers)
peers <- opt("peers", "")
if (nzchar(peers)) .libPaths(c(.libPaths(), peers))

if ("--child" %in% args) {
  suppressMessages(library(sparsevgp))
  ns <- asNamespace("sparsevgp")
  set <- opt("set", "")
  # the loader of bench_peers.R
  src <- readLines(file.path(here, "bench_peers.R"))
  a <- grep("^pkg_data <- function", src)
  b <- grep("^metrics <- function", src)
  uci_small <- c("concrete", "energy", "yacht", "bostonHousing")
  eval(parse(text = src[a:(b - 1L)]))
  s <- load_split(set, 0L)
  M <- ns$.auto_max_inducing(nrow(s$x))
  one <- function(kernel, neighbours, M) {
    t0 <- cpu()
    st <- ns$.start_regression(kernel, s$x, s$y, M = M, neighbours = neighbours)
    t1 <- cpu()
    ls <- st$kernel$lengthscale / apply(s$x, 2L, stats::sd)
    sprintf("%.3f\t%.4g\t%.3g", t1 - t0, exp(mean(log(ls))), st$noise / stats::var(s$y))
  }
  cat("RESULT", set, one(kernel_rbf(), 0L, M), one(kernel_matern52(), 20L, 30L), blas_name(),
      sep = "\t")
  cat("\n")
  quit(save = "no")
}

libs <- strsplit(opt("libs", ""), ",")[[1L]]
reps <- as.integer(opt("reps", "3"))
rows <- list()
for (r in seq_len(reps)) for (set in sets) for (l in libs) {
  out <- system2(file.path(R.home("bin"), "Rscript"),
                 c(self, "--child", paste0("--lib=", l), paste0("--set=", set),
                   paste0("--data=", data_dir), paste0("--peers=", peers)), stdout = TRUE)
  hit <- strsplit(grep("^RESULT", out, value = TRUE), "\t")[[1L]]
  rows[[length(rows) + 1L]] <- data.frame(
    lib = basename(l), set = set, rep = r,
    cpu_K0 = as.numeric(hit[3L]), c_K0 = as.numeric(hit[4L]), share_K0 = as.numeric(hit[5L]),
    cpu_K20 = as.numeric(hit[6L]), c_K20 = as.numeric(hit[7L]), share_K20 = as.numeric(hit[8L]),
    blas = hit[9L])
}
res <- do.call(rbind, rows)
print(res, row.names = FALSE)
cat("\nmedian CPU s over the repetitions:\n")
print(stats::aggregate(cbind(cpu_K0, cpu_K20) ~ lib + set, res, stats::median), row.names = FALSE)
