# Plots of every model. which = "fit": for regression with one input the
# data, the predictive mean and intervals for f and for y, and the inducing
# inputs; two inputs: an image of the mean (or sd) with a colour key, the
# data and the inducing inputs; more inputs: observed against predicted with
# prediction intervals. Classifiers are drawn by R/classification.R.
# which = "convergence": the bound during training (fit$optim$trail, stage
# after stage, and fit$optim$stages), the bound after each selection pass
# (pgpr's double loop, reinit_inducing()), or Adam's minibatch estimates.
# which = "residuals": Pearson residuals against fitted values.
#
# Layout shared by every plot: legends go above the plot region, under the
# title (never over the data); colour keys go in the right margin with
# their title written along them (never under the main title); titles
# shrink to the width of the figure; data points shrink, fade and, over a
# surface, are left out as their number grows (.point_style()).

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
#' The title names the model and, for a learned noise model, known
#' per-point noise variances or prior weights, says that the noise is
#' heteroscedastic. Legends sit above the plot region, under the title, and
#' colour keys in the right margin, so that neither covers the data.
#'
#' \strong{Dense data.} The data points are drawn smaller and more
#' transparent as their number grows, so that together they cover about a
#' tenth of the plot region; over a surface (two inputs) they are left out
#' when that would make them smaller than a quarter of the usual size (as
#' for the full \code{volcano} grid in a small panel). \code{points = TRUE}
#' draws them anyway, \code{points = FALSE} never.
#'
#' \strong{Maps.} With two inputs, the first is on the horizontal axis and
#' the second on the vertical one, except that inputs named like latitude
#' and longitude (\code{lat}, \code{latitude}; \code{lon}, \code{long},
#' \code{longitude}) are drawn as a map: longitude across, latitude up, with
#' the aspect ratio \eqn{1/\cos}{1/cos} of the mean latitude, so that a
#' degree of longitude has its length on the ground. \code{inputs = c(2, 1)}
#' (or the names) swaps the axes, and \code{asp = 1} (passed on to the plot)
#' gives two inputs in the same units equal scales.
#'
#' \code{which = "convergence"} shows how training went: the best bound
#' after each evaluation of the objective, stage after stage on one axis of
#' evaluations, each stage in its own colour and named in the legend with
#' the bound it reached (\code{fit$optim$trail}, \code{fit$optim$stages} and
#' \code{fit$optim$stage_evals}). When some stages ran on a subsample of the
#' data (\code{sgpr()} beyond 20 000 observations) the axis shows the bound
#' per observation, so that stages on different numbers of observations
#' compare. For a fit of \code{\link{reinit_inducing}()} it shows the bound
#' after each selection pass against \eqn{M} (or against the pass when
#' \eqn{M} does not change); for minibatch fits the minibatch estimates of
#' the bound with their running mean. \code{which = "residuals"} plots the
#' Pearson residuals (see \code{\link{residuals.sparsevgp}}) against the
#' fitted values, with lines at 0 and \eqn{\pm 2}{+/- 2}.
#'
#' @param x a fitted regression model.
#' @param which \code{"fit"}, \code{"convergence"} or \code{"residuals"}.
#' @param what for two inputs: \code{"mean"} or \code{"sd"} (the standard
#'   deviation of \eqn{f}).
#' @param n number of grid points per input for the curve or surface (at
#'   most 120 per input for a surface, which is drawn with smooth
#'   interpolation between grid points on devices that support it).
#' @param level the coverage of the bands and intervals.
#' @param noise if \code{FALSE}, the band for new observations is not drawn
#'   (one input).
#' @param inducing if \code{FALSE}, the inducing inputs are not drawn.
#' @param points whether to draw the data: \code{NULL} (the default) decides
#'   by their number (see Dense data), \code{TRUE} always, \code{FALSE}
#'   never.
#' @param inputs for two inputs: the inputs on the horizontal and vertical
#'   axes, by name or position (\code{c(2, 1)} swaps them); by default in
#'   the order of the model, or as a map (see Maps).
#' @param xlab,ylab,main axis labels and title; by default the names of the
#'   input and the response, and a short description of the model.
#' @param ... further graphical parameters passed to \code{plot()} (such as
#'   \code{asp}, \code{xlim}, \code{ylim}).
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
#'                 height = c(volcano))[seq(1, length(volcano), by = 9), ]
#' s <- sgpr(height ~ row + col, data = v, inducing = 40)
#' plot(s, asp = 1)
#' plot(s, what = "sd", asp = 1)
#'
#' # a map: longitude across, latitude up
#' q <- sgpr(depth ~ lat + long, data = quakes[1:600, ], inducing = 30)
#' plot(q)
#' @export
plot.sparsevgp <- function(x, which = c("fit", "convergence", "residuals"),
                           what = c("mean", "sd"), n = 200L, level = 0.95, noise = TRUE,
                           inducing = TRUE, points = NULL, inputs = NULL, xlab = NULL,
                           ylab = NULL, main = NULL, ...) {
  which <- match.arg(which)
  what <- match.arg(what)
  level <- .check_level(level)
  n <- .check_grid_n(n)
  noise <- .check_flag(noise, "noise")
  inducing <- .check_flag(inducing, "inducing")
  if (!is.null(points)) points <- .check_flag(points, "points")
  if (which == "convergence") return(invisible(.plot_convergence(x, xlab, ylab, main, ...)))
  .shards_refuse(x, "plot(fit, which = \"fit\") and \"residuals\"", "predict(fit, newdata) on a grid")
  if (which == "residuals") return(invisible(.plot_residuals(x, xlab, ylab, main, ...)))
  D <- ncol(x$x)
  if (is.null(main)) main <- .plot_title(x)
  if (D == 1L) {
    return(invisible(.plot_1d(x, n, level, noise, inducing, points, xlab, ylab, main, ...)))
  }
  if (D == 2L) {
    return(invisible(.plot_2d(x, what, min(n, .surface_n), inducing, points, inputs, xlab, ylab,
                              main, ...)))
  }
  invisible(.plot_observed(x, level, xlab, ylab, main, ...))
}

