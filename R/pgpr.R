# Polya-Gamma sparse GP classification (PGPR; Passerello 2022, chapter 4): the
# collapsed bound for the logistic likelihood with closed-form local
# parameters c, trained by Passerello's double loop (sections 4.3.2, 5.4) with
# heteroscedastic greedy-variance selection of the inducing inputs.
#
# For fixed c the bound is the heteroscedastic Gaussian bound with noise
# lambda_n = 1 / theta_n and pseudo-targets ytil_n = y_n / (2 theta_n), plus
# terms that depend on c only (Passerello 2022, eq. 4.14 and App. C.3, in
# the exact pseudo-target form derived for this package and checked
# numerically in its tests), so it is computed by the
# Gaussian bound routine of SGPR (src/bound_gaussian.c) and its gradient comes
# from that routine's adjoints.

#' Polya-Gamma sparse Gaussian process classification (PGPR)
#'
#' Fits the collapsed sparse variational Gaussian process classifier of
#' Passerello (2022, chapter 4) for the logistic likelihood
#' \eqn{p(y_n | f_n) = \sigma(y_n f_n)}{p(y_n | f_n) = sigma(y_n f_n)}, \eqn{y_n \in \{-1, +1\}}{y_n in \{-1, +1\}}. The
#' likelihood is augmented with Polya-Gamma variables
#' \eqn{\omega_n \sim PG(1, c_n)}{omega_n ~ PG(1, c_n)}; the optimal \eqn{q(u)} is then Gaussian and
#' available in closed form, and the evidence lower bound (Passerello 2022,
#' eq. 4.7)
#' \deqn{F = \log N(\tilde y; m, Q_{ff} + \Theta^{-1}) - \tfrac12 \mathrm{tr}(\Theta(K_{ff} - Q_{ff}))
#'       + \tfrac N2 \log 2\pi - \tfrac12 \sum_n \log\theta_n + \tfrac18 \sum_n \theta_n^{-1}
#'       - N \log 2 - \sum_n KL[PG(1, c_n) \| PG(1, 0)]}{F = log N(y~; m, Qff + Theta^-1) - 1/2 tr(Theta (Kff - Qff))
#'       + N/2 log 2 pi - 1/2 sum_n log theta_n + 1/8 sum_n 1/theta_n
#'       - N log 2 - sum_n KL[PG(1, c_n) || PG(1, 0)]}
#' with \eqn{\theta_n = \tanh(c_n/2)/(2c_n)}{theta_n = tanh(c_n/2)/(2c_n)} and pseudo-targets
#' \eqn{\tilde y_n = y_n / (2\theta_n)}{y~_n = y_n / (2 theta_n)} is the collapsed bound of
#' heteroscedastic sparse regression plus terms that depend on \eqn{c} only
#' (Passerello 2022, eq. 4.14 and Appendix C.3; the exact pseudo-target form
#' was derived for this package and is checked numerically in its tests).
#' It is a lower bound on the log marginal likelihood
#' of the logistic model for every \eqn{c}; it is computed by the same C
#' routine as \code{\link{sgpr}()} in \eqn{O(N M^2)}{O(N M^2)} time.
#'
#' \strong{Training} follows Passerello's double loop, a "double-layered
#' variational EM" (Passerello 2022, sections 4.3.2 and 5.4). The inner
#' loop alternates L-BFGS-B on the kernel parameters (and the mean, and the
#' inducing inputs if \code{optimize_inducing = TRUE}) at fixed \eqn{c} with
#' closed-form updates \eqn{c_n = \sqrt{\mu_n^2 + \sigma_n^2}}{c_n = sqrt(mu_n^2 + sigma_n^2)} from the current
#' \eqn{q(f_n)}{q(f_n)} (Passerello 2022, eq. 4.11), which never decrease the bound.
#' With
#' \code{inducing = "hgv"} or \code{"gv"} an outer loop re-selects the
#' inducing inputs from the training inputs before every inner loop, by
#' greedy conditional variance weighted by \eqn{\theta}{theta} (heteroscedastic
#' greedy variance, HGV, which favours points near the decision boundary;
#' Passerello 2022, sections 4.3.2 and 5.5) or unweighted (GV; Burt,
#' Rasmussen and van der Wilk 2020), at the current kernel
#' and \eqn{c}; ties are broken in one random order drawn once per fit, so
#' that a selection changes between passes only through the kernel and
#' \eqn{c}. Both loops stop when the bound changes by less than
#' \code{control$tol} (by default \eqn{10^{-4}}{1e-4} nats per observation)
#' or after \code{control$outer_max} and \code{control$inner_max} rounds;
#' the outer loop keeps the state with the highest bound. The per-pass
#' record is in \code{fit$history}.
#'
#' What the defaults add to the thesis's loop, so that a fit without
#' settings can be trusted:
#' \itemize{
#'   \item \strong{Starting values found by the bound.} Kernel parameters
#'     left \code{NULL} start at the best point of a small grid (lengthscales
#'     \eqn{m \cdot sd(x_d) \sqrt{D}}{m sd(x_d) sqrt(D)} with one multiplier
#'     \eqn{m \in 2^{-4}, \dots, 2^3}{m in 2^-4, ..., 2^3} for all inputs, variances 1,
#'     4, 16, 64), each scored by the bound with \eqn{c} at its optimum, on
#'     at most 1000 rows. Before any kernel parameter moves, \eqn{c} is
#'     brought to its optimum for the starting kernel and inducing inputs
#'     (from the thesis's \eqn{c_n = 0.1} every point has the same precision
#'     \eqn{\theta_n}{theta_n}).
#'   \item \strong{HGV weighted by a fitted model.} Its first pass runs at
#'     the greedy-variance selection (with every \eqn{c_n = 0.1}{c_n = 0.1} the
#'     weights are equal), and every later selection is weighted by the
#'     \eqn{\theta_n}{theta_n} of the kernel and \eqn{c} fitted in the pass
#'     before, so HGV and GV differ whenever the fitted Polya-Gamma
#'     precisions do. Weights of \eqn{c} fitted at the starting kernel alone
#'     favour the inputs that kernel explains worst; from a kernel that is
#'     nearly diagonal on the data they chose isolated inputs, and the fit
#'     collapsed to a kernel variance near 0. Since the pass with the
#'     highest bound is kept, HGV's bound is at least that of GV's first pass.
#'   \item \strong{One lengthscale first.} With one lengthscale per input
#'     left to the data (the default for several inputs), training first
#'     fits one lengthscale for all inputs in units of their standard
#'     deviations, and then one per input, but only when the sparse
#'     approximation of that first fit is accurate (its weighted trace
#'     \eqn{\sum_n \theta_n [K_{ff} - Q_{ff}]_{nn}}{sum_n theta_n [Kff - Qff]_nn} below \eqn{10^{-3}}{1e-3}
#'     per observation): where it is not, the bound favours kernels its
#'     inducing inputs can represent and switches off inputs that the data
#'     need. The lengthscales reported are per input in either case.
#'   \item \strong{M from the data.} Without \code{M} or \code{threshold},
#'     the first selection takes \eqn{\min(N, 100)}{min(N, 100)} inducing inputs, and every
#'     later selection, at the fitted kernel and \eqn{c}, adds inducing inputs
#'     until the \eqn{\theta}{theta}-weighted trace is below \eqn{10^{-3}}{1e-3} nats per
#'     observation: for fixed \eqn{c} the bound is that of heteroscedastic
#'     regression with noise \eqn{1/\theta_n}{1/theta_n}, whose expected KL divergence from
#'     the exact posterior lies between half the trace and the trace
#'     (Passerello 2022, eq. 3.7), the same target as \code{\link{sgpr}()}'s.
#'     At most \eqn{\max(100, \sqrt{4.5 \cdot 10^8 / N})}{max(100, sqrt(4.5e8 / N))} (300 at \eqn{N =
#'     5000}) are taken. Among passes whose bounds are within that target of
#'     the highest, the one with the fewest inducing inputs is kept, and the
#'     outer loop stops at the first pass that raises the bound by less than
#'     that target.
#'     \code{summary()} reports the \eqn{M} chosen.
#'   \item \strong{The latent amplitude by the Bernoulli bound.} The
#'     Polya-Gamma bound is the Jaakkola and Jordan (2000) bound on
#'     \eqn{\log\sigma}{log sigma} in expectation under \eqn{q(f)}; the Bernoulli bound of the
#'     same \eqn{q(u)}, \eqn{\sum_n E_q[\log\sigma(y_n f_n)] - KL[q(u) \| p(u)]}{sum_n E_q[log sigma(y_n f_n)] - KL[q(u) || p(u)]},
#'     is higher by a gap that grows with the spread of \eqn{q(f)}, so the PG
#'     bound favours small kernel variances and probabilities too close to
#'     1/2. With the kernel variance left \code{NULL}, training ends by
#'     scaling the latent function's prior (variance by \eqn{a^2}{a^2}, a learned
#'     mean by \eqn{a}) with \eqn{c} at their optimum, \eqn{a} chosen among
#'     \eqn{1.25^k}{1.25^k} by that Bernoulli bound; \code{fit$amplitude} records
#'     \eqn{a} and both bounds, and \code{fit$bound} is the PG bound at the
#'     final parameters. Within the inner loop, a round that raised the
#'     variance is followed by steps of the same factor along that direction
#'     (variance, mean and \eqn{c} together) while the PG bound rises: the
#'     alternation at fixed \eqn{c} climbs it by about a factor 1.5 per round.
#'   \item \strong{Large data.} With more than \code{control$subsample}
#'     (10 000) observations the schedule runs on a random subsample of that
#'     many rows; then \eqn{c}, and so \eqn{q(u)}, are computed on all the data
#'     (the kernel, mean and inducing inputs stay as fitted on the
#'     subsample).
#' }
#' Given parameters, \code{M}, a \code{threshold} or a kernel with one
#' lengthscale (\code{kernel_rbf(ard = FALSE)}) are respected as given;
#' \code{control = list(tol = 1e-3)} with \code{kernel = kernel_rbf(1, 1)} and
#' a given \code{M} is the thesis's protocol (\code{inst/bench/reproduce_pgpr.R}).
#'
#' @inheritParams sgpr
#' @param y the labels: a factor with two levels (the second is the
#'   positive class), a logical vector, or a numeric 0/1 (or -1/+1) vector.
#' @param kernel a kernel; parameters left \code{NULL} start at the best
#'   point of a grid scored by the bound (see Details), or, with
#'   \code{optimize = FALSE}, at variance 1 and the median distance between
#'   inputs. Passerello's experiments start from \code{kernel_rbf(1, 1)}
#'   (GPflow's default) on standardised inputs.
#' @param inducing how the inducing inputs are chosen: \code{"greedy"}
#'   (heteroscedastic greedy variance, weighted by \eqn{\theta}{theta} and
#'   re-selected in every outer pass; the default; \code{"hgv"} is the
#'   same), \code{"gv"} (greedy variance without weights, likewise),
#'   \code{"kmeans"} or \code{"random"} (chosen once: k-means centres, or
#'   training inputs drawn without replacement; \code{"uniform"}, the former
#'   name of \code{"random"}, still works with a deprecation warning), a
#'   number \eqn{M} (the same as \code{"greedy"} with that \code{M}), a
#'   matrix of inducing inputs, or the result of \code{select_inducing()}
#'   (both held as given unless \code{optimize_inducing = TRUE}). The method
#'   names are those of \code{\link{sgpr}()}.
#' @param M the number of inducing inputs for the selection methods; by
#'   default chosen from the data for the greedy methods (see Details) and
#'   \eqn{\min(N, 100)}{min(N, 100)} for \code{"kmeans"} and \code{"random"}. With a
#'   \code{threshold} it is the most that greedy selection may take (by
#'   default no limit).
#' @param threshold for the greedy methods: stop adding inducing inputs
#'   once the (weighted) trace \eqn{\mathrm{tr}(W(K_{ff} - Q_{ff}))}{tr(W(Kff - Qff))} falls
#'   below it, so that \eqn{M} is chosen in every selection pass
#'   (Passerello 2022, section 7.1.3, suggests 1e-3 for small data; it
#'   should grow with \eqn{N}: \code{kl_threshold(kl, N = N)} is
#'   \code{kl} nats per observation, and the default without \code{M} or
#'   \code{threshold} uses \eqn{10^{-3}}{1e-3} per observation at the fitted kernel).
#' @param mean the prior mean of the latent function: a fixed number (0, as
#'   in Passerello 2022, by default) or \code{"constant"} to learn it.
#' @param optimize_inducing if \code{TRUE}, the inducing inputs are also
#'   optimised by gradient in every inner L-BFGS-B run (the "GO" variants of
#'   Passerello 2022, section 5.6.2).
#' @param fixed names of parameters to hold at their starting values:
#'   \code{"variance"}, \code{"lengthscale"}, \code{"mean"}, or single
#'   entries such as \code{"lengthscale[2]"}.
#' @param control a list of settings: \code{maxit} (L-BFGS-B iterations per
#'   inner run, 250), \code{inner_max} (inner rounds of L-BFGS-B and c
#'   updates, 10), \code{ci_iters} (c updates per round, 10),
#'   \code{outer_max} (selection passes for \code{"hgv"}/\code{"gv"}, 10),
#'   \code{tol} (change of the bound that ends a loop; \code{NULL}, the
#'   default, is \eqn{10^{-4}}{1e-4} nats per observation; the thesis used 1e-3),
#'   \code{subsample} (observations beyond which training runs on a
#'   random subsample of that many first, 10 000; \code{Inf} for never),
#'   \code{c_init}
#'   (starting value of every \eqn{c_n}{c_n}, 0.1, as in the code of Passerello's
#'   experiments), \code{memory} (the working memory of one evaluation
#'   beyond which the bound is computed over chunks of rows and greedy
#'   selection runs on a subsample of rows; by default an eighth of the machine's memory within 256 MB and 2 GB; see
#'   \code{\link{scaling}}), and
#'   \code{factr}, \code{pgtol}, \code{trace}, \code{jitter},
#'   \code{jitter_cap} as in \code{\link{gpr}()}.
#' @param start a previous \code{pgpr} fit whose kernel parameters, mean and
#'   local parameters \eqn{c} are the starting values.
#' @param cluster a cluster from \code{parallel::makeCluster()}: the data and
#'   the local parameters \eqn{c} are split over its workers, which compute
#'   their shares of every evaluation of the bound and update their own
#'   \eqn{c} (see \code{\link{scaling}}); by default \code{NULL}, one
#'   process.
#' @return An object of class \code{c("pgpr", "sparsevgp")} with, besides
#'   the usual fields, \code{c} and \code{theta} (the local PG parameters and
#'   their means at the training inputs), \code{history} (one row per outer
#'   pass: the number of inducing inputs, the bound, inner rounds and
#'   optimiser evaluations), \code{converged}, \code{amplitude} (the factor
#'   chosen by the Bernoulli bound, that bound before and after, and the PG
#'   bound before; \code{NULL} when the kernel variance was given), and
#'   \code{labels} (the class coding). \code{predict()} is described in \code{\link{predict.pgpr}}.
#' @templateVar model pgpr
#' @templateVar classifier yes
#' @template fit-value
#' @template practice
#' @references Passerello, G. (2022). Heteroscedastic inducing point
#'   selection for sparse Gaussian process classification. MEng thesis,
#'   Imperial College London.
#'
#'   Jaakkola, T. S. and Jordan, M. I. (2000). Bayesian parameter estimation
#'   via variational methods. Statistics and Computing, 10, 25-37.
#'
#'   Wenzel, F., Galy-Fajou, T., Donner, C., Kloft, M. and Opper, M. (2019).
#'   Efficient Gaussian process classification using Polya-Gamma data
#'   augmentation. AAAI.
#' @seealso \code{\link{svgp}} for the uncollapsed Bernoulli baseline,
#'   \code{\link{predict.pgpr}}, \code{\link{pg_theta}}.
#' @examples
#' d <- classification_data("banana")
#' set.seed(1)
#' fit <- pgpr(y ~ x1 + x2, data = d, M = 20, control = list(outer_max = 3, inner_max = 3))
#' fit
#' fit$history
#' table(observed = d$y, predicted = predict(fit, d, type = "class"))
#' plot(fit)
#'
#' # M chosen in each pass by a threshold on the theta-weighted trace
#' set.seed(1)
#' auto <- pgpr(y ~ x1 + x2, data = d, threshold = 0.5, control = list(outer_max = 3))
#' auto$history
#' @export
pgpr <- function(x, ...) UseMethod("pgpr")

