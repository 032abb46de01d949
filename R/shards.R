# Data that never pass through the master: rows loaded by the workers of
# a cluster, each from its own files (or database, or anything its load
# function reads), and models fitted on them with only M x M statistics,
# gradient pieces and summary statistics travelling.
#
#   shards(cl, load)      each worker i runs load(i) and keeps its data
#                         frame; the master keeps the cluster, a key and
#                         the row counts.
#   sgpr(y ~ ., data = sh)  (osgpr: R/shards_osgpr.R, the same way)
#                         the formula is applied on the workers (.shard_frame()
#                         agrees the factor levels, .shard_design() builds
#                         the inputs and targets with them and returns
#                         counts, means, sums of squares and ranges), and
#                         the fit runs on the workers' design through the
#                         cluster path of R/cluster.R: each worker holds a
#                         share (list(fit = its rows as a fit)) under the
#                         fit's key, so .shard_collapsed() evaluates the
#                         bound there as for cluster = cl.
#
# What the fit needs from the data, without the data:
#   - the scaling of the optimiser (.optim_setup(): means and sds of the
#     inputs and of y), the starting noise and mean, and N come from the
#     summary statistics, combined over workers by the pairwise formulas
#     of Chan, Golub and LeVeque (1983) for means and sums of squares;
#   - the start search reads 1000 evenly spaced rows and the default
#     lengthscales 400 (as R/start.R and .kern_init() pick them from all
#     rows in one process), fetched from their workers;
#   - the schedule of R/training.R runs on a subsample of at most
#     .train_subsample rows (the master draws global row numbers from R's
#     random numbers, so set.seed() reproduces it; the workers send those
#     rows), and then on all rows on the workers with the inducing inputs
#     held (.train_large()). When N is at most that size, the subsample is
#     all the rows, and the fit is the one of one process on the
#     concatenated rows: the master then holds them while it fits, the
#     same bound on its memory as for larger N;
#   - prior weights (weights = w, an expression in the workers' columns)
#     are evaluated on the workers and stay there: each worker's noise
#     variances are sigma^2 / w at its rows (.shard_configure()), the
#     subsample's rows bring theirs, and the selection weights each row
#     by w / sigma^2;
#   - greedy selection of the inducing inputs over all rows runs in rounds
#     (.shards_greedy()): each worker keeps the pivoted Cholesky factor of
#     its own rows and proposes its row of largest residual variance; the
#     master takes the largest proposal and sends it back, and every worker
#     adds that column to its factor. This is the greedy conditional
#     variance selection over the union of the rows (Burt, Rasmussen and
#     van der Wilk 2020; Passerello 2022, eq. 3.7) itself, not an
#     approximation: the residual variance of a row given the selected
#     points needs only the row and the pivots' rows of the factor, which
#     travel with the proposal. One exchange of O(M + D) numbers per
#     selected point, O(n_w M^2) work on each worker.
#
# The fit the master keeps holds no rows (x has 0 rows, y length 0) and
# fit$shards: N, the rows per worker and the summary statistics, so
# O(M^2 + M D) numbers; nobs() and the like read .nobs().

