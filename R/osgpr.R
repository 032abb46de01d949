# Orthogonal sparse GP regression (Fernlund 2022, chapter 5): regular inducing
# inputs Z and orthogonal inducing inputs O, with the collapsed bounds of
# src/bound_orthogonal.c (block Cholesky of Fernlund 2022, Algorithm 3) and the
# SOLVE-GPR (eq. 5.57) or ODGPR (eq. 5.56) predictive distribution.
#
# Facts derived for this package and checked numerically in its tests, which
# this file makes visible: Fernlund's collapsed bound (eq. 5.33) equals the
# SGPR bound on rbind(Z, O) (by the block inverse, eq. 5.4); the predictive
# mean of both families equals the SGPR mean on rbind(Z, O); the true ELBOs of
# the SOLVE-GP and ODVGP posteriors the model predicts with are lower, with
# closed forms. bound = "union" optimises eq. 5.33, bound = "family" the ELBO
# of the predicted posterior.

#' Orthogonal sparse Gaussian process regression (SOLVE-GPR and ODGPR)
#'
#' Fits a sparse Gaussian process with \eqn{M_1}{M_1} regular inducing inputs
#' \eqn{Z} and \eqn{M_2}{M_2} orthogonal inducing inputs \eqn{O} by a collapsed
#' bound (Fernlund 2022, chapter 5): the orthogonal function values
#' \eqn{v^\perp = v - K_{vu}K_{uu}^{-1}u}{v_perp = v - Kvu Kuu^-1 u} are independent of \eqn{u} a priori,
#' with covariance \eqn{C_{vv} = K_{vv} - K_{vu}K_{uu}^{-1}K_{uv}}{Cvv = Kvv - Kvu Kuu^-1 Kuv}. Two
#' variational families are available:
#' \describe{
#'   \item{\code{type = "solve"}}{SOLVE-GP (Shi, Titsias and Mnih 2020):
#'     \eqn{q(u) = N(m_u, S_u)}{q(u) = N(m_u, S_u)} and \eqn{q(v^\perp) = N(m_v, S_v)}{q(v_perp) = N(m_v, S_v)}
#'     independent. The predictive covariance is Fernlund (2022), eq. 5.57.}
#'   \item{\code{type = "odvgp"}}{ODVGP (Salimbeni et al. 2018), the special
#'     case \eqn{S_v = C_{vv}}{S_v = Cvv}: the orthogonal inputs change the mean only,
#'     and the predictive covariance is that of SGPR on \eqn{Z} alone
#'     (eq. 5.56).}
#' }
#' The optimal \eqn{q} is available in closed form (eq. 5.26), so the bound
#' depends only on the kernel parameters, the noise, the mean and the
#' inducing inputs, which are optimised by L-BFGS-B on analytic gradients.
#'
#' \strong{Which bound.} Fernlund's orthogonal collapsed bound (eq. 5.33)
#' equals the SGPR bound of \code{\link{sgpr}()} on the stacked inducing set
#' \code{rbind(Z, O)}, and the predictive mean of both types equals the SGPR
#' mean on \code{rbind(Z, O)} (derived for this package from the block
#' inverse, Fernlund 2022, eq. 5.4, and checked numerically in its tests):
#' eq. 5.33 is the ELBO of a
#' different posterior (the full-covariance one) from the one the model
#' predicts with. \code{bound = "family"} (the default) maximises the true
#' ELBO of the predicted posterior, which is lower (closed forms derived for
#' this package and checked numerically; Fernlund 2022, section 5.3.2, takes
#' the two to be equal):
#' \deqn{F_{solve} = F_{5.33} - \tfrac12\log|B_v| + \tfrac12\log|Q|, \quad
#'       F_{odvgp} = F_{5.33} - \tfrac12\mathrm{tr}(A_vA_v^\top) + \tfrac12\log|Q|,}{F_solve = F_5.33 - 1/2 log|B_v| + 1/2 log|Q|,
#'   F_odvgp = F_5.33 - 1/2 tr(A_v A_v') + 1/2 log|Q|,}
#' with \eqn{B_v = I + A_vA_v^\top}{B_v = I + A_vA_v'}, \eqn{Q} the Schur complement of
#' \eqn{B_u}{B_u} in \eqn{B} and \eqn{A_v = L_v^{-1}C_{vf}/\sigma}{A_v = L_v^-1 Cvf/sigma} (eq. 5.37). So
#' \eqn{F_{odvgp} \le F_{solve} \le F_{5.33}}{F_odvgp <= F_solve <= F_5.33}, with equality in the second
#' when the two sets are far apart. \code{bound = "union"} maximises eq. 5.33
#' as Fernlund (2022) does; the fit is then that of \code{sgpr()} on the union,
#' predicted through the orthogonal family. \code{summary()} reports both.
#'
#' \strong{Cost.} The bound is computed by the block Cholesky of Fernlund
#' (2022), Algorithm 3, in \eqn{O(N M^2)}{O(N M^2)} with \eqn{M = M_1 + M_2}{M = M_1 + M_2} and no
#' \eqn{N \times N}{N x N} matrix. Its flop count equals that of SGPR with \eqn{M}
#' inducing inputs, counting every operation at its true cost: the claim of
#' Fernlund (2022, section 6.1, Table 6.1) that it is 25--50\% cheaper comes
#' from mixing unit costs and does not hold. \code{inst/bench/bench_osgpr.R} measures it; see
#' \code{vignette("orthogonal", package = "sparsevgp")} for the figures.
#' The bounds are sums over the observations of the statistics of SGPR on
#' \code{rbind(Z, O)} (with the block factor of Algorithm 3) followed by
#' \eqn{M \times M}{M x M} algebra, so beyond \code{control$memory} they are
#' computed over chunks of rows, in memory
#' \eqn{O(M^2 + \mathrm{chunk} \cdot M)}{O(M^2 + chunk M)}, in OpenMP threads and on
#' the workers of a cluster, as for \code{sgpr()} (see \code{\link{scaling}}); prediction, \code{fitted()}
#' and \code{osgpr_components()} work in blocks of rows.
#'
#' \strong{Inducing inputs.} \code{inducing} and \code{orthogonal} each take
#' a matrix, a number of points or a \code{select_inducing()} result, as in
#' \code{\link{sgpr}()}; \code{0} (or a matrix with no rows) leaves that set
#' empty, and the model is then SGPR on the other set (except that an ODGPR
#' without regular points predicts with the prior covariance). When both are
#' numbers, \eqn{M_1 + M_2}{M_1 + M_2} points are chosen together and the first
#' \eqn{M_1}{M_1} become \eqn{Z}, so that the two sets never coincide. Orthogonal
#' inputs at (or very near) regular ones make \eqn{C_{vv}}{Cvv} singular: the
#' Cholesky jitter then decides the result, and a warning says so.
#'
#' \strong{Scope.} Both types are collapsed: \eqn{q} is always the optimum
#' for a Gaussian likelihood. \code{type = "odvgp"} is the optimum of
#' Salimbeni et al.'s ODVGP ELBO (their Appendix E, with the noise variance
#' put back; the tests check that the two agree). Their uncollapsed model is
#' not provided: free \eqn{(a_\gamma, a_\beta, L_S)}{(a_gamma, a_beta, L_S)}, natural gradients,
#' minibatches, column-sampled KL and non-Gaussian likelihoods. For
#' classification use \code{\link{pgpr}()} or \code{\link{svgp}()}.
#'
#' @inheritParams sgpr
#' @param data a data frame for the formula interface, or the data held by
#'   the workers of a cluster, \code{\link{shards}(cl, load)}: the formula
#'   (and \code{weights} and \code{subset}) are evaluated on the workers,
#'   the start and both sets of inducing inputs are chosen on the rows this
#'   process gathers (all of them up to 20 000 rows, which gives the fit of
#'   one process; a random subsample beyond, then the kernel, noise and mean
#'   on all rows on the workers), and \code{fitted(fit, cluster = sh)} and
#'   \code{residuals(fit, cluster = sh)} are computed there. Known noise
#'   variances, noise formulas and offsets are not available on shards.
#' @param control as for \code{\link{gpr}()}, and \code{schedule}:
#'   \code{"staged"} (the default, see Details) or \code{"joint"}, and
#'   \code{memory}: the working memory of one evaluation beyond which the
#'   bound is computed over chunks of rows and greedy selection of the
#'   inducing inputs runs on a subsample of rows (bytes, or a string such as
#'   \code{"2GB"}; by default an eighth of the machine's memory within 256 MB and 2 GB; see \code{\link{scaling}}).
#' @param inducing the regular inducing inputs \eqn{Z}: a matrix, a number
#'   \eqn{M_1}{M_1} (\code{0} for none), a method name as in \code{\link{sgpr}()}
#'   (\code{"greedy"}, \code{"kmeans"}, \code{"random"}, ...; for
#'   \eqn{\min(50, N/2)}{min(50, N/2)} points, or as many as \code{orthogonal} asks for)
#'   or a \code{select_inducing()} result. By default as many as the
#'   orthogonal ones, or \eqn{\min(50, N/2)}{min(50, N/2)}.
#' @param orthogonal the orthogonal inducing inputs \eqn{O}, given like
#'   \code{inducing}.
#' @param type the variational family and so the predictive distribution:
#'   \code{"solve"} (SOLVE-GPR) or \code{"odvgp"} (ODGPR).
#' @param bound the objective: \code{"family"}, the ELBO of the posterior
#'   the model predicts with, or \code{"union"}, Fernlund (2022), eq. 5.33 (the SGPR
#'   bound on \code{rbind(Z, O)}).
#' @param noise one learned noise variance (a number, its starting value), a
#'   vector of \eqn{N} known variances, or a one-sided formula for a learned
#'   log-linear noise model, exactly as in \code{\link{sgpr}()}. By default
#'   one variance starting at a tenth of the variance of \code{y}.
#' @param kernel a kernel, such as \code{\link{kernel_rbf}()}; parameters
#'   left \code{NULL} are chosen from the data.
#' @param optimize_inducing if \code{TRUE} (the default), the inducing
#'   inputs are optimised with the other parameters in the last stage of
#'   training; \code{FALSE} holds them where (re-)selection put them.
#' @param fixed names of parameters to hold at their starting values, as in
#'   \code{\link{sgpr}()}, including \code{"Z"} and \code{"O"} or single
#'   entries such as \code{"O[2,1]"}.
#' @param start a previous \code{osgpr} fit whose parameters are the starting
#'   values (this is how \code{update()} warm-starts).
#' @param cluster a cluster from \code{parallel::makeCluster()}: the data
#'   are split over its workers, which compute their shares of every
#'   evaluation of the bound (see \code{\link{scaling}}); by default
#'   \code{NULL}, one process.
#' @return An object of class \code{c("osgpr", "sparsevgp")}, with the usual
#'   methods (\code{\link{predict.sparsevgp}}, \code{summary}, \code{plot},
#'   \code{logLik}, \code{update}, ...). \code{params$Z} and \code{params$O}
#'   hold the two sets; \code{bounds} holds the union, SOLVE and ODVGP bounds
#'   at the fitted parameters.
#' @templateVar model osgpr
#' @templateVar classifier no
#' @template fit-value
#' @template practice
#' @references Fernlund, O. (2022). Orthogonal sparse variational
#'   approximations for Gaussian processes. MSc thesis, Imperial College
#'   London. Shi, J., Titsias, M. and Mnih, A. (2020). Sparse
#'   orthogonal variational inference for Gaussian processes. AISTATS.
#'   Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M. (2018).
#'   Orthogonally decoupled variational Gaussian processes. NeurIPS.
#' @seealso \code{\link{posterior_orthogonal}}, \code{\link{osgpr_components}},
#'   \code{\link{kl_predictive}}, \code{\link{sgpr}}
#' @examples
#' fit <- osgpr(y ~ x, data = snelson, inducing = 4, orthogonal = 4)
#' fit
#' summary(fit)
#' plot(fit)
#'
#' # Fernlund's bound (eq. 5.33) is the SGPR bound on rbind(Z, O)
#' p <- fit$params
#' sg <- sgpr(y ~ x, data = snelson, inducing = rbind(p$Z, p$O),
#'            kernel = kernel_rbf(p$lengthscale, p$variance),
#'            noise = p$noise, mean = p$mean, optimize = FALSE)
#' c(union = fit$bounds[["union"]], sgpr = as.numeric(logLik(sg)),
#'   family = as.numeric(logLik(fit)))
#' @export
osgpr <- function(x, ...) UseMethod("osgpr")

