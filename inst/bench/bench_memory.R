# bench_memory.R: whether a fit stays within control$memory at every stage,
# and what the workspace of the collapsed bounds costs and saves.
#
# Parts (each configuration in a fresh Rscript process, bench_child.R):
#   stages   a default sgpr() fit (and pgpr(), osgpr() at the smaller N) on N
#            rows of D = 8 inputs with control$memory = each budget, a few
#            optimiser evaluations per run (maxit; memory does not depend
#            on their number). The peak resident memory of every stage (the
#            search for starting values, each selection, each optimiser
#            run, the final evaluation with the report, summary(), predict()
#            at the N training inputs) is read from VmHWM after resetting it
#            (/proc/self/clear_refs) as the stage begins; `growth_mb` is that
#            peak minus the resident memory just before the fit (the data
#            already made). The target: growth <= budget + 32 MB.
#   eval     one all-data evaluation (bound and gradient) at N = 1e6, M =
#            100, D = 8 with the default budget and with budgets of 256 MB
#            and 8 GB, against the BLAS floor of its dense work (one M x N
#            triangular solve and one M x M x N rank update, dtrsm and
#            dsyrk) plus the kernel evaluations; user and system CPU time
#            of the evaluations after the first (the workspace is then
#            allocated).
#   piece    one evaluation at N = 5e4, M = 500, D = 8: the default budget
#            against memory = "8GB" (both one piece when the default allows).
# Usage (from the package root, with sparsevgp installed):
#   R_LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/R/lib \
#     OPENBLAS_NUM_THREADS=1 Rscript inst/bench/bench_memory.R [stages|eval|piece|all]
#     [--N=2e5,1e6] [--budgets=50MB,256MB,1GB] [--maxit=3] [--lib=<library>]
# Results: inst/bench/results/bench_memory.txt. Not run by R CMD check.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "bench_child.R"))
suppressMessages(library(sparsevgp))

rss_mb <- function() {
  s <- readLines("/proc/self/status")
  as.numeric(sub("^VmRSS:\\s*([0-9]+) kB$", "\\1", grep("^VmRSS:", s, value = TRUE))) / 1024
}
reset_hwm <- function() cat("5", file = "/proc/self/clear_refs")

truth <- function(x) {
  sin(2 * pi * x[, 1]) + cos(4 * x[, 2]) + x[, 3]^2 + 0.3 * x[, 4] +
    0.5 * sin(3 * x[, 5]) + 0.4 * x[, 5] * x[, 6]
}
make_data <- function(N, D = 8L) {
  set.seed(1)
  x <- matrix(stats::runif(N * D), N, D)
  list(x = x, y = truth(x) + stats::rnorm(N, sd = 0.3))
}
cpu <- function(t) c(user = t[["user.self"]], sys = t[["sys.self"]])

