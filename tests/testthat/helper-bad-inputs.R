# The table of bad user-level inputs (inst/bench/bad_inputs.R runs all of
# them, each in its own child process; test-hardening.R runs a subset in
# batches): NA/Inf, wrong dims and types, factors, M > N, duplicated and
# co-located inducing inputs, bad noise vectors, constant responses, one-
# and three-class labels, N = 1 and 2, singular K_uu, huge and tiny values,
# newdata with wrong columns or no rows, and with NA (which gives NA in
# that row, as predict.lm() does). Each scenario must end in a clean
# error naming the cause, or a finite result (possibly with warnings).

# The data every scenario may use (small: each scenario runs in well under
# a second when it fits).
bad_inputs_setup <- function() {
  e <- new.env()
  local({
    set.seed(1)
    x <- runif(40, -3, 3)
    y <- sin(2 * x) + rnorm(40, sd = 0.1)
    X <- cbind(a = runif(40), b = runif(40))
    y2 <- sin(3 * X[, 1]) + X[, 2] + rnorm(40, sd = 0.1)
    cls <- factor(ifelse(y > 0, "up", "down"))
    c01 <- as.integer(y > 0)
    d <- data.frame(x = x, y = y, z = rnorm(40), g = factor(sample(c("u", "v"), 40, TRUE)),
                    cl = cls)
    Z <- matrix(seq(-2.5, 2.5, length.out = 6))
    k1 <- kernel_rbf(1, 1)
    fits <- list(
      gpr = gpr(x, y, kernel = k1, optimize = FALSE),
      sgpr = sgpr(x, y, kernel = k1, inducing = Z, optimize = FALSE),
      osgpr = osgpr(x, y, kernel = k1, inducing = Z[1:3, , drop = FALSE],
                    orthogonal = Z[4:6, , drop = FALSE], optimize = FALSE),
      pgpr = pgpr(x, cls, kernel = k1, inducing = Z, optimize = FALSE),
      svgp = svgp(x, cls, kernel = k1, inducing = Z, optimize = FALSE),
      svgp_gauss = svgp(x, y, likelihood = "gaussian", kernel = k1, inducing = Z,
                        optimize = FALSE),
      sgpr_formula = sgpr(y ~ x + z, data = d, kernel = kernel_rbf(1, 1), inducing = 5,
                          optimize = FALSE))
  }, envir = e)
  e
}