#' @rdname osgpr
#' @export
osgpr.formula <- function(x, data = NULL, subset, weights, na.action, offset, ...) {
  .fit_formula("osgpr", match.call(), parent.frame(), x, data, ...)
}

#' @rdname osgpr
#' @export
osgpr.default <- function(x, y, kernel = kernel_rbf(), inducing = NULL,
                          orthogonal = NULL, type = c("solve", "odvgp"),
                          bound = c("family", "union"), noise = NULL,
                          mean = "constant", optimize = TRUE, optimize_inducing = TRUE,
                          fixed = NULL, control = list(), start = NULL, weights = NULL,
                          offset = NULL, cluster = NULL, ...) {
  call <- .model_call(match.call(), "osgpr")
  data <- .dots_data(...)
  type <- match.arg(type)
  bound <- match.arg(bound)
  x <- .as_input_matrix(x, "x", min_rows = 2L)
  y <- .as_response(y, nrow(x), model = "osgpr")
  wo <- .check_weights_offset(weights, offset, nrow(x))
  if (!is.null(wo$offset)) y <- y - wo$offset
  kernel <- .check_kernel(kernel)
  optimize_inducing <- .check_flag(optimize_inducing, "optimize_inducing")
  optimize <- .check_flag(optimize, "optimize")
  control <- .collapsed_control(control)
  .check_start(start, "osgpr", x)
  fit <- .osgpr_build(call, x, y, kernel, inducing, orthogonal, type, bound, noise, mean,
                      optimize, optimize_inducing, fixed, control, start, data = data,
                      weights = wo$weights, extra = wo)
  # with a cluster the data go to the workers once (R/cluster.R)
  .cluster_fit(fit, optimize, cluster)
}

