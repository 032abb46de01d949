# Plots of regression fits. One input: the data, the predictive mean, a band
# of +/- 2 sd for f and dashed lines for y, and the inducing inputs as ticks.
# Two inputs: the mean surface with the inducing inputs. More inputs:
# observed against predicted with +/- 2 sd bars.

#' Plot a Gaussian process regression fit
#'
#' @param x a fitted regression model.
#' @param n number of grid points per input for the curve or surface.
#' @param xlab,ylab,main axis labels and title; sensible defaults.
#' @param ... further graphical parameters passed to \code{plot()}.
#' @return The plotted data, invisibly: a data frame of the grid, mean and
#'   standard deviations (one or two inputs), or of observed and predicted
#'   values.
#' @examples
#' fit <- gpr(y ~ x, data = snelson[1:80, ])
#' plot(fit)
#' @export
plot.sparsevgp <- function(x, n = 200L, xlab = NULL, ylab = NULL, main = NULL, ...) {
  D <- ncol(x$x)
  if (is.null(main)) main <- x$model
  if (D == 1L) return(invisible(.plot_1d(x, n, xlab, ylab, main, ...)))
  if (D == 2L) {
    return(invisible(.plot_2d(x, min(n, 60L), xlab, ylab, main, ...)))
  }
  invisible(.plot_observed(x, xlab, ylab, main, ...))
}

.input_names <- function(object) {
  cn <- colnames(object$x)
  if (is.null(cn)) cn <- paste0("x", seq_len(ncol(object$x)))
  cn
}

# A grid of inputs as a model matrix: predict() takes it as is, also for
# formula fits whose columns are transformations of the data's variables.
.grid_newdata <- function(object, grid) {
  colnames(grid) <- colnames(object$x)
  grid
}

