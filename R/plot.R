# Plots of every model. which = "fit": for regression with one input the
# data, the predictive mean and intervals for f and for y, and the inducing
# inputs; two inputs: an image of the mean (or sd) with a colour key, the
# data and the inducing inputs; more inputs: observed against predicted with
# prediction intervals. Classifiers are drawn by R/classification.R.
# which = "convergence": the bound during training (fit$optim$trail, stage
# after stage, and fit$optim$stages), the bound after each selection pass
# (pgpr's double loop, reinit_inducing()), or Adam's minibatch estimates.
# which = "residuals": Pearson residuals against fitted values.

#' Plot a Gaussian process regression fit
#'
#' \code{which = "fit"} draws the fitted model on the scale of the data,
#' with axes labelled by the names of the input and the response:
#' \itemize{
#'   \item one input: the data, the predictive mean, a band for the latent
#'     function \eqn{f} (a confidence band, of coverage \code{level}),
#'     dashed lines for new observations \eqn{y} (a prediction band;
#'     \code{noise = FALSE} leaves them out) and the inducing inputs as
#'     marks on the lower edge (\code{inducing = FALSE} leaves them out);
#'   \item two inputs: an image of the predictive mean (\code{what =
#'     "sd"}: of the standard deviation of \eqn{f}) with a colour key and
#'     contours, the data (white points) and the inducing inputs;
#'   \item more inputs: the predicted against the observed response, with
#'     prediction intervals.
#' }
#' \code{which = "convergence"} shows how training went: the best bound
#' after each evaluation of the objective, stage after stage, with the bound
#' after each stage (\code{fit$optim$trail} and \code{fit$optim$stages});
#' for a fit of \code{\link{reinit_inducing}()} the bound after each
#' selection pass against \eqn{M} (or against the pass when \eqn{M} does not
#' change); for minibatch fits the minibatch estimates of the bound with
#' their running mean. \code{which = "residuals"} plots the Pearson
#' residuals (see \code{\link{residuals.sparsevgp}}) against the fitted
#' values, with lines at 0 and \eqn{\pm 2}{+/- 2}.
#'
#' @param x a fitted regression model.
#' @param which \code{"fit"}, \code{"convergence"} or \code{"residuals"}.
#' @param what for two inputs: \code{"mean"} or \code{"sd"} (the standard
#'   deviation of \eqn{f}).
#' @param n number of grid points per input for the curve or surface.
#' @param level the coverage of the bands and intervals.
#' @param noise if \code{FALSE}, the band for new observations is not drawn
#'   (one input).
#' @param inducing if \code{FALSE}, the inducing inputs are not drawn.
#' @param xlab,ylab,main axis labels and title; by default the names of the
#'   input and the response, and a short description of the model.
#' @param ... further graphical parameters passed to \code{plot()} or
#'   \code{image()}.
#' @return The plotted data, invisibly: a data frame of the grid, mean and
#'   standard deviations (one or two inputs), of observed and predicted
#'   values, of the bound during training, or of fitted values and
#'   residuals.
#' @examples
#' fit <- gpr(y ~ x, data = snelson[1:80, ])
#' plot(fit)
#' plot(fit, which = "convergence")
#' plot(fit, which = "residuals")
#'
#' # a surface: the mean with a colour key, then its uncertainty
#' v <- data.frame(row = c(row(volcano)), col = c(col(volcano)),
#'                 height = c(volcano))[seq(1, length(volcano), by = 7), ]
#' s <- sgpr(height ~ row + col, data = v, inducing = 40)
#' plot(s)
#' plot(s, what = "sd")
#' @export
plot.sparsevgp <- function(x, which = c("fit", "convergence", "residuals"),
                           what = c("mean", "sd"), n = 200L, level = 0.95, noise = TRUE,
                           inducing = TRUE, xlab = NULL, ylab = NULL, main = NULL, ...) {
  which <- match.arg(which)
  what <- match.arg(what)
  level <- .check_level(level)
  n <- .check_grid_n(n)
  noise <- .check_flag(noise, "noise")
  inducing <- .check_flag(inducing, "inducing")
  if (which == "convergence") return(invisible(.plot_convergence(x, xlab, ylab, main, ...)))
  if (which == "residuals") return(invisible(.plot_residuals(x, xlab, ylab, main, ...)))
  D <- ncol(x$x)
  if (is.null(main)) main <- .plot_title(x)
  if (D == 1L) return(invisible(.plot_1d(x, n, level, noise, inducing, xlab, ylab, main, ...)))
  if (D == 2L) {
    return(invisible(.plot_2d(x, what, min(n, 60L), inducing, xlab, ylab, main, ...)))
  }
  invisible(.plot_observed(x, level, xlab, ylab, main, ...))
}

