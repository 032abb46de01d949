#' Snelson's one-dimensional regression data
#'
#' The toy data set of Snelson and Ghahramani (2006), used throughout the
#' sparse Gaussian process literature and in the figures of Fernlund's (2022)
#' thesis on orthogonal inducing points: 200 noisy observations of a smooth
#' function on [0, 6], and 301 evenly spaced test inputs on [-3, 10].
#'
#' @format \code{snelson}: a data frame with 200 rows and columns \code{x}
#'   (input) and \code{y} (response). \code{snelson_test}: a data frame with
#'   301 rows and one column \code{x}.
#' @source The copies distributed with GPflow's documentation (Apache-2.0
#'   licence), originally from Edward Snelson's SPGP code. Built by
#'   \code{data-raw/snelson.R} in the package sources.
#' @references Snelson, E. and Ghahramani, Z. (2006). Sparse Gaussian
#'   processes using pseudo-inputs. Advances in Neural Information Processing
#'   Systems 18.
#' @examples
#' plot(y ~ x, data = snelson)
#' range(snelson_test$x)
"snelson"

#' @rdname snelson
"snelson_test"
