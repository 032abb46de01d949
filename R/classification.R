# What the two binary classifiers, pgpr() and svgp(likelihood = "bernoulli" or "probit"),
# share: the Polya-Gamma variance map and the predict/plot helpers that their
# methods in R/pgpr.R and R/svgp.R call.

# Label coding (.as_labels(), .labels_from_prob()), Gauss-Hermite
# quadrature and the probabilities of the binary links (.class_prob()) are
# the likelihood layer's, in R/likelihoods.R.

#' Polya-Gamma helper functions
#'
#' The quantities of the Polya-Gamma augmentation of the logistic
#' likelihood (Polson, Scott and Windle 2013; Wenzel et al. 2019; Passerello
#' 2022, section 2.6), computed in C without overflow or
#' cancellation: the mean \eqn{\theta(c) = E[\omega] = \tanh(c/2)/(2c)}{theta(c) = E[omega] = tanh(c/2)/(2c)} of
#' \eqn{\omega \sim PG(1, c)}{omega ~ PG(1, c)} (which tends to 1/4 at \eqn{c = 0}),
#' \eqn{\log\cosh(x)}{log cosh(x)}, and the divergence
#' \eqn{KL[PG(1, c) \| PG(1, 0)] = \log\cosh(c/2) - (c/4)\tanh(c/2)}{KL[PG(1, c) || PG(1, 0)] = log cosh(c/2) - (c/4)tanh(c/2)}.
#' \code{\link{pgpr}()} uses them; they are exported for checks and plots.
#'
#' The KL divergence follows from the exponential tilting
#' \eqn{PG(\omega | 1, c) \propto \exp(-c^2\omega/2) PG(\omega | 1, 0)}{PG(omega | 1, c) propto exp(-c^2 omega/2) PG(omega | 1, 0)}
#' (Polson, Scott and Windle 2013). Integrating \eqn{\omega}{omega} out of the
#' augmented likelihood under \eqn{PG(1, c)} gives the logistic bound of
#' Jaakkola and Jordan (2000), tight at \eqn{|z| = c} (see the example).
#'
#' @param c,x numeric vectors.
#' @return A numeric vector like the input.
#' @references Polson, N. G., Scott, J. G. and Windle, J. (2013). Bayesian
#'   inference for logistic models using Polya-Gamma latent variables. JASA
#'   108, 1339--1349.
#'
#'   Jaakkola, T. S. and Jordan, M. I. (2000). Bayesian parameter estimation
#'   via variational methods. Statistics and Computing 10, 25--37.
#'
#'   See also \link{sparsevgp-references}.
#' @examples
#' pg_theta(c(0, 1e-6, 1, 100))      # 1/4 at 0, about 1/(2c) for large c
#' pg_log_cosh(c(0, 1, 1000))        # no overflow
#' pg_kl(c(0, 0.01, 5))
#' # Jaakkola-Jordan: log sigmoid(z) >= -log 2 + z/2 - theta z^2/2 - KL, tight at |z| = c
#' z <- 1.7
#' c(plogis(z, log.p = TRUE), -log(2) + z / 2 - pg_theta(z) * z^2 / 2 - pg_kl(z))
#' @name polya_gamma
NULL

#' @rdname polya_gamma
#' @export
pg_theta <- function(c) .pg_map(c, "c", .ffi_pg_theta)

#' @rdname polya_gamma
#' @export
pg_log_cosh <- function(x) .pg_map(x, "x", .ffi_pg_log_cosh)

#' @rdname polya_gamma
#' @export
pg_kl <- function(c) .pg_map(c, "c", .ffi_pg_kl)

# Elementwise C map keeping names and dimensions.
.pg_map <- function(x, name, fun) {
  if (!is.numeric(x)) stop(sprintf("'%s' must be numeric", name), call. = FALSE)
  storage.mode(x) <- "double"
  x[] <- fun(as.vector(x))
  x
}

# ---- predict, fitted, logLik ------------------------------------------------

.classifier_types <- c("link", "prob", "class", "pg_variance", "latent", "response")

