# Input validation and data handling shared by the model constructors.
# Messages name the argument the user passed, so that a mistake is found
# from the error alone.

# A numeric design matrix from a vector, matrix or data frame of numbers
# (with allow_na = TRUE, missing values are kept: new inputs for
# prediction).
.as_input_matrix <- function(x, name = "x", min_rows = 1L, allow_na = FALSE) {
  if (is.data.frame(x)) {
    ok <- vapply(x, function(col) is.numeric(col) || is.logical(col), TRUE)
    if (!all(ok)) {
      stop(sprintf("'%s' must contain only numeric columns (not: %s)", name,
                   paste(names(x)[!ok], collapse = ", ")), call. = FALSE)
    }
    x <- as.matrix(x)
  }
  if (is.null(dim(x)) && (is.numeric(x) || is.logical(x))) {
    x <- matrix(x, ncol = 1L)
  }
  if (!is.matrix(x) || !(is.numeric(x) || is.logical(x))) {
    stop(sprintf("'%s' must be a numeric vector, matrix or data frame", name),
         call. = FALSE)
  }
  if (ncol(x) < 1L) stop(sprintf("'%s' has no columns", name), call. = FALSE)
  if (nrow(x) < min_rows) {
    stop(sprintf("'%s' must have at least %d row%s", name, min_rows,
                 if (min_rows == 1L) "" else "s"), call. = FALSE)
  }
  # the elementwise test only when some entry is not finite (it allocates
  # two logical copies of x)
  bad <- !.all_finite(x) && (if (allow_na) any(is.infinite(x)) else TRUE)
  if (bad) {
    stop(sprintf("'%s' contains %s values%s", name,
                 if (allow_na) "infinite" else "NA, NaN or infinite",
                 if (allow_na || name != "x") "" else
                   " (the formula interface drops incomplete rows by its na.action)"),
         call. = FALSE)
  }
  # (only when needed: on a double matrix it would make a wrapper whose
  # first write access from C copies the data)
  if (!is.double(x)) storage.mode(x) <- "double"
  x
}

# The response of a regression model (`model`, for messages): a finite
# numeric vector of length n. Classes (a factor, logical or character
# vector) are the commonest mix-up: the error names the classifiers.
.as_response <- function(y, n, name = "y", model = NULL) {
  if (is.null(y)) stop(sprintf("'%s' is missing", name), call. = FALSE)
  if (is.matrix(y) && ncol(y) == 1L) y <- drop(y)
  if ((is.factor(y) || is.logical(y) || is.character(y)) && is.null(dim(y))) {
    k <- length(unique(y[!is.na(y)]))
    what <- if (is.factor(y)) sprintf("a factor with %d levels", nlevels(y)) else
      sprintf("a %s vector with %d values", if (is.logical(y)) "logical" else "character", k)
    stop(sprintf("'%s' must be a numeric vector, not %s: %s is regression for a numeric response; for classes use %s",
                 name, what, if (is.null(model)) "this model" else paste0(model, "()"),
                 if (k > 2L) "svgp() or odvgp(), which fit more than two classes" else
                   "pgpr() or svgp(), the binary classifiers"), call. = FALSE)
  }
  if (!is.numeric(y) || !is.null(dim(y))) {
    stop(sprintf("'%s' must be a numeric vector", name), call. = FALSE)
  }
  if (length(y) != n) {
    stop(sprintf("'%s' has length %d but the inputs have %d rows", name,
                 length(y), n), call. = FALSE)
  }
  if (!.all_finite(y)) {
    stop(sprintf("'%s' contains NA, NaN or infinite values", name),
         call. = FALSE)
  }
  .check_response_scale(if (is.double(y)) y else as.double(y), name)
}

# A response whose spread (max - min) is beyond 1e100, or below 1e-100 but
# not 0 (a constant response is fine), has a variance that over- or
# underflows double precision once squared and summed: the bounds and the
# optimiser's standardisation (by sd(y)) cannot work with it.
.check_response_scale <- function(y, name = "y") {
  span <- if (length(y)) max(y) - min(y) else 0
  if (!(span <= 1e100) || (span > 0 && span < 1e-100)) {
    stop(sprintf("'%s' spans %s (max - min), outside 1e-100 to 1e100, where its variance %s double precision: rescale it (for example %s / %s) and scale the predictions back",
                 name, format(span, digits = 3L),
                 if (span > 1) "overflows" else "underflows", name,
                 format(10^round(log10(span)), digits = 3L)), call. = FALSE)
  }
  y
}