# Grid points per input of a surface at most: with interpolation between
# them (.draw_surface()) the image looks smooth.
.surface_n <- 120L

# A short title: the model, its number of inducing inputs and, when the
# noise is not one constant variance, that it is heteroscedastic (long
# titles shrink to the width of the figure, .plot_margins()).
.plot_title <- function(object) {
  M <- NROW(object$params$Z)
  name <- switch(class(object)[1L],
                 gpr = "Exact GP",
                 sgpr = "SGPR",
                 osgpr = if (identical(object$type, "odvgp")) "ODGPR" else "SOLVE-GPR",
                 pgpr = "PGPR",
                 svgp = sprintf("SVGP (%s)", .lik_title(.lik_of(object))),
                 class(object)[1L])
  title <- if (inherits(object, "osgpr")) {
    sprintf("%s, M = %d + %d", name, M, NROW(object$params$O))
  } else if (is.null(object$params$Z)) name else sprintf("%s, M = %d", name, M)
  het <- .noise_kind_label(object)
  if (is.null(het)) title else paste0(title, ", ", het)
}

# How the title describes noise that is not one constant variance: a
# learned model, known per-point variances, or prior weights.
.noise_kind_label <- function(object) {
  nm <- object$noise_model
  if (!is.null(nm) && identical(nm$kind, "model")) return("heteroscedastic noise model")
  if (!is.null(nm) && identical(nm$kind, "known")) return("known noise variances")
  if (!is.null(object$weights) && length(unique(object$weights)) > 1L) {
    return("weighted (heteroscedastic) noise")
  }
  NULL
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

# ---- layout: titles, legends above the plot, keys in the margin -------------

# Legends are drawn at this size (relative to par("cex")).
.legend_cex <- 0.75

# Inches per line of margin text on the current device and figure.
.line_inches <- function() graphics::par("csi") * graphics::par("mex")

# The layout of a legend with entries `labels` in a strip `width` inches
# wide: the most columns that fit, the rows, and the margin lines it takes
# (legend() leaves half a row above and below). legend() makes every
# column as wide as the widest entry: the symbol (seg.len = 1.6
# characters), a gap of one character, the text and one more.
.legend_layout <- function(labels, width, cex = .legend_cex) {
  n <- length(labels)
  if (!n) return(list(ncol = 0L, rows = 0L, lines = 0))
  xc <- graphics::strwidth("0", units = "inches", cex = cex)
  w0 <- max(graphics::strwidth(labels, units = "inches", cex = cex)) + 3.6 * xc
  k <- max(1L, min(n, floor((width - 0.5 * xc) / w0)))
  rows <- ceiling(n / k)
  # as few columns as that many rows need, so that the columns are full
  k <- ceiling(n / rows)
  list(ncol = k, rows = rows, lines = (rows + 1) * cex / graphics::par("mex"))
}

# Margins for a plot with title `main`, a legend (the arguments of
# legend(), at least `legend`) between the title and the plot region, and
# at least `right` lines on the right (a colour key). Sets par(mar) for the
# plot that follows and returns what .plot_decorate() needs, with the old
# settings in `op` for the caller to restore once everything is drawn.
.plot_margins <- function(main, legend = NULL, right = NULL) {
  mar <- graphics::par("mar")
  if (!is.null(right)) mar[4L] <- max(mar[4L], right)
  li <- .line_inches()
  fin <- graphics::par("fin")
  width <- max(fin[1L] - (mar[2L] + mar[4L]) * li, 0.5)
  lay <- .legend_layout(legend$legend, width)
  has_main <- length(main) == 1L && !is.na(main) && nzchar(main)
  cex_main <- graphics::par("cex.main")
  if (has_main) {
    # shrink a title wider than the plot region and the narrower margin
    tw <- graphics::strwidth(main, units = "inches", cex = cex_main,
                             font = graphics::par("font.main"))
    avail <- width + 2 * min(mar[c(2L, 4L)]) * li
    if (tw > avail) cex_main <- cex_main * avail / tw
  }
  below <- lay$lines + if (lay$rows) 0.2 else 0
  # the title's height in lines (par("cex.main") is relative to par("cex"))
  th <- if (has_main) 1.1 * cex_main / graphics::par("mex") else 0
  mar[3L] <- max(mar[3L], below + if (has_main) th + 0.5 else 0)
  # the title centred in the space above the legend, as title() centres it
  # in the margin
  title_line <- below + max(0.3, (mar[3L] - below - th) / 2)
  list(op = graphics::par(mar = mar), legend = legend, layout = lay, main = if (has_main) main,
       title_line = title_line, cex_main = cex_main)
}

# The title and the legend above the plot region, after the plot is drawn.
.plot_decorate <- function(m) {
  if (m$layout$rows) {
    args <- c(list(x = graphics::grconvertX(0.5, "npc"), y = graphics::grconvertY(1, "npc"),
                   xjust = 0.5, yjust = 0, ncol = m$layout$ncol, bty = "n", xpd = NA,
                   cex = .legend_cex, seg.len = 1.6),
              m$legend)
    do.call(graphics::legend, args)
  }
  if (!is.null(m$main)) graphics::title(main = m$main, line = m$title_line, cex.main = m$cex_main)
  invisible()
}

# How to draw n data points in the current plot region: points whose total
# area is about a tenth of the region, and no larger than `base` (a cex);
# they fade as they shrink. `drop` (over a surface): leave them out when
# they would be smaller than a quarter of the usual size, unless points =
# TRUE. list(draw, cex, alpha).
.point_style <- function(n, points = NULL, base = 0.6, drop = TRUE) {
  pin <- graphics::par("pin")
  # a filled circle (pch 16, 21) at cex c has a radius of about
  # 0.375 c times the character size in inches
  r1 <- 0.375 * graphics::par("cin")[2L] / 1.2 * graphics::par("cex")
  fit <- sqrt(0.1 * prod(pin) / (max(n, 1) * pi)) / r1
  cex <- min(base, fit)
  draw <- if (is.null(points)) !(drop && cex < 0.25) else points
  list(draw = draw && n > 0L, cex = max(cex, 0.25),
       alpha = max(0.15, min(1, sqrt(cex / base), sqrt(400 / max(n, 1)))))
}

# ---- one input ------------------------------------------------------------------

.plot_1d <- function(object, n, level, noise, inducing, points, xlab, ylab, main, ...) {
  xr <- range(object$x[, 1L])
  pad <- 0.05 * diff(xr)
  if (pad == 0) pad <- 1
  grid <- matrix(seq(xr[1L] - pad, xr[2L] + pad, length.out = n), ncol = 1L)
  g <- grid[, 1L]
  b <- .plot_bands(.lik_of(object), object, grid, level, noise)
  yname <- .response_name(object)
  if (!is.null(object$offset)) yname <- paste(yname, "- offset")
  if (is.null(xlab)) xlab <- .input_names(object)[1L]
  if (is.null(ylab)) ylab <- yname
  ylim <- range(object$y, b$f_lo, b$f_hi, if (noise) c(b$y_lo, b$y_hi))
  marks <- if (inducing) .inducing_marks(object) else list()
  pct <- sprintf("%g%%", 100 * level)
  band <- grDevices::adjustcolor("steelblue", 0.3)
  leg <- list(legend = c("data", "mean", sprintf("f: %s interval", pct),
                         if (noise) sprintf("y: %s interval", pct),
                         vapply(marks, function(m) m$label, "")),
              pch = c(16, NA, 15, if (noise) NA, vapply(marks, function(m) m$pch, 0)),
              lty = c(NA, 1, NA, if (noise) 2, rep(NA, length(marks))),
              lwd = c(NA, 2, NA, if (noise) 1, rep(2, length(marks))),
              pt.cex = c(1, NA, 2, if (noise) NA, rep(1, length(marks))),
              col = c(grDevices::grey(0.45), "steelblue4", band, if (noise) "steelblue4",
                      vapply(marks, function(m) m$col, "")))
  m <- .plot_margins(main, leg)
  on.exit(graphics::par(m$op))
  graphics::plot(range(object$x[, 1L], g), ylim, type = "n", xlab = xlab, ylab = ylab, ...)
  st <- .point_style(length(object$y), points, drop = FALSE)
  data_col <- grDevices::adjustcolor(grDevices::grey(0.45), st$alpha)
  graphics::polygon(c(g, rev(g)), c(b$f_lo, rev(b$f_hi)), col = band, border = NA)
  if (st$draw) {
    graphics::points(object$x[, 1L], object$y, pch = 16, cex = st$cex, col = data_col)
  }
  if (noise) {
    graphics::lines(b$gy, b$y_lo, lty = 2, col = "steelblue4")
    graphics::lines(b$gy, b$y_hi, lty = 2, col = "steelblue4")
  }
  graphics::lines(g, b$mean, lwd = 2, col = "steelblue4")
  # symbols on the lower edge, so that the two sets of an osgpr fit differ
  # in shape as well as colour (legible in grey scale)
  y_edge <- graphics::par("usr")[3L]
  for (mk in marks) {
    graphics::points(mk$at, rep(y_edge, length(mk$at)), pch = mk$pch, col = mk$col,
                     lwd = 2, xpd = TRUE)
  }
  if (!st$draw) leg <- lapply(leg, `[`, -1L)
  m$legend <- leg
  .plot_decorate(m)
  out <- data.frame(x = g, mean = unname(b$mean), sd_f = unname(b$sd_f))
  if (noise && length(b$gy) == length(g)) out$sd_y <- unname(b$sd_y)
  out
}

# The curve and the bands of a plot at the rows of `grid` (NULL: the
# training inputs, with their offsets), of coverage `level`: the mean of y,
# the band of the latent function on the scale of y (f_lo, f_hi) and, with
# `noise`, that of a new y at the inputs `gy` (y_lo, y_hi), with the
# standard deviations of f and of y.
.plot_bands <- function(lik, object, grid, level, noise) UseMethod(".plot_bands")

# Gaussian: mean -/+ z sd. The noise may be known only at the training
# inputs (a vector of variances, or a noise formula in variables other than
# the input): then the y band is drawn there.
#' @export
.plot_bands.lik_gaussian <- function(lik, object, grid, level, noise) {
  z <- stats::qnorm((1 + level) / 2)
  if (is.null(grid)) {
    p <- .predict_moments(object, .prediction_inputs(object), noise = TRUE)
    s <- sqrt(p$var + p$noise)
    return(list(mean = p$mean, y_lo = p$mean - z * s, y_hi = p$mean + z * s, sd_y = s))
  }
  pf <- .grid_moments(object, grid)
  gy <- grid[, 1L]
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
  list(mean = pf$mean, f_lo = pf$mean - z * sf, f_hi = pf$mean + z * sf, sd_f = sf, gy = gy,
       y_lo = if (noise) py$mean - z * sy, y_hi = if (noise) py$mean + z * sy, sd_y = sy)
}

# Any other likelihood (R/likelihoods.R): the mean of y, the band of E[y |
# f] (the inverse link of f's band) and the quantiles of a new y.
#' @export
.plot_bands.sparsevgp_likelihood <- function(lik, object, grid, level, noise) {
  z <- stats::qnorm((1 + level) / 2)
  p <- if (is.null(grid)) .predict_moments(object, .prediction_inputs(object)) else
    .grid_moments(object, grid)
  m <- .lik_moments(lik, p$mean, p$var, object$params)
  sf <- sqrt(p$var)
  q <- if (noise) .lik_quantiles(lik, p$mean, p$var, object$params, (1 + c(-1, 1) * level) / 2)
  list(mean = m$mean, f_lo = .lik_link_inverse(lik, p$mean - z * sf),
       f_hi = .lik_link_inverse(lik, p$mean + z * sf), sd_f = sf,
       gy = if (!is.null(grid)) grid[, 1L], y_lo = q[[1L]], y_hi = q[[2L]], sd_y = sqrt(m$var))
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

# ---- two inputs: surfaces ---------------------------------------------------------

# The inputs on the horizontal and vertical axes of a surface: `inputs`
# (names or positions), else the model's order, except that inputs named
# like longitude and latitude are drawn as a map (longitude across,
# latitude up, aspect ratio 1 / cos(mean latitude)). list(idx, names, asp).
.surface_axes <- function(object, inputs = NULL) {
  nm <- .input_names(object)
  lat <- grepl("^(lat|latitude)$", nm, ignore.case = TRUE)
  lon <- grepl("^(lon|long|longitude|lng)$", nm, ignore.case = TRUE)
  geo <- sum(lat) == 1L && sum(lon) == 1L
  if (!is.null(inputs)) {
    idx <- if (is.character(inputs)) match(inputs, nm) else
      if (is.numeric(inputs)) as.integer(inputs) else NA_integer_
    if (length(idx) != 2L || anyNA(idx) || !setequal(idx, 1:2)) {
      stop(sprintf("'inputs' must give the two inputs (%s) in the order of the horizontal and vertical axes, such as c(2, 1) or c(\"%s\", \"%s\")",
                   paste(nm, collapse = ", "), nm[2L], nm[1L]), call. = FALSE)
    }
  } else {
    idx <- if (geo) c(which(lon), which(lat)) else 1:2
  }
  asp <- NA_real_
  if (geo) {
    la <- range(object$x[, which(lat)])
    if (all(abs(la) <= 90) && diff(la) > 0 && max(abs(la)) < 89) {
      asp <- 1 / cos(mean(la) * pi / 180)
      # the aspect ratio is of the vertical to the horizontal axis
      if (idx[1L] == which(lat)) asp <- 1 / asp
    }
  }
  list(idx = idx, names = nm[idx], asp = asp)
}

# The grid of a surface: n x n points over the range of the two inputs, in
# the order of the axes (g1 across, g2 up), and the same points as a matrix
# with the model's columns.
.surface_grid <- function(object, n, ax) {
  r1 <- range(object$x[, ax$idx[1L]])
  r2 <- range(object$x[, ax$idx[2L]])
  if (diff(r1) == 0) r1 <- r1 + c(-0.5, 0.5)
  if (diff(r2) == 0) r2 <- r2 + c(-0.5, 0.5)
  g1 <- seq(r1[1L], r1[2L], length.out = n)
  g2 <- seq(r2[1L], r2[2L], length.out = n)
  eg <- as.matrix(expand.grid(g1, g2))
  grid <- matrix(0, nrow(eg), 2L)
  grid[, ax$idx] <- eg
  list(g1 = g1, g2 = g2, grid = grid, axes_grid = eg)
}

# Open a surface plot over the grid's cells (edges of the first and last
# cells), with the aspect ratio of a map unless the user gave one.
.surface_frame <- function(sg, ax, xlab, ylab, ...) {
  h1 <- diff(sg$g1[1:2]) / 2
  h2 <- diff(sg$g2[1:2]) / 2
  dots <- list(...)
  args <- list(x = NA, type = "n", xlim = range(sg$g1) + c(-h1, h1),
               ylim = range(sg$g2) + c(-h2, h2), xaxs = "i", yaxs = "i", xlab = xlab,
               ylab = ylab)
  if (is.null(dots$asp) && is.finite(ax$asp)) args$asp <- ax$asp
  args[names(dots)] <- NULL
  do.call(graphics::plot, c(args, dots))
}

# Open a surface plot: the margins for the legend above and the key on the
# right, the frame, the image of zm and its key. Returns the record of
# .plot_margins() (the caller restores m$op once everything is drawn).
.surface_plot <- function(sg, ax, zm, col, ks, key, main, legend, xlab, ylab, ...) {
  m <- .plot_margins(main, legend, right = .key_lines(format(ks$at)))
  done <- FALSE
  on.exit(if (!done) graphics::par(m$op))
  .surface_frame(sg, ax, xlab, ylab, ...)
  .draw_surface(sg$g1, sg$g2, zm, col, ks$zlim)
  .colour_key(ks, col, key)
  done <- TRUE
  m
}

# An image of zm (rows along g1, columns along g2) in the colours `col`
# over zlim, as a raster that bitmap devices interpolate between grid
# points (smooth at any size, no seams between cells).
.draw_surface <- function(g1, g2, zm, col, zlim) {
  br <- seq(zlim[1L], zlim[2L], length.out = length(col) + 1L)
  k <- findInterval(zm, br, rightmost.closed = TRUE, all.inside = TRUE)
  img <- matrix(col[k], nrow(zm), ncol(zm))
  img[is.na(zm)] <- NA
  # a raster's rows run from the top
  ras <- grDevices::as.raster(t(img)[ncol(zm):1L, , drop = FALSE])
  h1 <- diff(g1[1:2]) / 2
  h2 <- diff(g2[1:2]) / 2
  graphics::rasterImage(ras, min(g1) - h1, min(g2) - h2, max(g1) + h1, max(g2) + h2,
                        interpolate = TRUE)
  graphics::box()
}

# Colour keys: a bar right of the plot region, tick labels right of it and
# the title written along them (so that it never meets the main title).
.key_cex <- 0.7

# A key's limits (widened when the surface is constant) and tick values.
.key_scale <- function(zlim) {
  if (!all(is.finite(zlim)) || diff(zlim) <= 0) {
    z0 <- mean(zlim[is.finite(zlim)])
    zlim <- if (is.finite(z0)) z0 + c(-0.5, 0.5) * max(1e-8, abs(z0)) else c(0, 1)
  }
  at <- pretty(zlim, n = 5L)
  list(zlim = zlim, at = at[at >= zlim[1L] & at <= zlim[2L]])
}

# The right margin in lines that a key with tick labels `labels` needs.
.key_lines <- function(labels) {
  w <- max(graphics::strwidth(labels, units = "inches", cex = .key_cex))
  h <- graphics::strheight("M", units = "inches", cex = .key_cex)
  (0.1 + 0.14 + 0.05 + 0.03 + w + 0.1 + 1.5 * h + 0.1) / .line_inches()
}

.colour_key <- function(ks, col, title) {
  usr <- graphics::par("usr")
  pin <- graphics::par("pin")
  xin <- diff(usr[1:2]) / pin[1L]
  x0 <- usr[2L] + 0.1 * xin
  x1 <- x0 + 0.14 * xin
  yb <- seq(usr[3L], usr[4L], length.out = length(col) + 1L)
  graphics::rect(x0, yb[-length(yb)], x1, yb[-1L], col = col, border = NA, xpd = NA)
  graphics::rect(x0, usr[3L], x1, usr[4L], border = grDevices::grey(0.3), xpd = NA)
  h <- diff(usr[3:4])
  yat <- usr[3L] + (ks$at - ks$zlim[1L]) / diff(ks$zlim) * h
  graphics::segments(x1, yat, x1 + 0.05 * xin, yat, xpd = NA)
  lab <- format(ks$at)
  graphics::text(x1 + 0.08 * xin, yat, lab, adj = c(0, 0.5), cex = .key_cex, xpd = NA)
  w <- max(graphics::strwidth(lab, units = "inches", cex = .key_cex))
  hh <- graphics::strheight("M", units = "inches", cex = .key_cex)
  graphics::text(x1 + (0.08 + w + 0.1 + 0.6 * hh) * xin, mean(usr[3:4]), title, srt = 90,
                 adj = c(0.5, 0.5), cex = .key_cex, xpd = NA)
}

# Inducing inputs on a surface, in the axes' order: gold diamonds (Z) and
# orange triangles (O) with black edges, visible on any background.
.draw_inducing_2d <- function(object, idx = 1:2) {
  if (!is.null(object$params$Z) && nrow(object$params$Z)) {
    graphics::points(object$params$Z[, idx[1L]], object$params$Z[, idx[2L]], pch = 23, cex = 1,
                     bg = "gold", col = "black")
  }
  if (!is.null(object$params$O) && nrow(object$params$O)) {
    graphics::points(object$params$O[, idx[1L]], object$params$O[, idx[2L]], pch = 24, cex = 1,
                     bg = "darkorange", col = "black")
  }
}

.plot_2d <- function(object, what, n, inducing, points, inputs, xlab, ylab, main, ...) {
  ax <- .surface_axes(object, inputs)
  sg <- .surface_grid(object, n, ax)
  p <- .grid_moments(object, sg$grid)
  # the mean of y (E[y] under the predictive: f itself for the Gaussian)
  z <- if (what == "mean") .lik_moments(.lik_of(object), p$mean, p$var, object$params)$mean else
    sqrt(p$var)
  zm <- matrix(z, n, n)
  if (is.null(xlab)) xlab <- ax$names[1L]
  if (is.null(ylab)) ylab <- ax$names[2L]
  yname <- .response_name(object)
  key <- if (what == "mean") yname else paste("sd of", yname)
  ks <- .key_scale(range(z))
  col <- grDevices::hcl.colors(40, "viridis")
  has_Z <- inducing && NROW(object$params$Z) > 0L
  has_O <- inducing && NROW(object$params$O) > 0L
  leg <- list(legend = c("data", if (has_Z) "inducing inputs", if (has_O) "orthogonal inputs"),
              pch = c(21, if (has_Z) 23, if (has_O) 24),
              pt.bg = c("white", if (has_Z) "gold", if (has_O) "darkorange"),
              col = c(grDevices::grey(0.15), if (has_Z) "black", if (has_O) "black"))
  m <- .surface_plot(sg, ax, zm, col, ks, key, main, leg, xlab, ylab, ...)
  on.exit(graphics::par(m$op))
  if (diff(range(z)) > 0) {
    graphics::contour(sg$g1, sg$g2, zm, add = TRUE, col = grDevices::grey(0.9, 0.8),
                      labcex = 0.6)
  }
  st <- .point_style(length(object$y), points)
  if (st$draw) {
    graphics::points(object$x[, ax$idx[1L]], object$x[, ax$idx[2L]], pch = 21, cex = st$cex,
                     bg = grDevices::adjustcolor("white", st$alpha),
                     col = grDevices::adjustcolor(grDevices::grey(0.15), st$alpha), lwd = 0.5)
  }
  if (inducing) .draw_inducing_2d(object, ax$idx)
  if (!st$draw) leg <- lapply(leg, `[`, -1L)
  m$legend <- leg
  .plot_decorate(m)
  out <- data.frame(sg$axes_grid, mean = unname(p$mean), sd = unname(sqrt(p$var)))
  names(out)[1:2] <- ax$names
  out
}

# ---- more inputs, residuals ------------------------------------------------------

.plot_observed <- function(object, level, xlab, ylab, main, ...) {
  b <- .plot_bands(.lik_of(object), object, NULL, level, TRUE)
  y <- object$y + if (is.null(object$offset)) 0 else object$offset
  yname <- .response_name(object)
  if (is.null(xlab)) xlab <- paste("observed", yname)
  if (is.null(ylab)) ylab <- sprintf("predicted %s (%g%% interval)", yname, 100 * level)
  lim <- range(y, b$y_lo, b$y_hi)
  m <- .plot_margins(main)
  on.exit(graphics::par(m$op))
  graphics::plot(y, b$mean, type = "n", xlab = xlab, ylab = ylab, xlim = range(y), ylim = lim,
                 ...)
  st <- .point_style(length(y), drop = FALSE)
  graphics::segments(y, b$y_lo, y, b$y_hi,
                     col = grDevices::adjustcolor("steelblue", 0.3 * st$alpha))
  graphics::points(y, b$mean, pch = 16, cex = st$cex,
                   col = grDevices::adjustcolor("steelblue4", st$alpha))
  graphics::abline(0, 1, lty = 2, col = grDevices::grey(0.4))
  .plot_decorate(m)
  data.frame(observed = unname(y), predicted = unname(b$mean), sd = unname(b$sd_y))
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
  m <- .plot_margins(main)
  on.exit(graphics::par(m$op))
  graphics::plot(f, r, type = "n", xlab = xlab, ylab = ylab, ...)
  st <- .point_style(length(r), drop = FALSE)
  graphics::points(f, r, pch = 16, cex = st$cex,
                   col = grDevices::adjustcolor("steelblue4", 0.7 * st$alpha))
  graphics::abline(h = 0, lty = 2, col = grDevices::grey(0.4))
  graphics::abline(h = c(-2, 2), lty = 3, col = grDevices::grey(0.6))
  if (length(unique(f)) > 3L) {
    sm <- stats::lowess(f, r)
    graphics::lines(sm, col = "firebrick", lwd = 1.5)
  }
  .plot_decorate(m)
  data.frame(fitted = unname(f), residual = unname(r))
}

# ---- convergence ----------------------------------------------------------------

# Readable names of training stages (fit$optim$stages).
.stage_label <- function(nm) {
  sub <- startsWith(nm, "subsample_")
  base <- sub("^subsample_", "", nm)
  lab <- vapply(base, function(b) {
    if (grepl("^reselect_[0-9]+$", b)) return(sub("^reselect_", "re-selection ", b))
    switch(b,
           inducing_held = "inducing inputs held",
           all = "all parameters",
           all_flat = "all parameters (flat)",
           all_data = "all data, inducing inputs held",
           fixed_Z = "inducing inputs held",
           fixed_Z_O = "inducing inputs held",
           gsub("_", " ", b))
  }, "")
  ifelse(sub, paste0("subsample: ", lab), lab)
}

.plot_convergence <- function(object, xlab, ylab, main, ...) {
  o <- object$optim
  ttl <- function(s) if (is.null(main)) paste0(.plot_title(object), ": ", s) else main
  own_ylab <- is.null(ylab)
  if (own_ylab) ylab <- .bound_label(object)
  # the bound after each selection pass: reinit_inducing(), or pgpr's
  # double loop
  h <- if (!is.null(object$reinit)) object$reinit$history else
    if (inherits(object, "pgpr") && !is.null(object$history)) object$history
  if (!is.null(h)) {
    by_M <- length(unique(h$M)) > 1L
    xv <- if (by_M) h$M else h$pass
    m <- .plot_margins(ttl("selection passes"))
    on.exit(graphics::par(m$op))
    graphics::plot(xv, h$bound, type = "b", pch = 16,
                   xlab = if (!is.null(xlab)) xlab else if (by_M) "number of inducing inputs M" else
                     "selection pass", ylab = ylab, xaxt = "n", ...)
    graphics::axis(1, at = unique(xv))
    # the pass of each M; with one M throughout the title already says it
    if (by_M) graphics::text(xv, h$bound, paste0("pass ", h$pass), pos = 3, cex = 0.6, xpd = NA)
    best <- which.max(h$bound)
    graphics::points(xv[best], h$bound[best], pch = 1, cex = 2, col = "firebrick")
    .plot_decorate(m)
    return(data.frame(pass = h$pass, M = h$M, bound = h$bound))
  }
  if (identical(o$method, "Adam") && length(o$trace)) {
    tr <- o$trace
    k <- max(1L, length(tr) %/% 20L)
    run <- stats::filter(tr, rep(1 / k, k), sides = 1)
    leg <- list(legend = c("minibatch estimate", sprintf("running mean of %d", k),
                           "full-batch bound at the end"),
                lty = c(1, 1, 3), lwd = c(1, 2, 1),
                col = c(grDevices::grey(0.6), "steelblue4", "firebrick"))
    m <- .plot_margins(ttl("Adam"), leg)
    on.exit(graphics::par(m$op))
    graphics::plot(seq_along(tr), tr, type = "l", col = grDevices::grey(0.6),
                   xlab = if (is.null(xlab)) "Adam iteration" else xlab, ylab = ylab, ...)
    graphics::lines(seq_along(tr), run, lwd = 2, col = "steelblue4")
    graphics::abline(h = object$bound, lty = 3, col = "firebrick")
    .plot_decorate(m)
    return(data.frame(iteration = seq_along(tr), estimate = tr, running_mean = as.numeric(run)))
  }
  tr <- o$trail
  if (!length(tr)) {
    stop(if (is.null(o)) "this model was not optimised (optimize = FALSE): there is no history to plot" else
      "there is no history of the bound to plot (no free parameters, or a fit made before version 0.2.0)",
      call. = FALSE)
  }
  # the stage of each evaluation: fit$optim$stage_evals counts them stage
  # by stage (one stage for a single run, or a fit that has no count)
  st <- o$stages
  ev <- o$stage_evals
  if (length(st) && length(ev) == length(st) && sum(ev) == length(tr)) {
    stage <- rep(seq_along(st), ev)
  } else {
    stage <- rep(1L, length(tr))
    st <- if (length(st)) st[length(st)] else c(run = object$bound)
    ev <- length(tr)
  }
  # stages on a subsample and on all the data compare per observation
  n_obs <- rep(as.numeric(length(object$y)), length(st))
  if (!is.null(o$subsample)) n_obs[startsWith(names(st), "subsample_")] <- o$subsample
  per_obs <- length(unique(n_obs)) > 1L
  val <- if (per_obs) tr / n_obs[stage] else tr
  stv <- if (per_obs) st / n_obs else st
  if (per_obs && own_ylab) ylab <- paste(ylab, "per observation")
  # the first evaluations of a run can be far below the rest: the axis
  # starts at the 5% quantile of the trail
  fin <- val[is.finite(val)]
  if (!length(fin)) stop("no evaluation of the bound succeeded: there is nothing to plot", call. = FALSE)
  lo <- stats::quantile(fin, 0.05, names = FALSE)
  ylim <- c(lo, max(fin))
  if (diff(ylim) <= 0) ylim <- ylim + c(-1, 1) * max(1, abs(ylim[1L])) * 1e-6
  cols <- if (length(st) == 1L) "steelblue4" else
    grDevices::hcl.colors(max(3L, length(st)), "Dark 3")[seq_along(st)]
  leg <- list(legend = sprintf("%s: %s", .stage_label(names(st)), format(stv, digits = 7L)),
              lty = 1, lwd = 2, col = cols)
  m <- .plot_margins(ttl("training"), leg)
  on.exit(graphics::par(m$op))
  graphics::plot(seq_along(val), val, type = "n", ylim = ylim,
                 xlab = if (is.null(xlab)) "evaluation of the bound, all stages" else xlab,
                 ylab = ylab, ...)
  ends <- cumsum(ev)
  for (k in seq_along(st)) {
    i <- which(stage == k)
    if (!length(i)) next
    graphics::lines(i, val[i], type = "s", lwd = 1.5, col = cols[k])
    graphics::points(max(i), stv[[k]], pch = 16, cex = 0.8, col = cols[k])
  }
  if (length(st) > 1L) {
    graphics::abline(v = ends[-length(ends)] + 0.5, lty = 3, col = grDevices::grey(0.6))
  }
  if (any(val < lo, na.rm = TRUE)) {
    graphics::mtext(sprintf("%d early evaluations below the axis", sum(val < lo, na.rm = TRUE)),
                    side = 1, line = -1.1, adj = 0.98, cex = 0.7, col = grDevices::grey(0.4))
  }
  .plot_decorate(m)
  out <- data.frame(evaluation = seq_along(tr), stage = names(st)[stage], bound = tr)
  if (per_obs) out$bound_per_observation <- val
  out
}

# The number of grid points per input of a plot: a whole number >= 2.
.check_grid_n <- function(n) {
  if (!is.numeric(n) || length(n) != 1L || !is.finite(n) || n < 2 || n != round(n) ||
      n > 1e5) {
    stop("'n' must be a whole number of grid points per input, from 2 to 100000", call. = FALSE)
  }
  as.integer(n)
}
