# Comparing fits: anova() as a table of bounds (or likelihoods), degrees of
# freedom, AIC, BIC and differences, and vcov(), which explains why there is
# no covariance matrix of the hyperparameters. The value compared is what
# logLik() returns; its attribute "kind" says whether it is a lower bound on
# log p(y) ("bound", the default) or a log likelihood ("likelihood": the exact
# GP, and approximate likelihoods such as a Vecchia approximation).

#' Compare fits of one model on the same data
#'
#' \code{anova()} tabulates fits of the same model function on the same
#' response: for each, the number of hyperparameters (\code{Df}, as in
#' \code{\link{logLik.sparsevgp}}), the value it maximised, \code{AIC},
#' \code{BIC}, and for each fit after the first the differences from the fit
#' before it. A typical use is a learned noise model against one noise
#' variance, \code{anova(sgpr(accel ~ times, data = mcycle), sgpr(accel ~
#' times, data = mcycle, noise = ~ times))}.
#'
#' \strong{What a difference of bounds means.} The sparse models maximise the
#' ELBO, a lower bound on the log marginal likelihood \eqn{\log p(y)}{log
#' p(y)}. Each fit's ELBO falls short of its own \eqn{\log p(y)}{log p(y)} by
#' the KL divergence from its approximate posterior to the exact one, and that
#' gap differs between fits (a better noise model can also make the
#' approximation tighter or looser). So a difference of ELBOs of \eqn{d}
#' nats says that the second fit reaches a bound \eqn{d} nats higher: a better
#' model, a tighter approximation, or both. It is not a log likelihood ratio,
#' and \eqn{2d} has no chi-squared distribution, so no p-value is given. For
#' \code{\link{sgpr}()} fits the table adds the upper bound of Titsias (2014)
#' (column \code{Upper}, as in \code{summary()}): each fit's \eqn{\log
#' p(y)}{log p(y)} at its fitted hyperparameters lies between its ELBO and its
#' \code{Upper}, so a fit whose ELBO is above another fit's \code{Upper} has
#' the larger \eqn{\log p(y)}{log p(y)} for certain.
#'
#' For \code{\link{gpr}()} fits the values are exact log marginal
#' likelihoods and their difference is a log likelihood ratio of type-II
#' maximum likelihood fits. Even then no p-value is given: the fits are not
#' checked to be nested, and nested GP models usually differ by a parameter
#' at the edge of its range (a variance of zero, a lengthscale of infinity),
#' where the chi-squared approximation of the likelihood ratio does not
#' hold.
#'
#' \strong{What is compared.} The value is \code{logLik(fit)}; its attribute
#' \code{"kind"} says whether it is a lower bound on \eqn{\log p(y)}{log p(y)}
#' (\code{"bound"}, the default when the attribute is absent) or a log
#' likelihood (\code{"likelihood"}: \code{gpr()}, and models whose objective
#' is an approximate likelihood rather than a bound). A fit can declare its
#' kind in its field \code{loglik_kind}, which \code{logLik()} reports. Fits
#' of different kinds are compared all the same, with a note that their
#' difference mixes a bound and a likelihood.
#'
#' @param object a fit of \code{\link{sgpr}()}, \code{\link{gpr}()},
#'   \code{\link{osgpr}()}, \code{\link{pgpr}()}, \code{\link{svgp}()} or
#'   \code{\link{odvgp}()}.
#' @param ... further fits of the same model function on the same response.
#' @return A data frame of class \code{"anova"} with one row per fit and
#'   columns \code{Df}, the value compared (\code{ELBO} or \code{logLik}),
#'   \code{Upper} (\code{sgpr()} fits), \code{AIC}, \code{BIC}, \code{Df
#'   diff} and the difference of the values (\code{ELBO diff} or
#'   \code{logLik diff}); its heading lists the fits' calls and what the
#'   difference means. Printed like \code{anova()} tables of \pkg{stats}.
#' @references Titsias, M. K. (2014). Variational inference for Gaussian and
#'   determinantal point processes. Advances in Variational Inference
#'   workshop, NIPS 2014.
#' @importFrom stats anova vcov
#' @seealso \code{\link{logLik.sparsevgp}} (\code{AIC()}, \code{BIC()}),
#'   \code{summary()} of an \code{\link{sgpr}()} fit for its bound and upper bound.
#' @examples
#' set.seed(1)
#' x <- runif(200, -5, 5)
#' y <- 2.5 * sin(6 * x / 5) + rnorm(200, sd = sqrt(0.05 + 0.05 * x^2))
#' d <- data.frame(x = x, y = y)
#' homo <- sgpr(y ~ x, data = d, inducing = 20)
#' het <- sgpr(y ~ x, data = d, inducing = 20, noise = ~ x + I(x^2))
#' anova(homo, het)
#' @export
anova.sparsevgp <- function(object, ...) {
  fits <- c(list(object), list(...))
  ok <- vapply(fits, inherits, TRUE, what = "sparsevgp")
  if (!all(ok)) {
    stop(sprintf("anova(): argument%s %s %s not a sparsevgp fit", if (sum(!ok) > 1L) "s" else "",
                 paste(which(!ok), collapse = ", "), if (sum(!ok) > 1L) "are" else "is"),
         call. = FALSE)
  }
  cls <- vapply(fits, function(f) class(f)[1L], "")
  if (length(unique(cls)) > 1L) {
    stop(sprintf("anova() compares fits of one model function, not %s: the bounds of different models differ in how far they fall below log p(y). AIC() and BIC() take fits of different models",
                 paste(unique(paste0(cls, "()")), collapse = " and ")), call. = FALSE)
  }
  n <- vapply(fits, function(f) as.double(.nobs(f)), 0)
  same <- vapply(fits[-1L], function(f) .same_response(fits[[1L]], f), TRUE)
  if (length(unique(n)) > 1L || !all(same)) {
    stop(sprintf("anova() compares fits to the same response: %s",
                 if (length(unique(n)) > 1L)
                   sprintf("the fits have %s observations (check subset and na.action)",
                           paste(format(n, scientific = FALSE, trim = TRUE), collapse = ", ")) else
                   "the fits' responses (or prior weights or offsets) differ"),
         call. = FALSE)
  }
  ll <- lapply(fits, stats::logLik)
  value <- vapply(ll, as.numeric, 0)
  df <- vapply(ll, function(l) as.numeric(attr(l, "df")), 0)
  kind <- vapply(ll, .kind_of, "")
  what <- if (all(kind == "likelihood")) "logLik" else if (all(kind == "bound")) "ELBO" else
    "ELBO or logLik"
  upper <- vapply(fits, function(f) {
    u <- f$upper_bound
    if (is.numeric(u) && length(u) == 1L) u else NA_real_
  }, 0)
  tab <- data.frame(Df = df, value = value, Upper = upper,
                    AIC = -2 * value + 2 * df, BIC = -2 * value + log(n) * df,
                    dDf = c(NA, diff(df)), dvalue = c(NA, diff(value)),
                    check.names = FALSE)
  names(tab)[c(2L, 6L, 7L)] <- c(what, "Df diff", paste(what, "diff"))
  if (all(is.na(upper))) tab$Upper <- NULL
  rownames(tab) <- as.character(seq_along(fits))
  calls <- vapply(fits, function(f) paste(deparse(f$call, width.cutoff = 500L), collapse = " "),
                  "")
  heading <- c(sprintf("Comparison of %d %s() fits to the same %.0f observations\n",
                       length(fits), cls[1L], n[1L]),
               paste0(sprintf("Model %d: %s", seq_along(calls), calls), collapse = "\n"),
               .anova_note(kind, !all(is.na(upper))))
  structure(tab, heading = heading, class = c("anova", "data.frame"))
}