.check_positive <- function(x, name, len = NULL) {
  if (!is.numeric(x) || any(!is.finite(x)) || any(x <= 0) ||
      (!is.null(len) && length(x) != len)) {
    what <- if (is.null(len) || len > 1L) "positive finite numbers" else
      "one positive finite number"
    if (!is.null(len) && len > 1L) what <- sprintf("%d %s", len, what)
    stop(sprintf("'%s' must be %s", name, what), call. = FALSE)
  }
  # below the smallest normal double a number has lost its precision, and
  # what is computed from it underflows (a subnormal kernel variance gave
  # bound -Inf and NaN predictions, or a fit stuck at its start)
  if (any(x < .Machine$double.xmin)) {
    stop(sprintf("'%s' is %s, below the smallest normal double (%s): give it on the scale of the data",
                 name, format(min(x), digits = 3L), format(.Machine$double.xmin, digits = 3L)),
         call. = FALSE)
  }
  as.double(x)
}

.check_flag <- function(x, name) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    stop(sprintf("'%s' must be TRUE or FALSE", name), call. = FALSE)
  }
  x
}

# The model frame of a formula interface, built as lm() builds it: the
# call's `data`, `subset`, `weights`, `na.action` and `offset` go to
# stats::model.frame(), evaluated in `env` (where the model function was
# called), so that `subset = Month > 5` and `weights = w` are looked up in
# the data first. na.action defaults to getOption("na.action"), as in lm().
# A learned noise formula's model matrix joins the frame as the column
# "(noise)", so that subset and na.action drop the same rows from both.
# Inputs are model.matrix() columns without the intercept, so factors become
# indicator columns and transformations such as log(x1) work. Returns the
# inputs x, the response y, the terms, the factor levels, the frame, the
# na.action record, the prior weights, the offset and the noise design
# (NULL when absent).
.formula_data <- function(formula, data, call = NULL, env = parent.frame(), noise = NULL,
                          min_rows = 2L) {
  if (!inherits(formula, "formula") || length(formula) != 3L) {
    stop("'formula' must be a two-sided formula such as y ~ x1 + x2",
         call. = FALSE)
  }
  if (missing(data) || is.null(data)) data <- environment(formula)
  if (is.list(data)) {
    .check_formula_vars(stats::terms(formula, data = data), data, "'data'", "the formula")
  }
  mfc <- if (is.null(call)) call("model.frame") else
    call[c(1L, match(c("subset", "weights", "na.action", "offset"), names(call), 0L))]
  mfc[[1L]] <- quote(stats::model.frame)
  mfc$formula <- formula
  mfc$data <- data
  mfc$drop.unused.levels <- TRUE
  design <- NULL
  if (inherits(noise, "formula") && length(all.vars(noise))) {
    # the noise formula on all rows (its variables, like the model's, are
    # evaluated before subset and na.action apply, as in model.frame())
    nf <- stats::model.frame(noise, data, na.action = stats::na.pass)
    ntt <- attr(nf, "terms")
    Phi <- stats::model.matrix(ntt, nf)
    attr(Phi, "assign") <- attr(Phi, "contrasts") <- NULL
    design <- list(terms = ntt, xlevels = stats::.getXlevels(ntt, nf))
    mfc$noise <- Phi
  }
  mf <- eval(mfc, env)
  tt <- attr(mf, "terms")
  attr(tt, "intercept") <- 0L
  x <- stats::model.matrix(tt, mf)
  attr(x, "assign") <- NULL
  attr(x, "contrasts") <- NULL
  y <- stats::model.response(mf)
  w <- stats::model.weights(mf)
  off <- stats::model.offset(mf)
  if (!is.null(design)) {
    design$Phi <- mf[["(noise)"]]
    rownames(design$Phi) <- NULL
    class(design) <- "sparsevgp_noise_design"
  }
  parts <- Filter(Negate(is.null), list(x, y, w, off, design$Phi))
  incomplete <- !do.call(stats::complete.cases, parts)
  if (any(incomplete)) {
    stop(sprintf("%d of %d rows of the model frame have missing values, which na.action = na.pass keeps: use na.action = na.omit or na.exclude to drop them",
                 sum(incomplete), length(incomplete)), call. = FALSE)
  }
  .check_formula_inputs(x, formula, min_rows)
  x <- .as_input_matrix(x, "inputs", min_rows)
  list(x = x, y = y, terms = tt, xlevels = stats::.getXlevels(tt, mf), frame = mf,
       na.action = attr(mf, "na.action"), weights = w, offset = off, noise = design)
}

