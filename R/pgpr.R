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
#' \code{control$tol} or after \code{control$outer_max} and
#' \code{control$inner_max} rounds; the outer loop keeps the state with the
#' highest bound. The per-pass record is in \code{fit$history}.
#'
#' @inheritParams sgpr
#' @param y the labels: a factor with two levels (the second is the
#'   positive class), a logical vector, or a numeric 0/1 (or -1/+1) vector.
#' @param kernel a kernel; parameters left \code{NULL} start at variance 1
#'   and the median distance between inputs. Passerello's experiments start
#'   from \code{kernel_rbf(1, 1)} (GPflow's default) on standardised inputs.
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
#'   default \eqn{\min(N, 100)}{min(N, 100)}. With a \code{threshold} it is the most that
#'   greedy selection may take (by default no limit).
#' @param threshold for the greedy methods: stop adding inducing inputs
#'   once the (weighted) trace \eqn{\mathrm{tr}(W(K_{ff} - Q_{ff}))}{tr(W(Kff - Qff))} falls
#'   below it, so that \eqn{M} is chosen automatically (Passerello 2022,
#'   section 7.1.3, suggests 1e-3 for small data; it should grow with
#'   \eqn{N}).
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
#'   \code{tol} (change of the bound that ends a loop, 1e-3), \code{c_init}
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
#'   optimiser evaluations), \code{converged}, and \code{labels} (the class
#'   coding). \code{predict()} is described in \code{\link{predict.pgpr}}.
#' @templateVar model pgpr
#' @templateVar classifier yes
#' @template fit-value
#' @template practice
#' @references Passerello, G. (2022). Heteroscedastic inducing point
#'   selection for sparse Gaussian process classification. MEng thesis,
#'   Imperial College London.
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
                         threshold = NULL, mean = 0, optimize = TRUE,
                         optimize_inducing = FALSE, fixed = NULL, control = list(),
                         start = NULL, cluster = NULL, ...) {
  call <- .model_call(match.call(), "pgpr")
  .dots_data(...)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  N <- nrow(x)
  lab <- .as_labels(y, N)
  kernel <- .check_kernel(kernel)
  optimize <- .check_flag(optimize, "optimize")
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  control <- .pgpr_control(control)
  c0 <- rep(control$c_init, N)
  if (!is.null(.check_start(start, "pgpr", x))) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (length(start$c) == N) c0 <- start$c
  }
  kernel <- .kern_init(kernel, x, NULL)
  spec <- .inducing_spec(inducing, M, threshold, x)
  mn <- .mean_start(mean, .class_mean_start(lab$y01))
  if (!is.null(start) && !mn$fixed && !is.null(start$params$mean)) mn$value <- start$params$mean
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
                               converged = NA))
  # with a cluster the data and c go to the workers once (R/cluster.R)
  .cluster_fit(fit, optimize, cluster)
}

# ---- set-up ---------------------------------------------------------------------

.pgpr_default_control <- list(maxit = 250L, inner_max = 10L, ci_iters = 10L, outer_max = 10L,
                              tol = 1e-3, c_init = 0.1)

