# Install the R packages that building the vignettes and running the tests
# of sparsevgp need (knitr, rmarkdown, testthat), when R cannot load them:
# on a machine without apt-get, or with an R that does not see Debian's
# packages. Run by tools/setup.sh and by .ci/run when apt-get fails:
#   Rscript tools/install_suggests.R
#
# Packages come from the repository R is configured with
# (getOption("repos")); the cloud mirror of CRAN stands in only where none is
# set ("@CRAN@"). Besides the missing packages, it installs what they depend
# on (Depends, Imports, LinkingTo, recursively) where that is missing or
# older than the version they require, and nothing else: an R that already
# has most dependencies compiles only the few it needs.

want <- c("knitr", "rmarkdown", "testthat")
loads <- function(p) isTRUE(suppressWarnings(requireNamespace(p, quietly = TRUE)))
need <- want[!vapply(want, loads, TRUE)]
if (!length(need)) {
  cat("setup: R loads", paste(want, collapse = ", "), "\n")
  quit(save = "no")
}

repos <- getOption("repos")
if (!length(repos)) repos <- c(CRAN = "@CRAN@")
repos[repos == "@CRAN@"] <- "https://cloud.r-project.org"

# the first library R may write to, else the user's own (created), which R
# then finds in later sessions too
libs <- .libPaths()
lib <- libs[file.access(libs, 2L) == 0L][1L]
if (is.na(lib)) {
  lib <- path.expand(strsplit(Sys.getenv("R_LIBS_USER"), .Platform$path.sep)[[1L]][1L])
  dir.create(lib, recursive = TRUE, showWarnings = FALSE)
  .libPaths(c(lib, libs))
}

ap <- utils::available.packages(repos = repos)
# the dependencies of package p in the repository, with the least version
# each must have (NA: any)
requires <- function(p) {
  f <- ap[p, intersect(c("Depends", "Imports", "LinkingTo"), colnames(ap))]
  x <- trimws(unlist(strsplit(f[!is.na(f)], ",")))
  x <- x[nzchar(x)]
  data.frame(package = sub("^([[:alnum:].]+).*$", "\\1", x),
             version = ifelse(grepl(">=", x, fixed = TRUE),
                              sub("^.*>=[[:space:]]*([^)[:space:]]+).*$", "\\1", x), NA),
             stringsAsFactors = FALSE)
}
installed <- function(p) {
  d <- suppressWarnings(utils::packageDescription(p, lib.loc = .libPaths()))
  if (is.list(d)) d$Version else NA_character_
}
todo <- need
queue <- need
while (length(queue)) {
  p <- queue[1L]
  queue <- queue[-1L]
  if (!(p %in% rownames(ap))) stop("setup: the repository has no package ", p, call. = FALSE)
  r <- requires(p)
  r <- r[r$package %in% rownames(ap) & !(r$package %in% todo), , drop = FALSE]
  for (i in seq_len(nrow(r))) {
    v <- installed(r$package[i])
    if (is.na(v) || (!is.na(r$version[i]) &&
                     package_version(v) < package_version(r$version[i]))) {
      todo <- c(todo, r$package[i])
      queue <- c(queue, r$package[i])
    }
  }
}
cat("setup: installing", paste(todo, collapse = ", "), "into", lib, "from",
    paste(repos, collapse = ", "), "\n")
utils::install.packages(todo, lib = lib, repos = repos, dependencies = FALSE)
bad <- want[!vapply(want, loads, TRUE)]
if (length(bad)) stop("setup: R still cannot load ", paste(bad, collapse = ", "), call. = FALSE)