# The scenarios: a data frame (id, model, what, code). Most are generated
# for every model they apply to, from the calls below with the placeholder
# MODEL and, for the classifiers, LABELS.
bad_inputs_scenarios <- function() {
  reg <- c(gpr = "gpr(%s)", sgpr = "sgpr(%s, inducing = 6)",
           osgpr = "osgpr(%s, inducing = 3, orthogonal = 3)",
           svgp_gauss = "svgp(%s, likelihood = \"gaussian\", inducing = 6)")
  cl <- c(pgpr = "pgpr(%s, inducing = 6)", svgp = "svgp(%s, inducing = 6)")
  # arguments x, y (and extras) of a regression model
  reg_args <- c(
    "NA in x" = "replace(x, 3, NA), y", "NaN in x" = "replace(x, 3, NaN), y",
    "Inf in x" = "replace(x, 3, Inf), y", "-Inf in x" = "replace(x, 3, -Inf), y",
    "NA in y" = "x, replace(y, 5, NA)", "Inf in y" = "x, replace(y, 5, Inf)",
    "x character" = "as.character(x), y", "x factor" = "factor(round(x)), y",
    "x data frame with a factor column" = "data.frame(x = x, g = d$g), y",
    "x list" = "as.list(x), y", "x with 0 columns" = "matrix(0, 40, 0), y",
    "y factor" = "x, factor(y > 0)", "y character" = "x, as.character(y)",
    "y one shorter" = "x, y[-1]", "y matrix with 2 columns" = "x, cbind(y, y)",
    "x and y empty" = "numeric(0), numeric(0)", "N = 1" = "x[1], y[1]",
    "N = 2" = "x[1:2], y[1:2]", "N = 3" = "x[1:3], y[1:3]",
    "constant y" = "x, rep(2.5, 40)", "constant x" = "rep(1, 40), y",
    "x all equal but two" = "c(rep(0, 38), 1, 2), y",
    "x with duplicated rows" = "rep(x[1:10], 4), y",
    "x spans 1e-200" = "x * 1e-200, y", "x spans 1e-300" = "x * 1e-300, y",
    "x around 1e200" = "1e200 + x, y", "x * 1e300" = "x * 1e300, y",
    "y * 1e300" = "x, y * 1e300", "y * 1e-160" = "x, y * 1e-160",
    "y * 1e100" = "x, y * 1e100", "y * 1e-90" = "x, y * 1e-90",
    "y shifted by 1e200" = "x, y + 1e200",
    "kernel variance 1e-320" = "x, y, kernel = kernel_rbf(1, 1e-320)",
    "kernel variance 1e-300" = "x, y, kernel = kernel_rbf(1, 1e-300)",
    "kernel variance 1e307" = "x, y, kernel = kernel_rbf(1, 1e307)",
    "lengthscale 1e-300" = "x, y, kernel = kernel_rbf(1e-300)",
    "lengthscale 1e300" = "x, y, kernel = kernel_rbf(1e300)",
    "ARD lengthscales for 1 column" = "x, y, kernel = kernel_rbf(c(1, 2))",
    "kernel a string" = "x, y, kernel = \"rbf\"", "kernel NULL" = "x, y, kernel = NULL",
    "Matern 3/2 at 1e-300 lengthscale" = "x, y, kernel = kernel_matern32(1e-300, 1)",
    "noise negative" = "x, y, noise = -1", "noise 0" = "x, y, noise = 0",
    "noise NA" = "x, y, noise = NA", "noise 1e-320" = "x, y, noise = 1e-320",
    "noise character" = "x, y, noise = \"a\"",
    "mean NA" = "x, y, mean = NA", "mean a string" = "x, y, mean = \"zero\"",
    "mean Inf" = "x, y, mean = Inf",
    "control jitter -1" = "x, y, control = list(jitter = -1)",
    "control maxit 0" = "x, y, control = list(maxit = 0)",
    "control unknown entry" = "x, y, control = list(bogus = 1)",
    "fixed unknown" = "x, y, fixed = \"bogus\"", "optimize NA" = "x, y, optimize = NA",
    "fixed everything" = "x, y, fixed = c(\"variance\", \"lengthscale\", \"noise\", \"mean\")")
  # arguments of the sparse regression models only
  sparse_args <- c(
    "M > N" = "x, y, inducing = 100", "M = 0" = "x, y, inducing = 0",
    "M = -1" = "x, y, inducing = -1", "M = NA" = "x, y, inducing = NA",
    "M = 2.5" = "x, y, inducing = 2.5", "M = N" = "x, y, inducing = 40",
    "N = 2, M = 1" = "x[1:2], y[1:2], inducing = 1", "N = 2, M = 2" = "x[1:2], y[1:2], inducing = 2",
    "N = 3, M = 2" = "x[1:3], y[1:3], inducing = 2",
    "inducing method unknown" = "x, y, inducing = \"bogus\"",
    "inducing matrix with 2 columns" = "x, y, inducing = cbind(Z, Z)",
    "duplicated Z" = "x, y, inducing = rbind(Z, Z[1, ])",
    "Z with NA" = "x, y, inducing = replace(Z, 2, NA)",
    "Z far from the data" = "x, y, inducing = Z + 1e6",
    "Z nearly duplicated (singular K_uu)" = "x, y, inducing = rbind(Z, Z[1, ] + 1e-12)",
    "Z equal to x" = "x, y, inducing = matrix(x)",
    "noise vector with NA" = "x, y, noise = replace(rep(0.1, 40), 3, NA)",
    "noise vector of the wrong length" = "x, y, noise = rep(0.1, 39)",
    "noise vector with a zero" = "x, y, noise = replace(rep(0.1, 40), 3, 0)",
    "noise vector 1e-14" = "x, y, noise = rep(1e-14, 40)",
    "noise vector 1e-200" = "x, y, noise = rep(1e-200, 40)",
    "noise vector spanning 1e-8 to 1e8" = "x, y, noise = 10^seq(-8, 8, length.out = 40)",
    "noise formula with an unknown variable" = "x, y, noise = ~ bogus",
    "noise formula two-sided" = "x, y, noise = y ~ x1")
  # arguments of the binary classifiers (LABELS: the labels)
  cl_args <- c(
    "NA in x" = "replace(x, 3, NA), cls", "Inf in x" = "replace(x, 3, Inf), cls",
    "x character" = "as.character(x), cls", "x with 0 columns" = "matrix(0, 40, 0), cls",
    "one class" = "x, factor(rep(\"a\", 40))", "one class of two levels" = "x, factor(rep(\"a\", 40), levels = c(\"a\", \"b\"))",
    "three classes" = "x, factor(rep(c(\"a\", \"b\", \"c\"), length.out = 40))",
    "labels 0/1" = "x, c01", "labels -1/1" = "x, 2 * c01 - 1", "labels 1/2" = "x, c01 + 1",
    "labels logical" = "x, c01 == 1", "labels character" = "x, as.character(cls)",
    "labels numeric 0.5" = "x, c01 / 2", "NA label" = "x, replace(cls, 4, NA)",
    "labels one shorter" = "x, cls[-1]", "N = 1" = "x[1], cls[1]",
    "N = 2, one of each class, M = 2" = "x[c(1, 5)], cls[c(1, 5)], inducing = 2",
    "N = 3, M = 2" = "x[c(1, 4, 5)], cls[c(1, 4, 5)], inducing = 2",
    "N = 2, one class" = "x[1:2], cls[1:2]",
    "constant x" = "rep(1, 40), cls", "x * 1e300" = "x * 1e300, cls",
    "x spans 1e-300" = "x * 1e-300, cls", "M > N" = "x, cls, inducing = 100",
    "M = 0" = "x, cls, inducing = 0", "duplicated Z" = "x, cls, inducing = rbind(Z, Z[1, ])",
    "Z nearly duplicated (singular K_uu)" = "x, cls, inducing = rbind(Z, Z[1, ] + 1e-12)",
    "kernel variance 1e-320" = "x, cls, kernel = kernel_rbf(1, 1e-320)",
    "kernel variance 1e300" = "x, cls, kernel = kernel_rbf(1, 1e300)",
    "lengthscale 1e-300" = "x, cls, kernel = kernel_rbf(1e-300)",
    "mean NA" = "x, cls, mean = NA")
  out <- list()
  add <- function(model, what, code) {
    out[[length(out) + 1L]] <<- data.frame(model = model, what = what, code = code,
                                           stringsAsFactors = FALSE)
  }
  for (m in names(reg)) {
    for (w in names(reg_args)) {
      args <- reg_args[[w]]
      # the exact GP has no inducing inputs; svgp has no noise vectors
      add(m, w, sprintf(if (m == "gpr") "gpr(%s)" else reg[[m]], args))
    }
    if (m != "gpr") for (w in names(sparse_args)) {
      if (m == "svgp_gauss" && grepl("^noise", w)) next
      call <- sub(", inducing = [0-9]+", "", reg[[m]])
      if (m == "osgpr") call <- "osgpr(%s)"
      add(m, w, sprintf(call, sparse_args[[w]]))
    }
  }
  for (m in names(cl)) for (w in names(cl_args)) {
    call <- if (grepl("inducing", cl_args[[w]])) sub(", inducing = [0-9]+", "", cl[[m]]) else cl[[m]]
    add(m, w, sprintf(call, cl_args[[w]]))
  }
  # orthogonal inducing inputs
  o <- c("O co-located with Z" = "osgpr(x, y, inducing = Z, orthogonal = Z)",
         "O duplicated" = "osgpr(x, y, inducing = Z[1:3, , drop = FALSE], orthogonal = rbind(Z[4, ], Z[4, ]))",
         "O nearly Z" = "osgpr(x, y, inducing = Z, orthogonal = Z + 1e-10)",
         "orthogonal = 0" = "osgpr(x, y, inducing = 3, orthogonal = 0)",
         "orthogonal > N" = "osgpr(x, y, inducing = 3, orthogonal = 100)",
         "inducing + orthogonal > N" = "osgpr(x, y, inducing = 30, orthogonal = 30)",
         "type unknown" = "osgpr(x, y, type = \"bogus\")",
         "bound unknown" = "osgpr(x, y, bound = \"bogus\")",
         "repeated inputs, defaults" = "osgpr(rep(1:10, 10), rnorm(100))",
         "greedy returns fewer than M1 + M2" = "{set.seed(1); x2 <- runif(200, -3, 3); osgpr(x2, sin(2 * x2) + rnorm(200, sd = 0.1), inducing = 20, orthogonal = 20)}",
         "O with NA" = "osgpr(x, y, inducing = 3, orthogonal = replace(Z, 1, NA))")
  for (w in names(o)) add("osgpr", w, o[[w]])
  # svgp options
  s <- c("batch_size 0" = "svgp(x, cls, inducing = 6, batch_size = 0)",
         "batch_size > N" = "svgp(x, cls, inducing = 6, batch_size = 100)",
         "batch_size 1" = "svgp(x, cls, inducing = 6, batch_size = 1, control = list(maxit = 20))",
         "whiten NA" = "svgp(x, cls, inducing = 6, whiten = NA)",
         "quadrature 0" = "svgp(x, cls, inducing = 6, quadrature = 0)",
         "quadrature 1" = "svgp(x, cls, inducing = 6, quadrature = 1)",
         "likelihood unknown" = "svgp(x, cls, likelihood = \"bogus\")",
         "poisson with class labels" = "svgp(x, cls, likelihood = \"poisson\")",
         "poisson with negative counts" = "svgp(x, -abs(round(y)), likelihood = \"poisson\")",
         "poisson with fractions" = "svgp(x, abs(y), likelihood = \"poisson\")",
         "student_t noise negative" = "svgp(x, y, likelihood = \"student_t\", noise = -1)",
         "student_t df 0" = "svgp(x, y, likelihood = gp_likelihood(\"student_t\", df = 0))",
         "gaussian likelihood with class labels" = "svgp(x, cls, likelihood = \"gaussian\")",
         "probit, one class" = "svgp(x, factor(rep(\"a\", 40)), likelihood = \"probit\")",
         "q_u of the wrong size" = "svgp(x, cls, inducing = Z, q_u = list(mean = 1:2, sqrt = diag(2)))",
         "noise negative (gaussian)" = "svgp(x, y, likelihood = \"gaussian\", noise = -1)")
  for (w in names(s)) add("svgp", w, s[[w]])
  # selection
  sel <- c("M > N" = "select_inducing(x, k1, M = 100)", "M = 0" = "select_inducing(x, k1, M = 0)",
           "M = NA" = "select_inducing(x, k1, M = NA)", "x with NA" = "select_inducing(replace(x, 2, NA), k1, M = 5)",
           "all inputs equal" = "select_inducing(rep(1, 40), k1, M = 5)",
           "weights with NA" = "select_inducing(x, k1, M = 5, weights = replace(rep(1, 40), 2, NA))",
           "weights of the wrong length" = "select_inducing(x, k1, M = 5, weights = rep(1, 39))",
           "weights 1e308" = "select_inducing(x, k1, M = 5, weights = rep(1e308, 40))",
           "threshold negative" = "select_inducing(x, k1, threshold = -1)",
           "method unknown" = "select_inducing(x, k1, M = 5, method = \"bogus\")",
           "kernel without parameters" = "select_inducing(x, kernel_rbf(), M = 5)",
           "kmeans, M > distinct inputs" = "select_inducing(rep(1:3, 10), k1, M = 5, method = \"kmeans\")",
           "random, M > distinct inputs" = "select_inducing(rep(1:3, 10), k1, M = 5, method = \"random\")",
           "lengthscale 1e-300" = "select_inducing(x, kernel_rbf(1e-300, 1), M = 5)",
           "long lengthscale, distinct inputs" = "select_inducing(seq(0, 1, length.out = 200), kernel_rbf(10, 1), M = 50)")
  for (w in names(sel)) add("select_inducing", w, sel[[w]])
  # predictions
  for (m in c("gpr", "sgpr", "osgpr", "pgpr", "svgp", "svgp_gauss")) {
    p <- c("newdata with 2 columns" = "predict(fits$MODEL, cbind(x, x))",
           "newdata with NA (that row gives NA)" =
             "p <- predict(fits$MODEL, c(1, NA)); stopifnot(is.na(p$mean[2])); lapply(p, `[`, 1)",
           "newdata character" = "predict(fits$MODEL, \"a\")",
           "newdata with 0 rows" = "predict(fits$MODEL, matrix(0, 0, 1))",
           "newdata with 0 rows, full_cov" = "predict(fits$MODEL, matrix(0, 0, 1), full_cov = TRUE)",
           "newdata at 1e300" = "predict(fits$MODEL, 1e300)",
           "newdata a data frame" = "predict(fits$MODEL, data.frame(x = 1:3))",
           "type unknown" = "predict(fits$MODEL, 1:3, type = \"bogus\")",
           "full_cov NA" = "predict(fits$MODEL, 1:3, full_cov = NA)")
    for (w in names(p)) add(m, paste("predict:", w), gsub("MODEL", m, p[[w]], fixed = TRUE))
  }
  f <- c("newdata without a variable" = "predict(fits$sgpr_formula, data.frame(x = 1))",
         "newdata with 0 rows" = "predict(fits$sgpr_formula, d[0, ])",
         "newdata a matrix of wrong width" = "predict(fits$sgpr_formula, matrix(1, 2, 5))",
         "newdata with NA (that row gives NA)" =
           "p <- predict(fits$sgpr_formula, data.frame(x = c(NA, 1), z = 1)); stopifnot(is.na(p$mean[1])); lapply(p, `[`, 2)",
         "formula with a missing variable" = "sgpr(y ~ x + bogus, data = d, inducing = 5)",
         "formula with a factor input" = "sgpr(y ~ x + g, data = d, inducing = 5)",
         "formula with a factor response" = "sgpr(cl ~ x, data = d, inducing = 5)",
         "one-sided formula" = "sgpr(~ x, data = d)",
         "data not a data frame" = "sgpr(y ~ x, data = 1:3)",
         "pgpr formula with three classes" = "pgpr(g3 ~ x, data = transform(d, g3 = factor(rep(1:3, length.out = 40))))")
  for (w in names(f)) add("formula", w, f[[w]])
  tab <- do.call(rbind, out)
  tab$id <- seq_len(nrow(tab))
  tab[, c("id", "model", "what", "code")]
}

