# The scenarios of inst/bench/scenarios_resources.R: user-level calls about
# resources and faults (memory budgets, jitter, control lists, kernel
# trees, objective() and its cluster, interrupts in every phase, time
# limits, warm starts, plots and simulations), each run in a child process
# by child_batches() (tests/testthat/helper-fuzz.R) and classified as the
# table of bad inputs is (tests/testthat/helper-bad-inputs.R): a clean
# error, a finite result (with or without warnings), or a failure (an
# unclean error, a non-finite result, a crash, a hang).

res_setup <- function() {
  e <- new.env()
  local({
    set.seed(3)
    x <- matrix(runif(120, -3, 3), 60, 2)
    y <- sin(2 * x[, 1]) + 0.3 * x[, 2] + rnorm(60, sd = 0.1)
    lab <- factor(ifelse(y > 0, "up", "down"))
    cl3 <- factor(c("a", "b", "c")[1L + (y > -0.5) + (y > 0.5)])
    k1 <- kernel_rbf(1, 1)
    deep <- function(n) {
      k <- kernel_rbf(1, 1)
      for (i in seq_len(n)) k <- if (i %% 2) k + kernel_rbf(1, 1) else k * kernel_rbf(1, 1)
      k
    }
    by_hand <- function(n) {
      k <- kernel_rbf(1, 1)
      for (i in seq_len(n)) {
        k <- structure(list(op = if (i %% 2) "sum" else "product", parts = list(kernel_rbf(1, 1), k)),
                       class = c("sparsevgp_kernel_combo", "sparsevgp_kernel"))
      }
      k
    }
    many <- function(n) Reduce(`+`, lapply(seq_len(n), function(i) kernel_rbf()))
    fits <- list(
      gpr = gpr(x, y, kernel = k1, optimize = FALSE),
      sgpr = sgpr(x, y, kernel = k1, inducing = 8, optimize = FALSE),
      osgpr = osgpr(x, y, kernel = k1, inducing = 4, orthogonal = 4, optimize = FALSE),
      pgpr = pgpr(x, lab, kernel = k1, inducing = 8, optimize = FALSE),
      svgp = svgp(x, lab, kernel = k1, inducing = 8, optimize = FALSE),
      multi = suppressWarnings(svgp(x, cl3, inducing = 5, control = list(maxit = 5))))
    with_hook <- function(opts, expr) {
      old <- options(opts)
      on.exit(options(old))
      expr
    }
    limited <- function(expr, secs = 0.3) {
      setTimeLimit(elapsed = secs, transient = TRUE)
      on.exit(setTimeLimit(elapsed = Inf))
      expr
    }
    big <- function(n = 4000) {
      set.seed(5)
      xx <- matrix(runif(2 * n, -3, 3), n, 2)
      list(x = xx, y = sin(3 * xx[, 1]) * cos(2 * xx[, 2]) + rnorm(n, sd = 0.1))
    }
  }, envir = e)
  e
}