# ---- one configuration (a child process) ------------------------------------
if ("--child" %in% args) {
  part <- opt("part", "stages")
  N <- as.numeric(opt("N", "2e5"))
  if (part == "stages") {
    model <- opt("model", "sgpr")
    budget <- opt("budget", "256MB")
    maxit <- as.integer(opt("maxit", "3"))
    d <- make_data(N)
    if (model == "pgpr") d$y <- factor(d$y > stats::median(d$y))
    # what making the data left behind goes first (glibc's heap too)
    invisible(gc())
    invisible(sparsevgp:::.ffi_release())
    base <- rss_mb()
    stages <- list()
    current <- "constructor"
    reset_hwm()
    close_stage <- function(next_stage) {
      stages[[length(stages) + 1L]] <<- data.frame(stage = current, peak_mb = vm_hwm_mb(),
                                                   stringsAsFactors = FALSE)
      current <<- next_stage
      reset_hwm()
    }
    options(sparsevgp.stage_hook = close_stage)
    ctl <- list(memory = budget, maxit = maxit, trace = 0)
    t0 <- proc.time()
    fit <- suppressWarnings(switch(model,
      sgpr = sgpr(d$x, d$y, control = ctl),
      pgpr = pgpr(d$x, d$y, inducing = 100, control = c(ctl, list(inner_max = 2L, outer_max = 2L))),
      osgpr = osgpr(d$x, d$y, inducing = 50, orthogonal = 50, control = ctl)))
    tfit <- proc.time() - t0
    close_stage("summary")
    s <- summary(fit)
    close_stage("predict at the N inputs")
    p <- predict(fit, d$x)
    close_stage("end")
    options(sparsevgp.stage_hook = NULL)
    st <- do.call(rbind, stages)
    st$growth_mb <- st$peak_mb - base
    limit <- sparsevgp:::.check_memory(budget) / 2^20 + 32
    for (i in seq_len(nrow(st))) {
      cat(sprintf("RESULT\t%s\t%g\t%s\t%d\t%s\t%.1f\t%.1f\t%s\t%.1f\t%.1f\n", model, N, budget,
                  nrow(fit$params$Z), st$stage[i], st$peak_mb[i], st$growth_mb[i],
                  if (st$growth_mb[i] <= limit) "yes" else "NO",
                  tfit[["user.self"]], tfit[["sys.self"]]))
    }
    quit(save = "no")
  }
  # an sgpr model on N rows with M inducing inputs at the budget, and the
  # CPU time of one evaluation (bound and gradient) after the first, which
  # allocates the workspace
  timed_model <- function(N, M, budget) {
    d <- make_data(N)
    Z <- d$x[seq(1, N, length.out = M), , drop = FALSE]
    fit <- sgpr(d$x, d$y, inducing = Z, kernel = kernel_rbf(rep(0.5, 8), 1), noise = 0.1,
                optimize = FALSE, control = list(memory = if (budget == "default") NULL else budget))
    o <- objective(fit)
    invisible(o$gr(o$par))
    reps <- as.integer(opt("reps", "3"))
    t0 <- proc.time()
    for (r in seq_len(reps)) invisible(o$gr(o$par + r * 1e-3))
    list(d = d, Z = Z, fit = fit, plan = sparsevgp:::.collapsed_plan(fit, M),
         te = (proc.time() - t0) / reps)
  }
  if (part == "eval") {
    M <- as.integer(opt("M", "100"))
    budget <- opt("budget", "default")
    tm <- timed_model(N, M, budget)
    d <- tm$d
    Z <- tm$Z
    fit <- tm$fit
    plan <- tm$plan
    te <- tm$te
    # the BLAS floor of the dense work and the kernel evaluations
    k <- sparsevgp:::.kernel_at(fit$kernel, fit$params)
    L <- t(chol(kernel_matrix(k, Z) + diag(1e-8, M)))
    rows <- min(N, 50000)
    t1 <- proc.time()
    for (b in sparsevgp:::.row_blocks(N, rows)) {
      K <- kernel_matrix(k, Z, d$x[b, , drop = FALSE])
    }
    tk <- proc.time() - t1
    t2 <- proc.time()
    for (b in sparsevgp:::.row_blocks(N, rows)) {
      A <- forwardsolve(L, kernel_matrix(k, Z, d$x[b, , drop = FALSE]))
      AA <- tcrossprod(A)
    }
    tf <- proc.time() - t2 - tk
    cat(sprintf("RESULT\t%g\t%d\t%s\t%s\t%d\t%.0f\t%.2f\t%.3f\t%.2f\t%.2f\t%.2f\t%s\n", N, M,
                budget, plan$where, plan$rows, plan$bytes / 2^20, te[["user.self"]] + te[["sys.self"]],
                te[["sys.self"]], tf[["user.self"]] + tf[["sys.self"]],
                tk[["user.self"]] + tk[["sys.self"]],
                (te[["user.self"]] + te[["sys.self"]]) /
                  (tf[["user.self"]] + tf[["sys.self"]] + tk[["user.self"]] + tk[["sys.self"]]),
                blas_name()))
    quit(save = "no")
  }
  if (part == "piece") {
    M <- as.integer(opt("M", "500"))
    budget <- opt("budget", "default")
    tm <- timed_model(N, M, budget)
    fit <- tm$fit
    plan <- tm$plan
    te <- tm$te
    cat(sprintf("RESULT\t%g\t%d\t%s\t%s\t%.0f\t%.2f\t%.3f\t%.0f\t%s\n", N, M, budget, plan$where,
                fit$control$memory / 2^20, te[["user.self"]] + te[["sys.self"]], te[["sys.self"]],
                vm_hwm_mb(), blas_name()))
    quit(save = "no")
  }
  stop("unknown part")
}

