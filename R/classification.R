# What the two binary classifiers, pgpr() and svgp(likelihood = "bernoulli" or "probit"),
# share: label coding, class probabilities from the latent predictive
# distribution, the Polya-Gamma variance map, and the predict/plot helpers
# that their methods in R/pgpr.R and R/svgp.R call.

# ---- labels ---------------------------------------------------------------

# Two classes coded as y01 in {0, 1} and ypm = 2 y01 - 1 in {-1, +1} (the PG
# formulas use y_n^2 = 1, Passerello 2022, chapter 4), plus what is needed to give
# class predictions back in the user's coding. The positive class (1) is the
# second factor level, TRUE, or 1, as in glm().
.as_labels <- function(y, n, name = "y") {
  if (is.null(y)) stop(sprintf("'%s' is missing", name), call. = FALSE)
  if (is.matrix(y) && ncol(y) == 1L) y <- drop(y)
  if (!is.null(dim(y))) stop(sprintf("'%s' must be a vector, not a matrix", name), call. = FALSE)
  if (length(y) != n) {
    stop(sprintf("'%s' has length %d but the inputs have %d rows", name, length(y), n),
         call. = FALSE)
  }
  if (anyNA(y)) {
    stop(sprintf("'%s' contains NA (%d of %d labels): remove those observations first",
                 name, sum(is.na(y)), n), call. = FALSE)
  }
  two <- function(k, what) {
    if (k != 2L) {
      stop(sprintf("'%s' must have exactly two classes, but it has %d (%s)", name, k, what),
           call. = FALSE)
    }
  }
  if (is.factor(y)) {
    used <- levels(y)[levels(y) %in% as.character(y)]
    two(length(used), paste(used, collapse = ", "))
    y01 <- as.numeric(as.character(y) == used[2L])
    coding <- list(type = "factor", levels = used)
  } else if (is.logical(y)) {
    two(length(unique(y)), paste(unique(y), collapse = ", "))
    y01 <- as.numeric(y)
    coding <- list(type = "logical", levels = c("FALSE", "TRUE"))
  } else if (is.numeric(y)) {
    u <- sort(unique(y))
    if (!all(u %in% c(0, 1)) && !all(u %in% c(-1, 1))) {
      stop(sprintf("'%s' as a number must be coded 0/1 (or -1/+1); it has values %s", name,
                   paste(utils::head(u, 5L), collapse = ", ")), call. = FALSE)
    }
    two(length(u), paste(u, collapse = ", "))
    y01 <- as.numeric(y == 1)
    coding <- list(type = "numeric", levels = as.character(u), values = u)
  } else {
    stop(sprintf("'%s' must be a two-level factor, a logical vector or a 0/1 vector, not %s",
                 name, class(y)[1L]), call. = FALSE)
  }
  list(y01 = y01, ypm = 2 * y01 - 1, coding = coding)
}

# The starting value of a learned constant prior mean of a classifier: the
# logit of the share of positive labels (kept within [0.01, 0.99]).
.class_mean_start <- function(y01) stats::qlogis(min(max(mean(y01), 0.01), 0.99))

# Class labels in the user's coding from the probability of the positive
# class (p > 1/2; every probability method gives the same boundary mu = 0).
.labels_from_prob <- function(p, coding) {
  pos <- p > 0.5
  out <- switch(coding$type,
    factor = factor(coding$levels[1L + pos], levels = coding$levels),
    logical = pos,
    numeric = coding$values[1L + pos])
  names(out) <- names(p)
  out
}

# ---- probabilities ----------------------------------------------------------

.gh_cache <- new.env(parent = emptyenv())

# Gauss-Hermite nodes and weights for int exp(-t^2) g(t) dt (Golub and Welsch 1969:
# the nodes are the eigenvalues of the Jacobi matrix of the Hermite
# polynomials, the weights sqrt(pi) times the squared first components).
.gauss_hermite <- function(n = 20L) {
  key <- as.character(n)
  if (!is.null(.gh_cache[[key]])) return(.gh_cache[[key]])
  if (n == 1L) {
    gh <- list(x = 0, w = sqrt(pi))
  } else {
    J <- matrix(0, n, n)
    off <- sqrt(seq_len(n - 1L) / 2)
    J[cbind(1:(n - 1L), 2:n)] <- off
    J[cbind(2:n, 1:(n - 1L))] <- off
    e <- eigen(J, symmetric = TRUE)
    o <- order(e$values)
    gh <- list(x = e$values[o], w = sqrt(pi) * e$vectors[1L, o]^2)
  }
  .gh_cache[[key]] <- gh
  gh
}