#' Data held by the workers of a cluster
#'
#' \code{shards()} lets each worker of a cluster load its own rows of a data
#' set (from its files, a database, anything), so that a model can be fitted
#' on data that never pass through this process:
#' \code{sgpr(y ~ x1 + x2, data = shards(cl, load))}. Only summary
#' statistics, a bounded subsample and the \eqn{M \times M}{M x M} statistics
#' of each evaluation travel (see Details and \code{\link{scaling}}).
#' \code{\link{pgpr}()}, \code{\link{svgp}()} and \code{\link{osgpr}()} take
#' shards too.
#'
#' \code{load(i, ...)} runs on worker \code{i} of \code{cl} (\code{i = 1,
#' ..., length(cl)}) and returns that worker's rows as a data frame (a
#' matrix is converted); a worker may have no rows. The data frames stay on
#' the workers until the cluster is stopped. \code{load} and the arguments
#' in \code{...} are sent to the workers, so \code{load} should read the
#' data rather than carry them (a function that refers to large objects of
#' its environment sends them along).
#'
#' The result is passed as \code{data} to \code{\link{sgpr}()},
#' \code{\link{pgpr}()}, \code{\link{svgp}()} or \code{\link{osgpr}()} (other
#' models refuse it with an error for now). The formula is applied on the workers:
#' the levels of factors are agreed across workers first (the union of the
#' levels present on any worker, sorted for character columns, in order of
#' appearance for factors), so that every worker builds the same columns.
#' Terms whose coefficients come from the data (\code{poly()},
#' \code{scale()}, splines) would differ between workers and are refused:
#' compute them in \code{load}. Rows with missing values are dropped
#' (\code{na.omit}).
#'
#' \strong{Prior weights.} \code{sgpr(y ~ x1 + x2, data = sh, weights = w)}
#' reads the weights from the workers' data: \code{w} (a column, or an
#' expression in the columns such as \code{1 / s2}) is evaluated on each
#' worker against its own rows, as \code{lm()} evaluates \code{weights} in
#' \code{data}, and must be positive (rows where it is missing are dropped
#' with the rest of the row). The noise variance of row \eqn{n} is
#' \eqn{\sigma^2 / w_n}{sigma^2 / w_n}, as in one process; the weights stay on
#' the workers (and with the rows of the subsample), and the greedy
#' selection maximises \eqn{w_n d_n / \sigma^2}{w_n d_n / sigma^2} over all rows, so the fit is
#' that of one process with the same weights.
#'
#' \strong{Known noise variances, subset and offset.} The same holds for
#' the other arguments that \code{lm()} evaluates in \code{data}:
#' \code{sgpr(y ~ x1 + x2, data = sh, noise = s2)} with \code{s2} a column
#' of the workers' data (or an expression in their columns, such as
#' \code{s^2}) takes the known per-point noise variances of each row from
#' its worker, the fit of \code{noise = s2} in one process on the
#' concatenated rows (with \code{weights = w} too, the variances are
#' \code{s2 / w}); \code{subset = keep & x1 > 0} selects rows on each worker,
#' and the counts, means and ranges that scale the fit are those of the kept
#' rows; \code{offset = o} and \code{offset()} terms in the formula are
#' subtracted from the response on the workers (\code{sgpr()}), and
#' \code{predict(fit, newdata)} adds them at the new rows, as in one process.
#' \code{subset} works for \code{pgpr()} and \code{svgp()} too. A vector of
#' variances (or weights) in this process, noise formulas, and weights or an
#' offset for \code{pgpr()} and \code{svgp()} are refused with an error of
#' class \code{"sparsevgp_shards_error"}.
#'
#' What the fit needs from the data comes without them: the scaling of the
#' optimiser, the starting noise and mean from counts, means, sums of
#' squares and ranges of the workers' columns; the search for starting values
#' from 1000 evenly spaced rows; greedy selection of the inducing inputs
#' over all rows in rounds (each worker proposes the row of its share with
#' the largest residual variance, the master takes the largest and every
#' worker updates its factor: the selection one process would make, up to
#' ties); the schedule of \code{\link{sgpr}()} on a random subsample of at
#' most 20 000 rows (\code{set.seed()} reproduces it), then the kernel,
#' noise and mean on all rows on the workers with the inducing inputs held.
#' With at most 20 000 rows in all, the subsample is all of them and the
#' fit is the one of one process on the rows concatenated in worker order.
#' The fit keeps no rows: \code{predict(fit, newdata)} works in this process
#' as for any fit, and \code{fitted(fit, cluster = sh)} and
#' \code{residuals(fit, cluster = sh)} compute the values at the workers'
#' rows on the workers and return them in worker order.
#'
#' \strong{Classifiers and svgp.} For \code{\link{pgpr}()} and
#' \code{\link{svgp}()} the response may be labels (a factor, logical,
#' text or numbers), coded on the workers as the fit codes them (a worker
#' may hold one class only). With at most 20 000 rows in all, this process
#' gathers them and starts, selects and runs the model's schedule as one
#' process does on the rows in worker order, while every evaluation on all
#' rows runs on the workers' own rows: the fit of one process (pgpr to
#' 1e-8; svgp's L-BFGS-B over \eqn{q(u)} follows the order of the sums, so
#' its fit equals that with \code{cluster =} and the same split, and its
#' bound and gradient equal one process's to 1e-10 at any parameters).
#' With more rows the model is fitted in this process on a random subsample
#' of 20 000 rows that the workers send (starts, selection and schedule;
#' \code{set.seed()} reproduces it), and then on all rows on the workers
#' as one process continues after its own subsample: \code{pgpr()} the
#' closed-form updates of the local parameters \eqn{c}, \code{svgp()}
#' \eqn{q(u)} at its conditional optimum, and \code{svgp(batch_size =)}
#' Adam on minibatches of all rows (the row numbers drawn in this process
#' from R's random numbers). pgpr's \eqn{c} stay on the workers while the
#' model is fitted; \code{objective(fit, cluster = sh)} recomputes them
#' from the fit's \eqn{q(f)}. \code{svgp()} with several classes is fitted
#' in this process on the gathered rows up to 20 000 rows (the fit of one
#' process; \code{svgp(cluster =)} does not take several classes), and
#' beyond as with two classes: the subsample's fit, then \eqn{q(u)} at its
#' conditional optimum (or Adam on minibatches) on all rows on the workers
#' with the subsample's Monte Carlo draws of the softmax.
#' Natural-gradient steps (\code{control$optimizer = "natgrad"}) are fitted
#' in this process on at most 20 000 rows. \code{fitted(fit, cluster = sh)}
#' and \code{residuals(fit, type, cluster = sh)} of these fits are computed
#' on the workers, each on its own rows, as one process computes them (the
#' probabilities of the positive class by \code{method}, a matrix of class
#' probabilities for several classes, \code{"response"} and
#' \code{"pearson"} residuals); only the result, \eqn{N} numbers, comes to
#' this process, so ask for it when \eqn{N} numbers fit here (to keep the
#' values on the workers, compute what you need from them there, for
#' example with \code{predict(fit, newdata)} inside \code{load} or
#' \code{parallel::clusterCall()}). \code{plot()} of these fits refuses and
#' points to \code{predict(fit, newdata)}.
#'
#' \strong{Orthogonal inducing inputs.} \code{osgpr(y ~ x1 + x2, data = sh)}
#' runs as \code{sgpr()} does: with at most 20 000 rows this process
#' gathers them and starts, chooses the regular and the orthogonal inducing
#' inputs and runs the schedule as one process does on the rows in worker
#' order (the fit of one process, for both \code{type}s), with the final
#' evaluation on the workers; with more rows the start, both sets and the
#' schedule come from one random subsample of 20 000 rows (\code{set.seed()}
#' reproduces it), then the kernel, noise and mean are fitted on all rows
#' on the workers with both sets held. \code{weights = w} and \code{subset}
#' are evaluated on the workers; known noise variances, noise formulas and
#' offsets are refused with an error of class
#' \code{"sparsevgp_shards_error"}.
#'
#' \strong{Memory.} \code{shards()} asks each worker for its host's name
#' (\code{Sys.info()[["nodename"]]}), and the workers of one host share the
#' fit's \code{control$memory}: each worker's budget for its chunks and its
#' part of the greedy selection is \code{control$memory} divided by the
#' number of workers on its host, so that the workers of a host together
#' stay within the budget (see \code{\link{scaling}}).
#'
#' \strong{Neighbours.} \code{sgpr(y ~ ., data = sh, neighbours = K)} fits
#' the model with a Vecchia residual (see \code{\link{sgpr}}) with each
#' row's neighbours taken from the same shard: no process holds all rows,
#' so each worker draws a random order of its own rows (from a seed this
#' process sends; \code{set.seed()} reproduces it) and chooses every row's
#' neighbours among the earlier rows of its shard, by residual correlation
#' as in one process, and again when the lengthscales have moved. It is
#' still a Vecchia approximation, with the residual process independent
#' across shards (the inducing-point part stays global), and the objective
#' is its exact likelihood, summed over the workers. When each shard holds
#' a region of the inputs little is lost; when the shards are random
#' splits, each row's neighbours are only as close as in a fraction of the
#' data. Measured on the volcano surface (\code{inst/bench/bench_shards_vif.R},
#' 4246 training cells, \eqn{K = 10}, three splits): test NLPD 0.849 in one
#' process, 0.853 with the two spatial halves as shards, 0.981 with two
#' random halves, and 1.569 without neighbours. \code{neighbours = "auto"}
#' runs the trial of one process on the gathered rows (at most 20 000, a
#' random subsample beyond). The fit's values at the workers' rows (\code{fitted()}, \code{residuals()})
#' condition each row on its own shard; \code{predict(fit, newdata,
#' cluster = sh)} computes predictions at new points on the workers, each
#' point from the shard that holds the training row nearest to it (in the
#' inputs scaled by the lengthscales), and \code{predict(fit, newdata)}
#' without the shards says so. With up to 20 000 rows the fit is that of
#' one process with the neighbour sets restricted to the shards.
#'
#' \strong{Faults.} A worker that dies, or that lost its rows, stops the
#' fit with an error of class \code{sparsevgp_cluster_error}; this process
#' stays usable. The error's \code{fit} element holds the model at the
#' parameters reached before the failure (for \code{pgpr()} and
#' \code{svgp()} with more rows than the subsample, the subsample's fit);
#' once the cluster is restored, \code{update(e$fit, cluster = new_cl)}
#' loads the rows on the workers of \code{new_cl} with the load function and
#' arguments the shards keep, resumes from there and drops the rows from
#' those workers afterwards (\code{update(e$fit, data = shards(new_cl,
#' load))} does the same with shards you keep). Any fit with \code{data =
#' sh} and \code{cluster = cl} loads the rows on \code{cl} that way.
#'
#' @param cl a cluster from \code{parallel::makeCluster()} (PSOCK, which
#'   spans machines, or FORK).
#' @param load a function of the worker number \code{i} (and the arguments
#'   in \code{...}) that returns that worker's rows as a data frame.
#' @param ... further arguments of \code{load}.
#' @return An object of class \code{"sparsevgp_shards"}: the cluster, a key
#'   under which the workers keep their data, the number of rows and the
#'   columns on each worker, \code{load} with its arguments (to load
#'   the rows again on another cluster), the host of each worker
#'   (\code{hosts}) and the number of workers on it (\code{per_host}).
#' @seealso \code{\link{scaling}}, \code{\link{sgpr}}, \code{\link{pgpr}},
#'   \code{\link{svgp}}, \code{\link{osgpr}}
#' @examples
#' \donttest{
#' # a stand-in for two hosts that each read their own file
#' dir <- tempfile("shards")
#' dir.create(dir)
#' set.seed(1)
#' for (i in 1:2) {
#'   x1 <- runif(500, -3, 3)
#'   x2 <- runif(500, -3, 3)
#'   d <- data.frame(x1 = x1, x2 = x2, y = sin(x1) * cos(x2) + rnorm(500, sd = 0.1))
#'   saveRDS(d, file.path(dir, sprintf("part-%03d.rds", i)))
#' }
#' cl <- parallel::makeCluster(2)
#' sh <- shards(cl, function(i, dir) readRDS(file.path(dir, sprintf("part-%03d.rds", i))),
#'              dir = dir)
#' sh
#' fit <- sgpr(y ~ x1 + x2, data = sh, inducing = 20)
#' fit
#' predict(fit, data.frame(x1 = 0, x2 = 0))
#' head(residuals(fit, cluster = sh))
#' parallel::stopCluster(cl)
#' unlink(dir, recursive = TRUE)
#' }
#' @export
shards <- function(cl, load, ...) {
  .cluster_check(cl, "cl")
  if (!is.function(load)) {
    stop("'load' must be a function of the worker number i that returns that worker's rows as a data frame",
         call. = FALSE)
  }
  cl <- .cluster_open(cl, length(cl), "cl", shares = FALSE)
  key <- .shard_key()
  each <- as.list(seq_along(cl))
  info <- tryCatch(
    .cluster_call(list(cl = cl, key = NULL), ".shard_load",
                  list(key = key, load = load, args = list(...)), each),
    error = function(e) {
      .cluster_release(list(cl = cl, key = key))
      stop(e)
    })
  n <- vapply(info, function(r) as.double(r$n), 0)
  cols <- info[[which.max(c(n > 0, TRUE))[1L]]]$columns
  # the workers of one host share its memory budget: each one's is
  # control$memory divided by the number of workers on its host
  hosts <- vapply(info, `[[`, "", "host")
  per_host <- as.vector(table(hosts)[hosts])
  .cluster_call(list(cl = cl, key = key), ".shard_per_host", list(), as.list(per_host))
  structure(list(cl = cl, key = key, n = n, columns = cols, load = load, args = list(...),
                 columns_by_worker = lapply(info, `[[`, "columns"), hosts = hosts,
                 per_host = per_host),
            class = "sparsevgp_shards")
}

# The name of the host of this process (the option sparsevgp.nodename
# stands in for it in tests of several hosts on one machine).
.shard_nodename <- function() {
  host <- getOption("sparsevgp.nodename")
  if (is.null(host)) Sys.info()[["nodename"]] else as.character(host)
}

# On a worker: the number of workers on its host, which divide its memory.
.shard_per_host <- function(s, a, each) {
  s$per_host <- each
  TRUE
}

# A worker's memory budget: control$memory divided by the number of
# workers `per_host` on its host (NULL: not on shards, the whole budget).
.host_memory <- function(memory, per_host) {
  if (is.null(per_host) || !is.numeric(memory) || length(memory) != 1L) return(memory)
  memory / per_host
}