#' @rdname pgpr
#' @export
pgpr.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("pgpr", match.call(), parent.frame(), x, data, ...)
}

#' @rdname pgpr
#' @export
pgpr.default <- function(x, y, kernel = kernel_rbf(), inducing = "greedy", M = NULL,
                         threshold = NULL, mean = "constant", optimize = TRUE,
                         optimize_inducing = FALSE, fixed = NULL, control = list(),
                         start = NULL, cluster = NULL, ...) {
  call <- .model_call(match.call(), "pgpr")
  .dots_data(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  N <- nrow(x)
  .pgpr_check_classes(y)
  lab <- .as_labels(y, N)
  kernel <- .check_kernel(kernel)
  optimize <- .check_flag(optimize, "optimize")
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  control <- .pgpr_control(control)
  # the loops' tolerance: by default 1e-4 nats per observation
  if (is.null(control$tol)) control$tol <- 1e-4 * N
  c0 <- rep(control$c_init, N)
  if (!is.null(.check_start(start, "pgpr", x))) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (length(start$c) == N) c0 <- start$c
  }
  # M chosen from the data (greedy selection without M or threshold): a
  # first selection of M_start, then M by a threshold at the fitted kernel
  # in each re-selection (R/pgpr_training.R)
  auto <- is.null(M) && is.null(threshold) && is.character(inducing) &&
    length(inducing) == 1L && inducing %in% .greedy_methods
  spec <- .inducing_spec(inducing, M, threshold, x)
  if (auto) {
    spec$auto <- TRUE
    spec$M_start <- spec$M
    spec$M_max <- .pgpr_max_inducing(N)
  }
  # lengthscales left to the data: one for all inputs in units of their sd,
  # then (ard = TRUE) one per input (R/pgpr_training.R); a warm start from
  # such a fit keeps its one lengthscale
  ard_stage <- isTRUE(kernel$ard)
  shared <- optimize &&
    (if (is.null(start)) .pgpr_shares(kernel, x, fixed) else isTRUE(start$lengthscale_tied))
  # the latent amplitude chosen at the end by the Bernoulli bound
  # (R/pgpr_training.R) when the kernel variance is left to the data
  amplitude <- optimize && is.null(start) && !.is_combo(kernel) && is.null(kernel$variance) &&
    !any(grepl("variance", as.character(fixed)))
  mn <- .mean_start(mean, .class_mean_start(lab$y01))
  if (!is.null(start) && !mn$fixed && !is.null(start$params$mean)) mn$value <- start$params$mean
  # parameters left unset start at the best point of a grid scored by the
  # bound (R/start_classification.R) when the model is fitted from scratch
  if (optimize && is.null(start)) {
    kernel <- .start_classifier(kernel, x, lab$ypm, M = spec$M, mean = mn$value)
  }
  kernel <- .kern_init(kernel, x, NULL)
  # the greedy selections break ties in one order drawn once per fit and
  # reused in every outer pass (see .pgpr_select)
  if (spec$method %in% .greedy_methods) spec$perm <- sample.int(N)
  # a warm start on the same inputs with the same selection settings starts
  # from the fitted inducing inputs (and tie-break order), so that
  # update(fit, optimize = FALSE) reproduces the fit
  keep <- c("method", "M", "threshold")
  warm_Z <- !is.null(start) && spec$method != "given" && identical(start$x, x) &&
    identical(start$selection[keep], spec[keep])
  if (warm_Z && !is.null(start$selection$perm)) spec$perm <- start$selection$perm
  Z <- if (warm_Z) start$params$Z else .pgpr_select(spec, x, kernel, pg_theta(c0), control$memory)
  params <- c(.kern_params(kernel), list(mean = mn$value, Z = Z))
  transforms <- c(variance = "log", lengthscale = "log", mean = "identity", Z = "identity")
  fit <- .new_fit("pgpr", call, x, lab$y01, kernel, params, transforms, fixed,
                  always = c(if (mn$fixed) "mean", if (!optimize_inducing) "Z"),
                  control = control,
                  label = sprintf("Polya-Gamma sparse GP classification (PGPR), inducing inputs: %s",
                                  .pgpr_inducing_label(spec, optimize_inducing)),
                  extra = list(ypm = lab$ypm, labels = lab$coding, c = c0, selection = spec,
                               converged = NA, shared_stage = shared,
                               ard_stage = shared && ard_stage, scale_latent = amplitude,
                               shared_scale = if (shared) .column_sd(x),
                               lengthscale_tied = isTRUE(start$lengthscale_tied) &&
                                 !optimize))
  # with a cluster the data and c go to the workers once (R/cluster.R)
  .cluster_fit(fit, optimize, cluster)
}

