# Shared by the benchmarks that run each configuration in a fresh Rscript
# process, so that peak memory and time are those of one configuration
# alone (bench_scale.R, bench_stream_orthogonal.R, bench_cluster.R). Each
# sources this file first (from its own folder) and gets
#   args, opt()     its command-line arguments and their --name=value options;
#   lib             --lib=, the library sparsevgp is loaded from (also in
#                   the children);
#   self            the script's path, to run it again with --child;
#   vm_hwm_mb()     the peak memory of this process (Linux /proc);
#   blas_name()     the BLAS this process loaded;
#   run_children()  the parent's loop: the script once per configuration,
#                   its tab-separated RESULT lines read back into a table.
# Not run by R CMD check.

args <- commandArgs(trailingOnly = TRUE)
opt <- function(name, default) {
  hit <- grep(sprintf("^--%s=", name), args, value = TRUE)
  if (length(hit)) sub(sprintf("^--%s=", name), "", hit[length(hit)]) else default
}
lib <- opt("lib", "")
if (nzchar(lib)) .libPaths(c(lib, .libPaths()))
self <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))

vm_hwm_mb <- function() {
  s <- readLines("/proc/self/status")
  as.numeric(sub("^VmHWM:\\s*([0-9]+) kB$", "\\1", grep("^VmHWM:", s, value = TRUE))) / 1024
}

blas_name <- function() {
  maps <- readLines("/proc/self/maps")
  if (any(grepl("openblas", maps))) "OpenBLAS" else
    if (any(grepl("libmkl", maps))) "MKL" else "R's reference BLAS"
}

# Run this script with --child and each element of `configs` (a character
# vector of further options, with `label` naming it in messages) and read
# the RESULT lines into a data frame with the columns `cols`; the columns
# other than `text` are numbers.
run_children <- function(configs, labels, cols, text) {
  rows <- list()
  for (i in seq_along(configs)) {
    out <- system2(file.path(R.home("bin"), "Rscript"),
                   c(shQuote(self), "--child", configs[[i]],
                     if (nzchar(lib)) sprintf("--lib=%s", lib)),
                   stdout = TRUE, stderr = FALSE)
    lines <- grep("^RESULT\t", out, value = TRUE)
    if (!length(lines)) {
      message(sprintf("%s: failed", labels[[i]]))
      next
    }
    for (line in lines) {
      r <- as.data.frame(t(strsplit(line, "\t")[[1L]][-1L]), stringsAsFactors = FALSE)
      names(r) <- cols
      print(r, row.names = FALSE)
      rows[[length(rows) + 1L]] <- r
    }
  }
  res <- do.call(rbind, rows)
  num <- setdiff(cols, text)
  res[num] <- lapply(res[num], function(v) suppressWarnings(as.numeric(v)))
  res
}