#' @export
print.sparsevgp_shards <- function(x, ...) {
  cat(sprintf("Data on %d worker%s of a cluster: %s rows (%s)\n", length(x$n),
              if (length(x$n) == 1L) "" else "s", format(sum(x$n), big.mark = ","),
              paste(format(x$n, big.mark = ",", trim = TRUE), collapse = ", ")))
  cols <- names(x$columns)
  cat(sprintf("Columns: %s\n", paste(sprintf("%s (%s)", cols, x$columns), collapse = ", ")))
  if (!is.null(x$hosts)) {
    tab <- table(factor(x$hosts, levels = unique(x$hosts)))
    cat(sprintf("Hosts: %s (each worker's memory budget is control$memory divided by the workers of its host)\n",
                paste(sprintf("%s (%d worker%s)", names(tab), tab, ifelse(tab == 1L, "", "s")),
                      collapse = ", ")))
  }
  invisible(x)
}

# On a worker: run the user's load(i) and keep the data frame under a$key.
.shard_load <- function(s, a, each) {
  i <- each
  d <- tryCatch(do.call(a$load, c(list(i), a$args)), error = function(e) {
    stop(sprintf("load(%d) failed on worker %d: %s", i, i, conditionMessage(e)), call. = FALSE)
  })
  if (is.matrix(d)) d <- as.data.frame(d)
  if (!is.data.frame(d)) {
    stop(sprintf("load(%d) returned %s on worker %d, not a data frame", i,
                 .describe_value(d), i), call. = FALSE)
  }
  .shard_store(list(data = d), a$key)
  list(n = nrow(d), columns = vapply(d, function(v) class(v)[1L], ""), host = .shard_nodename())
}

# ---- the formula on the workers ----------------------------------------------

# On a worker: the model frame of the formula on its rows (missing values
# dropped), with the classes and levels of its variables.
.shard_frame <- function(s, a, each = NULL) {
  mf <- .shard_model_frame(a$formula, s$data, a$weights, na.action = stats::na.omit,
                           drop.unused.levels = TRUE, extra = a$extra)
  vars <- vapply(mf, function(v) class(v)[1L], "")
  levels <- lapply(mf, function(v) {
    if (is.factor(v)) levels(v) else if (is.character(v)) sort(unique(v))
  })
  # the formula with `.` expanded over the worker's columns, and the
  # variables as model.frame() evaluates them for new data: terms whose
  # coefficients come from the data (poly(), scale(), splines) differ
  # between workers
  tt <- attr(mf, "terms")
  f <- stats::formula(tt)
  environment(f) <- globalenv()
  list(n = nrow(mf), classes = vars, levels = levels[!vapply(levels, is.null, TRUE)], formula = f,
       predvars = paste(deparse(attr(tt, "predvars"), width.cutoff = 500L), collapse = " "))
}

# On a worker: the model frame of `formula` on its rows `data`, with the
# prior weights `weights` (an expression in the columns of the data, as the
# call's weights = w is for model.frame(), or NULL) and the other arguments
# of model.frame() in `...`. `extra` holds the call's other expressions in
# the columns (.shards_extra()): `subset` (a logical expression selecting
# rows), `offset` and `noise` (known per-row noise variances, the column
# "(noise)"); each NULL when absent. The expressions are evaluated in the
# data only: a variable that is not a column of the worker's data is an
# error.
.shard_model_frame <- function(formula, data, weights = NULL, ..., extra = NULL) {
  ex <- c(list(weights = weights), extra)
  ex <- ex[!vapply(ex, is.null, TRUE)]
  if (!length(ex)) return(stats::model.frame(formula, data, ...))
  for (a in names(ex)) {
    miss <- setdiff(all.vars(ex[[a]]), names(data))
    if (length(miss)) {
      stop(sprintf("with data = shards() '%s' is computed from the columns of the workers' data, and %s %s not a column there",
                   a, paste(miss, collapse = ", "), if (length(miss) > 1L) "are" else "is"),
           call. = FALSE)
    }
  }
  # (the data by name, so that the call never holds the rows)
  mfc <- as.call(c(list(quote(stats::model.frame), formula = formula, data = quote(data)), ex,
                   list(...)))
  mf <- eval(mfc)
  w <- stats::model.weights(mf)
  if (!is.null(w) && (!is.numeric(w) || any(!is.finite(w)) || any(w <= 0))) {
    stop("'weights' must be positive finite numbers, one per observation (leave out observations of zero weight in 'load')",
         call. = FALSE)
  }
  s2 <- mf[["(noise)"]]
  if (!is.null(s2) && (!is.numeric(s2) || any(!is.finite(s2)) || any(s2 <= 0))) {
    stop("'noise' must be positive finite variances, one per observation, in the workers' data",
         call. = FALSE)
  }
  off <- mf[["(offset)"]]
  if (!is.null(off) && (!is.numeric(off) || any(!is.finite(off)))) {
    stop("'offset' must be finite numbers, one per observation, in the workers' data", call. = FALSE)
  }
  mf
}

# The levels of each factor agreed over the workers' frames: the union of
# the levels present anywhere (sorted for character variables, as factor()
# sorts them, in order of appearance for factors). A variable that is a
# factor on one worker and a number on another is refused.
.shards_levels <- function(frames) {
  have <- vapply(frames, function(f) f$n > 0L, TRUE)
  classes <- lapply(frames[have], `[[`, "classes")
  vars <- unique(unlist(lapply(classes, names)))
  for (v in vars) {
    cls <- unique(vapply(classes, function(cl) if (v %in% names(cl)) cl[[v]] else NA_character_, ""))
    cls <- cls[!is.na(cls)]
    kinds <- unique(ifelse(cls %in% c("factor", "ordered", "character"), "categorical", cls))
    if (length(kinds) > 1L) {
      stop(sprintf("the variable '%s' is %s on different workers: every worker must load it with the same type",
                   v, paste(cls, collapse = " and ")), call. = FALSE)
    }
  }
  lev <- list()
  for (f in frames) {
    for (v in names(f$levels)) {
      lev[[v]] <- if (identical(f$classes[[v]], "character")) sort(union(lev[[v]], f$levels[[v]]))
                  else union(lev[[v]], f$levels[[v]])
    }
  }
  lev
}

# On a worker: the inputs and targets of its rows under the agreed levels,
# kept as its share of the fit under a$fit_key, and their summary
# statistics: count, means and sums of squared deviations, ranges and
# whether all are finite, of every input column and of y.
.shard_design <- function(s, a, each = NULL) {
  mf <- .shard_model_frame(a$formula, s$data, a$weights, xlev = a$xlevels,
                           na.action = stats::na.omit, drop.unused.levels = FALSE,
                           extra = a$extra)
  tt <- attr(mf, "terms")
  attr(tt, "intercept") <- 0L
  x <- stats::model.matrix(tt, mf)
  attr(x, "assign") <- attr(x, "contrasts") <- NULL
  rownames(x) <- NULL
  y <- stats::model.response(mf)
  if (!is.null(dim(y)) || is.null(y) ||
      !(is.numeric(y) || (isTRUE(a$labels) && (is.factor(y) || is.logical(y) || is.character(y))))) {
    stop(if (isTRUE(a$labels)) "the response of the formula must be one variable of labels or numbers" else
           "the response of the formula must be one numeric variable", call. = FALSE)
  }
  # labels (a classifier's response) stay as they are, coded later with
  # the coding of the whole fit (.shard_adopt())
  if (is.numeric(y)) y <- as.double(y)
  # an offset (offset() terms and the call's offset): the target is y minus
  # it, as sgpr() fits it in one process
  off <- stats::model.offset(mf)
  if (!is.null(off)) {
    if (!is.numeric(y)) stop("an offset needs a numeric response", call. = FALSE)
    y <- y - as.double(off)
  }
  storage.mode(x) <- "double"
  fit <- structure(list(x = x, y = y), class = c("sgpr", "sparsevgp"))
  # known per-row noise variances (noise = s2): the worker's factors of the
  # noise variances are s2 / w (.shard_rel())
  if (!is.null(mf[["(noise)"]])) fit$noise_var <- as.double(mf[["(noise)"]])
  # the workers on its host (which share control$memory, .host_memory())
  fit$per_host <- s$per_host
  # prior weights: the worker's noise variances are sigma^2 / w
  # (.shard_configure())
  if (!is.null(a$weights)) fit$weights <- as.double(stats::model.weights(mf))
  .shard_store(list(fit = fit), a$fit_key)
  ym <- .shard_moments(cbind(y = if (is.numeric(y)) y else rep(0, length(y))))
  rel <- .rows_rel(fit$weights, fit$noise_var)
  list(n = nrow(x), colnames = colnames(x), x = .shard_moments(x), y = ym,
       rel = if (!is.null(rel)) c(sum = sum(rel), min = min(c(Inf, rel)), max = max(c(-Inf, rel))))
}

# Count, means, sums of squared deviations, minima, maxima and numbers of
# non-finite values of the columns of x.
.shard_moments <- function(x) {
  n <- nrow(x)
  ok <- is.finite(x)
  bad <- colSums(!ok)
  if (n == 0L) {
    z <- rep(0, ncol(x))
    return(list(n = 0, mean = z, m2 = z, min = rep(Inf, ncol(x)), max = rep(-Inf, ncol(x)),
                bad = bad))
  }
  mu <- colMeans(x)
  list(n = n, mean = mu, m2 = colSums(sweep(x, 2L, mu)^2), min = apply(x, 2L, min),
       max = apply(x, 2L, max), bad = bad)
}