# Whether fits b and a have the same response (y with its offset and prior
# weights), as anova() needs.
.same_response <- function(a, b) {
  resp <- function(f) {
    y <- f$y
    if (!is.null(f$offset)) y <- y + f$offset
    list(unname(as.double(y)), if (!is.null(f$weights)) unname(as.double(f$weights)))
  }
  isTRUE(all.equal(resp(a), resp(b), tolerance = 1e-12))
}

# The kind of a logLik value: "bound" unless it says otherwise.
.kind_of <- function(ll) {
  k <- attr(ll, "kind")
  if (is.character(k) && length(k) == 1L && k %in% c("bound", "likelihood")) k else "bound"
}

# The kind of what a fit maximised, for logLik(): the fit's own field
# `loglik_kind` when set (a model whose objective is an approximate
# likelihood sets "likelihood"), the exact likelihood for gpr(), else a
# lower bound on log p(y).
.loglik_kind <- function(object) {
  k <- object$loglik_kind
  if (is.character(k) && length(k) == 1L && k %in% c("bound", "likelihood")) return(k)
  if (inherits(object, "gpr")) "likelihood" else "bound"
}

# What the differences in an anova() table mean, in words.
.anova_note <- function(kind, has_upper) {
  note <- if (all(kind == "bound")) {
    c("ELBO: the lower bound on log p(y) that each fit maximised. A difference of ELBOs is not a log likelihood ratio: each ELBO is below its own log p(y) by the KL divergence from its approximation to the exact posterior, which differs between fits, so a higher ELBO means a better model, a tighter approximation or both. No p-value: 2 x the difference has no chi-squared distribution.",
      if (has_upper) "Upper: the upper bound on log p(y) of Titsias (2014). Each fit's log p(y) lies between its ELBO and Upper: a fit whose ELBO is above another's Upper has the larger log p(y) for certain.")
  } else if (all(kind == "likelihood")) {
    "logLik: the log likelihood each fit maximised (type-II maximum likelihood). Its difference is a log likelihood ratio; no p-value, since the fits are not checked to be nested and nested GP models usually differ by a parameter at the edge of its range (a variance of 0), where the chi-squared approximation fails."
  } else {
    "The fits maximised different things: some a lower bound on log p(y) (ELBO), some a log likelihood, so their difference mixes the model with the approximation. No p-value."
  }
  c("", unlist(lapply(note, function(p) c(strwrap(p, width = 0.95 * getOption("width")), "")),
               use.names = FALSE))
}

#' @rdname sparsevgp-methods
#' @export
vcov.sparsevgp <- function(object, ...) {
  stop("vcov() is not available: the hyperparameters are point estimates that maximise a bound on the marginal likelihood (type-II maximum likelihood), which for the sparse models is not a likelihood, and the curvature of a bound at its maximum is not the inverse covariance of the estimates (see ?confint.sparsevgp). The uncertainty of the function is in predict(fit, se.fit = TRUE) or predict(fit, full_cov = TRUE), simulate(fit), and posterior_inducing(fit) for sgpr() and pgpr() fits",
       call. = FALSE)
}