# predict() for binary classifiers: the latent predictive distribution
# (.predict_moments(): complete rows, variances clamped, rows named), then
# the class probabilities, labels or PG variances. Intervals are for the
# latent function (type "link") or for the probability g(f) (type "prob":
# the quantiles g(mu -/+ z s) of g(f) under q(f), since g is increasing);
# se.fit is the standard deviation of f, or of g(f) under q(f) (by
# Gauss-Hermite quadrature, whatever `method`). With pad = TRUE, results are
# padded for the rows that na.exclude dropped.
.predict_classifier <- function(object, newdata, type, method, interval = "none", level = 0.95,
                                se.fit = FALSE, full_cov = FALSE, na.action = stats::na.pass,
                                pad = TRUE, cluster = NULL) {
  type <- match.arg(type, .classifier_types)
  if (type == "latent") type <- "link"
  if (type == "response") type <- "prob"
  method <- match.arg(method, c("quadrature", "probit", "plugin"))
  interval <- match.arg(interval, c("none", "confidence", "prediction"))
  level <- .check_level(level)
  se.fit <- .check_flag(se.fit, "se.fit")
  full_cov <- .check_flag(full_cov, "full_cov")
  if (full_cov && type != "link") {
    stop("'full_cov = TRUE' is only available for type = \"link\"", call. = FALSE)
  }
  if (full_cov && (interval != "none" || se.fit)) {
    stop("'full_cov = TRUE' gives the covariance matrix: it cannot be combined with 'interval' or 'se.fit'",
         call. = FALSE)
  }
  if ((interval != "none" || se.fit) && type %in% c("class", "pg_variance")) {
    stop(sprintf("'interval' and 'se.fit' are for type = \"link\" or \"prob\", not \"%s\"", type),
         call. = FALSE)
  }
  if (interval == "prediction") {
    stop("a prediction interval of a binary label says nothing beyond its probability: use interval = \"confidence\" (for the latent function, or for the probability with type = \"prob\")",
         call. = FALSE)
  }
  inp <- .prediction_inputs(object, newdata, na.action)
  if (!pad) inp$na <- NULL
  lat <- .predict_moments(object, inp, full_cov, cluster = cluster)
  if (type == "link") {
    if (full_cov) return(list(mean = .pad(inp, lat$mean), cov = .pad(inp, lat$cov, cov = TRUE)))
    if (interval == "none" && !se.fit) {
      return(list(mean = .pad(inp, lat$mean), var = .pad(inp, lat$var)))
    }
    s <- sqrt(lat$var)
    z <- stats::qnorm((1 + level) / 2)
    fit <- if (interval == "none") lat$mean else
      .interval_matrix(lat$mean, lat$mean - z * s, lat$mean + z * s)
    fit <- .pad(inp, fit)
    return(if (se.fit) list(fit = fit, se.fit = .pad(inp, s)) else fit)
  }
  if (type == "pg_variance") {
    # Passerello 2022, Fig. 5.1: c* = sqrt(mu*^2 + s*^2), 1 / theta(c*)
    v <- 1 / pg_theta(sqrt(lat$mean^2 + lat$var))
    return(.pad(inp, v))
  }
  link <- .class_link(object)
  p <- .class_prob(lat$mean, lat$var, method, link)
  names(p) <- names(lat$mean)
  if (type == "class") return(.pad(inp, .labels_from_prob(p, object$labels)))
  if (interval == "none" && !se.fit) return(.pad(inp, p))
  fit <- p
  if (interval == "confidence") {
    g <- if (link == "probit") stats::pnorm else stats::plogis
    z <- stats::qnorm((1 + level) / 2)
    s <- sqrt(lat$var)
    fit <- .interval_matrix(p, g(lat$mean - z * s), g(lat$mean + z * s))
  }
  fit <- .pad(inp, fit)
  if (!se.fit) return(fit)
  list(fit = fit, se.fit = .pad(inp, .class_prob_sd(lat$mean, lat$var, link)))
}

# The standard deviation of g(f) under f ~ N(mu, s2), g the inverse link, by
# 20-point Gauss-Hermite quadrature of E[g(f)] and E[g(f)^2].
.class_prob_sd <- function(mu, s2, link) {
  g <- if (link == "probit") stats::pnorm else stats::plogis
  gh <- .gauss_hermite(20L)
  s <- sqrt(pmax(s2, 0))
  m1 <- m2 <- numeric(length(mu))
  for (i in seq_along(gh$x)) {
    gi <- g(mu + sqrt(2) * s * gh$x[i])
    m1 <- m1 + gh$w[i] * gi
    m2 <- m2 + gh$w[i] * gi^2
  }
  m1 <- m1 / sqrt(pi)
  m2 <- m2 / sqrt(pi)
  out <- sqrt(pmax(m2 - m1^2, 0))
  names(out) <- names(mu)
  out
}