# The mix-ups a binary classifier meets first, with the function to use
# instead: a numeric response that is not two classes coded 0/1 or -1/+1
# (regression), and a factor of more than two classes. Other labels are
# checked by .as_labels().
.pgpr_check_classes <- function(y) {
  if (is.numeric(y) && is.null(dim(y)) && !anyNA(y)) {
    u <- sort(unique(y))
    if (!all(u %in% c(0, 1)) && !all(u %in% c(-1, 1))) {
      stop(sprintf("'y' as a number must be coded 0/1 (or -1/+1); it has values %s%s: pgpr() is a classifier of two classes, and for a numeric response sgpr() (or gpr() for small N) is the model to use",
                   paste(format(utils::head(u, 5L), digits = 4L), collapse = ", "),
                   if (length(u) > 5L) sprintf(", ... (%d in all)", length(u)) else ""),
           call. = FALSE)
    }
  }
  if (is.factor(y)) {
    used <- levels(y)[levels(y) %in% as.character(y)]
    if (length(used) > 2L) {
      stop(sprintf("'y' must have exactly two classes, but it has %d (%s): pgpr() classifies two, and svgp() or odvgp() fit more",
                   length(used), paste(utils::head(used, 5L), collapse = ", ")), call. = FALSE)
    }
  }
  invisible()
}