.plot_1d <- function(object, n, xlab, ylab, main, ...) {
  xr <- range(object$x[, 1L])
  pad <- 0.05 * diff(xr)
  if (pad == 0) pad <- 1
  grid <- matrix(seq(xr[1L] - pad, xr[2L] + pad, length.out = n), ncol = 1L)
  nd <- .grid_newdata(object, grid)
  pf <- predict(object, nd, type = "latent")
  g <- grid[, 1L]
  gy <- g
  # the noise may be known only at the training inputs (a vector of
  # variances, or a noise formula in variables other than the input): then
  # the y band is drawn there
  py <- if (identical(object$noise_model$kind, "known")) NULL else
    tryCatch(predict(object, nd, type = "response"), error = function(e) NULL)
  if (is.null(py)) {
    o <- order(object$x[, 1L])
    gy <- object$x[o, 1L]
    py <- predict(object, type = "response")
    py <- list(mean = py$mean[o], var = py$var[o])
  }
  sf <- sqrt(pf$var)
  sy <- sqrt(py$var)
  if (is.null(xlab)) xlab <- .input_names(object)[1L]
  if (is.null(ylab)) ylab <- "y"
  ylim <- range(object$y, py$mean - 2 * sy, py$mean + 2 * sy)
  graphics::plot(object$x[, 1L], object$y, xlab = xlab, ylab = ylab, main = main,
                 ylim = ylim, pch = 16, cex = 0.6, col = grDevices::grey(0.45), ...)
  graphics::polygon(c(g, rev(g)), c(pf$mean - 2 * sf, rev(pf$mean + 2 * sf)),
                    col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
  graphics::lines(gy, py$mean - 2 * sy, lty = 2, col = "steelblue4")
  graphics::lines(gy, py$mean + 2 * sy, lty = 2, col = "steelblue4")
  graphics::lines(g, pf$mean, lwd = 2, col = "steelblue4")
  marks <- .inducing_marks(object)
  # symbols on the lower edge, so that the two sets of an osgpr fit differ
  # in shape as well as colour (legible in grey scale)
  y_edge <- graphics::par("usr")[3L]
  for (mk in marks) {
    graphics::points(mk$at, rep(y_edge, length(mk$at)), pch = mk$pch, col = mk$col,
                     lwd = 2, xpd = TRUE)
  }
  leg <- c("data", "mean", "f: +/- 2 sd", "y: +/- 2 sd",
           vapply(marks, function(m) m$label, ""))
  graphics::legend("topleft", legend = leg, bty = "n", cex = 0.8,
                   pch = c(16, NA, 15, NA, vapply(marks, function(m) m$pch, 0)),
                   lty = c(NA, 1, NA, 2, rep(NA, length(marks))),
                   lwd = c(NA, 2, NA, 1, rep(2, length(marks))),
                   col = c(grDevices::grey(0.45), "steelblue4",
                           grDevices::adjustcolor("steelblue", 0.3), "steelblue4",
                           vapply(marks, function(m) m$col, "")))
  out <- data.frame(x = g, mean = pf$mean, sd_f = sf)
  if (length(gy) == length(g)) out$sd_y <- sy
  out
}

# Inducing inputs to mark on plots: list(list(at, col, pch, label)).
.inducing_marks <- function(object) {
  out <- list()
  if (!is.null(object$params$Z)) {
    out[[length(out) + 1L]] <- list(at = object$params$Z[, 1L], col = "firebrick",
                                    pch = 3, label = "inducing inputs")
  }
  if (!is.null(object$params$O)) {
    out[[length(out) + 1L]] <- list(at = object$params$O[, 1L], col = "darkorange",
                                    pch = 2, label = "orthogonal inputs")
  }
  out
}

.plot_2d <- function(object, n, xlab, ylab, main, ...) {
  r1 <- range(object$x[, 1L])
  r2 <- range(object$x[, 2L])
  g1 <- seq(r1[1L], r1[2L], length.out = n)
  g2 <- seq(r2[1L], r2[2L], length.out = n)
  grid <- as.matrix(expand.grid(g1, g2))
  p <- predict(object, .grid_newdata(object, grid))
  zm <- matrix(p$mean, n, n)
  nm <- .input_names(object)
  if (is.null(xlab)) xlab <- nm[1L]
  if (is.null(ylab)) ylab <- nm[2L]
  graphics::image(g1, g2, zm, col = grDevices::hcl.colors(30, "viridis"),
                  xlab = xlab, ylab = ylab, main = main, ...)
  graphics::contour(g1, g2, zm, add = TRUE, col = "white", labcex = 0.6)
  graphics::points(object$x[, 1L], object$x[, 2L], pch = 16, cex = 0.3,
                   col = grDevices::grey(0.8))
  if (!is.null(object$params$Z)) {
    graphics::points(object$params$Z[, 1L], object$params$Z[, 2L], pch = 4,
                     col = "firebrick", lwd = 2)
  }
  if (!is.null(object$params$O)) {
    graphics::points(object$params$O[, 1L], object$params$O[, 2L], pch = 3,
                     col = "darkorange", lwd = 2)
  }
  data.frame(grid, mean = p$mean, sd = sqrt(p$var))
}

.plot_observed <- function(object, xlab, ylab, main, ...) {
  p <- predict(object, type = "response")
  s <- sqrt(p$var)
  if (is.null(xlab)) xlab <- "observed"
  if (is.null(ylab)) ylab <- "predicted (+/- 2 sd)"
  lim <- range(object$y, p$mean - 2 * s, p$mean + 2 * s)
  graphics::plot(object$y, p$mean, xlab = xlab, ylab = ylab, main = main,
                 xlim = range(object$y), ylim = lim, pch = 16, cex = 0.6,
                 col = "steelblue4", ...)
  graphics::segments(object$y, p$mean - 2 * s, object$y, p$mean + 2 * s,
                     col = grDevices::adjustcolor("steelblue", 0.3))
  graphics::abline(0, 1, lty = 2, col = grDevices::grey(0.4))
  data.frame(observed = object$y, predicted = p$mean, sd = s)
}
