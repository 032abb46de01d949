# Draws from the posterior predictive distribution of any model: the
# latent function by the model's .predict_latent() (jointly through the full
# covariance, or pointwise), then the observations by the likelihood.

#' Simulate from the posterior of a fitted model
#'
#' Draws of the latent function \eqn{f} or of new observations \eqn{y} from
#' the (approximate) posterior predictive distribution of a fit, at the
#' training inputs or at new ones, as \code{\link[stats]{simulate}} does for
#' \code{lm()} and \code{glm()} fits. The hyperparameters are held at their
#' fitted values.
#'
#' The latent values are drawn jointly, through the Cholesky factor of the
#' full predictive covariance, when there are at most \code{max_joint}
#' inputs (\code{joint = NULL}, the default); otherwise, or with
#' \code{joint = FALSE}, each input is drawn independently from its marginal
#' distribution, which keeps memory at \eqn{O(n)} but loses the correlation
#' between inputs (draws are then not smooth curves). A jitter of
#' \eqn{10^{-10}}{1e-10} times the mean variance (grown tenfold while
#' needed) keeps the factorisation of a nearly singular covariance going.
#'
#' Observations are drawn from the likelihood given the latent draw:
#' Gaussian noise with the fitted variance (divided by the prior weights at
#' the training inputs) for regression, and labels with probability
#' \eqn{\sigma(f)}{sigmoid(f)} (or \eqn{\Phi(f)}{pnorm(f)} for the probit
#' link) for classifiers, coded like the training labels. For a multiclass
#' fit (robust-max or softmax likelihood) the labels are drawn from the
#' predictive class probabilities, independently at each input (only
#' \code{type = "response"}). At most \eqn{2^{31} - 1}{2^31 - 1} numbers (inputs times
#' \code{nsim}) are drawn in one call.
#'
#' @param object a fitted model.
#' @param nsim the number of draws.
#' @param seed as in \code{\link[stats]{simulate}}: \code{NULL}, or an
#'   integer passed to \code{set.seed()} (the random number generator's
#'   state is restored afterwards).
#' @param newdata new inputs, as for \code{\link{predict.sparsevgp}}; by
#'   default the training inputs.
#' @param type \code{"response"} for new observations \eqn{y} (the default,
#'   as in \code{stats::simulate()}), \code{"latent"} for the latent
#'   function \eqn{f} (\code{"link"} is the same).
#' @param joint \code{TRUE} for joint draws through the full covariance,
#'   \code{FALSE} for independent draws at each input, \code{NULL} for joint
#'   draws up to \code{max_joint} inputs.
#' @param max_joint the largest number of inputs drawn jointly when
#'   \code{joint = NULL}.
#' @param na.action for rows of \code{newdata} with missing inputs, as in
#'   \code{predict()}: \code{na.pass} gives \code{NA} rows.
#' @param ... not used (an error, as for \code{predict()}).
#' @return A data frame with one column per draw (\code{sim_1}, ...) and one
#'   row per input, with the attribute \code{"seed"} as in
#'   \code{stats::simulate()}. Rows that \code{na.exclude} dropped when
#'   fitting are \code{NA}.
#' @examples
#' fit <- sgpr(y ~ x, data = snelson, inducing = 15)
#' grid <- data.frame(x = seq(-1, 7, length.out = 100))
#' draws <- simulate(fit, nsim = 5, seed = 1, newdata = grid, type = "latent")
#' matplot(grid$x, draws, type = "l", lty = 1, xlab = "x", ylab = "f(x)")
#' points(snelson$x, snelson$y, pch = 16, cex = 0.4, col = "grey50")
#'
#' # the draws' mean and variance approach the predictive ones
#' sims <- simulate(fit, nsim = 2000, seed = 2, newdata = data.frame(x = 3))
#' p <- predict(fit, data.frame(x = 3), type = "response")
#' c(mean(unlist(sims)), p$mean, var(unlist(sims)), p$var)
#' @export
simulate.sparsevgp <- function(object, nsim = 1, seed = NULL, newdata = NULL,
                               type = c("response", "latent", "link"), joint = NULL,
                               max_joint = 2000L, na.action = stats::na.pass, ...) {
  .check_dots("simulate", ...)
  type <- match.arg(type)
  if (!is.numeric(nsim) || length(nsim) != 1L || !is.finite(nsim) || nsim < 1 ||
      nsim != round(nsim) || nsim > .Machine$integer.max) {
    stop(sprintf("'nsim' must be a whole number from 1 to %d", .Machine$integer.max),
         call. = FALSE)
  }
  nsim <- as.integer(nsim)
  if (!is.null(seed) && (!is.numeric(seed) || length(seed) != 1L || !is.finite(seed))) {
    stop("'seed' must be NULL or one number (for set.seed())", call. = FALSE)
  }
  if (!is.null(joint)) joint <- .check_flag(joint, "joint")
  # the random number state, as stats:::simulate.lm() keeps it
  if (!exists(".Random.seed", envir = globalenv(), inherits = FALSE)) stats::runif(1L)
  if (is.null(seed)) {
    rng_state <- get(".Random.seed", envir = globalenv())
  } else {
    old <- get(".Random.seed", envir = globalenv())
    on.exit(assign(".Random.seed", old, envir = globalenv()))
    set.seed(seed)
    rng_state <- structure(seed, kind = as.list(RNGkind()))
  }
  inp <- .prediction_inputs(object, newdata, na.action)
  ok <- inp$ok
  n <- nrow(inp$x)
  .check_draws(n, nsim)
  lik <- .lik_of(object)
  if (lik$latent > 1L) {
    sims <- .simulate_multiclass(object, lik, inp, nsim, type, joint)
  } else {
    if (is.null(joint)) joint <- sum(ok) <= max_joint
    p <- .predict_moments(object, inp, full_cov = joint)
    f <- matrix(NA_real_, n, nsim)
    if (any(ok)) {
      m <- p$mean[ok]
      z <- matrix(stats::rnorm(sum(ok) * nsim), sum(ok), nsim)
      f[ok, ] <- m + if (joint) .chol_jitter(p$cov[ok, ok, drop = FALSE]) %*% z else
        sqrt(p$var[ok]) * z
    }
    sims <- if (type != "response") as.data.frame(f) else .draw_response(lik, object, f, inp)
    names(sims) <- paste0("sim_", seq_len(nsim))
  }
  rn <- rownames(inp$x)
  if (is.null(rn)) rn <- as.character(seq_len(n))
  rownames(sims) <- make.unique(rn)
  if (inherits(inp$na, "exclude")) {
    rows <- stats::napredict(inp$na, seq_len(n))
    full <- character(length(rows))
    full[!is.na(rows)] <- rownames(sims)
    dropped <- names(inp$na)
    full[is.na(rows)] <- if (is.null(dropped)) as.character(which(is.na(rows))) else dropped
    sims <- sims[rows, , drop = FALSE]
    rownames(sims) <- make.unique(full)
  }
  attr(sims, "seed") <- rng_state
  sims
}