res_scenarios <- function() {
  out <- list()
  add <- function(model, what, code) {
    out[[length(out) + 1L]] <<- data.frame(model = model, what = what, code = code,
                                           stringsAsFactors = FALSE)
  }
  calls <- c(sgpr = "sgpr(x, y, inducing = 8, control = %s)",
             osgpr = "osgpr(x, y, inducing = 4, orthogonal = 4, control = %s)",
             pgpr = "pgpr(x, lab, inducing = 8, control = %s)",
             svgp = "svgp(x, lab, inducing = 8, control = %s)",
             gpr = "gpr(x, y, control = %s)")
  # A. memory budgets (the collapsed models and the selection)
  mem <- c("50MB" = "\"50MB\"", "1KB" = "\"1KB\"", "0B" = "\"0B\"", "-1MB" = "\"-1MB\"",
           "1e3 bytes" = "1e3", "1e30 bytes" = "1e30", "NA" = "NA", "NA string" = "NA_character_",
           "\" 2 GB \"" = "\" 2 GB \"", "1.5GB" = "\"1.5GB\"", "a word" = "\"plenty\"",
           "two numbers" = "c(1e6, 2e6)", "TRUE" = "TRUE", "Inf" = "Inf", "1 byte" = "1",
           "1TB" = "\"1TB\"", "a list" = "list(1e6)", "200KB (chunks)" = "\"200KB\"")
  for (m in c("sgpr", "osgpr", "pgpr")) for (w in names(mem)) {
    add(m, paste("control$memory", w), sprintf(calls[[m]], sprintf("list(memory = %s)", mem[[w]])))
  }
  for (w in names(mem)) {
    add("select_inducing", paste("memory", w), sprintf("select_inducing(x, k1, M = 8, memory = %s)",
                                                        mem[[w]]))
  }
  # B. jitter and its cap
  jit <- c("jitter 0" = "list(jitter = 0)", "jitter 1e-12" = "list(jitter = 1e-12)",
           "jitter 1e-2" = "list(jitter = 1e-2)", "jitter 1" = "list(jitter = 1, jitter_cap = 1)",
           "jitter Inf" = "list(jitter = Inf)", "jitter NA" = "list(jitter = NA)",
           "jitter -1e-8" = "list(jitter = -1e-8)", "jitter a string" = "list(jitter = \"a\")",
           "jitter two numbers" = "list(jitter = c(0, 1))",
           "jitter above its cap" = "list(jitter = 0.1, jitter_cap = 0.01)",
           "jitter_cap 0" = "list(jitter_cap = 0)", "jitter_cap 1e-300" = "list(jitter_cap = 1e-300)",
           "jitter_cap Inf" = "list(jitter_cap = Inf)")
  for (m in names(calls)) for (w in names(jit)) add(m, paste("control", w), sprintf(calls[[m]], jit[[w]]))
  # C. the forms of control
  ctl <- c("unnamed entry" = "list(10)", "named and unnamed" = "list(maxit = 5, 3)",
           "maxit 1e10" = "list(maxit = 1e10)", "maxit 0.5" = "list(maxit = 0.5)",
           "maxit TRUE" = "list(maxit = TRUE)", "trace a string" = "list(trace = \"a\")",
           "factr -1" = "list(factr = -1)", "min_gain NA" = "list(min_gain = NA)",
           "control NULL" = "NULL", "control a string" = "\"fast\"",
           "repeated entry" = "list(maxit = 3, maxit = 5)", "empty name" = "setNames(list(5), \"\")")
  for (m in names(calls)) for (w in names(ctl)) add(m, paste("control:", w), sprintf(calls[[m]], ctl[[w]]))
  # D. kernel trees
  kern <- c("32 levels" = "deep(32)", "33 levels" = "deep(33)", "1000 levels" = "deep(1000)",
            "5000 levels built by hand" = "by_hand(5000)", "20 default parts" = "many(20)",
            "product of 1e200 variances" = "kernel_rbf(1, 1e200) * (kernel_rbf(1, 1e200) + k1)",
            "product of 1e-200 variances" = "kernel_rbf(1, 1e-200) * (kernel_rbf(1, 1e-200) + k1)",
            "malformed combination" = "structure(list(op = \"sum\", parts = list(k1)), class = c(\"sparsevgp_kernel_combo\", \"sparsevgp_kernel\"))",
            "combination of non-kernels" = "structure(list(op = \"sum\", parts = list(1, 2)), class = c(\"sparsevgp_kernel_combo\", \"sparsevgp_kernel\"))")
  kcalls <- c(sgpr = "sgpr(x, y, inducing = 8, kernel = %s, control = list(maxit = 10))",
              osgpr = "osgpr(x, y, inducing = 4, orthogonal = 4, kernel = %s, control = list(maxit = 10))",
              pgpr = "pgpr(x, lab, inducing = 8, kernel = %s, control = list(maxit = 10))",
              svgp = "svgp(x, lab, inducing = 8, kernel = %s, control = list(maxit = 10))",
              gpr = "gpr(x, y, kernel = %s, control = list(maxit = 10))")
  for (m in names(kcalls)) for (w in names(kern)) add(m, paste("kernel", w), sprintf(kcalls[[m]], kern[[w]]))
  add("kernel", "rbf(1:3, ard = FALSE)", "kernel_rbf(lengthscale = 1:3, ard = FALSE)")
  add("kernel", "33 levels by +", "deep(32) * k1 + k1")
  add("kernel_matrix", "1000 levels", "kernel_matrix(by_hand(1000), x)")
  add("select_inducing", "33 levels", "select_inducing(x, deep(33), M = 5)")
  # E. objective() and its arguments
  obj <- c("fn(NA)" = "objective(fits$MODEL)$fn(NA)", "fn(1)" = "objective(fits$MODEL)$fn(1)",
           "fn(character)" = "objective(fits$MODEL)$fn(\"a\")",
           "gr(list)" = "{o <- objective(fits$MODEL); o$gr(as.list(o$par))}",
           "fn with Inf" = "{o <- objective(fits$MODEL); o$fn(replace(o$par, 1, Inf))}",
           "fn one too long" = "{o <- objective(fits$MODEL); o$fn(c(o$par, 0))}",
           "fn at par" = "{o <- objective(fits$MODEL); o$fn(o$par)}",
           "gr at par + 0.1" = "{o <- objective(fits$MODEL); o$gr(o$par + 0.1)}",
           "cluster a string" = "objective(fits$MODEL, cluster = \"cl\")",
           "cluster a list" = "objective(fits$MODEL, cluster = list(1, 2))")
  for (m in c("sgpr", "osgpr", "pgpr", "svgp", "gpr")) for (w in names(obj)) {
    add(m, paste("objective:", w), gsub("MODEL", m, obj[[w]], fixed = TRUE))
  }
  add("objective", "a list, not a fit", "objective(list(a = 1))")
  # F. interrupts in every phase (the test hooks)
  hooks <- c(start = "list(sparsevgp.interrupt_at = \"start\")",
             selection = "list(sparsevgp.interrupt_at = \"selection\")",
             reselection = "list(sparsevgp.interrupt_at = \"reselection\")",
             "c updates" = "list(sparsevgp.interrupt_at = \"c_update\")",
             "3rd evaluation" = "list(sparsevgp.interrupt_after = 3L)")
  icalls <- c(sgpr = "sgpr(x, y, inducing = 8)", osgpr = "osgpr(x, y, inducing = 4, orthogonal = 4)",
              pgpr = "pgpr(x, lab, inducing = 8)", svgp = "svgp(x, lab, inducing = 8)",
              gpr = "gpr(x, y)", odvgp = "odvgp(x, y, inducing = 4, orthogonal = 4)",
              "svgp Adam" = "svgp(x, y, likelihood = \"gaussian\", inducing = 6, batch_size = 20, control = list(maxit = 30))",
              "svgp natgrad" = "svgp(x, lab, inducing = 6, control = list(optimizer = \"natgrad\", maxit = 30))")
  for (m in names(icalls)) for (w in names(hooks)) {
    add(m, paste("interrupt:", w), sprintf("with_hook(%s, %s)", hooks[[w]], icalls[[m]]))
  }
  add("reinit_inducing", "interrupt: 3rd evaluation",
      "with_hook(list(sparsevgp.interrupt_after = 3L), reinit_inducing(fits$sgpr, max_passes = 2))")
  # G. time limits and fatal errors
  tl <- c(sgpr = "limited({d <- big(); sgpr(d$x, d$y, inducing = 150, control = list(min_gain = 0, factr = 1))})",
          osgpr = "limited({d <- big(); osgpr(d$x, d$y, inducing = 60, orthogonal = 60, control = list(min_gain = 0, factr = 1))})",
          pgpr = "limited({d <- big(); pgpr(d$x, factor(d$y > 0), inducing = 100)})",
          svgp = "limited({d <- big(); svgp(d$x, factor(d$y > 0), inducing = 60)})",
          gpr = "limited({d <- big(1500); gpr(d$x, d$y)})",
          select_inducing = "limited({d <- big(20000); select_inducing(d$x, k1, M = 500)})")
  for (m in names(tl)) add(m, "setTimeLimit(elapsed = 0.3)", tl[[m]])
  fat <- c("time limit in an evaluation" = "reached elapsed time limit",
           "no memory in an evaluation" = "cannot allocate vector of size 9.9 Gb")
  for (m in c("sgpr", "pgpr", "svgp")) for (w in names(fat)) {
    add(m, w, sprintf("with_hook(list(sparsevgp.evaluation_hook = function(n) if (n > 2) stop(\"%s\")), %s)",
                      fat[[w]], icalls[[m]]))
  }
  # H. a cluster that is not one, or not there
  cls <- c("a string" = "\"cl\"", "a number" = "2", "an empty list" = "structure(list(), class = \"cluster\")",
           "a stopped cluster" = "{cc <- parallel::makePSOCKcluster(1L); parallel::stopCluster(cc); cc}")
  for (m in c("sgpr", "pgpr", "svgp", "osgpr")) for (w in names(cls)) {
    add(m, paste("cluster", w), sprintf("%s(x, %s, inducing = 6, control = list(maxit = 5), cluster = %s)",
                                        m, if (m %in% c("pgpr", "svgp")) "lab" else "y", cls[[w]]))
  }
  add("sgpr", "optimize = FALSE with a live cluster (nothing sent)",
      "{cc <- parallel::makePSOCKcluster(1L); on.exit(parallel::stopCluster(cc)); sgpr(x, y, inducing = 6, optimize = FALSE, cluster = cc)}")
  add("predict", "cluster stopped", "{cc <- parallel::makePSOCKcluster(1L); parallel::stopCluster(cc); predict(fits$sgpr, x, cluster = cc)}")
  add("gpr", "cluster", "gpr(x, y, cluster = 2)")
  add("odvgp", "cluster", "odvgp(x, y, cluster = 2)")
  # I. warm starts
  st <- c("start on 3 columns" = "sgpr(cbind(x, 1), y, start = fits$sgpr)",
          "start with more inducing inputs than rows" = "sgpr(x[1:6, ], y[1:6], start = fits$sgpr)",
          "start of another model" = "sgpr(x, y, start = fits$gpr)",
          "osgpr start on 1 column" = "osgpr(x[, 1], y, start = fits$osgpr)",
          "osgpr start, fewer rows" = "osgpr(x[1:7, ], y[1:7], start = fits$osgpr)",
          "pgpr start on 1 column" = "pgpr(x[, 1], lab, start = fits$pgpr)",
          "pgpr start, other rows" = "pgpr(x[1:30, ], lab[1:30], start = fits$pgpr)",
          "svgp start on 3 columns" = "svgp(cbind(x, 0), lab, start = fits$svgp)",
          "gpr start on 1 column" = "gpr(x[, 1], y, start = fits$gpr)",
          "start a list" = "sgpr(x, y, start = list(params = 1))",
          "update with other data" = "update(fits$sgpr, x = x[1:30, ], y = y[1:30])",
          "update, optimize = FALSE" = "update(fits$osgpr, optimize = FALSE)")
  for (w in names(st)) add("start", w, st[[w]])
  # J. plots, simulations, predictions
  pl <- c("n = -1" = "plot(fits$MODEL, n = -1)", "n = 1" = "plot(fits$MODEL, n = 1)",
          "n = 1.5" = "plot(fits$MODEL, n = 1.5)", "n = NA" = "plot(fits$MODEL, n = NA)",
          "n = 1e7" = "plot(fits$MODEL, n = 1e7)", "n = 20" = "plot(fits$MODEL, n = 20)")
  for (m in c("sgpr", "pgpr", "svgp")) for (w in names(pl)) {
    add(m, paste("plot", w), sprintf("{pdf(NULL); on.exit(dev.off()); %s}", gsub("MODEL", m, pl[[w]], fixed = TRUE)))
  }
  sim <- c("multiclass response" = "simulate(fits$multi, nsim = 2, seed = 1)",
           "multiclass latent" = "simulate(fits$multi, type = \"latent\")",
           "multiclass joint" = "simulate(fits$multi, joint = TRUE)",
           "nsim 2^31" = "simulate(fits$sgpr, nsim = 2^31)",
           "nsim 1e9" = "simulate(fits$sgpr, nsim = 1e9)",
           "max_joint -1" = "simulate(fits$sgpr, max_joint = -1)",
           "seed NA" = "simulate(fits$sgpr, seed = NA)")
  for (w in names(sim)) add("simulate", w, sim[[w]])
  pr <- c("10^5 rows" = "predict(fits$MODEL, matrix(runif(2e5), 1e5, 2))",
          "full_cov on 2000 rows" = "predict(fits$MODEL, matrix(runif(4000), 2000, 2), full_cov = TRUE)")
  for (m in c("sgpr", "osgpr", "pgpr", "svgp", "gpr")) for (w in names(pr)) {
    add(m, paste("predict", w), gsub("MODEL", m, pr[[w]], fixed = TRUE))
  }
  # K. sizes of the inducing set
  ind <- c("inducing = 2^31" = "sgpr(x, y, inducing = 2^31)",
           "inducing = 1e300" = "sgpr(x, y, inducing = 1e300)",
           "inducing = TRUE" = "sgpr(x, y, inducing = TRUE)",
           "inducing = \"8\"" = "sgpr(x, y, inducing = \"8\")",
           "inducing = list()" = "sgpr(x, y, inducing = list())",
           "inducing a data frame" = "sgpr(x, y, inducing = as.data.frame(x[1:5, ]))",
           "threshold Inf" = "sgpr(x, y, threshold = Inf)",
           "threshold 1e300" = "sgpr(x, y, threshold = 1e300)",
           "M = 2^31" = "sgpr(x, y, inducing = \"greedy\", M = 2^31)",
           "pgpr inducing = 2^31" = "pgpr(x, lab, inducing = 2^31)",
           "osgpr orthogonal = 2^31" = "osgpr(x, y, inducing = 3, orthogonal = 2^31)",
           "svgp inducing = 2^31" = "svgp(x, lab, inducing = 2^31)",
           "select M = 2^31" = "select_inducing(x, k1, M = 2^31)",
           "select threshold 0 (all points)" = "select_inducing(x, k1, threshold = 0)")
  for (w in names(ind)) add("inducing", w, ind[[w]])
  tab <- do.call(rbind, out)
  tab$id <- seq_len(nrow(tab))
  tab[, c("id", "model", "what", "code")]
}

# The child side: bad_run_batch() of helper-bad-inputs.R in the
# environment of res_setup(), where a time limit or exhausted memory the
# scenario causes itself is a clean error.
res_run_batch <- function(items, out) {
  bad_run_batch(items, out, setup = res_setup,
                expected = "time limit|cannot allocate vector of size 9.9 Gb")
}