# p(y = 1 | x) from the latent predictive N(mu, s2):
#   "quadrature": int sigmoid(f) N(f; mu, s2) df by 20-point Gauss-Hermite,
#   "probit":     sigmoid(mu / sqrt(1 + pi s2 / 8)) (MacKay 1992),
#   "plugin":     sigmoid(mu), the choice of the code behind Passerello's
#                 experiments (2022, chapter 5).
.class_prob <- function(mu, s2, method, link = "logit") {
  # probit link: int Phi(f) N(f; mu, s2) df = Phi(mu / sqrt(1 + s2)) exactly
  if (identical(link, "probit")) {
    return(if (method == "plugin") stats::pnorm(mu) else stats::pnorm(mu / sqrt(1 + pmax(s2, 0))))
  }
  switch(method,
    plugin = stats::plogis(mu),
    probit = stats::plogis(mu / sqrt(1 + pi * s2 / 8)),
    quadrature = {
      gh <- .gauss_hermite(20L)
      s <- sqrt(pmax(s2, 0))
      p <- numeric(length(mu))
      for (i in seq_along(gh$x)) p <- p + gh$w[i] * stats::plogis(mu + sqrt(2) * s * gh$x[i])
      p / sqrt(pi)
    })
}

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
.class_link <- function(object) {
  if (identical(object$likelihood, "probit")) "probit" else "logit"
}