# The workers' moments combined (Chan, Golub and LeVeque 1983): the rows
# of .col_stats() (mean, sd, min, max, finite) over all rows.
.shards_combine <- function(ms) {
  n <- vapply(ms, `[[`, 0, "n")
  N <- sum(n)
  mean <- Reduce(`+`, Map(function(m, k) m$mean * k, ms, n)) / N
  m2 <- Reduce(`+`, Map(function(m, k) m$m2 + k * (m$mean - mean)^2, ms, n))
  out <- rbind(mean = mean, sd = sqrt(m2 / (N - 1)),
               min = do.call(pmin, lapply(ms, `[[`, "min")),
               max = do.call(pmax, lapply(ms, `[[`, "max")),
               finite = as.double(Reduce(`+`, lapply(ms, `[[`, "bad")) == 0))
  out
}

# The formula applied on the workers of the shards `sh`: the levels agreed,
# each worker's rows turned into its share of a fit (under a new key), and
# the combined statistics. Returns list(h (the cluster handle of the
# workers with rows), terms, xlevels, N, colnames, x (.col_stats() rows),
# y (c(mean, var))). `weights` is the expression of the prior weights in
# the workers' columns (NULL: none), `extra` the other expressions of
# .shards_extra() (subset, offset, known noise variances).
.shards_design <- function(sh, formula, xlev = NULL, labels = FALSE, weights = NULL,
                           extra = NULL) {
  if (!inherits(sh, "sparsevgp_shards")) stop("'data' must be the result of shards()", call. = FALSE)
  if (!inherits(formula, "formula") || length(formula) != 3L) {
    stop("'formula' must be a two-sided formula such as y ~ x1 + x2", call. = FALSE)
  }
  # the formula's variables come from the workers' data: its environment
  # stays here (it could hold anything)
  environment(formula) <- globalenv()
  all <- list(cl = sh$cl, key = sh$key, n = sh$n)
  if (is.null(xlev)) {
    frames <- .cluster_call(all, ".shard_frame", list(formula = formula, weights = weights, extra = extra))
    xlev <- .shards_levels(frames)
    pv <- unique(vapply(frames[vapply(frames, `[[`, 0, "n") > 0], `[[`, "", "predvars"))
    if (length(pv) > 1L) {
      stop("the formula has terms computed from the data (such as poly(), scale() or splines), which each worker would compute from its own rows: compute them in 'load' with coefficients common to all workers",
           call. = FALSE)
    }
    formula <- frames[[which.max(c(vapply(frames, `[[`, 0, "n") > 0, TRUE))]]$formula
  }
  fit_key <- .shard_key()
  d <- tryCatch(.cluster_call(all, ".shard_design",
                              list(formula = formula, xlevels = xlev, fit_key = fit_key,
                                   labels = labels, weights = weights, extra = extra)),
                error = function(e) {
                  .cluster_release(list(cl = sh$cl, key = fit_key))
                  stop(e)
                })
  n <- vapply(d, `[[`, 0, "n")
  keep <- n > 0
  # the workers without rows take no part in the fit
  if (any(!keep)) .cluster_release(list(cl = sh$cl[!keep], key = fit_key))
  h <- list(cl = sh$cl[keep], key = fit_key, n = n[keep])
  N <- sum(n)
  D <- length(d[[1L]]$colnames)
  if (N < 2) {
    .cluster_release(h)
    stop(sprintf("the model frame has %d row%s on the workers after na.action, and at least 2 are needed",
                 N, if (N == 1) "" else "s"), call. = FALSE)
  }
  if (D == 0L) {
    .cluster_release(h)
    stop(sprintf("the formula %s has no inputs: a Gaussian process needs at least one variable on the right-hand side",
                 paste(deparse(formula, width.cutoff = 200L), collapse = " ")), call. = FALSE)
  }
  xs <- .shards_combine(lapply(d[keep], `[[`, "x"))
  ys <- .shards_combine(lapply(d[keep], `[[`, "y"))
  bad <- colnames(xs)[xs["finite", ] == 0]
  if (length(bad) || ys["finite", 1L] == 0) {
    .cluster_release(h)
    stop(sprintf("the %s infinite values on the workers: na.action drops missing values only, so leave those rows out in 'load'",
                 if (length(bad)) paste("input", paste(bad, collapse = ", "), "has") else "response has"),
         call. = FALSE)
  }
  colnames(xs) <- d[[which(keep)[1L]]]$colnames
  mf_terms <- stats::terms(formula)
  tt <- stats::delete.response(mf_terms)
  # the range and mean of the rows' factors of the noise variances (s2 / w)
  rel <- lapply(d[keep], `[[`, "rel")
  rel <- if (!is.null(rel[[1L]])) {
    c(min = min(vapply(rel, `[[`, 0, "min")), mean = sum(vapply(rel, `[[`, 0, "sum")) / N,
      max = max(vapply(rel, `[[`, 0, "max")))
  }
  list(h = h, terms = .shards_terms(formula), xlevels = xlev[intersect(names(xlev), all.vars(tt))],
       N = N, colnames = colnames(xs), x = xs,
       y = c(mean = ys["mean", 1L], var = ys["sd", 1L]^2), rel = rel)
}

# The terms of the fit as .formula_data() records them (no intercept), from
# the formula alone (the data are on the workers).
.shards_terms <- function(formula) {
  tt <- stats::terms(formula)
  attr(tt, "intercept") <- 0L
  tt
}

# On a worker: the rows `each` (of its share of the fit) of the inputs and
# targets.
.shard_rows <- function(s, a, each) {
  list(x = s$fit$x[each, , drop = FALSE], y = s$fit$y[each], w = s$fit$weights[each],
       s2 = s$fit$noise_var[each])
}

# The rows `rows` (increasing numbers into the rows of all workers in
# order) fetched from the workers of the handle h, with their prior
# weights w and known noise variances s2 (NULL: none).
.shards_gather <- function(h, rows) {
  r <- .cluster_rows(h, ".shard_rows", list(), batch = rows)
  list(x = do.call(rbind, lapply(r, `[[`, "x")), y = unlist(lapply(r, `[[`, "y")),
       w = unlist(lapply(r, `[[`, "w")), s2 = unlist(lapply(r, `[[`, "s2")))
}

# The factors of the noise variances of rows with prior weights w and known
# variances s2 (NULL: none; NULL when both are): s2 / w.
.rows_rel <- function(w, s2) {
  if (is.null(w) && is.null(s2)) return(NULL)
  (if (is.null(s2)) 1 else s2) / (if (is.null(w)) 1 else w)
}

# On a worker: the kernel, control and noise model of the fit in its share.
# With prior weights or known variances, its rows' factors of the noise
# variances are s2 / w (.rows_rel(); the fit on the master keeps none).
.shard_configure <- function(s, a, each = NULL) {
  for (f in names(a)) s$fit[[f]] <- a[[f]]
  # (its share of the memory budget of its host)
  if (!is.null(a$control)) s$fit$control$memory <- .host_memory(a$control$memory, s$fit$per_host)
  rel <- .rows_rel(s$fit$weights, s$fit$noise_var)
  if (!is.null(rel)) s$fit$noise_model$lambda <- rel
  TRUE
}

# ---- what the shared fitting code reads ----------------------------------------

# The number of observations of a fit (its rows, or those on the workers).
.nobs <- function(fit) if (is.null(fit$shards)) length(fit$y) else fit$shards$N

# The mean and variance of the response, and the column statistics of the
# inputs (.col_stats()), of a fit: from its rows, or from the summary
# statistics of the workers' rows.
.y_mean <- function(fit) if (is.null(fit$shards)) mean(fit$y) else fit$shards$y[["mean"]]

.y_var <- function(fit) if (is.null(fit$shards)) stats::var(fit$y) else fit$shards$y[["var"]]

.x_stats <- function(fit) if (is.null(fit$shards)) .col_stats(fit$x) else fit$shards$x

# ---- sgpr on shards --------------------------------------------------------------

