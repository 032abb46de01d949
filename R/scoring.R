# Scoring of repeated-split model comparisons as in Passerello (2022,
# sections 5.1.2 and 5.7): summary statistics over the runs, one point
# per criterion to every best model (ties all score), and per-data-set ranks.
# The thesis's Tables D.1/D.2 are bundled in inst/extdata so that tests can
# check that these rules reproduce its Tables 5.2, 5.4 and 5.5.

#' Score a repeated-split comparison of models (the points and ranks of Passerello 2022)
#'
#' The scoring rules of Passerello (2022, sections 5.1.2 and 5.7)
#' for comparing models over repeated random train/test splits.
#' \code{summarise_runs()} reduces the runs to five statistics per data set,
#' method and metric; \code{award_points()} gives one point per criterion to
#' every model that is best in it; \code{rank_table()} ranks the models per
#' data set by their points.
#'
#' \strong{Statistics.} For each metric (by default the training ELBO
#' \code{elbo}, the test accuracy \code{acc} and the test negative log
#' predictive probability \code{nll}) the runs are summarised by their
#' maximum, minimum, median, mean and \emph{population} standard deviation
#' (divisor \eqn{n}, as NumPy's \code{np.std} in the code behind the
#' thesis). With
#' \code{digits} the statistics are rounded as the thesis printed them (2
#' decimals for the ELBO, 4 for the others), so that ties count as they do
#' in its tables.
#'
#' \strong{Points.} Each (data set, metric, statistic) is one criterion, 15
#' per data set for three metrics. The best value is the highest for the
#' max, min, median and mean of a metric where higher is better, the lowest
#' for those of a metric in \code{lower_better}, and the lowest standard
#' deviation for every metric. Every model with the best value earns a point
#' (ties all score; missing values never score). This rule reproduces the
#' thesis's Table 5.4 exactly from its Table D.2, and the ELBO and accuracy
#' columns of its Table 5.2 from Table D.1; its printed NLL column of Table
#' 5.2 differs from the rule (see the tests in \code{test-scoring.R}).
#'
#' \strong{Ranks.} Per data set the models are ranked by their total points,
#' tied models sharing the better rank; with \eqn{K} models a first place is
#' worth \eqn{K} and a last place 1 (Tables 5.3 and 5.5 of the thesis).
#'
#' The bundled file \code{system.file("extdata", "passerello2022_tables_D1_D2.csv",
#' package = "sparsevgp")} holds the thesis's Tables D.1 and D.2 in the form
#' these functions take (columns \code{table}, \code{dataset}, \code{N},
#' \code{M}, \code{method}, \code{metric}, the five statistics and a
#' \code{note} on the two corrected misprints).
#'
#' @param runs a data frame with one row per run: the grouping columns
#'   \code{by} and one numeric column per metric. A numeric vector gives its
#'   five statistics.
#' @param metrics the metric columns of \code{runs}.
#' @param by the columns that identify a group of runs.
#' @param digits \code{NULL} (no rounding) or the number of decimals per
#'   metric: one number, or a vector named by metric.
#' @param tab a data frame in the long form of \code{summarise_runs()}:
#'   columns \code{dataset}, \code{method}, \code{metric}, \code{max},
#'   \code{min}, \code{median}, \code{mean}, \code{std}.
#' @param methods the methods to compare, in the order of the result; by
#'   default all in \code{tab}, in order of appearance. Rows of other
#'   methods are dropped before scoring.
#' @param lower_better the metrics for which lower values are better.
#' @return \code{summarise_runs()}: for a vector, the named statistics
#'   \code{max}, \code{min}, \code{median}, \code{mean}, \code{std}; for a
#'   data frame, a data frame with the \code{by} columns, \code{metric} and
#'   the five statistics, one row per group and metric.
#'   \code{award_points()}: a matrix with one row per method and a column of
#'   points per metric plus \code{total}. \code{rank_table()}: a matrix with
#'   one row per method, the number of data sets on which it ranked
#'   \code{rank1} \ldots \code{rankK}, its \code{score} (rank points) and the
#'   \code{max} possible score.
#' @references Passerello, G. (2022). Heteroscedastic inducing point
#'   selection for sparse Gaussian process classification. MEng thesis,
#'   Imperial College London, Tables 5.2-5.5, D.1, D.2.
#' @examples
#' # the thesis's Table D.2 (gradient-optimised inducing inputs)
#' d <- read.csv(system.file("extdata", "passerello2022_tables_D1_D2.csv",
#'                           package = "sparsevgp"))
#' d2 <- d[d$table == "D.2", ]
#' award_points(d2)          # the thesis's Table 5.4
#' rank_table(d2)            # and its Table 5.5
#'
#' # scoring one's own runs: two methods, three splits of one data set
#' runs <- data.frame(dataset = "toy", method = rep(c("a", "b"), each = 3),
#'                    elbo = c(-10.2, -9.8, -10.0, -10.5, -9.9, -10.1),
#'                    acc = c(0.9, 0.95, 0.9, 0.9, 0.95, 0.95),
#'                    nll = c(0.21, 0.18, 0.2, 0.22, 0.17, 0.19))
#' s <- summarise_runs(runs, digits = c(elbo = 2, acc = 4, nll = 4))
#' s
#' award_points(s)
#' summarise_runs(c(1, 2, 3, 10))
#' @export
summarise_runs <- function(runs, metrics = c("elbo", "acc", "nll"),
                           by = c("dataset", "method"), digits = NULL) {
  if (is.numeric(runs) && is.null(dim(runs))) {
    return(.run_stats(.check_runs(runs, "runs")))
  }
  if (!is.data.frame(runs)) {
    stop("'runs' must be a data frame of runs or a numeric vector", call. = FALSE)
  }
  if (!is.character(metrics) || !length(metrics) || !is.character(by) || !length(by)) {
    stop("'metrics' and 'by' must be character vectors of column names", call. = FALSE)
  }
  miss <- setdiff(c(by, metrics), names(runs))
  if (length(miss)) {
    stop(sprintf("'runs' has no column%s %s", if (length(miss) > 1L) "s" else "",
                 paste(sprintf("'%s'", miss), collapse = ", ")), call. = FALSE)
  }
  if (!nrow(runs)) stop("'runs' has no rows", call. = FALSE)
  digits <- .scoring_digits(digits, metrics)
  groups <- split(runs, runs[by], drop = TRUE, lex.order = TRUE)
  out <- lapply(groups, function(r) {
    do.call(rbind, lapply(metrics, function(m) {
      s <- .run_stats(.check_runs(r[[m]], sprintf("runs$%s", m)))
      if (!is.na(digits[[m]])) s <- round(s, digits[[m]])
      cbind(r[1L, by, drop = FALSE], metric = m, as.data.frame(as.list(s)),
            stringsAsFactors = FALSE)
    }))
  })
  out <- do.call(rbind, out)
  rownames(out) <- NULL
  out
}