# The link of a classifier: "probit" for svgp(likelihood = "probit"), else
# "logit" (pgpr and svgp's Bernoulli-logit).
.class_link <- function(object) .lik_of(object)$link

# Residuals of a classifier (residuals() of pgpr and svgp fits): the 0/1
# labels minus the probabilities of the positive class, divided by
# sqrt(p (1 - p)) for type = "pearson"; padded for na.exclude.
.residuals_classifier <- function(object, type = c("response", "pearson"), cluster = NULL) {
  type <- match.arg(type)
  # a fit on shards: computed on the workers (cluster = its shards)
  if (!is.null(object$shards)) {
    return(.shards_fit_values(object, cluster, "residuals", list(type = type)))
  }
  .no_cluster_residuals(cluster)
  p <- .predict_classifier(object, NULL, "prob", "quadrature", "none", 0.95, FALSE, FALSE,
                           pad = FALSE)
  r <- object$y - p
  if (type == "pearson") r <- r / sqrt(p * (1 - p))
  names(r) <- rownames(object$x)
  stats::naresid(object$na.action, r)
}

# The error of residuals(fit, cluster =) for a fit whose rows are here.
.no_cluster_residuals <- function(cluster) {
  if (!is.null(cluster)) {
    stop("'cluster' in residuals() is for fits on shards(): the residuals of this fit are computed here",
         call. = FALSE)
  }
  invisible()
}

# Training-set probabilities (padded for the rows that na.exclude dropped).
.fitted_classifier <- function(object, method, cluster = NULL) {
  if (!is.null(object$shards)) {
    return(.shards_fit_values(object, cluster, "fitted", list(method = method)))
  }
  .predict_classifier(object, NULL, "prob", method, cluster = cluster)
}

# Accuracy and mean negative log predictive probability (nats per point) of
# predicted probabilities p of the positive class against labels y01.
.class_metrics <- function(p, y01) {
  p <- pmin(pmax(p, .Machine$double.xmin), 1 - .Machine$double.eps / 2)
  c(accuracy = mean((p > 0.5) == (y01 == 1)),
    nll = -mean(ifelse(y01 == 1, log(p), log1p(-p))))
}

# ---- plots --------------------------------------------------------------------

# 1-D: p(y = 1 | x) with the band g(mu -/+ z sd), the labels at 0 and 1
# and the inducing inputs as ticks. 2-D: an image of the probability (or of
# the PG variance map) with a colour key, the decision boundary p = 1/2,
# the data by class (shapes and colours that stay visible on the
# background, with a legend naming the classes) and the inducing inputs.
# More inputs: the predicted probabilities by observed class. Legends go
# above the plot and keys in the right margin (R/plot.R).
.plot_classifier <- function(object, which, what, n, method, level, xlab, ylab, main,
                             inducing = TRUE, ..., points = NULL, inputs = NULL) {
  which <- match.arg(which, c("fit", "convergence", "residuals"))
  level <- .check_level(level)
  if (!is.null(points)) points <- .check_flag(points, "points")
  n <- .check_grid_n(n)
  if (which == "convergence") return(invisible(.plot_convergence(object, xlab, ylab, main, ...)))
  .shards_refuse(object, "plot(fit, which = \"fit\") and \"residuals\"",
                 "predict(fit, newdata, type = \"prob\") on a grid")
  if (which == "residuals") return(invisible(.plot_residuals(object, xlab, ylab, main, ...)))
  D <- ncol(object$x)
  if (is.null(main)) {
    main <- .plot_title(object)
    if (what == "pg_variance") main <- paste(main, if (D == 2L) "- log10 PG variance" else "- PG variance")
  }
  if (D == 1L) {
    return(.plot_class_1d(object, what, n, method, level, xlab, ylab, main, inducing, points,
                          ...))
  }
  if (D == 2L) {
    return(.plot_class_2d(object, what, min(n, .surface_n), method, xlab, ylab, main, inducing,
                          points, inputs, ...))
  }
  p <- .predict_classifier(object, NULL, "prob", method, pad = FALSE)
  cls <- factor(object$labels$levels[1L + object$y], levels = object$labels$levels)
  m <- .plot_margins(main)
  on.exit(graphics::par(m$op))
  st <- .point_style(length(p), drop = FALSE)
  graphics::stripchart(p ~ cls, vertical = TRUE, method = "jitter", pch = 16, cex = st$cex,
                       col = grDevices::adjustcolor(.class_colours, st$alpha),
                       xlab = if (is.null(xlab)) paste("observed", .response_name(object)) else xlab,
                       ylab = if (is.null(ylab)) .prob_label(object) else ylab, ...)
  graphics::abline(h = 0.5, lty = 2, col = grDevices::grey(0.4))
  .plot_decorate(m)
  invisible(data.frame(class = cls, prob = unname(p)))
}