# A short title: the model and its number of inducing inputs (long labels
# are cut off in panels of a multi-figure layout).
.plot_title <- function(object) {
  M <- NROW(object$params$Z)
  name <- switch(class(object)[1L],
                 gpr = "Exact GP",
                 sgpr = "SGPR",
                 osgpr = if (identical(object$type, "odvgp")) "ODGPR" else "SOLVE-GPR",
                 pgpr = "PGPR",
                 svgp = sprintf("SVGP (%s)", c(bernoulli = "logit", probit = "probit",
                                               gaussian = "Gaussian")[[object$likelihood]]),
                 class(object)[1L])
  if (inherits(object, "osgpr")) {
    return(sprintf("%s, M = %d + %d", name, M, NROW(object$params$O)))
  }
  if (is.null(object$params$Z)) name else sprintf("%s, M = %d", name, M)
}

.input_names <- function(object) {
  cn <- colnames(object$x)
  if (is.null(cn)) cn <- paste0("x", seq_len(ncol(object$x)))
  cn
}

# The name of the response: the left-hand side of the formula, or the
# expression given as `y` to the matrix interface (when short), or "y".
.response_name <- function(object) {
  if (!is.null(object$terms)) {
    lhs <- stats::formula(object$terms)[[2L]]
    return(paste(deparse(lhs, width.cutoff = 60L), collapse = ""))
  }
  y <- object$call$y
  if (is.name(y) || (is.call(y) && nchar(paste(deparse(y), collapse = "")) <= 30L)) {
    return(paste(deparse(y), collapse = ""))
  }
  "y"
}

# A grid of inputs as a model matrix: predict() takes it as is, also for
# formula fits whose columns are transformations of the data's variables.
.grid_newdata <- function(object, grid) {
  colnames(grid) <- colnames(object$x)
  grid
}

# The moments of f (and, with noise = TRUE, y) at the rows of a grid
# matrix. An offset is unknown on a grid: the curve is drawn without it
# (the response axis then reads "<response> - offset").
.grid_moments <- function(object, grid, noise = FALSE) {
  object$offset <- NULL
  inp <- .prediction_inputs(object, .grid_newdata(object, grid))
  .predict_moments(object, inp, noise = noise)
}