#' @rdname summarise_runs
#' @export
award_points <- function(tab, methods = NULL, lower_better = "nll") {
  tab <- .check_score_table(tab, methods)
  methods <- attr(tab, "methods")
  metrics <- unique(tab$metric)
  pts <- matrix(0, length(methods), length(metrics), dimnames = list(methods, metrics))
  for (ds in unique(tab$dataset)) for (m in metrics) {
    t <- tab[tab$dataset == ds & tab$metric == m, , drop = FALSE]
    for (st in .score_stats) {
      v <- t[[st]]
      ok <- !is.na(v)
      if (!any(ok)) next
      low <- st == "std" || m %in% lower_better
      best <- if (low) min(v[ok]) else max(v[ok])
      # every tied best model scores: this reading of Passerello (2022,
      # section 5.7) reproduces its Table 5.4 from Table D.2
      winners <- unique(t$method[ok & v == best])
      pts[winners, m] <- pts[winners, m] + 1
    }
  }
  cbind(pts, total = rowSums(pts))
}

#' @rdname summarise_runs
#' @export
rank_table <- function(tab, methods = NULL, lower_better = "nll") {
  tab <- .check_score_table(tab, methods)
  methods <- attr(tab, "methods")
  K <- length(methods)
  sets <- unique(tab$dataset)
  rk <- matrix(0L, K, K, dimnames = list(methods, paste0("rank", seq_len(K))))
  for (ds in sets) {
    p <- award_points(tab[tab$dataset == ds, , drop = FALSE], methods,
                      lower_better)[, "total"]
    # tied models share the better rank
    r <- rank(-p, ties.method = "min")
    for (j in seq_len(K)) rk[j, r[j]] <- rk[j, r[j]] + 1L
  }
  cbind(rk, score = drop(rk %*% (K:1)), max = K * length(sets))
}

.score_stats <- c("max", "min", "median", "mean", "std")

# max, min, median, mean and the population SD (divisor n, as np.std).
.run_stats <- function(v) {
  c(max = max(v), min = min(v), median = stats::median(v), mean = mean(v),
    std = sqrt(mean((v - mean(v))^2)))
}

.check_runs <- function(v, name) {
  if (!is.numeric(v) || !length(v) || anyNA(v)) {
    stop(sprintf("'%s' must be numeric with at least one value and no NA", name),
         call. = FALSE)
  }
  as.double(v)
}