# The formula interface with data = shards(): the model's fit on the
# workers' rows (sgpr here, pgpr and svgp in R/shards_models.R, osgpr in
# R/shards_osgpr.R).
.shards_formula <- function(model, call, formula, sh, ...) {
  if (!(model %in% c("sgpr", "pgpr", "svgp", "osgpr"))) {
    stop(sprintf("%s() does not take data held by shards() yet: sgpr(), pgpr(), svgp() and osgpr() do. For %s(), collect the rows into one data frame (or fit on a subsample), or pass the data with cluster = cl",
                 model, model), call. = FALSE)
  }
  # prior weights (sgpr, osgpr), subset, offset (sgpr) and known noise
  # variances (sgpr): expressions in the workers' columns, evaluated on the workers
  # as model.frame() evaluates them in the data (.shards_extra())
  for (a in if (model %in% c("pgpr", "svgp")) c("weights", "offset")) {
    if (!is.null(call[[a]])) {
      .shards_stop(sprintf("'%s' is not available with data = shards() in %s() (sgpr() takes it): %s the rows in 'load'",
                           a, model, if (a == "weights") "weight" else "offset"))
    }
  }
  extra <- .shards_extra(call, sh)
  if (!is.null(call$na.action) &&
      !(deparse(call$na.action) %in% c("na.omit", "na.exclude", "stats::na.omit"))) {
    stop("with data = shards() rows with missing values are dropped (na.action = na.omit)",
         call. = FALSE)
  }
  .interrupt_clear()
  # (known noise variances named by a column stay unevaluated here)
  args <- .shards_dots(if (!is.null(extra$noise)) "noise", ...)
  if (!is.null(args$cluster)) {
    # the rows loaded anew on the workers of `cluster` by the load function
    # of the shards (update(fit, cluster = new_cl) after a failure); they
    # are dropped from the workers after the fit
    sh <- .shards_reload(sh, args$cluster)
    on.exit(.cluster_release(list(cl = sh$cl, key = sh$key)), add = TRUE)
    args$cluster <- NULL
  }
  .call <- .formula_call(call, model)
  if (model == "osgpr") {
    return(do.call(.shards_osgpr, c(list(formula, sh), args,
                                    list(.call = .call, .weights = call$weights, .extra = extra)),
                   quote = TRUE))
  }
  if (model != "sgpr") {
    return(do.call(.shards_model, c(list(model, formula, sh), args,
                                    list(.call = .call, .extra = extra)), quote = TRUE))
  }
  do.call(.shards_sgpr, c(list(formula, sh), args,
                          list(.call = .call, .weights = call$weights, .extra = extra)),
          quote = TRUE)
}

# The expressions of a call with data = shards() that the workers evaluate
# in their columns, as model.frame() does in the data of one process:
# list(subset, offset, noise), each NULL when absent. `noise` is there when
# the call's noise = names columns of the shards (known per-row variances,
# noise = s2 or an expression in columns such as s^2); any other noise
# (a number, a formula) is evaluated here as usual.
.shards_extra <- function(call, sh) {
  ne <- call$noise
  cols <- names(sh$columns)
  known <- is.language(ne) && !(is.call(ne) && identical(ne[[1L]], as.name("~"))) &&
    length(all.vars(ne)) > 0L && all(all.vars(ne) %in% cols)
  list(subset = call$subset, offset = call$offset, noise = if (known) ne)
}

# The arguments in `...` as a named list, without those named in `skip`
# (left unevaluated: they name columns of the workers' data).
.shards_dots <- function(skip, ...) {
  n <- ...length()
  nm <- names(match.call(expand.dots = FALSE)$...)
  if (is.null(nm)) nm <- character(n)
  keep <- which(!(nm %in% skip))
  out <- vector("list", length(keep))
  for (j in seq_along(keep)) out[j] <- list(...elt(keep[j]))
  names(out) <- nm[keep]
  out
}

# The error of something data = shards() does not do (yet): a condition of
# class "sparsevgp_shards_error".
.shards_stop <- function(msg) {
  stop(structure(class = c("sparsevgp_shards_error", "error", "condition"),
                 list(message = msg, call = NULL)))
}

# The shards `sh` loaded again on the workers of the cluster `cl` with the
# same load function and arguments.
.shards_reload <- function(sh, cl) {
  .cluster_check(cl, "cluster")
  if (!is.function(sh$load)) {
    stop("these shards do not keep their load function: use data = shards(cluster, load)",
         call. = FALSE)
  }
  do.call(shards, c(list(cl, sh$load), sh$args), quote = TRUE)
}