.plot_1d <- function(object, n, level, noise, inducing, xlab, ylab, main, ...) {
  xr <- range(object$x[, 1L])
  pad <- 0.05 * diff(xr)
  if (pad == 0) pad <- 1
  grid <- matrix(seq(xr[1L] - pad, xr[2L] + pad, length.out = n), ncol = 1L)
  z <- stats::qnorm((1 + level) / 2)
  pf <- .grid_moments(object, grid)
  g <- grid[, 1L]
  gy <- g
  # the noise may be known only at the training inputs (a vector of
  # variances, or a noise formula in variables other than the input): then
  # the y band is drawn there
  py <- if (!noise || identical(object$noise_model$kind, "known")) NULL else
    tryCatch(.grid_moments(object, grid, noise = TRUE), error = function(e) NULL)
  if (noise && is.null(py)) {
    o <- order(object$x[, 1L])
    gy <- object$x[o, 1L]
    obj <- object
    obj$offset <- NULL
    p0 <- .predict_moments(obj, .prediction_inputs(obj), noise = TRUE)
    py <- list(mean = p0$mean[o], var = p0$var[o], noise = p0$noise[o])
  }
  sf <- sqrt(pf$var)
  sy <- if (noise) sqrt(py$var + py$noise)
  yname <- .response_name(object)
  if (!is.null(object$offset)) yname <- paste(yname, "- offset")
  if (is.null(xlab)) xlab <- .input_names(object)[1L]
  if (is.null(ylab)) ylab <- yname
  ylim <- range(object$y, pf$mean - z * sf, pf$mean + z * sf,
                if (noise) c(py$mean - z * sy, py$mean + z * sy))
  graphics::plot(object$x[, 1L], object$y, xlab = xlab, ylab = ylab, main = main,
                 ylim = ylim, pch = 16, cex = 0.6, col = grDevices::grey(0.45), ...)
  graphics::polygon(c(g, rev(g)), c(pf$mean - z * sf, rev(pf$mean + z * sf)),
                    col = grDevices::adjustcolor("steelblue", 0.3), border = NA)
  if (noise) {
    graphics::lines(gy, py$mean - z * sy, lty = 2, col = "steelblue4")
    graphics::lines(gy, py$mean + z * sy, lty = 2, col = "steelblue4")
  }
  graphics::lines(g, pf$mean, lwd = 2, col = "steelblue4")
  marks <- if (inducing) .inducing_marks(object) else list()
  # symbols on the lower edge, so that the two sets of an osgpr fit differ
  # in shape as well as colour (legible in grey scale)
  y_edge <- graphics::par("usr")[3L]
  for (mk in marks) {
    graphics::points(mk$at, rep(y_edge, length(mk$at)), pch = mk$pch, col = mk$col,
                     lwd = 2, xpd = TRUE)
  }
  pct <- sprintf("%g%%", 100 * level)
  leg <- c("data", "mean", sprintf("f: %s interval", pct),
           if (noise) sprintf("y: %s interval", pct), vapply(marks, function(m) m$label, ""))
  graphics::legend("topleft", legend = leg, bty = "n", cex = 0.8,
                   pch = c(16, NA, 15, if (noise) NA, vapply(marks, function(m) m$pch, 0)),
                   lty = c(NA, 1, NA, if (noise) 2, rep(NA, length(marks))),
                   lwd = c(NA, 2, NA, if (noise) 1, rep(2, length(marks))),
                   col = c(grDevices::grey(0.45), "steelblue4",
                           grDevices::adjustcolor("steelblue", 0.3), if (noise) "steelblue4",
                           vapply(marks, function(m) m$col, "")))
  out <- data.frame(x = g, mean = unname(pf$mean), sd_f = unname(sf))
  if (noise && length(gy) == length(g)) out$sd_y <- unname(sy)
  out
}

# Inducing inputs to mark on plots: list(list(at, col, pch, label)).
.inducing_marks <- function(object) {
  out <- list()
  if (!is.null(object$params$Z) && nrow(object$params$Z)) {
    out[[length(out) + 1L]] <- list(at = object$params$Z[, 1L], col = "firebrick",
                                    pch = 3, label = "inducing inputs")
  }
  if (!is.null(object$params$O) && nrow(object$params$O)) {
    out[[length(out) + 1L]] <- list(at = object$params$O[, 1L], col = "darkorange",
                                    pch = 2, label = "orthogonal inputs")
  }
  out
}