# The inputs of a formula's model frame, with errors in the formula's
# terms: no input at all (y ~ 1), infinite values (which na.action does not
# drop), too few rows after subset and na.action.
.check_formula_inputs <- function(x, formula, min_rows) {
  if (ncol(x) == 0L) {
    stop(sprintf("the formula %s has no inputs: a Gaussian process needs at least one variable on the right-hand side, as in %s ~ x",
                 paste(deparse(formula, width.cutoff = 200L), collapse = " "),
                 paste(deparse(formula[[2L]], width.cutoff = 60L), collapse = "")),
         call. = FALSE)
  }
  bad <- !is.finite(x)
  if (any(bad)) {
    cols <- colnames(x)[colSums(bad) > 0L]
    rows <- which(rowSums(bad) > 0L)
    stop(sprintf("the input%s %s %s infinite values (in %d row%s, the first %s): na.action drops missing values only, so leave those rows out (for example subset = is.finite(%s))",
                 if (length(cols) > 1L) "s" else "", paste(cols, collapse = ", "),
                 if (length(cols) > 1L) "have" else "has", length(rows),
                 if (length(rows) > 1L) "s" else "", rows[1L], cols[1L]), call. = FALSE)
  }
  if (nrow(x) < min_rows) {
    stop(sprintf("the model frame has %d row%s after subset and na.action, and at least %d are needed",
                 nrow(x), if (nrow(x) == 1L) "" else "s", min_rows), call. = FALSE)
  }
  invisible()
}

# Prior weights and an offset, checked against the number of observations:
# list(weights, offset), NULL for each one that is absent. Weights must be
# positive (a zero weight would be an infinite noise variance).
.check_weights_offset <- function(weights, offset, n) {
  if (!is.null(weights)) {
    if (!is.numeric(weights) || length(weights) != n || any(!is.finite(weights)) ||
        any(weights <= 0)) {
      stop(sprintf("'weights' must be %d positive finite numbers, one per observation (leave out observations of zero weight, for example with subset = w > 0)",
                   n), call. = FALSE)
    }
    weights <- as.double(weights)
  }
  if (!is.null(offset)) {
    if (!is.numeric(offset) || length(offset) != n || any(!is.finite(offset))) {
      stop(sprintf("'offset' must be %d finite numbers, one per observation", n),
           call. = FALSE)
    }
    offset <- as.double(offset)
  }
  list(weights = weights, offset = offset)
}

# The inputs of a prediction, simulation or plot: the rows of `newdata`
# that `na.action` keeps, as a model matrix whose rows may still hold NA
# (na.pass, the default: those rows give NA), or the training inputs when
# `newdata` is NULL. Returns
#   x        the model matrix of the kept rows,
#   data     what the noise model reads at those rows (NULL: the training
#            inputs),
#   offset   the offset at those rows (NULL for none),
#   ok       the rows of x with complete inputs and offset,
#   na       the na.action record, for napredict() (padding of na.exclude).
.prediction_inputs <- function(object, newdata = NULL, na.action = stats::na.pass) {
  if (is.null(newdata)) {
    if (!is.null(object$shards)) {
      stop("this fit's rows are on the workers of its shards: give 'newdata', or use fitted(fit, cluster = sh) for the fitted values at the workers' rows",
           call. = FALSE)
    }
    return(list(x = object$x, data = NULL, offset = object$offset,
                ok = rep(TRUE, nrow(object$x)), na = object$na.action))
  }
  if (is.character(na.action)) na.action <- get(na.action, mode = "function")
  if (!is.function(na.action)) {
    stop("'na.action' must be a function such as na.pass, na.omit or na.exclude", call. = FALSE)
  }
  offset <- NULL
  if (!is.null(object$terms) && !is.matrix(newdata)) {
    # a matrix is taken as the model matrix itself (the columns of fit$x),
    # which is how plots predict on a grid of transformed inputs
    if (!is.data.frame(newdata) && !is.list(newdata)) {
      stop("'newdata' must be a data frame (or a matrix with the columns of the model matrix) for a model fitted with a formula",
           call. = FALSE)
    }
    tt <- stats::delete.response(object$terms)
    .check_formula_vars(tt, newdata, "'newdata'", "the model's formula")
    mf <- stats::model.frame(tt, newdata, na.action = na.action, xlev = object$xlevels)
    x <- stats::model.matrix(tt, mf)
    attr(x, "assign") <- NULL
    attr(x, "contrasts") <- NULL
    x <- .as_input_matrix(x, "newdata", min_rows = 0L, allow_na = TRUE)
    na <- attr(mf, "na.action")
    n_all <- nrow(mf) + length(na)
    rows <- if (length(na)) seq_len(n_all)[-na] else seq_len(n_all)
    # the offset as predict.lm() finds it: offset() terms in the formula and
    # the call's `offset`, both evaluated in newdata
    offset <- stats::model.offset(mf)
    if (!is.null(object$call$offset)) {
      off <- eval(object$call$offset, newdata, environment(object$terms))
      offset <- (if (is.null(offset)) 0 else offset) + off[rows]
    }
    data <- if (is.data.frame(newdata)) newdata[rows, , drop = FALSE] else x
  } else {
    x <- .as_input_matrix(newdata, "newdata", min_rows = 0L, allow_na = TRUE)
    D <- ncol(object$x)
    if (ncol(x) != D) {
      stop(sprintf("'newdata' must have %d columns, not %d", D, ncol(x)),
           call. = FALSE)
    }
    cn <- colnames(object$x)
    if (!is.null(cn) && !is.null(colnames(x)) && !identical(colnames(x), cn)) {
      stop(sprintf("the columns of 'newdata' (%s) do not match the training inputs (%s)",
                   paste(colnames(x), collapse = ", "), paste(cn, collapse = ", ")),
           call. = FALSE)
    }
    # (without missing inputs na.action has nothing to do: no data frame
    # copy of x)
    na <- if (anyNA(x)) attr(na.action(as.data.frame(x)), "na.action")
    if (length(na)) x <- x[-na, , drop = FALSE]
    data <- x
  }
  if (!is.null(object$offset) && is.null(offset) && nrow(x) > 0L) {
    stop("this fit has an offset, which is unknown at the new inputs: fit with the formula interface (offset() in the formula or offset = an expression in the data's variables) to predict at new data",
         call. = FALSE)
  }
  ok <- stats::complete.cases(x)
  if (!is.null(offset)) ok <- ok & is.finite(offset)
  list(x = x, data = data, offset = offset, ok = ok, na = na)
}