# ---- set-up ---------------------------------------------------------------------

.pgpr_default_control <- list(maxit = 250L, inner_max = 10L, ci_iters = 10L, outer_max = 10L,
                              tol = NULL, c_init = 0.1, subsample = 10000L)

# Whether training fits one lengthscale for all inputs (in units of their
# sd) first: a single kernel with its lengthscales left to the data (ard
# NULL or TRUE), none of them held, several inputs.
.pgpr_shares <- function(kernel, x, fixed) {
  if (ncol(x) < 2L || .is_combo(kernel) || !is.null(kernel$lengthscale) ||
      isFALSE(kernel$ard)) {
    return(FALSE)
  }
  !any(grepl("lengthscale", as.character(fixed)))
}

# Standard deviations of the input columns (1 for constant columns).
.column_sd <- function(x) {
  s <- apply(x, 2L, stats::sd)
  s[!is.finite(s) | s <= 0] <- 1
  s
}

# The most inducing inputs an automatic M takes: about as many as keep one
# evaluation near N M^2 = 4.5e8 multiplications (300 at N = 5000), at least
# 100 and at most N.
.pgpr_max_inducing <- function(N) {
  as.integer(min(N, max(100, floor(sqrt(4.5e8 / N)))))
}

# The PGPR loop settings, then the shared optimiser and jitter settings.
.pgpr_control <- function(control) {
  .check_control_list(control)
  own <- c("inner_max", "ci_iters", "outer_max", "tol", "c_init", "subsample", "memory")
  ctrl <- utils::modifyList(.pgpr_default_control, control)
  for (nm in c("inner_max", "ci_iters", "outer_max", "maxit")) {
    v <- ctrl[[nm]]
    if (!is.numeric(v) || length(v) != 1L || !is.finite(v) || v < 1 || v != round(v) ||
        v > .Machine$integer.max) {
      stop(sprintf("'control$%s' must be a whole number from 1 to %d", nm,
                   .Machine$integer.max), call. = FALSE)
    }
  }
  if (!is.null(ctrl$tol) && (!is.numeric(ctrl$tol) || length(ctrl$tol) != 1L ||
                             !(ctrl$tol >= 0))) {
    stop("'control$tol' must be NULL or one number >= 0", call. = FALSE)
  }
  if (!is.numeric(ctrl$subsample) || length(ctrl$subsample) != 1L || is.na(ctrl$subsample) ||
      ctrl$subsample < 100) {
    stop("'control$subsample' must be one number >= 100 (Inf: never)", call. = FALSE)
  }
  if (!is.numeric(ctrl$c_init) || length(ctrl$c_init) != 1L || !is.finite(ctrl$c_init) ||
      ctrl$c_init < 0) {
    stop("'control$c_init' must be one number >= 0", call. = FALSE)
  }
  ctrl$memory <- .check_memory(ctrl$memory)
  shared <- .check_control(ctrl[setdiff(names(ctrl), own)])
  c(shared, ctrl[own])
}