# ---- the parent ---------------------------------------------------------------
part <- if (length(args) && !grepl("^--", args[1L])) args[1L] else "all"
cat("sparsevgp", format(utils::packageVersion("sparsevgp")), "on", R.version.string, "\n")
cat(sprintf("%s, %d processors, physical memory %.1f GB, default budget %.0f MB\n",
            sub("^model name\\s*:\\s*", "",
                grep("^model name", readLines("/proc/cpuinfo"), value = TRUE)[1L]),
            parallel::detectCores(), sparsevgp:::.physical_memory() / 2^30,
            sparsevgp:::.default_memory() / 2^20))
if (part %in% c("stages", "all")) {
  Ns <- as.numeric(strsplit(opt("N", "2e5,1e6"), ",")[[1L]])
  budgets <- strsplit(opt("budgets", "50MB,256MB,1GB"), ",")[[1L]]
  maxit <- opt("maxit", "3")
  conf <- list()
  for (N in Ns) for (b in budgets) {
    conf[[length(conf) + 1L]] <- c(part = "stages", model = "sgpr", N = N, budget = b)
  }
  for (m in c("pgpr", "osgpr")) {
    conf[[length(conf) + 1L]] <- c(part = "stages", model = m, N = min(Ns), budget = "256MB")
  }
  res <- run_children(
    lapply(conf, function(cf) c(sprintf("--part=%s", cf[["part"]]), sprintf("--model=%s", cf[["model"]]),
                                 sprintf("--N=%s", cf[["N"]]), sprintf("--budget=%s", cf[["budget"]]),
                                 sprintf("--maxit=%s", maxit))),
    vapply(conf, paste, "", collapse = " "),
    c("model", "N", "budget", "M", "stage", "peak_mb", "growth_mb", "within", "fit_user_s",
      "fit_sys_s"),
    c("model", "budget", "stage", "within"))
  cat("\nPeak memory growth by stage (MB above the resident memory before the fit; within: <= budget + 32 MB)\n")
  print(res[, c("model", "N", "budget", "M", "stage", "growth_mb", "within")], row.names = FALSE)
  agg <- stats::aggregate(growth_mb ~ model + N + budget, res, max)
  cat("\nLargest growth of any stage:\n")
  print(agg, row.names = FALSE)
}
if (part %in% c("eval", "all")) {
  conf <- list(c("default", "1e6"), c("256MB", "1e6"), c("8GB", "1e6"))
  res <- run_children(
    lapply(conf, function(cf) c("--part=eval", sprintf("--budget=%s", cf[1L]),
                                 sprintf("--N=%s", cf[2L]))),
    vapply(conf, paste, "", collapse = " "),
    c("N", "M", "budget", "where", "rows", "work_mb", "eval_cpu_s", "eval_sys_s", "floor_dense_s",
      "kernel_s", "ratio", "blas"),
    c("budget", "where", "blas"))
  cat("\nOne all-data evaluation (bound and gradient) against the BLAS floor of its dense work plus the kernel evaluations:\n")
  print(res, row.names = FALSE)
}
if (part %in% c("piece", "all")) {
  conf <- list("default", "8GB")
  res <- run_children(
    lapply(conf, function(cf) c("--part=piece", sprintf("--budget=%s", cf), "--N=5e4")),
    unlist(conf),
    c("N", "M", "budget", "where", "memory_mb", "eval_cpu_s", "eval_sys_s", "peak_mb", "blas"),
    c("budget", "where", "blas"))
  cat("\nOne evaluation at N = 5e4, M = 500: the default budget against 8 GB:\n")
  print(res, row.names = FALSE)
  cat(sprintf("default / 8GB CPU time: %.3f\n", res$eval_cpu_s[1L] / res$eval_cpu_s[2L]))
}