# The osgpr fit from its rows x, y (with `data` of a noise formula and prior
# `weights`): the warm start from `start`, the start search, both sets, the
# noise and the mean, as osgpr.default() makes them. On shards
# (R/shards_osgpr.R) x and y are the rows gathered here, the fit is made
# on `keep` (no rows), N counts all rows and `mean_y` is the mean of all
# targets. `extra`: further fields of the fit.
.osgpr_build <- function(call, x, y, kernel, inducing, orthogonal, type, bound, noise, mean,
                         optimize, optimize_inducing, fixed, control, start, data = NULL,
                         weights = NULL, N = nrow(x), mean_y = mean(y),
                         keep = list(x = x, y = y), extra = NULL) {
  if (!is.null(start)) {
    kernel <- .warm_kernel(kernel, start$params, ncol(x))
    if (nrow(start$params$Z) + nrow(start$params$O) <= N) {
      inducing <- .osgpr_warm_set(inducing, start$params$Z)
      orthogonal <- .osgpr_warm_set(orthogonal, start$params$O)
    }
  }
  st <- .start_collapsed(kernel, x, y, noise, list(M = 100L),
                         optimize && is.null(start) && control$schedule != "joint")
  kernel <- st$kernel
  sets <- .osgpr_sets(inducing, orthogonal, x, kernel, control$memory)
  nz <- .noise_setup(noise, x, y, data, start = st$noise, weights = weights)
  mn <- .mean_start(mean, mean_y)
  params <- c(.kern_params(kernel),
              nz$params, list(mean = mn$value, Z = sets$Z, O = sets$O))
  transforms <- c(variance = "log", lengthscale = "log", nz$transforms,
                  mean = "identity", Z = "identity", O = "identity")
  if (!is.null(start)) {
    params <- .warm_params(params, start$params, skip = c("Z", "O", if (mn$fixed) "mean"))
  }
  label <- c(solve = "SOLVE-GPR", odvgp = "ODGPR")[[type]]
  .new_fit("osgpr", call, keep$x, keep$y, kernel, params, transforms, fixed,
           always = c(if (mn$fixed) "mean", if (!optimize_inducing) c("Z", "O")),
           control = control,
           label = sprintf("Orthogonal SGPR (%s), %s noise, %s bound", label, nz$label,
                           if (bound == "union") "union (SGPR on Z and O together)" else
                             "family"),
           extra = c(list(noise_model = nz$model, type = type, bound_type = bound), extra))
}