.pgpr_inducing_label <- function(spec, optimize_inducing) {
  lab <- switch(spec$method,
                greedy = , hgv = "heteroscedastic greedy variance",
                gv = "greedy variance",
                kmeans = "k-means",
                random = "uniform subset",
                given = "given")
  if (optimize_inducing) paste(lab, "+ gradient optimisation") else lab
}

# The one place where PGPR asks for inducing inputs (R/inducing.R): greedy
# conditional variance weighted by theta ("greedy", "hgv": heteroscedastic
# greedy variance, Passerello 2022, sections 3.3.2 and 4.3.2) or unweighted
# ("gv", Burt et al. 2020), k-means centres or distinct training inputs drawn
# without replacement (Passerello 2022, sections 5.4 and 5.6.1). With a threshold (greedy
# only) the selection stops once the weighted trace tr(W (Kff - Qff)) falls
# below it, with M (if given) as a cap. The double loop passes the same
# tie-breaking order spec$perm in every pass: with a stationary kernel all
# prior variances are equal, so GV's first pick is a tie among all inputs,
# and a fresh order in each pass would change the selection by chance alone,
# so that the bound kept moving and the loop seldom converged.
.pgpr_select <- function(spec, x, kernel, theta, memory = NULL, hook = "selection") {
  .select_by_spec(spec, x, kernel, weights = theta, perm = spec$perm, memory = memory,
                  hook = hook)
}


#' @export
.select_weights.pgpr <- function(fit) pg_theta(fit$c)

# ---- bound and gradient -----------------------------------------------------------