# The PGPR loop settings, then the shared optimiser and jitter settings.
.pgpr_control <- function(control) {
  .check_control_list(control)
  own <- c("inner_max", "ci_iters", "outer_max", "tol", "c_init", "memory")
  ctrl <- utils::modifyList(.pgpr_default_control, control)
  for (nm in c("inner_max", "ci_iters", "outer_max", "maxit")) {
    v <- ctrl[[nm]]
    if (!is.numeric(v) || length(v) != 1L || !is.finite(v) || v < 1 || v != round(v) ||
        v > .Machine$integer.max) {
      stop(sprintf("'control$%s' must be a whole number from 1 to %d", nm,
                   .Machine$integer.max), call. = FALSE)
    }
  }
  if (!is.numeric(ctrl$tol) || length(ctrl$tol) != 1L || !(ctrl$tol >= 0)) {
    stop("'control$tol' must be one number >= 0", call. = FALSE)
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

# The greedy methods, which the double loop re-selects in every pass.
.greedy_methods <- c("greedy", "hgv", "gv")

#' @export
.select_weights.pgpr <- function(fit) pg_theta(fit$c)

# reinit_inducing(): refit with new inducing inputs held fixed, by the inner
# loop (L-BFGS-B on the kernel alternated with c updates).
#' @export
.refit_inducing.pgpr <- function(fit, Z) {
  fit <- .set_inducing(fit, Z)
  start <- proc.time()[["elapsed"]]
  fit <- .pgpr_inner(fit)
  fit$time <- proc.time()[["elapsed"]] - start
  .finish(fit)
}

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
  N <- nrow(fit$x)
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
# `iters` times or until c stops moving. Each update is a coordinate ascent
# step and never lowers the bound (derived for this package and checked
# numerically; Passerello 2022, section 4.1.3, iterates the updates until
# the bound converges). Returns the
# fit with the new c and `bound` evaluated there.
# On a cluster the workers update their own c, and only the largest change
# comes back; fit$c is then stale until .pgpr_sync_c().
.pgpr_update_c <- function(fit, iters) {
  .stage_mark("updates of c", fit$x)
  r <- .evaluate(fit, fit$params, grad = FALSE)
  # Ctrl-C ends the updates with the last one completed (each update is
  # whole: c changes only once it is computed; on a cluster the workers'
  # answers always arrive, R/cluster.R)
  fit <- .interruptible(.pgpr_update_c_run(fit, r, iters), "the updates of the local parameters c",
                        function() {
                          fit$bound <- r$value
                          fit
                        })
  fit
}

.pgpr_update_c_run <- function(fit, r, iters) {
  for (i in seq_len(iters)) {
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
    if (done) break
  }
  fit$bound <- r$value
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

# ---- training -------------------------------------------------------------------------

# L-BFGS-B runs at fixed c bound the kernel's log parameters above by 30. On
# near-separable data the kernel variance grows without bound, and a line
# search can step to values (variance ~ 1e22 with lengthscale ~ 1e8 on
# crabs) where K_uu + jitter is numerically rank one and I + A A' cannot be
# factorised; the bound keeps every trial point computable and is far beyond
# any sensible optimum. Only upper bounds: when every variable has two
# bounds L-BFGS-B takes a full first step to the Cauchy point, which can land
# on a lower bound where the bound is flat (variance e^-30) and stall there.
#' @export
.optim_upper.pgpr <- function(fit, par) ifelse(grepl("^log_", names(par)), 30, Inf)

# Inner loop (Passerello 2022, section 4.1.3): L-BFGS-B on the free parameters at fixed
# c, then closed-form c updates, until the bound changes by less than tol.
.pgpr_inner <- function(fit) {
  ctrl <- fit$control
  prev <- -Inf
  evals <- 0L
  rounds <- 0L
  converged <- FALSE
  for (it in seq_len(ctrl$inner_max)) {
    fit <- .fit_lbfgsb(fit)
    evals <- evals + as.integer(fit$optim$counts[[1L]])
    rounds <- it
    # interrupted: no further update or run (R/interrupt.R); the bound is
    # the run's best
    if (.interrupt_pending()) {
      fit$bound <- fit$optim$value
      break
    }
    fit <- .pgpr_update_c(fit, ctrl$ci_iters)
    if (.interrupt_pending()) break
    if (abs(fit$bound - prev) <= ctrl$tol) {
      converged <- TRUE
      break
    }
    prev <- fit$bound
  }
  fit$inner <- list(rounds = rounds, evaluations = evals, converged = converged)
  .pgpr_sync_c(fit)
}

# The double loop (Passerello 2022, sections 4.3.2 and 5.4): for the greedy methods,
# re-select Z from scratch at the current kernel and c before each inner
# loop, until the bound changes by less than tol or outer_max passes; keep
# the best state.
#' @export
.train.pgpr <- function(fit) {
  ctrl <- fit$control
  spec <- fit$selection
  reselect <- spec$method %in% .greedy_methods
  passes <- if (reselect) ctrl$outer_max else 1L
  start <- proc.time()[["elapsed"]]
  best <- NULL
  prev <- -Inf
  hist <- vector("list", passes)
  converged <- FALSE
  for (pass in seq_len(passes)) {
    if (reselect && pass > 1L) {
      .work_drop(fit)
      kern <- .kernel_at(fit$kernel, fit$params)
      Z <- .pgpr_select(spec, fit$x, kern, pg_theta(fit$c), fit$control$memory,
                        hook = "reselection")
      # interrupted: the best state so far is the fit
      if (.interrupt_pending()) break
      fit$params$Z <- Z
      fit$fixed <- .fixed_from_spec(fit)
    }
    fit <- .pgpr_inner(fit)
    hist[[pass]] <- data.frame(pass = pass, M = nrow(fit$params$Z), bound = fit$bound,
                               inner_rounds = fit$inner$rounds,
                               evaluations = fit$inner$evaluations)
    if (is.null(best) || fit$bound > best$bound) best <- fit
    if (.interrupt_pending()) break
    if (abs(fit$bound - prev) <= ctrl$tol) {
      converged <- TRUE
      break
    }
    prev <- fit$bound
  }
  if (!reselect) converged <- fit$inner$converged
  best$history <- do.call(rbind, hist[!vapply(hist, is.null, TRUE)])
  # the optimiser report covers every inner L-BFGS-B run of every pass
  total <- sum(best$history$evaluations)
  best$optim$counts <- c("function" = total, gradient = total)
  best$converged <- converged
  best$time <- proc.time()[["elapsed"]] - start
  # the workers' c are the last pass's: the final evaluation reads the best
  if (!identical(best$c, fit$c)) .pgpr_sync_c(best, push = TRUE)
  best
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
    out[["Training"]] <- sprintf("%d selection pass%s, %s; best bound in pass %d",
                                 nrow(h), if (nrow(h) == 1L) "" else "es",
                                 if (isTRUE(fit$converged)) "converged" else "stopped at the cap",
                                 h$pass[which.max(h$bound)])
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
#' @param xlab,ylab,main axis labels and title.
#' @param ... further graphical parameters.
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
                      xlab = NULL, ylab = NULL, main = NULL, ...) {
  what <- match.arg(what)
  method <- match.arg(method)
  .plot_classifier(x, which[1L], what, n, method, level, xlab, ylab, main,
                   .check_flag(inducing, "inducing"), ...)
}