# An image with a colour key in the right margin (widened while drawing),
# which works inside par(mfrow = ) layouts, unlike filled.contour().
.image_key <- function(g1, g2, zm, col, zlim, key_title, xlab, ylab, main, useRaster = TRUE,
                       ...) {
  if (!all(is.finite(zlim)) || diff(zlim) <= 0) {
    zlim <- mean(zlim[is.finite(zlim)]) + c(-0.5, 0.5) * max(1e-8, abs(mean(zlim[is.finite(zlim)])))
    if (!all(is.finite(zlim))) zlim <- c(0, 1)
  }
  mar <- graphics::par("mar")
  op <- graphics::par(mar = c(mar[1:3], max(mar[4L], 5.6)))
  on.exit(graphics::par(op))
  # a raster image has no seams between cells on bitmap devices
  graphics::image(g1, g2, zm, col = col, zlim = zlim, xlab = xlab, ylab = ylab, main = main,
                  useRaster = useRaster, ...)
  .colour_key(zlim, col, key_title)
  invisible(zlim)
}

# A vertical colour bar just right of the plot region, with tick labels and
# a title above it.
.colour_key <- function(zlim, col, title) {
  usr <- graphics::par("usr")
  w <- diff(usr[1:2])
  h <- diff(usr[3:4])
  x0 <- usr[2L] + 0.03 * w
  x1 <- x0 + 0.04 * w
  yb <- seq(usr[3L], usr[4L], length.out = length(col) + 1L)
  graphics::rect(x0, yb[-length(yb)], x1, yb[-1L], col = col, border = NA, xpd = NA)
  graphics::rect(x0, usr[3L], x1, usr[4L], border = grDevices::grey(0.3), xpd = NA)
  at <- pretty(zlim, n = 5L)
  at <- at[at >= zlim[1L] & at <= zlim[2L]]
  yat <- usr[3L] + (at - zlim[1L]) / diff(zlim) * h
  graphics::segments(x1, yat, x1 + 0.01 * w, yat, xpd = NA)
  graphics::text(x1 + 0.015 * w, yat, format(at), adj = c(0, 0.5), cex = 0.7, xpd = NA)
  graphics::text((x0 + x1) / 2, usr[4L] + 0.02 * h, title, adj = c(0.5, 0), cex = 0.7,
                 xpd = NA)
}

# Points that stay visible on any background: a white fill with a dark
# edge for the data; the inducing inputs in gold.
.draw_inducing_2d <- function(object) {
  if (!is.null(object$params$Z) && nrow(object$params$Z)) {
    graphics::points(object$params$Z[, 1L], object$params$Z[, 2L], pch = 23, cex = 1,
                     bg = "gold", col = "black")
  }
  if (!is.null(object$params$O) && nrow(object$params$O)) {
    graphics::points(object$params$O[, 1L], object$params$O[, 2L], pch = 24, cex = 1,
                     bg = "darkorange", col = "black")
  }
}

.plot_2d <- function(object, what, n, inducing, xlab, ylab, main, ...) {
  r1 <- range(object$x[, 1L])
  r2 <- range(object$x[, 2L])
  g1 <- seq(r1[1L], r1[2L], length.out = n)
  g2 <- seq(r2[1L], r2[2L], length.out = n)
  grid <- as.matrix(expand.grid(g1, g2))
  p <- .grid_moments(object, grid)
  z <- if (what == "mean") p$mean else sqrt(p$var)
  zm <- matrix(z, n, n)
  nm <- .input_names(object)
  if (is.null(xlab)) xlab <- nm[1L]
  if (is.null(ylab)) ylab <- nm[2L]
  yname <- .response_name(object)
  key <- if (what == "mean") yname else paste("sd of", yname)
  .image_key(g1, g2, zm, col = grDevices::hcl.colors(40, "viridis"), zlim = range(z),
             key_title = key, xlab = xlab, ylab = ylab, main = main, ...)
  if (diff(range(z)) > 0) {
    graphics::contour(g1, g2, zm, add = TRUE, col = grDevices::grey(0.9, 0.8), labcex = 0.6)
  }
  graphics::points(object$x[, 1L], object$x[, 2L], pch = 21, cex = 0.5, bg = "white",
                   col = grDevices::grey(0.15), lwd = 0.5)
  if (inducing) .draw_inducing_2d(object)
  leg <- c("data", if (inducing && NROW(object$params$Z)) "inducing inputs",
           if (inducing && NROW(object$params$O)) "orthogonal inputs")
  if (length(leg) > 1L) {
    graphics::legend("topleft", legend = leg, pch = c(21, 23, 24)[seq_along(leg)],
                     pt.bg = c("white", "gold", "darkorange")[seq_along(leg)], cex = 0.7,
                     bg = grDevices::adjustcolor("white", 0.8), box.col = NA)
  }
  out <- data.frame(grid, mean = unname(p$mean), sd = unname(sqrt(p$var)))
  names(out)[1:2] <- nm
  out
}