# Warm start: keep the previous set unless another one was asked for.
.osgpr_warm_set <- function(arg, old) {
  if (is.null(arg)) return(old)
  if (is.numeric(arg) && is.null(dim(arg)) && length(arg) == 1L &&
      isTRUE(arg == nrow(old))) return(old)
  arg
}

# The two inducing sets from what the user gave. Each of `inducing` and
# `orthogonal` is a count, a method name, a matrix, a select_inducing()
# result, or 0 (or a matrix with no rows) for none. When both ask for a
# selection (counts or method names), M1 + M2 points are chosen together and
# the first M1 become Z, so that the two sets never coincide; a method name
# without a count stands for min(50, N/2) points. `memory` is the budget of
# greedy selection (control$memory, select_inducing()).
.osgpr_sets <- function(inducing, orthogonal, x, kernel, memory = NULL) {
  N <- nrow(x)
  D <- ncol(x)
  empty <- matrix(0, 0L, D, dimnames = list(NULL, colnames(x)))
  is_count <- function(a) is.numeric(a) && is.null(dim(a)) && length(a) == 1L
  is_method <- function(a) is.character(a) && length(a) == 1L
  is_none <- function(a) (is_count(a) && isTRUE(a == 0)) ||
    ((is.matrix(a) || is.data.frame(a)) && nrow(a) == 0L)
  is_request <- function(a) (is_count(a) && !is_none(a)) || is_method(a)
  default_M <- min(50L, N %/% 2L)
  size <- function(a) {
    if (is_count(a)) return(a)
    if (is_method(a)) return(default_M)
    if (inherits(a, "sparsevgp_inducing")) return(NROW(a$Z))
    NROW(a)
  }
  if (is.null(inducing) && is.null(orthogonal)) {
    inducing <- orthogonal <- default_M
  } else if (is.null(inducing)) {
    inducing <- if (is_none(orthogonal)) min(50L, N) else size(orthogonal)
  } else if (is.null(orthogonal)) {
    orthogonal <- if (is_none(inducing)) min(50L, N) else size(inducing)
  }
  noZ <- is_none(inducing)
  noO <- is_none(orthogonal)
  if (noZ && noO) {
    stop("'inducing' and 'orthogonal' cannot both be empty", call. = FALSE)
  }
  methods <- unique(c(if (is_method(inducing)) inducing, if (is_method(orthogonal)) orthogonal))
  if (is_request(inducing) && is_request(orthogonal) && length(methods) <= 1L) {
    M1 <- .check_M(size(inducing), N, NA_integer_, "inducing")
    M2 <- .check_M(size(orthogonal), N, NA_integer_, "orthogonal")
    if (M1 + M2 > N) {
      stop(sprintf("'inducing' + 'orthogonal' ask for M1 + M2 = %d inducing points but there are only N = %d observations",
                   M1 + M2, N), call. = FALSE)
    }
    method <- if (length(methods)) methods else "greedy"
    W <- .select_by_spec(.inducing_spec(method, M1 + M2, NULL, x), x, kernel, memory = memory)
    if (nrow(W) < M1 + M2) {
      # greedy selection stops when no input has residual variance left
      # (repeated inputs, or a kernel that is numerically low-rank on them)
      M1 <- min(M1, nrow(W))
      M2 <- nrow(W) - M1
      warning(sprintf("the selection found only %d distinct inducing inputs with residual variance, fewer than the M1 + M2 asked for: using M1 = %d regular and M2 = %d orthogonal inputs",
                      nrow(W), M1, M2), call. = FALSE)
    }
    return(list(Z = W[seq_len(M1), , drop = FALSE], O = W[M1 + seq_len(M2), , drop = FALSE]))
  }
  pick <- function(a, name) {
    spec <- .inducing_spec(a, if (is_method(a)) default_M, NULL, x, name)
    .select_by_spec(spec, x, kernel, warn_short = is_count(a), name = name, memory = memory)
  }
  Z <- if (noZ) empty else pick(inducing, "inducing")
  O <- if (noO) empty else pick(orthogonal, "orthogonal")
  list(Z = Z, O = O)
}