# The PGPR bound at `params` and the current local parameters fit$c, through
# the pseudo-target identity (Passerello 2022, eq. 4.14 and App. C.3, in the
# exact form derived for this package and checked numerically):
#   F = F_gauss(ytil = y / (2 theta) - m, lambda = 1 / theta)
#       + N/2 log 2 pi - 1/2 sum log theta + 1/8 sum 1/theta - N log 2
#       - sum KL[PG(1, c_n) || PG(1, 0)].
# The added terms do not depend on the kernel, the mean or Z, so the gradient
# is the Gaussian bound's, contracted with the kernel derivatives as for
# sgpr (the heteroscedastic gradient derived for this package and checked
# against finite differences, with lambda = 1 / theta).
#' @export
.evaluate.pgpr <- function(fit, params, grad = TRUE, ...) {
  N <- .nobs(fit)
  # in one piece, in chunks or on the workers of a cluster, which hold c
  # (R/stream.R, R/cluster.R); the pseudo-targets are .targets.pgpr()
  b <- .collapsed_eval(fit, params, params$Z, grad)
  pg <- b$sums
  # the terms of Passerello (2022), eq. C.1 (they sum to the identity above)
  terms <- c(fit = b$fit + pg[["inv_theta"]] / 8,
             logdet = b$logdet - 0.5 * pg[["log_theta"]],
             trace = -0.5 * b$trace,
             constant = -N * log(2),
             kl_omega = -pg[["kl"]])
  out <- list(value = sum(terms), terms = terms, jitter = b$jitter,
              jitter_scale = mean(diag(b$Kww)),
              posterior = list(L = b$L, LB = b$LB, v = b$v),
              gaussian = b$bound)
  if (grad) out$grad <- .collapsed_grad(params, b$gk, b$blocks, Z = b$gk$W)
  out
}

# The pseudo-target form of the bound at the local parameters c: lambda =
# 1 / theta, targets y / (2 theta) - m, and the sums of the terms that
# depend on c only. The mean is the model's only own parameter.
#' @export
.targets.pgpr <- function(fit, params) {
  theta <- .ffi_pg_theta(fit$c)
  list(lambda = 1 / theta, y = fit$ypm / (2 * theta), shift = params$mean,
       sums = c(inv_theta = sum(1 / theta), log_theta = sum(log(theta)),
                kl = sum(.ffi_pg_kl(fit$c))),
       per_point = FALSE)
}

#' @export
.targets_grad.pgpr <- function(fit, params, t, adj) list(mean = -adj$gytil)

#' @export
.predict_latent.pgpr <- function(fit, xnew, full_cov) {
  .collapsed_predict(fit, fit$params$Z, xnew, full_cov)
}

# q*(f) at the training inputs (Passerello 2022, eq. C.2 with X* = X) from
# an evaluation of the bound, in blocks of rows: list(mean, var).
.pgpr_qf_train <- function(fit, r) {
  fit$posterior <- r$posterior
  p <- .collapsed_predict(fit, fit$params$Z, fit$x, FALSE)
  list(mean = p$mean, var = pmax(p$var, 0))
}

# Closed-form updates of the local parameters, c_n = sqrt(mu_n^2 + s_n^2)
# under the current q*(f) (Passerello 2022, eqs. 4.9-4.11), repeated
# `iters` times, until c stops moving, or until an update raises the bound
# by less than `tol`. Each update is a coordinate ascent
# step and never lowers the bound (derived for this package and checked
# numerically; Passerello 2022, section 4.1.3, iterates the updates until
# the bound converges). Returns the
# fit with the new c and `bound` evaluated there.
# On a cluster the workers update their own c, and only the largest change
# comes back; fit$c is then stale until .pgpr_sync_c().
.pgpr_update_c <- function(fit, iters, tol = 0, keep = FALSE) {
  .stage_mark("updates of c", fit$x)
  r <- .evaluate(fit, fit$params, grad = FALSE)
  # Ctrl-C ends the updates with the last one completed (each update is
  # whole: c changes only once it is computed; on a cluster the workers'
  # answers always arrive, R/cluster.R)
  fit <- .interruptible(.pgpr_update_c_run(fit, r, iters, tol, keep), "the updates of the local parameters c",
                        function() {
                          fit$bound <- r$value
                          fit
                        })
  fit
}

.pgpr_update_c_run <- function(fit, r, iters, tol, keep = FALSE) {
  for (i in seq_len(iters)) {
    before <- r$value
    .interrupt_point("c_update")
    if (is.null(fit$cluster)) {
      q <- .pgpr_qf_train(fit, r)
      cnew <- sqrt(q$mean^2 + q$var)
      done <- max(abs(cnew - fit$c)) <= 1e-10 * max(1, max(cnew))
      fit$c <- cnew
    } else {
      u <- .cluster_call(fit$cluster, ".shard_pg_update",
                         list(kernel = fit$kernel, params = fit$params, posterior = r$posterior))
      u <- do.call(rbind, u)
      done <- max(u[, "change"]) <= 1e-10 * max(1, max(u[, "largest"]))
    }
    r <- .evaluate(fit, fit$params, grad = FALSE)
    if (done || r$value - before < tol) break
  }
  fit$bound <- r$value
  if (keep) fit$last_evaluation <- r
  fit
}

# On a cluster: fit$c from the workers (once per pass of the outer loop), or
# the workers' c set to fit$c (push = TRUE). Nothing without a cluster.
.pgpr_sync_c <- function(fit, push = FALSE) {
  h <- fit$cluster
  if (is.null(h)) return(fit)
  if (push) {
    each <- lapply(split(fit$c, rep(seq_along(h$n), h$n)), unname)
    .cluster_call(h, ".shard_pg_c", NULL, unname(each))
  } else {
    fit$c <- unlist(.cluster_call(h, ".shard_pg_c", NULL), use.names = FALSE)
  }
  fit
}