.plot_observed <- function(object, level, xlab, ylab, main, ...) {
  p <- .predict_moments(object, .prediction_inputs(object), noise = TRUE)
  s <- sqrt(p$var + p$noise)
  z <- stats::qnorm((1 + level) / 2)
  y <- object$y + if (is.null(object$offset)) 0 else object$offset
  yname <- .response_name(object)
  if (is.null(xlab)) xlab <- paste("observed", yname)
  if (is.null(ylab)) ylab <- sprintf("predicted %s (%g%% interval)", yname, 100 * level)
  lim <- range(y, p$mean - z * s, p$mean + z * s)
  graphics::plot(y, p$mean, xlab = xlab, ylab = ylab, main = main,
                 xlim = range(y), ylim = lim, pch = 16, cex = 0.6, col = "steelblue4", ...)
  graphics::segments(y, p$mean - z * s, y, p$mean + z * s,
                     col = grDevices::adjustcolor("steelblue", 0.3))
  graphics::abline(0, 1, lty = 2, col = grDevices::grey(0.4))
  data.frame(observed = unname(y), predicted = unname(p$mean), sd = unname(s))
}

# Pearson residuals against fitted values (training rows used in the fit).
.plot_residuals <- function(object, xlab, ylab, main, ...) {
  r <- residuals(object, type = "pearson")
  f <- fitted(object)
  keep <- !is.na(r)
  r <- r[keep]
  f <- f[keep]
  classifier <- !is.null(object$labels)
  if (is.null(main)) main <- paste0(.plot_title(object), ": residuals")
  if (is.null(xlab)) {
    xlab <- if (classifier) sprintf("fitted p(%s = %s)", .response_name(object),
                                   object$labels$levels[2L]) else
      paste("fitted", .response_name(object))
  }
  if (is.null(ylab)) ylab <- "Pearson residual"
  graphics::plot(f, r, xlab = xlab, ylab = ylab, main = main, pch = 16, cex = 0.6,
                 col = grDevices::adjustcolor("steelblue4", 0.7), ...)
  graphics::abline(h = 0, lty = 2, col = grDevices::grey(0.4))
  graphics::abline(h = c(-2, 2), lty = 3, col = grDevices::grey(0.6))
  if (length(unique(f)) > 3L) {
    sm <- stats::lowess(f, r)
    graphics::lines(sm, col = "firebrick", lwd = 1.5)
  }
  data.frame(fitted = unname(f), residual = unname(r))
}

# ---- convergence ----------------------------------------------------------------