# ---- bound, gradient, prediction ----------------------------------------

# The objective: "union" (the SGPR bound on rbind(Z, O), Fernlund 2022,
# eq. 5.33) or the ELBO of the fit's family ("solve" or "odvgp").
.osgpr_variant <- function(fit) if (fit$bound_type == "union") "union" else fit$type

# The chosen bound at `params` and, with grad = TRUE, its gradient on the
# unconstrained scale. The adjoints of src/bound_orthogonal.c are for the
# stacked matrices K(W, W) and K(W, X), W = rbind(Z, O), so one kernel
# contraction gives the gradients for both sets.
#' @export
.evaluate.osgpr <- function(fit, params, grad = TRUE, ...) {
  Z <- params$Z
  M1 <- nrow(Z)
  W <- rbind(Z, params$O)
  variant <- .osgpr_variant(fit)
  # in one piece, in chunks or on a cluster (R/stream.R)
  b <- .collapsed_eval(fit, params, W, grad, M1 = M1, variant = variant)
  out <- list(value = b$bound,
              terms = c(fit = b$fit, logdet = b$logdet[[.bound_variants[[variant]] + 1L]],
                        trace = -0.5 * b$trace, constant = -0.5 * .nobs(fit) * log(2 * pi)),
              jitter = max(b$jitter), jitter_scale = mean(diag(b$Kww)),
              posterior = .osgpr_posterior(b, M1, fit$type, b$Kww))
  if (!grad) return(out)
  u <- seq_len(M1)
  v <- M1 + seq_len(nrow(W) - M1)
  out$grad <- .collapsed_grad(params, b$gk, b$blocks, Z = b$gk$W[u, , drop = FALSE],
                              O = b$gk$W[v, , drop = FALSE])
  out
}

# The caches of the predictive distribution. In whitened coordinates
# e = L^-1 [u; v] the posterior is N(w, S) with S^-1 = blkdiag(Bu, Bv) for
# SOLVE-GP and blkdiag(Bu, I) for ODVGP (derived for this package; the exact
# optimum has precision B, so SOLVE-GP is mean-field between u and the
# orthogonal part). The prediction
# routine of src/predict.c computes mean = T2'v, var = kss - |T1|^2 + |T2|^2
# with T1 = L^-1 K(W, *) and T2 = LB^-1 T1; with LB = chol(S^-1) =: LBf and
# v = LBf'w this is the mean T1'w, which equals Fernlund's eq. 5.55 without
# its N x N matrices, and the
# covariance K** - T1'(I - S)T1 of eq. 5.57 (solve) or 5.56 (odvgp), where
# T1 = [alpha_u; alpha_v] with alpha_v = Lv^-1 (Kv* - dv' alpha_u) (Fernlund
# 2022, Algorithm 3, lines 19-20; line 20 there reads C_v* = dv' d*, which
# omits K_v*: the correct line is C_v* = K_v* - dv' d*).
.osgpr_posterior <- function(b, M1, type, Kww) {
  M <- nrow(b$L)
  M2 <- M - M1
  LBf <- matrix(0, M, M)
  u <- seq_len(M1)
  v <- M1 + seq_len(M2)
  LBf[u, u] <- b$LBu
  LBf[v, v] <- if (type == "solve") b$LBv else diag(M2)
  # conditional prior variances of the orthogonal values given u, diag(Cvv),
  # from Lv Lv' = Cvv + eps_v I: small ones flag orthogonal inputs that
  # (nearly) coincide with the span of the regular ones
  Lv <- b$L[v, v, drop = FALSE]
  cvv <- rowSums(Lv^2) - b$jitter[2L]
  list(L = b$L, LB = LBf, v = drop(crossprod(LBf, b$w)), M1 = M1, w = b$w,
       c = b$c, LB_union = b$LB, LBu = b$LBu, LBv = b$LBv,
       bounds = setNames(b$bounds, c("union", "solve", "odvgp")),
       jitter = setNames(b$jitter, c("Kuu", "Cvv")),
       cvv = cvv, scale = mean(diag(Kww)))
}

#' @export
.predict_latent.osgpr <- function(fit, xnew, full_cov) {
  .collapsed_predict(fit, rbind(fit$params$Z, fit$params$O), xnew, full_cov)
}

# ---- what summary() reports -------------------------------------------------

#' @export
.report.osgpr <- function(fit) {
  post <- fit$posterior
  fit$bounds <- post$bounds
  fam <- post$bounds[[fit$type]]
  label <- c(solve = "SOLVE-GP", odvgp = "ODVGP")[[fit$type]]
  fit$summary_extra <- list(
    "Inducing inputs" = sprintf("M1 = %d regular (Z), M2 = %d orthogonal (O)",
                                nrow(fit$params$Z), nrow(fit$params$O)),
    "Optimised bound" = if (fit$bound_type == "family")
      sprintf("\"family\", the ELBO of the %s posterior used for prediction", label) else
      "\"union\", Fernlund (2022) eq. 5.33 = the SGPR bound on rbind(Z, O)",
    "family bound" = sprintf("%s (ELBO of the %s posterior)",
                             format(fam, digits = 10L), label),
    "union bound" = sprintf("%s (Fernlund 2022, eq. 5.33 = SGPR on rbind(Z, O))",
                            format(post$bounds[["union"]], digits = 10L)),
    "union - family" = format(post$bounds[["union"]] - fam, digits = 4L),
    "Jitter on Kuu, Cvv" = paste(format(post$jitter, digits = 3L), collapse = ", "))
  .osgpr_check_colocated(fit)
  fit
}