# The colours of the two classes (low and high probability of the positive
# class), matching the ends of the "Blue-Red 3" palette of the maps.
.class_colours <- c("#2166AC", "#B2182B")

.prob_label <- function(object) {
  sprintf("p(%s = %s)", .response_name(object), object$labels$levels[2L])
}

.plot_class_1d <- function(object, what, n, method, level, xlab, ylab, main, inducing, points,
                           ...) {
  xr <- range(object$x[, 1L])
  pad <- 0.05 * diff(xr)
  if (pad == 0) pad <- 1
  g <- seq(xr[1L] - pad, xr[2L] + pad, length.out = n)
  lat <- .grid_moments(object, matrix(g, ncol = 1L))
  if (is.null(xlab)) xlab <- .input_names(object)[1L]
  marks <- if (inducing) .inducing_marks(object) else list()
  if (what == "pg_variance") {
    v <- 1 / pg_theta(sqrt(lat$mean^2 + lat$var))
    leg <- if (length(marks)) list(legend = "inducing inputs", lty = 1, lwd = 2, col = "firebrick")
    m <- .plot_margins(main, leg)
    on.exit(graphics::par(m$op))
    graphics::plot(g, v, type = "l", lwd = 2, col = "darkorange3", xlab = xlab,
                   ylab = if (is.null(ylab)) "PG variance 1/theta" else ylab, ...)
    for (mk in marks) graphics::rug(mk$at, side = 1, col = mk$col, lwd = 2, ticksize = 0.04)
    .plot_decorate(m)
    return(invisible(data.frame(x = g, pg_variance = unname(v))))
  }
  link <- .class_link(object)
  p <- .class_prob(lat$mean, lat$var, method, link)
  s <- sqrt(lat$var)
  z <- stats::qnorm((1 + level) / 2)
  inv <- if (link == "probit") stats::pnorm else stats::plogis
  lo <- inv(lat$mean - z * s)
  hi <- inv(lat$mean + z * s)
  lev <- object$labels$levels
  band <- grDevices::adjustcolor("steelblue", 0.3)
  leg <- list(legend = c(sprintf("%s (at 0)", lev[1L]), sprintf("%s (at 1)", lev[2L]),
                         "probability", sprintf("%g%% interval", 100 * level),
                         if (length(marks)) "inducing inputs"),
              pch = c(16, 16, NA, 15, if (length(marks)) NA),
              pt.cex = c(1, 1, NA, 2, if (length(marks)) NA),
              lty = c(NA, NA, 1, NA, if (length(marks)) 1),
              lwd = c(NA, NA, 2, NA, if (length(marks)) 2),
              col = c(.class_colours, "steelblue4", band, if (length(marks)) "firebrick"))
  m <- .plot_margins(main, leg)
  on.exit(graphics::par(m$op))
  graphics::plot(range(object$x[, 1L], g), c(-0.05, 1.05), type = "n", xlab = xlab,
                 ylab = if (is.null(ylab)) .prob_label(object) else ylab, ...)
  graphics::polygon(c(g, rev(g)), c(lo, rev(hi)), border = NA, col = band)
  st <- .point_style(length(object$y), points, drop = FALSE)
  if (st$draw) {
    graphics::points(object$x[, 1L], object$y, pch = 16, cex = st$cex,
                     col = grDevices::adjustcolor(.class_colours, st$alpha)[1L + object$y])
  }
  graphics::lines(g, p, lwd = 2, col = "steelblue4")
  graphics::abline(h = 0.5, lty = 3, col = grDevices::grey(0.5))
  for (mk in marks) graphics::rug(mk$at, side = 1, col = mk$col, lwd = 2, ticksize = 0.04)
  if (!st$draw) m$legend <- lapply(leg, `[`, -(1:2))
  .plot_decorate(m)
  invisible(data.frame(x = g, prob = unname(p), mean = unname(lat$mean), sd = unname(s)))
}