.plot_convergence <- function(object, xlab, ylab, main, ...) {
  o <- object$optim
  ttl <- function(s) if (is.null(main)) paste0(.plot_title(object), ": ", s) else main
  if (is.null(ylab)) ylab <- .bound_label(object)
  # the bound after each selection pass: reinit_inducing(), or pgpr's
  # double loop
  h <- if (!is.null(object$reinit)) object$reinit$history else
    if (inherits(object, "pgpr") && !is.null(object$history)) object$history
  if (!is.null(h)) {
    by_M <- length(unique(h$M)) > 1L
    xv <- if (by_M) h$M else h$pass
    graphics::plot(xv, h$bound, type = "b", pch = 16, main = ttl("selection passes"),
                   xlab = if (!is.null(xlab)) xlab else if (by_M) "number of inducing inputs M" else
                     "selection pass", ylab = ylab, xaxt = "n", ...)
    graphics::axis(1, at = unique(xv))
    # the pass of each M; with one M throughout the title already says it
    if (by_M) graphics::text(xv, h$bound, paste0("pass ", h$pass), pos = 3, cex = 0.6, xpd = NA)
    best <- which.max(h$bound)
    graphics::points(xv[best], h$bound[best], pch = 1, cex = 2, col = "firebrick")
    return(data.frame(pass = h$pass, M = h$M, bound = h$bound))
  }
  if (identical(o$method, "Adam") && length(o$trace)) {
    tr <- o$trace
    k <- max(1L, length(tr) %/% 20L)
    run <- stats::filter(tr, rep(1 / k, k), sides = 1)
    graphics::plot(seq_along(tr), tr, type = "l", col = grDevices::grey(0.6),
                   main = ttl("Adam"),
                   xlab = if (is.null(xlab)) "Adam iteration" else xlab, ylab = ylab, ...)
    graphics::lines(seq_along(tr), run, lwd = 2, col = "steelblue4")
    graphics::abline(h = object$bound, lty = 3, col = "firebrick")
    graphics::legend("bottomright", bty = "n", cex = 0.8, lty = c(1, 1, 3), lwd = c(1, 2, 1),
                     col = c(grDevices::grey(0.6), "steelblue4", "firebrick"),
                     legend = c("minibatch estimate", sprintf("running mean of %d", k),
                                "full-batch bound at the end"))
    return(data.frame(iteration = seq_along(tr), estimate = tr, running_mean = as.numeric(run)))
  }
  tr <- o$trail
  if (!length(tr)) {
    stop(if (is.null(o)) "this model was not optimised (optimize = FALSE): there is no history to plot" else
      "there is no history of the bound to plot (no free parameters, or a fit made before version 0.2.0)",
      call. = FALSE)
  }
  # the first evaluations of a run can be far below the rest: the axis
  # starts at the 5% quantile of the trail
  fin <- tr[is.finite(tr)]
  if (!length(fin)) stop("no evaluation of the bound succeeded: there is nothing to plot", call. = FALSE)
  lo <- stats::quantile(fin, 0.05, names = FALSE)
  ylim <- c(lo, max(fin))
  if (diff(ylim) <= 0) ylim <- ylim + c(-1, 1) * max(1, abs(ylim[1L])) * 1e-6
  graphics::plot(seq_along(tr), tr, type = "s", lwd = 1.5, col = "steelblue4", ylim = ylim,
                 main = ttl("training"),
                 xlab = if (is.null(xlab)) "evaluations of the bound, all stages (best so far)" else xlab,
                 ylab = ylab, ...)
  st <- o$stages
  if (length(st)) {
    cols <- grDevices::hcl.colors(max(3L, length(st)), "Dark 3")[seq_along(st)]
    graphics::abline(h = st, lty = 3, col = cols)
    graphics::legend("bottomright", bty = "n", cex = 0.7, lty = 3, col = cols,
                     title = "bound after each stage",
                     legend = sprintf("%s: %s", gsub("_", " ", names(st)),
                                      format(st, digits = 8L)))
  }
  if (any(tr < lo)) {
    graphics::mtext(sprintf("%d early evaluations below the axis", sum(tr < lo)), side = 3,
                    line = -1.2, adj = 0.02, cex = 0.7, col = grDevices::grey(0.4))
  }
  data.frame(evaluation = seq_along(tr), bound = tr)
}

# The number of grid points per input of a plot: a whole number >= 2.
.check_grid_n <- function(n) {
  if (!is.numeric(n) || length(n) != 1L || !is.finite(n) || n < 2 || n != round(n) ||
      n > 1e5) {
    stop("'n' must be a whole number of grid points per input, from 2 to 100000", call. = FALSE)
  }
  as.integer(n)
}