.shards_sgpr <- function(formula, sh, kernel = NULL, inducing = "greedy", M = NULL,
                         threshold = NULL, noise = NULL, mean = "constant", optimize = TRUE,
                         optimize_inducing = NULL, fixed = NULL, control = list(),
                         start = NULL, neighbours = "auto", .call = NULL, .weights = NULL,
                         .extra = NULL) {
  # known per-row variances: noise = s2 names columns of the workers' data
  # (.shards_extra()), evaluated there; `noise` is then unset here
  known <- !is.null(.extra$noise)
  if (!known && !is.null(noise) &&
      !(is.numeric(noise) && length(noise) == 1L && is.finite(noise) && noise > 0)) {
    .shards_stop("with data = shards() 'noise' is one starting variance, or known per-point variances named by a column of the workers' data (noise = s2, or an expression in their columns); a vector of variances in this process and noise formulas are not available")
  }
  kernel_default <- is.null(kernel)
  if (!kernel_default) kernel <- .check_kernel(kernel)
  if (!is.null(optimize_inducing)) .check_flag(optimize_inducing, "optimize_inducing")
  optimize <- .check_flag(optimize, "optimize")
  control_given <- control
  control <- .collapsed_control(control, neighbours = TRUE)
  .check_start(start, "sgpr")
  weighted <- !is.null(.weights)
  dz <- .shards_design(sh, formula, weights = .weights, extra = .extra)
  if (!is.null(start)) {
    .check_start(start, "sgpr", matrix(0, 0L, length(dz$colnames)))
  }
  h <- dz$h
  on.exit(.cluster_release(h), add = TRUE)
  N <- dz$N
  # the default on small data: RBF or Matern 5/2 by the fitted bound, as in
  # one process (R/kernel_choice.R)
  if (.family_by_bound(if (!kernel_default) kernel, start, neighbours, inducing, M, threshold,
                       optimize, NULL, N)) {
    # from 300 rows, from the exact GP on the gathered rows (few: at most
    # 669), as in one process (R/kernel_choice.R)
    if (!known && .small_exact(N, noise, .weights, fixed, optimize_inducing, mean)) {
      g <- .shards_gather(h, seq_len(N))
      colnames(g$x) <- dz$colnames
      .cluster_release(h)
      fit <- .choose_family_exact(
        function(k) gpr.default(g$x, g$y, kernel = k, control = .exact_control(control_given)),
        function(k, noise, mean) {
          .shards_sgpr(formula, sh, kernel = k, inducing = inducing, noise = noise, mean = mean,
                       optimize = FALSE, optimize_inducing = FALSE, control = control_given,
                       neighbours = 0L, .call = .call, .extra = .extra)
        })
      if (!is.null(fit)) return(fit)
    }
    .cluster_release(h)
    return(.choose_family(function(k) {
      .shards_sgpr(formula, sh, kernel = k, inducing = inducing, M = M, threshold = threshold,
                   noise = noise, mean = mean, optimize = optimize,
                   optimize_inducing = optimize_inducing, fixed = fixed, control = control_given,
                   start = NULL, neighbours = neighbours, .call = .call, .weights = .weights,
                   .extra = .extra)
    }))
  }
  D <- length(dz$colnames)
  x0 <- matrix(0, 0L, D, dimnames = list(NULL, dz$colnames))
  # neighbours and the default kernel, as in one process (R/vif.R)
  nbr <- .sgpr_neighbours(neighbours, N, start)
  if (kernel_default) kernel <- .sgpr_default_kernel(nbr$K, start)
  if (!is.null(start)) {
    kernel <- .warm_kernel(kernel, start$params, D)
    # a fit stopped by a failed cluster resumes at its inducing inputs
    if ((missing(inducing) || isTRUE(start$resume)) && nrow(start$params$Z) <= N) {
      inducing <- start$params$Z
    }
  }
  # the parameters to resume from when the cluster fails: the start, then
  # those of the subsample's schedule (.train_large()); and the rows
  # gathered here
  h$checkpoint <- new.env(parent = emptyenv())
  warn_short <- !is.null(M) || is.numeric(inducing)
  search <- optimize && is.null(start) && control$schedule != "joint"
  small <- N <= .shards_subsample_rows()
  if (small) {
    # few rows: this process gathers them all (no more than the subsample
    # of larger data) and starts and selects as one process does on them
    g <- .shards_gather(h, seq_len(N))
    colnames(g$x) <- dz$colnames
    h$checkpoint$rows <- g
    dz$x <- .col_stats(g$x)
    dz$y <- c(mean = mean(g$y), var = stats::var(g$y))
    spec <- .vif_cap_spec(.inducing_spec(inducing, M, threshold, g$x, auto_kl = .auto_kl), N,
                          nbr$K)
    if (known) noise <- g$s2
    st <- .start_collapsed(kernel, g$x, g$y, noise, spec, search, neighbours = nbr$K)
    kernel <- st$kernel
    nz <- .noise_setup(noise, g$x, g$y, NULL, start = st$noise, weights = g$w)
    sel_weights <- 1 / .noise_lambda(list(noise_model = nz$model, x = g$x), nz$params,
                                      compact = TRUE)
    Z <- .select_by_spec(spec, g$x, kernel, sel_weights, warn_short = warn_short,
                         memory = control$memory)
  } else {
    spec <- .vif_cap_spec(.shards_spec(inducing, M, threshold, N, x0), N, nbr$K)
    # the rows of the start search and of the default lengthscales, evenly
    # spaced over all rows as in one process (R/start.R, .kern_init())
    i1000 <- unique(round(seq(1, N, length.out = min(N, 1000L))))
    i400 <- unique(round(seq(1, N, length.out = min(N, 400L))))
    rows <- sort(union(i1000, i400))
    g <- .shards_gather(h, rows)
    xs <- g$x[match(i1000, rows), , drop = FALSE]
    ys <- g$y[match(i1000, rows)]
    x4 <- g$x[match(i400, rows), , drop = FALSE]
    y4 <- g$y[match(i400, rows)]
    colnames(xs) <- colnames(x4) <- dz$colnames
    vy <- dz$y[["var"]]
    st <- list(kernel = kernel, noise = NULL)
    if (search) {
      st <- .start_regression(kernel, xs, ys, M = if (is.na(spec$M)) 100L else spec$M,
                              noise_free = TRUE,
                              moments = list(vy = vy, sx = unname(dz$x["sd", ])),
                              neighbours = nbr$K)
    }
    # unset variances from var(y) of all rows, unset lengthscales from the
    # 400 rows one process reads
    st$kernel <- .kern_init(.kern_fill_variance(.kern_ard(st$kernel, D),
                                                if (is.finite(vy) && vy > 0) vy else 1), x4, y4)
    kernel <- st$kernel
    if (is.null(st$noise)) st$noise <- if (is.finite(vy) && vy > 0) vy / 10 else 0.1
    # (with prior weights or known variances, each worker's selection
    # weights are w / (sigma^2 s2) at its rows: .shard_greedy_start())
    nz <- .noise_setup(if (known) g$s2[match(i1000, rows)] else noise, xs, ys, NULL,
                       start = st$noise, weights = if (weighted) rep(1, nrow(xs)))
    sel_weights <- if (known) 1 else 1 / nz$params[["noise"]]
    # ("gv" is the selection without weights, its threshold on the
    # unweighted trace, as .select_by_spec_run() makes it)
    gv <- identical(spec$method, "gv")
    Z <- if (spec$method == "given") spec$Z else
      .shards_greedy(h, kernel, spec, if (gv) 1 else sel_weights, control$memory, dz$colnames,
                     weighted = (weighted || known) && !gv)
    if (warn_short && !is.na(spec$M) && nrow(Z) < spec$M) {
      warning(sprintf("greedy selection stopped at %d of the M = %d inducing inputs asked for: every other row is explained by them to double precision (fewer distinct inputs, or a kernel numerically low-rank at them)",
                      nrow(Z), spec$M), call. = FALSE)
    }
  }
  mn <- .mean_start(mean, dz$y[["mean"]])
  # neighbours = "auto": the trial of one process on the rows gathered here
  # (R/shards_vif.R), and the selection again at the parameters it keeps
  if (nbr$auto) {
    select_at <- function(spec, kernel, nz) {
      if (small) {
        return(.select_by_spec(spec, g$x, kernel,
                               1 / .noise_lambda(list(noise_model = nz$model, x = g$x), nz$params),
                               memory = control$memory))
      }
      gv <- identical(spec$method, "gv")
      .shards_greedy(h, kernel, spec, if (gv) 1 else 1 / nz$params[["noise"]], control$memory,
                     dz$colnames, weighted = weighted && !gv)
    }
    a <- .shards_vif_auto(h, if (small) g, N, dz$colnames, if (!kernel_default) kernel, noise,
                          spec, Z, control, mean, optimize, kernel, nz, mn, optimize_inducing,
                          select_at)
    nbr$K <- a$K
    kernel <- a$kernel
    nz <- a$nz
    mn <- a$mn
    spec <- a$spec
    Z <- a$Z
  }
  if (is.null(optimize_inducing)) optimize_inducing <- !isTRUE(nbr$K > 0L)
  # the per-row factors 1 / w stay on the workers (.shard_configure()) and
  # with the rows of a subsample (.shards_subsample())
  nz_rows <- nz$model
  nz$model$lambda <- NULL
  # (their minimum, mean and maximum: what the master reports, .noise_lambda())
  nz$model$rows <- dz$rel
  params <- c(.kern_params(kernel), nz$params, list(mean = mn$value, Z = Z))
  transforms <- c(variance = "log", lengthscale = "log", nz$transforms,
                  mean = "identity", Z = "identity")
  if (!is.null(start)) {
    params <- .warm_params(params, start$params, skip = c("Z", if (mn$fixed) "mean"))
  }
  fit <- .new_fit("sgpr", .call, x0, numeric(0), kernel, params, transforms, fixed,
                  always = c(if (mn$fixed) "mean", if (!optimize_inducing) "Z"),
                  control = control,
                  label = sprintf("Sparse GP regression (SGPR), %s noise", nz$label),
                  extra = list(noise_model = nz$model,
                               selection = spec[intersect(names(spec),
                                                          c("method", "M", "threshold", "auto"))],
                               shards = list(N = N, n = h$n, x = dz$x, y = dz$y,
                                             weights = .weights, extra = .extra),
                               auto_neighbours = if (nbr$auto) a$report,
                               from_trial = nbr$auto && isTRUE(a$from_trial)))
  if (isTRUE(nbr$K > 0L)) fit <- .shards_vif_setup(fit, nbr$K, h$n, from = start)
  fit$terms <- dz$terms
  fit$xlevels <- dz$xlevels
  .cluster_call(h, ".shard_configure",
                list(kernel = kernel, control = control, noise_model = nz$model))
  # with neighbours the workers choose their rows' sets (R/shards_vif.R;
  # those of a warm start where it chose them)
  prepare <- function(fit) {
    if (!.has_neighbours(fit)) return(fit)
    .shards_vif_choose(fit, if (is.null(fit$neighbours$at)) fit$params else fit$neighbours$at)
  }
  fit <- .shards_run_fit(fit, h, optimize, prepare)
  fit$from_trial <- NULL
  # on the small path, the automatic M at the fitted parameters as in one
  # process (R/auto_m.R), selected on the gathered rows
  if (small && optimize) {
    fit <- .auto_m_refit(fit, function(f) .shards_run_fit(f, h, optimize, prepare), x = g$x,
                         weights = function(f) {
                           1 / .noise_lambda(list(noise_model = nz_rows, x = g$x), f$params,
                                             compact = TRUE)
                         })
  }
  fit
}

# The fit `fit` of sgpr or osgpr trained (optimize = TRUE) or built on the
# workers of the handle h, which hold its rows configured for it
# (.shard_configure()), after prepare(fit). A failed worker stops it with
# the classed cluster error, whose $fit holds the model at the parameters
# of the last stage that ended (h$checkpoint), to resume from.
.shards_run_fit <- function(fit, h, optimize, prepare = identity) {
  h$checkpoint$params <- fit$params
  fit$cluster <- h
  fit <- tryCatch({
    fit <- prepare(fit)
    .build_or_fit(fit, optimize)
  }, sparsevgp_cluster_error = function(e) {
    partial <- fit
    partial$cluster <- NULL
    partial$params <- h$checkpoint$params
    partial$optim <- NULL
    partial$resume <- TRUE
    e$fit <- partial
    e$message <- paste0(e$message, ". The fit so far is in this error's $fit: after restoring the cluster, update(e$fit, cluster = new_cluster) loads the rows there with the same load function and resumes from it")
    stop(e)
  })
  fit$cluster <- NULL
  fit
}

# What `inducing`, `M` and `threshold` ask for with data on the workers:
# as .inducing_spec() (automatic M, a number, "greedy"/"hgv"/"gv", or given
# inducing inputs), without k-means and random subsets, which need the rows.
.shards_spec <- function(inducing, M, threshold, N, x0) {
  if (is.character(inducing) && length(inducing) == 1L && inducing %in% c("kmeans", "random")) {
    stop(sprintf("inducing = \"%s\" is not available with data = shards(): use \"greedy\" (the default), a number, or a matrix of inducing inputs",
                 inducing), call. = FALSE)
  }
  # .inducing_spec() reads N from the rows of x; a stand-in with N rows
  # would be O(N), so the spec is made on one row and N put in after
  if (!is.null(dim(inducing)) || inherits(inducing, "sparsevgp_inducing")) {
    m <- if (inherits(inducing, "sparsevgp_inducing")) NROW(inducing$Z) else NROW(inducing)
    Z <- .given_inducing(inducing, matrix(0, m, ncol(x0), dimnames = dimnames(x0)))
    if (nrow(Z) > N) {
      stop(sprintf("'inducing' has M = %d rows but there are only N = %d observations", nrow(Z), N),
           call. = FALSE)
    }
    if (!is.null(M) || !is.null(threshold)) {
      stop("'M' and 'threshold' apply to the selection methods; the given inducing inputs fix M",
           call. = FALSE)
    }
    return(list(method = "given", M = nrow(Z), threshold = NULL, Z = Z))
  }
  if (is.null(M) && is.null(threshold) && (is.null(inducing) || identical(inducing, "greedy"))) {
    return(list(method = "greedy", M = .auto_max_inducing(N), threshold = .auto_kl * N,
                Z = NULL, auto = TRUE))
  }
  if (is.numeric(inducing) && length(inducing) == 1L) {
    if (!is.null(M)) stop("give the number of inducing inputs once: 'inducing' or 'M'", call. = FALSE)
    M <- inducing
    inducing <- "greedy"
  }
  spec <- .inducing_spec(inducing, NULL, threshold, matrix(0, 1L, ncol(x0)))
  if (!is.null(M)) {
    M <- .check_M(M, N, NA_integer_)
  } else if (is.null(threshold)) {
    M <- min(N, 100L)
  } else {
    M <- NA_integer_
  }
  spec$M <- M
  spec
}