.plot_class_2d <- function(object, what, n, method, xlab, ylab, main, inducing, points, inputs,
                           ...) {
  ax <- .surface_axes(object, inputs)
  sg <- .surface_grid(object, n, ax)
  lat <- .grid_moments(object, sg$grid)
  p <- .class_prob(lat$mean, lat$var, method, .class_link(object))
  pm <- matrix(p, n, n)
  if (is.null(xlab)) xlab <- ax$names[1L]
  if (is.null(ylab)) ylab <- ax$names[2L]
  if (what == "pg_variance") {
    zm <- matrix(log10(1 / pg_theta(sqrt(lat$mean^2 + lat$var))), n, n)
    col <- grDevices::hcl.colors(40, "YlOrRd", rev = TRUE)
    ks <- .key_scale(range(zm))
    key <- "log10 1/theta"
  } else {
    zm <- pm
    col <- grDevices::hcl.colors(40, "Blue-Red 3")
    ks <- .key_scale(c(0, 1))
    key <- .prob_label(object)
  }
  # a constant surface (an unfitted model) has no contours to draw
  boundary <- diff(range(p)) > 0
  has_Z <- inducing && !is.null(object$params$Z) && nrow(object$params$Z) > 0L
  lev <- object$labels$levels
  leg <- list(legend = c(lev, if (boundary) "p = 0.5", if (has_Z) "inducing inputs"),
              pch = c(21, 24, if (boundary) NA, if (has_Z) 23),
              pt.bg = c(.class_colours, if (boundary) NA, if (has_Z) "gold"),
              col = c(grDevices::grey(0.3), grDevices::grey(0.3), if (boundary) "black",
                      if (has_Z) "black"),
              lty = c(NA, NA, if (boundary) 1, if (has_Z) NA),
              lwd = c(NA, NA, if (boundary) 2.5, if (has_Z) 1))
  m <- .surface_plot(sg, ax, zm, col, ks, key, main, leg, xlab, ylab, ...)
  on.exit(graphics::par(m$op))
  if (diff(range(zm)) > 0) {
    if (what == "pg_variance") {
      graphics::contour(sg$g1, sg$g2, zm, add = TRUE, col = grDevices::grey(0.3), labcex = 0.6,
                        nlevels = 6)
    } else {
      graphics::contour(sg$g1, sg$g2, zm, levels = c(0.1, 0.25, 0.75, 0.9), add = TRUE,
                        col = grDevices::grey(0.25), labcex = 0.6, lty = 2)
    }
  }
  if (boundary) {
    graphics::contour(sg$g1, sg$g2, pm, levels = 0.5, add = TRUE, lwd = 2.5,
                      drawlabels = FALSE, col = "black")
  }
  # each class in its colour, with a white edge that shows on the
  # saturated background of its own colour, and its own shape
  st <- .point_style(length(object$y), points)
  if (st$draw) {
    graphics::points(object$x[, ax$idx[1L]], object$x[, ax$idx[2L]],
                     pch = c(21, 24)[1L + object$y], cex = st$cex,
                     bg = grDevices::adjustcolor(.class_colours, st$alpha)[1L + object$y],
                     col = grDevices::adjustcolor("white", st$alpha), lwd = 0.6)
  }
  if (has_Z) .draw_inducing_2d(object, ax$idx)
  if (!st$draw) m$legend <- lapply(leg, `[`, -(1:2))
  .plot_decorate(m)
  out <- data.frame(sg$axes_grid, prob = unname(p), mean = unname(lat$mean),
                    sd = unname(sqrt(lat$var)))
  names(out)[1:2] <- ax$names
  if (what == "pg_variance") out$pg_variance <- unname(1 / pg_theta(sqrt(lat$mean^2 + lat$var)))
  invisible(out)
}