# Orthogonal inputs whose prior variance given the regular ones is tiny sit
# (nearly) on the span of the regular ones (the case u = v of Fernlund 2022,
# section 6.3.1): C_vv
# is then singular and only the jitter keeps the factorisation going.
.osgpr_check_colocated <- function(fit) {
  post <- fit$posterior
  if (length(post$cvv) == 0L || nrow(fit$params$Z) == 0L) return(invisible())
  rel <- post$cvv / post$scale
  bad <- which(rel < 1e-6)
  if (length(bad)) {
    warning(sprintf("orthogonal input%s %s nearly coincide%s with the regular inducing inputs (prior variance given them down to %.2g of the kernel variance): C_vv is nearly singular, the jitter (%s) decides the result there, and such points add nothing",
                    if (length(bad) > 1L) "s" else "", paste(bad, collapse = ", "),
                    if (length(bad) > 1L) "" else "s", max(min(rel), 0),
                    format(post$jitter[["Cvv"]], digits = 3L)), call. = FALSE)
  }
  invisible()
}

# ---- closed-form q(u, v), decomposition, KL --------------------------------

#' The optimal distribution of the inducing variables of an orthogonal model
#'
#' The closed-form optimal variational distribution of an \code{\link{osgpr}}
#' fit (Fernlund 2022, eq. 5.26): \eqn{q(u) = N(m_u, S_u)}{q(u) = N(m_u, S_u)} of the function values
#' at the regular inputs \eqn{Z}, and \eqn{q(v^\perp) = N(m_v, S_v)}{q(v_perp) = N(m_v, S_v)} of the
#' orthogonal part \eqn{v^\perp = v - K_{vu}K_{uu}^{-1}u}{v_perp = v - Kvu Kuu^-1 u} at \eqn{O},
#' independent of \eqn{u}:
#' \deqn{m_u = K_{uf}(Q_u + Q_v + \Lambda)^{-1}(y - m), \quad
#'       m_v = C_{vf}(Q_u + Q_v + \Lambda)^{-1}(y - m),}{m_u = Kuf (Q_u + Q_v + Lambda)^-1 (y - m),
#'   m_v = Cvf (Q_u + Q_v + Lambda)^-1 (y - m),}
#' \deqn{S_u = K_{uu}(K_{uu} + K_{uf}\Lambda^{-1}K_{fu})^{-1}K_{uu}, \quad
#'       S_v = C_{vv}(C_{vv} + C_{vf}\Lambda^{-1}C_{fv})^{-1}C_{vv}}{S_u = Kuu (Kuu + Kuf Lambda^-1 Kfu)^-1 Kuu,
#'   S_v = Cvv (Cvv + Cvf Lambda^-1 Cfv)^-1 Cvv}
#' for SOLVE-GP, and \eqn{S_v = C_{vv}}{S_v = Cvv} for ODVGP. The constant mean \eqn{m}
#' is added to \eqn{m_u}{m_u}. \code{joint} gives the implied \eqn{q(u, v)} of
#' the function values at \code{rbind(Z, O)}.
#'
#' @param fit an \code{\link{osgpr}} fit.
#' @return A list with \code{Z}, \code{O}, \code{mean_u}, \code{cov_u},
#'   \code{mean_v}, \code{cov_v} (of \eqn{v^\perp}{v_perp}) and \code{joint}
#'   (\code{list(mean, cov)} of \eqn{(u, v)}).
#' @examples
#' fit <- osgpr(y ~ x, data = snelson, inducing = 3, orthogonal = 3)
#' q <- posterior_orthogonal(fit)
#' q$mean_u
#' q$cov_v
#' @export
posterior_orthogonal <- function(fit) {
  if (!inherits(fit, "osgpr")) stop("'fit' must be an osgpr fit", call. = FALSE)
  post <- fit$posterior
  M1 <- post$M1
  M <- nrow(post$L)
  u <- seq_len(M1)
  v <- M1 + seq_len(M - M1)
  # whitened posterior N(w, S), S = (LBf LBf')^-1; [u; v] = L e
  Sw <- chol2inv(t(post$LB))
  Lu <- post$L[u, u, drop = FALSE]
  Lv <- post$L[v, v, drop = FALSE]
  jm <- drop(post$L %*% post$w)
  jm[u] <- jm[u] + fit$params$mean
  jm[v] <- jm[v] + fit$params$mean
  list(Z = fit$params$Z, O = fit$params$O,
       mean_u = drop(Lu %*% post$w[u]) + fit$params$mean,
       cov_u = Lu %*% Sw[u, u, drop = FALSE] %*% t(Lu),
       mean_v = drop(Lv %*% post$w[v]),
       cov_v = Lv %*% Sw[v, v, drop = FALSE] %*% t(Lv),
       joint = list(mean = jm, cov = post$L %*% Sw %*% t(post$L)))
}