# Errors that come from a missing check rather than from one: messages of
# R internals and of the C entry points' argument checks reaching the user.
.bad_unclean <- paste(c("subscript out of bounds", "not found", "non-finite value supplied",
                        "needs finite values", "missing value where", "argument is of length zero",
                        "non-conformable", "foreign function", "LENGTH or similar",
                        "invalid 'type'", "could not find function", "internal error",
                        "BLAS/LAPACK", "must be a double", "NA/NaN/Inf in '",
                        "cannot allocate", "incorrect number of dimensions", "recursive indexing"),
                      collapse = "|")

# A value is finite when every number in it is; a fit when its bound, its
# parameters and its predictions at the training inputs are.
.bad_finite <- function(v) {
  if (inherits(v, "sparsevgp")) {
    p <- suppressWarnings(stats::predict(v))
    return(is.finite(v$bound) && all(is.finite(unlist(v$params))) &&
             all(is.finite(unlist(p))))
  }
  if (inherits(v, "sparsevgp_inducing")) return(all(is.finite(v$Z)))
  leaves <- unlist(v, use.names = FALSE)
  !is.numeric(leaves) || all(is.finite(leaves))
}

# The child side of child_batches(): run the scenarios and write their
# outcomes: "error" (clean), "unclean error", "finite", "warnings" (finite,
# with warnings), "non-finite". The message is the time, then the error or
# the warnings. The calls are evaluated in the environment of setup();
# errors matching `expected` are clean whatever else they match (a time
# limit a scenario sets itself, say).
bad_run_batch <- function(items, out, setup = bad_inputs_setup, expected = NULL) {
  setup <- setup()
  con <- file(out, open = "w")
  on.exit(close(con))
  for (i in seq_len(nrow(items))) {
    writeLines(sprintf("%d\tstart", i), con)
    flush(con)
    warns <- character()
    t0 <- proc.time()[["elapsed"]]
    res <- withCallingHandlers(
      tryCatch(eval(parse(text = items$code[i]), envir = new.env(parent = setup)),
               error = function(e) structure(list(msg = conditionMessage(e)), class = "bad_error")),
      warning = function(w) {
        warns <<- c(warns, conditionMessage(w))
        invokeRestart("muffleWarning")
      })
    el <- proc.time()[["elapsed"]] - t0
    outcome <- if (inherits(res, "bad_error")) {
      if (grepl(.bad_unclean, res$msg) &&
          !(length(expected) && grepl(expected, res$msg))) "unclean error" else "error"
    } else if (!isTRUE(tryCatch(.bad_finite(res), error = function(e) FALSE))) {
      "non-finite"
    } else if (length(warns)) "warnings" else "finite"
    msg <- if (inherits(res, "bad_error")) res$msg else paste(unique(warns), collapse = " // ")
    writeLines(sprintf("%d\t%s\t%.2f s | %s", i, outcome, el, gsub("[\t\n]", " ", msg)), con)
    flush(con)
  }
}