#' @export
.report.pgpr <- function(fit) {
  fit$theta <- pg_theta(fit$c)
  out <- list("Local PG parameters c" = sprintf("from %s to %s (theta from %s to %s)",
                                               format(min(fit$c), digits = 3L),
                                               format(max(fit$c), digits = 3L),
                                               format(min(fit$theta), digits = 3L),
                                               format(max(fit$theta), digits = 3L)))
  if (!is.null(fit$history)) {
    h <- fit$history
    kept <- if (is.null(fit$kept_pass)) h$pass[which.max(h$bound)] else fit$kept_pass
    out[["Training"]] <- sprintf("%d selection pass%s, %s; kept pass %d%s",
                                 nrow(h), if (nrow(h) == 1L) "" else "es",
                                 if (isTRUE(fit$converged)) "converged" else "stopped at the cap",
                                 kept,
                                 if (kept != h$pass[which.max(h$bound)])
                                   " (the fewest inducing inputs within the target of the highest bound)" else
                                   ", the highest bound")
    if (!is.null(fit$subsample)) {
      out[["Training"]] <- sprintf("on a subsample of %d rows; then c (and q(u)) on all the data",
                                   fit$subsample$rows)
    }
  }
  if (isTRUE(fit$lengthscale_tied)) {
    r <- fit$params$lengthscale / fit$shared_scale
    out[["Lengthscales"]] <- sprintf("one for all inputs in units of their sd: %s sd (the kernel of kernlab's ksvm() on scaled inputs; kernel_rbf(ard = TRUE) fits one per input)",
                                     format(exp(mean(log(r))), digits = 4L))
  }
  if (isTRUE(fit$selection$auto)) {
    out[["Number of inducing inputs"]] <- sprintf(
      "M = %d, chosen at the fitted kernel for an expected KL divergence below %g nats per observation (at most %d; give 'M' to choose)",
      nrow(fit$params$Z), .pgpr_auto_kl, fit$selection$M_max)
  }
  fit$summary_extra <- out
  fit
}

# ---- methods --------------------------------------------------------------------------------

#' Predictions from a Gaussian process classifier
#'
#' Predictions of \code{\link{pgpr}()} and \code{\link{svgp}()} (Bernoulli)
#' fits at new inputs: the latent function, class probabilities, labels, or
#' the Polya-Gamma variance map.
#'
#' The probability of the positive class is
#' \eqn{p(y_* = 1) = \int \sigma(f) N(f; \mu_*, \sigma_*^2) df}{p(y_* = 1) = integral sigma(f) N(f; mu_*, sigma_*^2) df}, where
#' \eqn{N(\mu_*, \sigma_*^2)}{N(mu_*, sigma_*^2)} is the latent predictive distribution. With
#' \code{method = "quadrature"} (the default) the integral is computed by
#' 20-point Gauss-Hermite quadrature: this is the predictive probability of
#' the fitted model, and it accounts for the latent uncertainty, so it is
#' less overconfident far from the data than the plug-in value.
#' \code{"probit"} uses the approximation
#' \eqn{\sigma(\mu_*/\sqrt{1 + \pi\sigma_*^2/8})}{sigma(mu_*/sqrt(1 + pi sigma_*^2/8))}, and \code{"plugin"} the
#' value \eqn{\sigma(\mu_*)}{sigma(mu_*)}, which ignores the variance; the plug-in is what
#' Passerello's experiments report (the code behind the accuracy and NLL of
#' Passerello 2022, Tables 5.2-5.5, uses it). All
#' three give the same decision boundary \eqn{\mu_* = 0}{mu_* = 0}, so
#' \code{type = "class"} does not depend on \code{method}.
#'
#' \code{type = "pg_variance"} gives \eqn{1/\theta(c_*)}{1/theta(c_*)} with
#' \eqn{c_* = \sqrt{\mu_*^2 + \sigma_*^2}}{c_* = sqrt(mu_*^2 + sigma_*^2)}: the variance of the Gaussian
#' pseudo-observation that the Polya-Gamma augmentation puts at \eqn{x_*}{x_*}. It
#' is smallest near the decision boundary (Passerello 2022, Fig. 5.1), which is where
#' heteroscedastic greedy variance places inducing inputs.
#'
#' @param object a \code{pgpr} or \code{svgp} fit.
#' @param newdata new inputs, as for \code{\link{predict.sparsevgp}}; by
#'   default the training inputs.
#' @param type \code{"link"} (the latent function: \code{list(mean, var)},
#'   or \code{cov} with \code{full_cov = TRUE}), \code{"prob"} (the
#'   probabilities of the second class, a vector), \code{"class"} (labels
#'   coded like the training labels), or \code{"pg_variance"} (a vector).
#'   \code{"latent"} and \code{"response"} are accepted for \code{"link"} and
#'   \code{"prob"}. For \code{svgp(likelihood = "gaussian")} fits the types
#'   are those of \code{\link{predict.sparsevgp}}.
#' @param method how probabilities are computed: \code{"quadrature"},
#'   \code{"probit"} or \code{"plugin"}; see Details.
#' @param interval \code{"none"} or \code{"confidence"}: for
#'   \code{type = "link"} the pointwise interval
#'   \eqn{\mu_* \pm z \sigma_*}{mu_* +/- z sigma_*} of the latent function, for
#'   \code{type = "prob"} its image \eqn{g(\mu_* \pm z \sigma_*)}{g(mu_* +/- z sigma_*)} under
#'   the inverse link \eqn{g}, an interval for the probability
#'   \eqn{g(f(x_*))}{g(f(x_*))}, with \eqn{z} = \code{qnorm((1 + level) / 2)}.
#'   A \code{"prediction"} interval of a binary label is an error: its
#'   distribution is the probability itself.
#' @param level the coverage of the intervals.
#' @param se.fit if \code{TRUE}, also return standard errors: the standard
#'   deviation of \eqn{f(x_*)}{f(x_*)} (\code{type = "link"}) or of
#'   \eqn{g(f(x_*))}{g(f(x_*))} (\code{type = "prob"}) under the latent
#'   predictive distribution.
#' @param full_cov for \code{type = "link"}: return the full covariance.
#' @param cluster a cluster from \code{parallel::makeCluster()}: the rows of
#'   \code{newdata} are split over its workers (see \code{\link{scaling}});
#'   by default \code{NULL}, one process.
#' @param na.action what to do with rows of \code{newdata} that have missing
#'   inputs: \code{na.pass} (predict \code{NA} for them), \code{na.omit} or
#'   \code{na.exclude}.
#' @param ... not used: any argument here is an error.
#' @return See \code{type}; vectors are named by the row names of
#'   \code{newdata}. With \code{interval}, a matrix with columns
#'   \code{fit}, \code{lwr} and \code{upr}; with \code{se.fit = TRUE}, a list
#'   with \code{fit} and \code{se.fit}.
#' @examples
#' d <- classification_data("banana")
#' set.seed(1)
#' fit <- pgpr(y ~ x1 + x2, data = d, inducing = "kmeans", M = 15,
#'             control = list(inner_max = 2))
#' nd <- data.frame(x1 = c(-2, 0, 2), x2 = c(0, 0, 3))
#' predict(fit, nd, type = "prob")
#' predict(fit, nd, type = "prob", method = "plugin")
#' predict(fit, nd, type = "prob", interval = "confidence")
#' predict(fit, nd, type = "class")
#' predict(fit, nd, type = "pg_variance")
#' @export
predict.pgpr <- function(object, newdata = NULL, type = c("link", "prob", "class", "pg_variance"),
                         method = c("quadrature", "probit", "plugin"),
                         interval = c("none", "confidence", "prediction"), level = 0.95,
                         se.fit = FALSE, full_cov = FALSE, na.action = stats::na.pass,
                         cluster = NULL, ...) {
  .check_dots("predict", ...)
  .predict_classifier(object, newdata, type[1L], method[1L], interval[1L], level, se.fit,
                      full_cov, na.action, cluster = cluster)
}