#' Decomposition of an orthogonal posterior into g, h and l
#'
#' The posterior process of an \code{\link{osgpr}} fit is a sum of three
#' independent processes (Fernlund 2022, eqs. 5.11 and 5.16; eq. 4.6 for SGPR):
#' \describe{
#'   \item{\code{g}}{the part carried by the regular inputs, mean
#'     \eqn{k_u^\top K_{uu}^{-1} m_u}{k_u' Kuu^-1 m_u} and variance
#'     \eqn{k_u^\top K_{uu}^{-1} S_u K_{uu}^{-1} k_u}{k_u' Kuu^-1 S_u Kuu^-1 k_u};}
#'   \item{\code{h}}{the part carried by the orthogonal inputs, mean
#'     \eqn{c_v^\top C_{vv}^{-1} m_v}{c_v' Cvv^-1 m_v} and variance
#'     \eqn{c_v^\top C_{vv}^{-1} S_v C_{vv}^{-1} c_v}{c_v' Cvv^-1 S_v Cvv^-1 c_v} (SOLVE-GP) or 0
#'     (ODVGP), with \eqn{c_v(x) = k(O, x) - K_{vu}K_{uu}^{-1}k_u(x)}{c_v(x) = k(O, x) - Kvu Kuu^-1 k_u(x)};}
#'   \item{\code{l}}{the prior part no inducing input can learn: mean 0 and
#'     variance \eqn{k(x, x) - k_u^\top K_{uu}^{-1} k_u}{k(x, x) - k_u' Kuu^-1 k_u} minus, for SOLVE-GP,
#'     \eqn{c_v^\top C_{vv}^{-1} c_v}{c_v' Cvv^-1 c_v}.}
#' }
#' The means and variances of the three add up to those of
#' \code{predict(fit, newdata)} minus the constant mean, which is reported
#' separately.
#'
#' @param fit an \code{\link{osgpr}} fit.
#' @param newdata new inputs, as for \code{\link{predict.sparsevgp}}; by
#'   default the training inputs.
#' @return A list with components \code{g}, \code{h}, \code{l} and
#'   \code{total}, each \code{list(mean, var)}, and \code{constant} (the
#'   constant mean).
#' @examples
#' fit <- osgpr(y ~ x, data = snelson, inducing = 3, orthogonal = 3)
#' xs <- data.frame(x = seq(-1, 7, length.out = 200))
#' d <- osgpr_components(fit, xs)
#' matplot(xs$x, cbind(d$g$mean, d$h$mean), type = "l", lty = 1,
#'         xlab = "x", ylab = "mean of g and h")
#' @export
osgpr_components <- function(fit, newdata) {
  if (!inherits(fit, "osgpr")) stop("'fit' must be an osgpr fit", call. = FALSE)
  inp <- .prediction_inputs(fit, if (missing(newdata)) NULL else newdata)
  if (!all(inp$ok)) {
    stop(sprintf("'newdata' has missing inputs in row%s %s: osgpr_components() needs complete rows",
                 if (sum(!inp$ok) > 1L) "s" else "", paste(utils::head(which(!inp$ok), 5L), collapse = ", ")),
         call. = FALSE)
  }
  xnew <- inp$x
  post <- fit$posterior
  k <- .kernel_at(fit$kernel, fit$params)
  W <- rbind(fit$params$Z, fit$params$O)
  M1 <- post$M1
  M <- nrow(W)
  u <- seq_len(M1)
  v <- M1 + seq_len(M - M1)
  n <- nrow(xnew)
  g <- list(mean = numeric(n), var = numeric(n))
  h <- list(mean = numeric(n), var = numeric(n))
  l <- list(mean = numeric(n), var = numeric(n))
  # in blocks of rows, so that no N x M matrix is held for many inputs
  for (b in .row_blocks(n)) {
    xb <- xnew[b, , drop = FALSE]
    T1 <- forwardsolve(post$L, .ffi_kern_matrix(k, W, xb))  # [alpha_u; alpha_v]
    T2 <- forwardsolve(post$LB, T1)                          # [beta_u; beta_v]
    a_u <- T1[u, , drop = FALSE]
    a_v <- T1[v, , drop = FALSE]
    g$mean[b] <- drop(crossprod(a_u, post$w[u]))
    g$var[b] <- colSums(T2[u, , drop = FALSE]^2)
    h$mean[b] <- drop(crossprod(a_v, post$w[v]))
    if (fit$type == "solve") h$var[b] <- colSums(T2[v, , drop = FALSE]^2)
    l$var[b] <- .ffi_kern_diag(k, xb) - colSums(a_u^2) -
      if (fit$type == "solve") colSums(a_v^2) else 0
  }
  rn <- rownames(xnew)
  nm <- function(p) lapply(p, function(z) { names(z) <- rn; z })
  list(g = nm(g), h = nm(h), l = nm(l),
       total = nm(list(mean = g$mean + h$mean, var = g$var + h$var + l$var)),
       constant = fit$params$mean)
}