# Observations drawn given the latent draws f (n x nsim; NA at incomplete
# rows), by the likelihood: a data frame, one column per draw.
.draw_response <- function(lik, object, f, inp) UseMethod(".draw_response")

# Gaussian noise with the fit's variances (divided by the prior weights at
# the training inputs; a noise model's at new inputs).
#' @export
.draw_response.lik_gaussian <- function(lik, object, f, inp) {
  noise <- .noise_vector(object, inp)
  as.data.frame(f + matrix(stats::rnorm(length(f)), nrow(f), ncol(f)) * sqrt(noise))
}

# Labels with probability g(f), coded like the training labels.
#' @export
.draw_response.lik_binary <- function(lik, object, f, inp) {
  g <- function(v) .lik_link_inverse(lik, v)
  u <- matrix(stats::runif(length(f)), nrow(f), ncol(f))
  as.data.frame(lapply(seq_len(ncol(f)), function(j) {
    lab <- .labels_from_prob(ifelse(u[, j] < g(f[, j]), 1, 0), object$labels)
    lab[is.na(f[, j])] <- NA
    lab
  }))
}

# Any other likelihood: its own draws given f (R/likelihoods.R).
#' @export
.draw_response.sparsevgp_likelihood <- function(lik, object, f, inp) {
  as.data.frame(lapply(seq_len(ncol(f)), function(j) {
    y <- rep(NA_real_, nrow(f))
    ok <- !is.na(f[, j])
    y[ok] <- .lik_draw(lik, f[ok, j], object$params)
    y
  }))
}

# Several classes: the K latent functions drawn independently at each input
# (joint draws over inputs are not available), then classes by the
# likelihood; type = "latent" gives one column per draw and class.
.simulate_multiclass <- function(object, lik, inp, nsim, type, joint) {
  if (isTRUE(joint)) {
    stop("joint draws are not available for multiclass fits: use joint = FALSE", call. = FALSE)
  }
  ok <- inp$ok
  n <- nrow(inp$x)
  lev <- object$labels$levels
  lat <- .predict_latent(object, inp$x[ok, , drop = FALSE], FALSE)
  K <- length(lev)
  out <- lapply(seq_len(nsim), function(i) {
    f <- lat$mean + sqrt(pmax(lat$var, 0)) * matrix(stats::rnorm(sum(ok) * K), sum(ok), K)
    if (type != "response") {
      m <- matrix(NA_real_, n, K, dimnames = list(NULL, lev))
      m[ok, ] <- f
      return(as.data.frame(m))
    }
    cls <- factor(rep(NA_character_, n), levels = lev)
    cls[ok] <- lev[.lik_draw(lik, f, object$params)]
    data.frame(cls)
  })
  sims <- do.call(cbind, out)
  names(sims) <- if (type != "response") {
    paste(rep(paste0("sim_", seq_len(nsim)), each = K), lev, sep = "_")
  } else paste0("sim_", seq_len(nsim))
  sims
}

# A lower triangular L with L L' = S + jitter I: the jitter starts at 1e-10
# times the mean diagonal and grows tenfold (to 1e-2) while the
# factorisation fails (a predictive covariance at many inputs is nearly
# singular).
.chol_jitter <- function(S) {
  S <- (S + t(S)) / 2
  scale <- mean(diag(S))
  if (!is.finite(scale) || scale <= 0) scale <- 1
  for (eps in c(0, 10^(-10:-2))) {
    R <- tryCatch(chol(S + diag(eps * scale, nrow(S))), error = function(e) NULL)
    if (!is.null(R)) return(t(R))
  }
  stop("the predictive covariance could not be factorised: use joint = FALSE", call. = FALSE)
}

# n inputs times nsim draws: at most 2^31 - 1 numbers (16 GB), a clear
# error beyond rather than R's own about a vector it cannot allocate.
.check_draws <- function(n, nsim) {
  if (as.double(n) * nsim > .Machine$integer.max) {
    stop(sprintf("'nsim' = %d draws at %d inputs are %.3g numbers, more than the %d (16 GB) simulate() makes at once: draw in several calls",
                 nsim, n, as.double(n) * nsim, .Machine$integer.max), call. = FALSE)
  }
  invisible()
}