# Run the scenarios in child processes (batches of `batch`, `timeout`
# seconds each; batch = 1 gives each its own process).
bad_inputs_run <- function(scenarios, helpers, batch = 1L, timeout = 60) {
  child_batches(scenarios, c("code"), helpers, "bad_run_batch", batch, timeout)
}

# The markdown table of a run of scenarios `r` (child_batches() output with
# id, model, what, code), written to `out` with a heading, the command that
# wrote it (`script`), the time limit and the outcomes; returns the failures.
scenario_table <- function(r, out, title, script, limit, elapsed, notes = character()) {
  outcomes <- c("error", "finite", "warnings", "unclean error", "non-finite", "crash", "hang")
  r$time <- suppressWarnings(as.numeric(sub(" s \\|.*", "", r$message)))
  r$text <- sub("^[0-9.]+ s \\| ?", "", r$message)
  tab <- table(factor(r$outcome, outcomes))
  esc <- function(s) gsub("|", "\\|", gsub("\n", " ", s), fixed = TRUE)
  lines <- c(
    paste("#", title),
    "",
    sprintf("sparsevgp %s, %s; written by `Rscript %s` (%d scenarios, each in its own child R process with a %d s limit, %.0f s in all).",
            format(utils::packageVersion("sparsevgp")), R.version.string, script, nrow(r), limit,
            elapsed),
    "",
    paste0("Outcomes: ", paste(sprintf("%s %d", names(tab), as.integer(tab)), collapse = ", "), "."),
    "A clean error or a finite result (possibly with warnings) is what every scenario must give;",
    notes,
    "the time is the elapsed time of the call in its child process.",
    "",
    "| # | model | input | outcome | time (s) | message or warnings |",
    "|---|---|---|---|---|---|",
    sprintf("| %d | %s | %s | %s | %s | %s |", r$id, r$model, esc(r$what), r$outcome,
            ifelse(is.na(r$time), "", sprintf("%.2f", r$time)), esc(r$text)),
    "",
    "The calls, by number:",
    "",
    sprintf("%d. `%s`", r$id, r$code))
  writeLines(lines, out)
  cat(sprintf("%d scenarios in %.0f s: %s\n", nrow(r), elapsed,
              paste(sprintf("%s %d", names(tab), as.integer(tab)), collapse = ", ")))
  bad <- r[!(r$outcome %in% c("error", "finite", "warnings")), ]
  if (nrow(bad)) print(bad[, c("id", "model", "what", "outcome", "text")], right = FALSE)
  cat("table written to", out, "\n")
  invisible(bad)
}