# The variables of the terms `tt` that neither `data` (a data frame or
# list; `name` in messages) nor the formula's environment has: an error
# naming them (`what` is the formula), instead of model.frame()'s "object
# 'b' not found". Missing values are for na.action to handle.
.check_formula_vars <- function(tt, data, name, what) {
  if (!is.list(data)) return(invisible())
  vars <- all.vars(tt)
  env <- environment(tt)
  if (is.null(env)) env <- globalenv()
  absent <- vars[!(vars %in% names(data)) &
                   !vapply(vars, exists, TRUE, envir = env, inherits = TRUE)]
  if (length(absent)) {
    stop(sprintf("%s has no variable%s %s, which %s uses", name,
                 if (length(absent) > 1L) "s" else "", paste(absent, collapse = ", "), what),
         call. = FALSE)
  }
  invisible()
}

# Row blocks of at most `size` rows, for predictions that would otherwise
# hold large matrices.
.row_blocks <- function(n, size = 1000L) {
  if (n == 0L) return(list())
  starts <- seq.int(1L, n, by = size)
  lapply(starts, function(s) s:min(n, s + size - 1L))
}

.fmt <- function(x, digits = 4L) formatC(x, digits = digits, format = "g")

# The call of a formula method as the user would type it: gpr(y ~ x, ...),
# without the name of the generic's first argument, so that update() works;
# `start` is kept as the user wrote it (.model_call()).
.formula_call <- function(call, fun) {
  call[[1L]] <- as.name(fun)
  nm <- names(call)
  nm[nm == "x"] <- ""
  names(call) <- nm
  call$start <- .start_record(call$start)
  call
}

# A short description of a value for messages: "3 numbers", "a character
# vector", "NA", "NULL", "a list".
.describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.list(x)) return("a list")
  if (!is.numeric(x)) return(sprintf("a %s vector", typeof(x)))
  n <- length(x)
  bad <- sum(!is.finite(x))
  sprintf("%d number%s%s", n, if (n == 1L) "" else "s",
          if (bad) sprintf(" (%d of them NA, NaN or infinite)", bad) else "")
}

# Column summaries of the numeric matrix x (rows mean, sd, min, max,
# finite), in one pass over it and without a copy (src/linalg.c): what the
# apply() family would cost a copy of x and one temporary per column for,
# which at large N outgrows the memory budget (?scaling).
.col_stats <- function(x) {
  if (!is.double(x)) storage.mode(x) <- "double"
  .ffi_colstats(x)
}

# Whether every entry of the numeric x is finite (one pass, no copy).
.all_finite <- function(x) all(.col_stats(x)["finite", ] == 1)

.col_sd <- function(x) .col_stats(x)["sd", ]

# Standard deviations `s` of input columns with 1 for a constant (or
# non-finite) one, for scaling the inputs.
.sd_or_one <- function(s) {
  s[!is.finite(s) | s <= 0] <- 1
  s
}

# max - min of each column.
.col_span <- function(x) {
  s <- .col_stats(x)
  s["max", ] - s["min", ]
}

# The value of `expr`, with R's stream of random numbers afterwards where it
# was before (one is started first if there is none yet).
.keep_stream <- function(expr) {
  if (!exists(".Random.seed", envir = globalenv(), inherits = FALSE)) stats::runif(1L)
  old <- get(".Random.seed", envir = globalenv())
  on.exit(assign(".Random.seed", old, envir = globalenv()))
  expr
}
