#!/bin/sh
# Prepare a machine to build, install and check sparsevgp from this source
# tree (the first command of README.md). On Debian or Ubuntu: apt-get update,
# then R with its headers and compilers (r-base-dev), the packages that build
# the vignettes (knitr, rmarkdown, pandoc) and run R CMD check with the tests
# (testthat, qpdf), without recommended packages (with them, apt pulls in
# hundreds more). Then, and on machines without apt-get, the R packages that R
# still cannot load are installed with install.packages() from the repository
# R is configured with (tools/install_suggests.R).
# Run it as root, or as a user who may use sudo, from the top of the tree:
#   sh tools/setup.sh
set -e
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    r-base-dev r-cran-knitr r-cran-rmarkdown r-cran-testthat pandoc qpdf
else
  echo "setup: no apt-get on this machine: install R, a C compiler and pandoc as your system does"
fi
Rscript tools/install_suggests.R
if ! Rscript -e 'quit(status = !rmarkdown::pandoc_available("1.12.3"))' >/dev/null 2>&1; then
  echo "setup: pandoc is missing, and the vignettes need it: install pandoc, or build without them (R CMD build --no-build-vignettes .)" >&2
  exit 1
fi
echo "setup: done"