# digits per metric, NA for no rounding.
.scoring_digits <- function(digits, metrics) {
  if (is.null(digits)) return(stats::setNames(rep(NA_real_, length(metrics)), metrics))
  if (!is.numeric(digits) || anyNA(digits)) {
    stop("'digits' must be NULL or whole numbers of decimals", call. = FALSE)
  }
  if (is.null(names(digits))) {
    if (length(digits) != 1L) {
      stop("'digits' must be one number or be named by metric", call. = FALSE)
    }
    return(stats::setNames(rep(digits, length(metrics)), metrics))
  }
  out <- stats::setNames(rep(NA_real_, length(metrics)), metrics)
  bad <- setdiff(names(digits), metrics)
  if (length(bad)) {
    stop(sprintf("'digits' names unknown metrics: %s", paste(bad, collapse = ", ")),
         call. = FALSE)
  }
  out[names(digits)] <- digits
  out
}

# The long table of statistics, restricted to `methods` (attribute "methods").
.check_score_table <- function(tab, methods) {
  if (!is.data.frame(tab)) stop("'tab' must be a data frame", call. = FALSE)
  need <- c("dataset", "method", "metric", .score_stats)
  miss <- setdiff(need, names(tab))
  if (length(miss)) {
    stop(sprintf("'tab' has no column%s %s", if (length(miss) > 1L) "s" else "",
                 paste(sprintf("'%s'", miss), collapse = ", ")), call. = FALSE)
  }
  for (st in .score_stats) {
    if (!is.numeric(tab[[st]])) stop(sprintf("'tab$%s' must be numeric", st), call. = FALSE)
  }
  tab$method <- as.character(tab$method)
  tab$metric <- as.character(tab$metric)
  if (is.null(methods)) methods <- unique(tab$method)
  if (!is.character(methods) || !length(methods) || anyDuplicated(methods)) {
    stop("'methods' must be distinct method names", call. = FALSE)
  }
  tab <- tab[tab$method %in% methods, , drop = FALSE]
  if (!nrow(tab)) stop("'tab' has no rows for the given 'methods'", call. = FALSE)
  dup <- duplicated(tab[c("dataset", "method", "metric")])
  if (any(dup)) {
    stop("'tab' has more than one row for some data set, method and metric (filter by table first?)",
         call. = FALSE)
  }
  attr(tab, "methods") <- methods
  tab
}

# ---- the version of the training code behind a cached comparison ------------

# An MD5 hash of the R code that trains the models of the reproduction of
# Passerello's tables (inst/bench/reproduce_pgpr.R): every function of the
# package whose name mentions pgpr, svgp or the Polya-Gamma helpers (but
# not their print, plot and summary methods), and the
# shared fitting path (starting values, optimiser, selection of inducing
# inputs), deparsed without source references. The script stores it with
# every cached run (column code_hash of inst/extdata/pgpr_reproduction.csv)
# and a test compares, so that a change of the training code that is not
# followed by a new cache fails the tests instead of leaving the vignette
# to show the results of code that no longer exists. The C code is not
# covered: a change of a bound there shows in the tests of the bound.
.training_code_hash <- function() {
  ns <- asNamespace("sparsevgp")
  # sorted the same in every locale (testthat sorts in C, a session in its own)
  nms <- sort(ls(ns, all.names = TRUE), method = "radix")
  shared <- c(".start_classifier", ".pg_bound_at", ".pg_optimal_c", ".fit_lbfgsb",
              ".fit_staged", ".objective", ".optim_setup", ".stop_move", ".stop_window",
              ".stop_code", ".default_control", ".check_control", ".select_by_spec",
              "select_inducing", ".inducing_spec", ".kmeans_inducing", ".kern_init",
              ".kern_ard", ".collapsed_bound", ".collapsed_matrices", ".collapsed_predict",
              ".class_start_multipliers", ".class_start_variances", ".class_mean_start",
              ".as_labels", ".kernel_at", ".contract", ".column_sd")
  # presentation (print, plot, summary) does not change a cached number
  show <- grepl("^(print|plot|summary|format)\\.|^\\.(report|plot)", nms)
  keep <- nms[(grepl("pgpr|svgp|^\\.?pg_", nms) & !show) | nms %in% shared]
  # functions only: the registered C routines deparse with their addresses,
  # which change from one session to the next
  keep <- keep[vapply(keep, function(nm) is.function(get(nm, envir = ns)), TRUE)]
  text <- unlist(lapply(keep, function(nm) c(nm, deparse(get(nm, envir = ns)))))
  f <- tempfile()
  on.exit(unlink(f), add = TRUE)
  writeLines(text, f, useBytes = TRUE)
  unname(tools::md5sum(f))
}