# ---- greedy selection in rounds ------------------------------------------------

# Greedy conditional variance selection over the rows of all workers of h
# (see the top of this file): at most spec$M points, or until the trace of
# the residual variances falls below spec$threshold (divided by the one
# selection weight, as .select_by_spec_run() does). Ties are broken by a
# random order on each worker and over the workers (R's random numbers on
# this process seed them: set.seed() reproduces the selection). Each worker
# works on its rows, or on a random subsample of them when its factor would
# not fit in control$memory (.select_rows()), with its trace scaled up.
.shards_greedy <- function(h, kernel, spec, weights, memory, colnames, weighted = FALSE) {
  N <- sum(h$n)
  cap <- if (is.na(spec$M)) min(N, .select_defaults$greedy$max_threshold_points) else spec$M
  thr <- spec$threshold
  # one weight for all rows: the unweighted selection with the threshold
  # divided by it (.select_by_spec_run()); with prior weights each worker
  # weights its rows by `weights` times their w, and the trace is weighted
  if (!is.null(thr) && !weighted) thr <- thr / weights
  nw <- length(h$cl)
  seeds <- sample.int(.Machine$integer.max, nw)
  order_w <- sample.int(nw)
  on.exit(try(.cluster_call(h, ".shard_greedy_end", list()), silent = TRUE), add = TRUE)
  p <- .cluster_call(h, ".shard_greedy_start",
                     list(k = kernel, cap = cap, memory = memory,
                          weight = if (weighted) weights), as.list(seeds))
  Z <- matrix(0, cap, length(colnames))
  m <- 0L
  repeat {
    if (m >= cap) break
    score <- vapply(p, `[[`, 0, "score")
    w <- order_w[which.max(score[order_w])]
    if (!(score[w] > 0)) break
    m <- m + 1L
    Z[m, ] <- p[[w]]$x
    p <- .cluster_call(h, ".shard_greedy_step",
                       list(z = p[[w]]$x, crow = p[[w]]$crow, dp = p[[w]]$dp),
                       as.list(seq_len(nw) == w))
    if (!is.null(thr) && sum(vapply(p, `[[`, 0, "trace")) < thr) break
  }
  Z <- Z[seq_len(m), , drop = FALSE]
  dimnames(Z) <- list(NULL, colnames)
  Z
}

# R's random numbers on a worker from `seed`, leaving its own stream as it
# was.
.with_seed <- function(seed, expr) .keep_stream({
  set.seed(seed)
  expr
})

# On a worker: the state of its part of the selection (an environment
# holding its candidate rows, their factor C and residual variances d, a
# random tie order) and its first proposal.
.shard_greedy_start <- function(s, a, each) {
  x <- s$fit$x
  n <- nrow(x)
  # the factor and a few vectors per row within the budget, at least 10 M rows
  nc <- .budget_rows(.host_memory(a$memory, s$fit$per_host), 8 * (a$cap + 2 * ncol(x) + 6), n = n,
                     at_least = min(n, 10 * a$cap))
  rows <- if (nc < n) sort(.with_seed(each, sample.int(n, nc))) else seq_len(n)
  g <- new.env(parent = emptyenv())
  g$x <- if (length(rows) < n) x[rows, , drop = FALSE] else x
  g$C <- matrix(0, length(rows), a$cap)
  g$d <- .ffi_kern_diag(a$k, g$x)
  g$excl <- logical(length(rows))
  g$order <- .with_seed(each + 1L, sample.int(length(rows)))
  g$m <- 0L
  g$k <- a$k
  g$scale <- n / max(1, length(rows))
  # the selection weights of its rows (NULL: one for all), so that it
  # maximises w_n d_n (Passerello 2022), as select_inducing(weights =)
  g$w <- if (!is.null(a$weight)) a$weight / .rows_rel(s$fit$weights, s$fit$noise_var)[rows]
  s$greedy <- g
  .shard_greedy_proposal(g)
}

# Its row of largest residual variance (first in the tie order), with the
# row of the factor there, and the trace of its residual variances.
.shard_greedy_proposal <- function(g) {
  ok <- !g$excl[g$order] & g$d[g$order] > 0
  wd <- if (is.null(g$w)) g$d else g$w * g$d
  trace <- sum(wd) * g$scale
  if (!any(ok)) {
    g$last <- NA_integer_
    return(list(score = -Inf, trace = trace))
  }
  cand <- g$order[ok]
  j <- cand[which.max(wd[cand])]
  g$last <- j
  list(score = wd[j], dp = g$d[j], x = g$x[j, ], crow = g$C[j, seq_len(g$m)], trace = trace)
}

# On a worker: the column of the selected point added to its factor (the
# owner, each = TRUE, zeroes the pivot's residual exactly, and every worker
# marks exact copies of the pivot as explained, as src/select.c does), and
# its next proposal.
.shard_greedy_step <- function(s, a, each) {
  g <- s$greedy
  m <- g$m
  kz <- drop(.ffi_kern_matrix(g$k, g$x, matrix(a$z, 1L)))
  # the factor is taken out of its environment while it changes, so that R
  # modifies it in place instead of copying it
  C <- g$C
  g$C <- NULL
  col <- kz
  # (the row of the pivot padded with zeros: no copy of C's first m columns)
  if (m > 0L) col <- col - drop(C %*% c(a$crow, numeric(ncol(C) - m)))
  col <- col / sqrt(a$dp)
  C[, m + 1L] <- col
  d <- pmax(g$d - col^2, 0)
  kpp <- drop(.ffi_kern_diag(g$k, matrix(a$z, 1L)))
  copies <- kz == kpp
  g$excl[copies] <- TRUE
  d[copies] <- 0
  if (isTRUE(each) && !is.na(g$last)) {
    C[g$last, m + 1L] <- sqrt(a$dp)
    d[g$last] <- 0
    g$excl[g$last] <- TRUE
  }
  g$C <- C
  g$d <- d
  g$m <- m + 1L
  .shard_greedy_proposal(g)
}

.shard_greedy_end <- function(s, a, each = NULL) {
  s$greedy <- NULL
  TRUE
}

# ---- the subsample of the schedule ----------------------------------------------

# n of the N rows of the workers' data drawn at random, in increasing order:
# every subsample of a fit on shards is drawn here, so that set.seed()
# gives the same rows on every route. (Hashing keeps a draw of a few rows
# from a very large N from allocating N integers.)
.shards_draw_rows <- function(N, n) {
  sort(if (n <= N / 2) sample.int(N, n, useHash = TRUE) else sample.int(N, n))
}

# The fit on a random subsample of n rows of the workers' data (all rows
# when there are at most n), fetched to this process, for the schedule of
# .train_large(). `all_rows` says whether it is all of them.
.shards_subsample <- function(fit, n) {
  N <- fit$shards$N
  all <- N <= n
  cp <- fit$cluster$checkpoint
  # (the rows gathered already: all of them, or osgpr's subsample of n
  # rows, R/shards_osgpr.R)
  if (is.environment(cp) && !is.null(cp$rows) && (all || length(cp$rows$y) == n)) {
    g <- cp$rows
    rm("rows", envir = cp)
  } else {
    rows <- if (all) seq_len(N) else .shards_draw_rows(N, n)
    g <- .shards_gather(fit$cluster, rows)
  }
  sub <- fit
  if (!all && !is.null(sub$selection$threshold)) {
    sub$selection$threshold <- sub$selection$threshold * n / N
  }
  sub$x <- g$x
  colnames(sub$x) <- colnames(fit$x)
  sub$y <- g$y
  # prior weights: the subsample's rows' factors of the noise variances, as
  # .subsample_fit() keeps them in one process
  if (!is.null(g$w)) sub$weights <- g$w
  rel <- .rows_rel(g$w, g$s2)
  if (!is.null(rel)) sub$noise_model$lambda <- rel
  sub$cluster <- NULL
  sub$shards <- NULL
  list(fit = sub, all_rows = all)
}

# The schedule of .train_staged() on the subsample of .shards_subsample():
# list(fit, all_rows). When the subsample is all the rows, `fit` is the
# finished schedule put back on the workers' rows; else it is the
# subsample's fit, whose parameters become the checkpoint.
.shards_train_subsample <- function(fit, sets, reselect, joint_first) {
  ss <- .shards_subsample(fit, .shards_subsample_rows())
  sub <- .train_staged(ss$fit, sets, reselect, joint_first)
  .shards_checkpoint(fit, sub$params)
  if (ss$all_rows) {
    sub[c("x", "y")] <- fit[c("x", "y")]
    sub$noise_model <- fit$noise_model
    sub$weights <- NULL
    sub$cluster <- fit$cluster
    sub$shards <- fit$shards
  }
  list(fit = sub, all_rows = ss$all_rows)
}