# Training-set probabilities (padded for the rows that na.exclude dropped).
.fitted_classifier <- function(object, method, cluster = NULL) {
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
# More inputs: the predicted probabilities by observed class.
.plot_classifier <- function(object, which, what, n, method, level, xlab, ylab, main,
                             inducing = TRUE, ...) {
  which <- match.arg(which, c("fit", "convergence", "residuals"))
  level <- .check_level(level)
  n <- .check_grid_n(n)
  if (which == "convergence") return(invisible(.plot_convergence(object, xlab, ylab, main, ...)))
  if (which == "residuals") return(invisible(.plot_residuals(object, xlab, ylab, main, ...)))
  D <- ncol(object$x)
  if (is.null(main)) {
    main <- .plot_title(object)
    if (what == "pg_variance") main <- paste(main, if (D == 2L) "- log10 PG variance" else "- PG variance")
  }
  if (D == 1L) {
    return(.plot_class_1d(object, what, n, method, level, xlab, ylab, main, inducing, ...))
  }
  if (D == 2L) {
    return(.plot_class_2d(object, what, min(n, 100L), method, xlab, ylab, main, inducing, ...))
  }
  p <- .predict_classifier(object, NULL, "prob", method, pad = FALSE)
  cls <- factor(object$labels$levels[1L + object$y], levels = object$labels$levels)
  graphics::stripchart(p ~ cls, vertical = TRUE, method = "jitter", pch = 16, cex = 0.6,
                       col = .class_colours, main = main,
                       xlab = if (is.null(xlab)) paste("observed", .response_name(object)) else xlab,
                       ylab = if (is.null(ylab)) .prob_label(object) else ylab, ...)
  graphics::abline(h = 0.5, lty = 2, col = grDevices::grey(0.4))
  invisible(data.frame(class = cls, prob = unname(p)))
}

# The colours of the two classes (low and high probability of the positive
# class), matching the ends of the "Blue-Red 3" palette of the maps.
.class_colours <- c("#2166AC", "#B2182B")

.prob_label <- function(object) {
  sprintf("p(%s = %s)", .response_name(object), object$labels$levels[2L])
}

.plot_class_1d <- function(object, what, n, method, level, xlab, ylab, main, inducing, ...) {
  xr <- range(object$x[, 1L])
  pad <- 0.05 * diff(xr)
  if (pad == 0) pad <- 1
  g <- seq(xr[1L] - pad, xr[2L] + pad, length.out = n)
  lat <- .grid_moments(object, matrix(g, ncol = 1L))
  if (is.null(xlab)) xlab <- .input_names(object)[1L]
  marks <- if (inducing) .inducing_marks(object) else list()
  if (what == "pg_variance") {
    v <- 1 / pg_theta(sqrt(lat$mean^2 + lat$var))
    graphics::plot(g, v, type = "l", lwd = 2, col = "darkorange3", xlab = xlab,
                   ylab = if (is.null(ylab)) "PG variance 1/theta" else ylab, main = main, ...)
    for (mk in marks) graphics::rug(mk$at, side = 1, col = mk$col, lwd = 2, ticksize = 0.04)
    return(invisible(data.frame(x = g, pg_variance = unname(v))))
  }
  link <- .class_link(object)
  p <- .class_prob(lat$mean, lat$var, method, link)
  s <- sqrt(lat$var)
  z <- stats::qnorm((1 + level) / 2)
  inv <- if (link == "probit") stats::pnorm else stats::plogis
  lo <- inv(lat$mean - z * s)
  hi <- inv(lat$mean + z * s)
  graphics::plot(object$x[, 1L], object$y, ylim = c(-0.05, 1.05), xlab = xlab,
                 ylab = if (is.null(ylab)) .prob_label(object) else ylab,
                 main = main, pch = 16, cex = 0.6, col = .class_colours[1L + object$y], ...)
  graphics::polygon(c(g, rev(g)), c(lo, rev(hi)), border = NA,
                    col = grDevices::adjustcolor("steelblue", 0.3))
  graphics::lines(g, p, lwd = 2, col = "steelblue4")
  graphics::abline(h = 0.5, lty = 3, col = grDevices::grey(0.5))
  for (mk in marks) graphics::rug(mk$at, side = 1, col = mk$col, lwd = 2, ticksize = 0.04)
  lev <- object$labels$levels
  leg <- c(sprintf("%s (at 0)", lev[1L]), sprintf("%s (at 1)", lev[2L]), "probability",
           sprintf("%g%% interval", 100 * level), if (length(marks)) "inducing inputs")
  graphics::legend("right", bty = "n", cex = 0.8, legend = leg,
                   pch = c(16, 16, NA, 15, NA)[seq_along(leg)],
                   lty = c(NA, NA, 1, NA, 1)[seq_along(leg)],
                   lwd = c(NA, NA, 2, NA, 2)[seq_along(leg)],
                   col = c(.class_colours, "steelblue4", grDevices::adjustcolor("steelblue", 0.3),
                           "firebrick")[seq_along(leg)])
  invisible(data.frame(x = g, prob = unname(p), mean = unname(lat$mean), sd = unname(s)))
}

.plot_class_2d <- function(object, what, n, method, xlab, ylab, main, inducing, ...) {
  r1 <- range(object$x[, 1L])
  r2 <- range(object$x[, 2L])
  g1 <- seq(r1[1L], r1[2L], length.out = n)
  g2 <- seq(r2[1L], r2[2L], length.out = n)
  grid <- as.matrix(expand.grid(g1, g2))
  lat <- .grid_moments(object, grid)
  p <- .class_prob(lat$mean, lat$var, method, .class_link(object))
  nm <- .input_names(object)
  if (is.null(xlab)) xlab <- nm[1L]
  if (is.null(ylab)) ylab <- nm[2L]
  if (what == "pg_variance") {
    z <- 1 / pg_theta(sqrt(lat$mean^2 + lat$var))
    zm <- matrix(log10(z), n, n)
    .image_key(g1, g2, zm, col = grDevices::hcl.colors(40, "YlOrRd", rev = TRUE),
               zlim = range(zm), key_title = "log10 1/theta", xlab = xlab, ylab = ylab,
               main = main, ...)
    if (diff(range(zm)) > 0) {
      graphics::contour(g1, g2, zm, add = TRUE, col = grDevices::grey(0.3), labcex = 0.6,
                        nlevels = 6)
    }
  } else {
    zm <- matrix(p, n, n)
    .image_key(g1, g2, zm, col = grDevices::hcl.colors(40, "Blue-Red 3"), zlim = c(0, 1),
               key_title = .prob_label(object), xlab = xlab, ylab = ylab, main = main, ...)
    if (diff(range(zm)) > 0) {
      graphics::contour(g1, g2, zm, levels = c(0.1, 0.25, 0.75, 0.9), add = TRUE,
                        col = grDevices::grey(0.25), labcex = 0.6, lty = 2)
    }
  }
  # a constant surface (an unfitted model) has no contours to draw
  boundary <- diff(range(p)) > 0
  if (boundary) {
    graphics::contour(g1, g2, matrix(p, n, n), levels = 0.5, add = TRUE, lwd = 2.5,
                      drawlabels = FALSE, col = "black")
  }
  # each class in its colour, with a white edge that shows on the
  # saturated background of its own colour, and its own shape
  graphics::points(object$x[, 1L], object$x[, 2L], pch = c(21, 24)[1L + object$y], cex = 0.6,
                   bg = .class_colours[1L + object$y], col = "white", lwd = 0.6)
  has_Z <- inducing && !is.null(object$params$Z) && nrow(object$params$Z) > 0L
  if (has_Z) {
    graphics::points(object$params$Z[, 1L], object$params$Z[, 2L], pch = 23, cex = 1.1,
                     bg = "gold", col = "black", lwd = 1)
  }
  lev <- object$labels$levels
  leg <- c(lev, if (boundary) "p = 0.5", if (has_Z) "inducing inputs")
  graphics::legend("topleft", legend = leg, cex = 0.7, bg = grDevices::adjustcolor("white", 0.8),
                   box.col = NA,
                   pch = c(21, 24, if (boundary) NA, if (has_Z) 23),
                   pt.bg = c(.class_colours, if (boundary) NA, if (has_Z) "gold"),
                   col = c("white", "white", if (boundary) "black", if (has_Z) "black"),
                   lty = c(NA, NA, if (boundary) 1, if (has_Z) NA),
                   lwd = c(NA, NA, if (boundary) 2.5, if (has_Z) 1))
  out <- data.frame(grid, prob = unname(p), mean = unname(lat$mean), sd = unname(sqrt(lat$var)))
  names(out)[1:2] <- nm
  if (what == "pg_variance") out$pg_variance <- unname(1 / pg_theta(sqrt(lat$mean^2 + lat$var)))
  invisible(out)
}