#' KL divergence between Gaussian predictive distributions
#'
#' \code{kl_gaussian()} is the Kullback-Leibler divergence
#' \deqn{KL(N_1 \| N_2) = \tfrac12\{\mathrm{tr}(\Sigma_2^{-1}\Sigma_1) +
#'   (\mu_2 - \mu_1)^\top\Sigma_2^{-1}(\mu_2 - \mu_1) - n +
#'   \log|\Sigma_2| - \log|\Sigma_1|\}}{KL(N_1 || N_2) = 1/2\{tr(Sigma_2^-1 Sigma_1) + (mu_2 - mu_1)'
#'   Sigma_2^-1(mu_2 - mu_1) - n + log|Sigma_2| - log|Sigma_1|\}}
#' (Fernlund 2022, eq. 3.11), computed from Cholesky factors.
#' \code{kl_predictive()} applies it to the joint predictive distributions
#' of two fitted models at the same inputs, as in Fernlund (2022), Figs. 6.2-6.4
#' (for example an \code{\link{osgpr}} fit against \code{\link{gpr}} or
#' \code{\link{sgpr}} fits at the same hyperparameters).
#'
#' Latent predictive covariances at many inputs are nearly singular, so the
#' same small jitter is added to the diagonal of both covariances:
#' \code{jitter} times the mean of their diagonals. Directions in which both
#' distributions are tighter than that do not count.
#'
#' @param mean1,cov1 mean vector and covariance matrix of the first Gaussian.
#' @param mean2,cov2 those of the second.
#' @param jitter relative jitter added to both covariances (see Details).
#' @param object,reference fitted models: the divergence is
#'   \eqn{KL(object \| reference)}{KL(object || reference)}.
#' @param newdata inputs at which to compare the two, as for
#'   \code{\link{predict.sparsevgp}}.
#' @param type \code{"latent"} (of \eqn{f}) or \code{"response"} (of
#'   \eqn{y}).
#' @return The divergence, one number (in nats).
#' @examples
#' kl_gaussian(c(0, 0), diag(2), c(1, 0), 2 * diag(2))
#' fit <- osgpr(y ~ x, data = snelson, inducing = 4, orthogonal = 4)
#' ex <- gpr(y ~ x, data = snelson, optimize = FALSE,
#'           kernel = kernel_rbf(fit$params$lengthscale, fit$params$variance),
#'           noise = fit$params$noise, mean = fit$params$mean)
#' kl_predictive(fit, ex, data.frame(x = seq(0, 6, length.out = 50)))
#' @export
kl_gaussian <- function(mean1, cov1, mean2, cov2, jitter = 0) {
  n <- length(mean1)
  chk <- function(S, name) {
    if (!is.matrix(S) || !is.numeric(S) || nrow(S) != n || ncol(S) != n || any(!is.finite(S))) {
      stop(sprintf("'%s' must be a finite %d x %d covariance matrix", name, n, n), call. = FALSE)
    }
  }
  if (!is.numeric(mean1) || !is.numeric(mean2) || length(mean2) != n ||
      any(!is.finite(mean1)) || any(!is.finite(mean2))) {
    stop("'mean1' and 'mean2' must be finite numeric vectors of the same length", call. = FALSE)
  }
  chk(cov1, "cov1")
  chk(cov2, "cov2")
  if (!is.numeric(jitter) || length(jitter) != 1L || !(jitter >= 0)) {
    stop("'jitter' must be one non-negative number", call. = FALSE)
  }
  if (n == 0L) return(0)
  eps <- jitter * mean(c(diag(cov1), diag(cov2)))
  fac <- function(S, name) {
    S <- (S + t(S)) / 2
    diag(S) <- diag(S) + eps
    R <- tryCatch(chol(S), error = function(e) NULL)
    if (is.null(R)) {
      stop(sprintf("'%s' is not positive definite with jitter %g: increase 'jitter'",
                   name, jitter), call. = FALSE)
    }
    R
  }
  R1 <- fac(cov1, "cov1")
  R2 <- fac(cov2, "cov2")
  # tr(S2^-1 S1) = |R2^-T R1'|_F^2, Mahalanobis term |R2^-T (m2 - m1)|^2
  tr <- sum(backsolve(R2, t(R1), transpose = TRUE)^2)
  maha <- sum(backsolve(R2, mean2 - mean1, transpose = TRUE)^2)
  0.5 * (tr + maha - n + 2 * sum(log(diag(R2))) - 2 * sum(log(diag(R1))))
}

#' @rdname kl_gaussian
#' @export
kl_predictive <- function(object, reference, newdata, type = c("latent", "response"),
                          jitter = 1e-8) {
  if (!inherits(object, "sparsevgp") || !inherits(reference, "sparsevgp")) {
    stop("'object' and 'reference' must be fitted sparsevgp models", call. = FALSE)
  }
  type <- match.arg(type)
  p1 <- predict(object, newdata, type = type, full_cov = TRUE)
  p2 <- predict(reference, newdata, type = type, full_cov = TRUE)
  kl_gaussian(unname(p1$mean), unname(p1$cov), unname(p2$mean), unname(p2$cov), jitter)
}
