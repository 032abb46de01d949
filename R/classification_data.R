# The classification data sets of Passerello (2022), shipped in inst/extdata (see the
# README there for provenance).

.classification_files <- list(
  banana = list(file = "banana.csv", header = FALSE),
  platform = list(file = "platform.csv", header = FALSE),
  crabs = list(file = "crabs.csv", header = TRUE),
  heart = list(file = "heart.csv", header = TRUE),
  ionosphere = list(file = "ionosphere.txt", header = FALSE),
  breast_cancer = list(file = "breast-cancer-diagnostic.txt", header = FALSE),
  pima = list(file = "pima-diabetes.csv", header = FALSE))

#' Binary classification data sets of Passerello (2022)
#'
#' Loads one of the data sets of Passerello's (2022) experiments on sparse
#' Gaussian process classification (Passerello 2022, Table 5.1), with the
#' preprocessing of the thesis author's code: the label is the 0/1 column
#' \code{y}, the other columns are the inputs, unstandardised.
#'
#' \describe{
#'   \item{banana}{400 x 2, the two-dimensional banana toy of GPflow's
#'     documentation.}
#'   \item{platform}{50 x 1, a one-dimensional toy (GPflow documentation).}
#'   \item{crabs}{200 x 6, Leptograpsus crabs; the label is the species
#'     (\code{Color}), as in the author's code, and sex is an input.}
#'   \item{heart}{270 x 13, Statlog heart disease (OpenML 53).}
#'   \item{ionosphere}{351 x 33, UCI radar returns (the constant second
#'     attribute dropped).}
#'   \item{breast_cancer}{569 x 30, UCI Breast Cancer Wisconsin
#'     (Diagnostic); \code{y = 1} is malignant.}
#'   \item{pima}{768 x 8, Pima Indians diabetes.}
#' }
#'
#' @param name the data set.
#' @return A data frame with the inputs and the label \code{y} (0/1).
#' @source The copies in the thesis author's repository
#'   (GiovanniPasserello/SHGP, MIT licence), originally from GPflow's
#'   documentation, OpenML and the UCI repository; see
#'   \code{system.file("extdata", "classification", "README.md", package =
#'   "sparsevgp")}.
#' @references Passerello, G. (2022). Heteroscedastic inducing point
#'   selection for sparse Gaussian process classification. MEng thesis,
#'   Imperial College London.
#' @examples
#' d <- classification_data("banana")
#' dim(d)
#' table(d$y)
#' plot(x2 ~ x1, data = d, col = y + 1, pch = 16, cex = 0.6)
#' @export
classification_data <- function(name = c("banana", "crabs", "heart", "ionosphere",
                                         "breast_cancer", "pima", "platform")) {
  name <- match.arg(name)
  spec <- .classification_files[[name]]
  path <- system.file("extdata", "classification", spec$file, package = "sparsevgp")
  if (!nzchar(path)) stop("the data files are missing from the installation", call. = FALSE)
  raw <- utils::read.csv(path, header = spec$header)
  d <- switch(name,
    banana = data.frame(x1 = raw[[1L]], x2 = raw[[2L]], y = raw[[3L]]),
    platform = data.frame(x = raw[[1L]], y = raw[[2L]]),
    crabs = data.frame(raw[c("Sex", "FrontalLobeSize", "RearWidth", "CarapaceLength",
                             "CarapaceWidth", "BodyDepth")], y = raw$Color),
    heart = data.frame(raw[-ncol(raw)], y = raw[[ncol(raw)]]),
    ionosphere = {
      x <- raw[-c(2L, ncol(raw))]
      names(x) <- sprintf("a%02d", c(1L, 3:34))
      data.frame(x, y = raw[[ncol(raw)]])
    },
    breast_cancer = {
      x <- raw[-(1:2)]
      names(x) <- sprintf("f%02d", 1:30)
      data.frame(x, y = raw[[2L]])
    },
    pima = {
      x <- raw[-ncol(raw)]
      names(x) <- c("pregnant", "glucose", "pressure", "triceps", "insulin", "mass",
                    "pedigree", "age")
      data.frame(x, y = raw[[ncol(raw)]])
    })
  d$y <- as.integer(d$y)
  d
}