#' @export
residuals.pgpr <- function(object, type = c("response", "pearson"), cluster = NULL, ...) {
  .check_dots("residuals", ...)
  .residuals_classifier(object, type, cluster)
}

#' @export
fitted.pgpr <- function(object, method = "quadrature", cluster = NULL, ...) {
  .check_dots("fitted", ...)
  .fitted_classifier(object, method, cluster)
}

#' Plot a Gaussian process classifier
#'
#' \code{which = "fit"} draws the classifier on the scale of the data, with
#' axes labelled by the names of the inputs and the response. For one
#' input: the probability of the positive class with a band
#' \eqn{g(\mu \pm z s)}{g(mu +/- z sd)} of coverage \code{level} (\eqn{g}
#' the inverse link), the labels at 0 and 1 in the colours of their classes,
#' and the inducing inputs as ticks. For two inputs: an image of the
#' probability with a colour key, dashed contours at 0.1, 0.25, 0.75 and
#' 0.9, the decision boundary \eqn{p = 1/2} (thick line), the data by class
#' (blue circles and red triangles with a white edge, so that they stay
#' visible on a background of their own colour; the legend names the
#' classes) and the inducing inputs (gold diamonds). With more inputs: the
#' fitted probabilities by observed class. \code{what = "pg_variance"}
#' shows the Polya-Gamma variance map \eqn{1/\theta}{1/theta} instead (Passerello
#' 2022, Fig. 5.1; log10 scale in 2-D). \code{which = "convergence"} and
#' \code{"residuals"} are as for \code{\link{plot.sparsevgp}}: for
#' \code{pgpr()} the convergence plot shows the bound after each selection
#' pass of the double loop.
#'
#' @param x a \code{pgpr} or \code{svgp} (Bernoulli) fit.
#' @param which \code{"fit"}, \code{"convergence"} or \code{"residuals"}.
#' @param what \code{"prob"} or \code{"pg_variance"}.
#' @param n number of grid points per input.
#' @param method how probabilities are computed; see
#'   \code{\link{predict.pgpr}}.
#' @param level the coverage of the band (one input).
#' @param inducing if \code{FALSE}, the inducing inputs are not drawn (for
#'   example when they are all the training inputs).
#' @param points,inputs whether to draw the data, and which input goes on
#'   which axis (two inputs), as for \code{\link{plot.sparsevgp}}: the data
#'   shrink and fade as their number grows and are left out over a map when
#'   they would hide it; inputs named like longitude and latitude are drawn
#'   as a map.
#' @param xlab,ylab,main axis labels and title.
#' @param ... further graphical parameters (such as \code{asp}).
#' @return The plotted data, invisibly.
#' @examples
#' d <- classification_data("banana")
#' set.seed(1)
#' fit <- pgpr(y ~ x1 + x2, data = d, inducing = "kmeans", M = 15,
#'             control = list(inner_max = 2))
#' plot(fit)
#' plot(fit, what = "pg_variance")
#' plot(fit, which = "convergence")
#' @export
plot.pgpr <- function(x, which = c("fit", "convergence", "residuals"),
                      what = c("prob", "pg_variance"), n = 200L,
                      method = c("quadrature", "probit", "plugin"), level = 0.95, inducing = TRUE,
                      points = NULL, inputs = NULL, xlab = NULL, ylab = NULL, main = NULL, ...) {
  what <- match.arg(what)
  method <- match.arg(method)
  .plot_classifier(x, which[1L], what, n, method, level, xlab, ylab, main,
                   .check_flag(inducing, "inducing"), ..., points = points, inputs = inputs)
}