# The rows of the subsample of a fit on shards: those of one process
# (.train_subsample); the option sparsevgp.shards_subsample sets fewer (for
# tests of the path of large data on small data).
.shards_subsample_rows <- function() {
  n <- getOption("sparsevgp.shards_subsample")
  if (is.null(n)) .train_subsample else as.integer(n)
}

# Where a fit on shards can resume from: the parameters of the last stage
# that ended (kept in the cluster handle while it is fitted).
.shards_checkpoint <- function(fit, params) {
  cp <- fit$cluster$checkpoint
  if (is.environment(cp)) cp$params <- params
  invisible()
}

# ---- a fit's rows on the workers again --------------------------------------------

# The cluster of objective() for a fit on shards: the shards given.
.shards_objective_cluster <- function(fit, cluster) {
  if (!inherits(cluster, "sparsevgp_shards")) {
    stop("this fit's rows are on the workers of its shards: objective(fit, cluster = sh) evaluates it there, with sh the shards() of its data",
         call. = FALSE)
  }
  cluster
}

# The workers of the shards `sh` each hold their rows of the fit's design
# (its formula and levels), as during the fit: the handle for evaluations
# (.cluster_call()). For objective(fit, cluster = sh).
.shards_attach <- function(fit, sh) {
  if (is.null(fit$terms)) {
    stop("only fits made with a formula are evaluated on shards", call. = FALSE)
  }
  labels <- inherits(fit, c("pgpr", "svgp"))
  dz <- .shards_design(sh, stats::formula(fit$terms), xlev = fit$xlevels, labels = labels,
                       weights = fit$shards$weights, extra = fit$shards$extra)
  h <- dz$h
  N <- .nobs(fit)
  if (dz$N != N || !identical(dz$colnames, colnames(fit$x))) {
    .cluster_release(h)
    stop(sprintf("the workers of the shards hold %.0f rows with columns %s, but the fit was made on %.0f rows with columns %s",
                 dz$N, paste(dz$colnames, collapse = ", "), N,
                 paste(colnames(fit$x), collapse = ", ")), call. = FALSE)
  }
  if (labels) return(.shards_attach_model(fit, h))
  .cluster_call(h, ".shard_configure",
                list(kernel = fit$kernel, control = fit$control, noise_model = fit$noise_model))
  if (.has_neighbours(fit)) return(.shards_vif_attach(fit, h))
  h
}

# The error of a method that reads the rows of a fit whose rows are on
# the workers (nothing for other fits): `what` it is, and what to do.
.shards_refuse <- function(fit, what, instead) {
  if (is.null(fit$shards)) return(invisible())
  stop(sprintf("%s reads the rows of the fit, which are on the workers of its shards (not available yet): %s",
               what, instead), call. = FALSE)
}

# ---- values at the workers' rows -------------------------------------------------

# The latent mean (and variance) at the rows of each worker of the shards
# `sh` under the formula of `fit`, computed on the workers: a list of the
# workers' list(mean, var), in worker order.
# (With neighbours, R/shards_vif.R: each worker conditions on its own rows;
# with `newx`, the predictions at those new inputs instead.)
.shards_predict_rows <- function(fit, sh, want = c("mean", "var", "y"), newx = NULL) {
  if (is.null(fit$terms)) {
    stop("the values at the rows of shards need a fit made with a formula", call. = FALSE)
  }
  a <- unclass(fit)[intersect(c("kernel", "params", "posterior", "whiten", "likelihood"),
                              names(fit))]
  class(a) <- class(fit)
  if (.has_neighbours(fit)) a <- .shards_vif_args(fit)
  all <- list(cl = sh$cl, key = sh$key, n = sh$n)
  .cluster_call(all, ".shard_fitted", list(fit = a, terms = fit$terms, xlevels = fit$xlevels,
                                           formula = stats::formula(fit$terms),
                                           weights = fit$shards$weights,
                                           extra = fit$shards$extra, newx = newx))
}

# On a worker: the model frame of a fit's formula a$formula (terms
# a$terms, levels a$xlevels, the call's expressions a$weights and a$extra)
# on its rows, missing values dropped as when fitting, and its inputs:
# list(mf, x).
.shard_fit_frame <- function(s, a) {
  f <- a$formula
  environment(f) <- globalenv()
  mf <- .shard_model_frame(f, s$data, a$weights, xlev = a$xlevels, na.action = stats::na.omit,
                           drop.unused.levels = FALSE, extra = a$extra)
  x <- stats::model.matrix(a$terms, mf)
  attr(x, "assign") <- attr(x, "contrasts") <- NULL
  rownames(x) <- NULL
  list(mf = mf, x = x)
}

# On a worker: the latent predictive at its rows (missing values dropped as
# when fitting) and their response.
.shard_fitted <- function(s, a, each = NULL) {
  # (rows with missing prior weights were dropped too)
  r <- .shard_fit_frame(s, a)
  mf <- r$mf
  x <- r$x
  if (.has_neighbours(a$fit)) {
    a$fit <- .shard_vif_local(a, x, mf)
    if (!is.null(a$newx)) return(.vif_local_predict(a$fit, a$newx))
  }
  if (nrow(x) == 0L) return(list(mean = numeric(0), var = numeric(0), y = numeric(0)))
  p <- .predict_latent(a$fit, x, FALSE)
  # the fitted values with the offset, as fitted() gives them in one process
  off <- stats::model.offset(mf)
  if (!is.null(off)) p$mean <- p$mean + off
  list(mean = p$mean, var = p$var, y = as.double(stats::model.response(mf)))
}

# fitted() and residuals() of a fit whose rows are on the workers of `sh`
# (NULL: not given, an error saying how).
.shards_values <- function(object, sh, what) {
  .shards_values_check(sh, what)
  r <- .shards_predict_rows(object, sh)
  m <- unlist(lapply(r, `[[`, "mean"), use.names = FALSE)
  if (length(m) != object$shards$N) {
    stop(sprintf("the workers of 'cluster' hold %d rows, not the %.0f this fit was made on",
                 length(m), object$shards$N), call. = FALSE)
  }
  if (what == "fitted") return(m)
  unlist(lapply(r, `[[`, "y"), use.names = FALSE) - m
}

# The shards `sh` given to fitted() or residuals() (`what`) of a fit on
# shards: an error unless they are shards.
.shards_values_check <- function(sh, what) {
  if (is.null(sh)) {
    stop(sprintf("this fit's rows are on the workers of its shards: %s(fit, cluster = sh) computes the values there, with sh the shards() the fit was made on (or new shards of the same data)",
                 what), call. = FALSE)
  }
  if (!inherits(sh, "sparsevgp_shards")) {
    stop(sprintf("'cluster' must be the shards() of this fit's data for %s() of a fit on shards", what),
         call. = FALSE)
  }
  invisible()
}

# fitted() or residuals() (`what`, with the arguments `args` of the
# method) of a pgpr or svgp fit whose rows are on the workers of the
# shards `sh`: each worker makes the fit with its own rows (the formula
# applied as when fitting, the labels coded as the fit codes them) and
# runs the method of one process on it (.shard_values()). The values come
# back in worker order: a vector (a matrix of class probabilities for
# several classes) of N numbers, O(N) in this process.
.shards_fit_values <- function(object, sh, what, args) {
  .shards_values_check(sh, what)
  if (is.null(object$terms)) {
    stop("the values at the rows of shards need a fit made with a formula", call. = FALSE)
  }
  template <- object
  template[c("shards", "cluster", "na.action", "frame")] <- NULL
  all <- list(cl = sh$cl, key = sh$key, n = sh$n)
  r <- .cluster_call(all, ".shard_values",
                     list(fit = template, what = what, args = args, terms = object$terms,
                          xlevels = object$xlevels, formula = stats::formula(object$terms),
                          weights = object$shards$weights, extra = object$shards$extra))
  r <- r[!vapply(r, is.null, TRUE)]
  v <- if (any(vapply(r, is.matrix, TRUE))) do.call(rbind, r) else unlist(r, use.names = FALSE)
  if (NROW(v) != object$shards$N) {
    stop(sprintf("the workers of 'cluster' hold %d rows, not the %.0f this fit was made on",
                 NROW(v), object$shards$N), call. = FALSE)
  }
  v
}

# On a worker: fitted() or residuals() (a$what, with a$args) of the fit
# a$fit given the worker's rows (NULL without rows).
.shard_values <- function(s, a, each = NULL) {
  r <- .shard_fit_frame(s, a)
  mf <- r$mf
  x <- r$x
  if (nrow(x) == 0L) return(NULL)
  storage.mode(x) <- "double"
  local <- a$fit
  local$x <- x
  if (a$what == "residuals") {
    coded <- .shards_code(local, stats::model.response(mf))
    for (v in names(coded)) local[[v]] <- coded[[v]]
  }
  fun <- if (a$what == "fitted") stats::fitted else stats::residuals
  out <- do.call(fun, c(list(local), a$args))
  if (is.matrix(out)) rownames(out) <- NULL else names(out) <- NULL
  out
}
