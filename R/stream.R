# Where an evaluation of a collapsed bound runs, and the budget it runs in.
#
# The collapsed bounds of sgpr, pgpr and osgpr are sums over the data
# points of M x M and M-vector statistics followed by M x M algebra
# (Titsias 2009), so one path serves all three (src/bound_stream.c):
#   pass 1  over the rows: Kuf, A = L^-1 Kuf Lambda^-1/2 and the sums A A',
#           A Lambda^-1/2 ytil, sum ytil^2 / lambda, sum k_nn / lambda,
#           the residual variances and sum log lambda;
#   value   B = I + A A', the bound and the M x M adjoint pieces (the SGPR
#           bound, or the orthogonal bounds of osgpr on the block factor of
#           K(W, W), W = rbind(Z, O));
#   pass 2  over the rows again: each row's column of dF/dKuf and its
#           per-point adjoints, contracted at once with the kernel
#           derivatives and added up.
# A model says only what its points contribute, through two generics:
#   .targets(fit, params)   per-point noise lambda (one number when it is
#                           the same for all points), targets y with a
#                           common shift (ytil = y - shift), `sums` of
#                           model terms over the points (pgpr's terms in
#                           c) and `per_point` (whether .targets_grad()
#                           needs each point's adjoint of lambda);
#   .targets_grad(fit, params, t, adj)
#                           the gradient blocks of the model's own
#                           parameters (mean, noise) from the adjoints
#                           summed over the points.
# Both work on any fit restricted to a subset of the rows, so the same code
# runs on the whole data in one process and on the shares held by the
# workers of a cluster (R/cluster.R).
#
# .collapsed_plan() is the one place that decides where an evaluation runs:
#   "memory"  one chunk of all rows: K(W, x) and A of pass 1 stay in the
#             workspace and pass 2 reuses them (no kernel matrix is
#             computed twice);
#   "chunks"  chunks of `rows` rows within control$memory: pass 2
#             recomputes each chunk's K(W, x) and A;
#   "cluster" the workers of fit$cluster each run "memory" or "chunks" on
#             their share within the same budget, and the master does the
#             M x M algebra.
# OpenMP threads (the option sparsevgp.threads) split each chunk's columns
# in every case. For a single kernel both passes run in C over all rows
# with one workspace allocated once per fit (.pass_work(); nothing is
# allocated per chunk or per evaluation, so memory stays within the budget
# and no time goes to the system's page faults). A sum or product of
# kernels contracts its adjoints in R (R/kernels.R), so its passes loop
# over the chunks in R (.combo_pass1(), .combo_pass2()).
#
# Another collapsed model plugs in by giving .targets() and
# .targets_grad() methods; if its bound adds further sums over row blocks
# (as a Vecchia model of the residual does, over blocks of neighbours), it
# adds them in the model's evaluate method by calling .collapsed_plan() for
# the chunking and summing its own block terms over plan$blocks (or, on a
# cluster, in a .shard_* function of its own, see R/cluster.R), next to
# .collapsed_eval().

# ---- the memory budget ------------------------------------------------------

# The default budget: .memory_fraction of the machine's physical memory,
# within [.memory_floor, .memory_cap]; .memory_fallback when the physical
# memory cannot be read. The cap keeps a default fit from claiming a large
# part of a big machine; one evaluation in one piece of N = 1e6 points and
# M = 100 inducing inputs needs about 2.4 GB, beyond which chunks of a few
# tens of MB cost at most a third more arithmetic (a second kernel matrix
# and triangular solve per chunk), see ?scaling.
.memory_fraction <- 1 / 8
.memory_floor <- 256 * 2^20
.memory_cap <- 2 * 2^30
.memory_fallback <- 1 * 2^30

# Chunks no larger than this (bytes of workspace) when the data do not fit
# in one piece: large enough that the BLAS works at full speed, small enough
# to stay in cache.
.chunk_bytes <- 64 * 2^20

.default_memory <- function() {
  ram <- .physical_memory()
  if (!isTRUE(is.finite(ram) && ram > 0)) return(.memory_fallback)
  min(.memory_cap, max(.memory_floor, .memory_fraction * ram))
}

# The physical memory in bytes (Linux: /proc/meminfo and a cgroup limit;
# macOS: sysctl), or NA.
.physical_memory <- function() {
  ram <- NA_real_
  if (file.exists("/proc/meminfo")) {
    m <- tryCatch(readLines("/proc/meminfo", n = 1L), error = function(e) "")
    kb <- suppressWarnings(as.numeric(sub("^MemTotal:\\s*([0-9]+) kB.*$", "\\1", m)))
    if (isTRUE(kb > 0)) ram <- kb * 1024
    for (f in c("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
      lim <- suppressWarnings(tryCatch(as.numeric(readLines(f, n = 1L)),
                                       error = function(e) NA_real_))
      if (isTRUE(lim > 0 && lim < ram)) ram <- lim
    }
  } else if (identical(Sys.info()[["sysname"]], "Darwin")) {
    b <- suppressWarnings(tryCatch(as.numeric(system2("sysctl", c("-n", "hw.memsize"),
                                                      stdout = TRUE, stderr = FALSE)),
                                   error = function(e) NA_real_))
    if (isTRUE(b > 0)) ram <- b
  }
  ram
}

# control$memory (or select_inducing()'s `memory`): a number of bytes or a
# string such as "512MB" or "2GB" (powers of 1024); NULL gives the default.
# Returns bytes. `name` is the argument in messages. Called once, when the
# model is built: the fit holds the bytes.
.check_memory <- function(memory, name = "control$memory") {
  if (is.null(memory)) return(.default_memory())
  units <- c(B = 1, KB = 2^10, MB = 2^20, GB = 2^30, TB = 2^40)
  bytes <- NA_real_
  if (is.numeric(memory) && length(memory) == 1L) {
    bytes <- memory
  } else if (is.character(memory) && length(memory) == 1L && !is.na(memory)) {
    up <- toupper(memory)
    m <- regmatches(up, regexec("^\\s*([0-9.E+]+)\\s*([KMGT]?B)?\\s*$", up))[[1L]]
    if (length(m)) {
      bytes <- suppressWarnings(as.numeric(m[2L])) * units[[if (nzchar(m[3L])) m[3L] else "B"]]
    }
  }
  if (!isTRUE(is.finite(bytes) && bytes >= 1)) {
    stop(sprintf("'%s' must be a positive number of bytes or a string such as \"512MB\" or \"2GB\"",
                 name), call. = FALSE)
  }
  as.double(bytes)
}

# The one budget formula: how many rows fit in `memory` bytes when each row
# needs `per_row` bytes on top of `fixed` bytes; at least `at_least`, at
# most `n`. Used by the passes of the collapsed bounds (.collapsed_plan())
# and by greedy selection (.select_rows(), R/inducing.R).
.budget_rows <- function(memory, per_row, fixed = 0, n = Inf, at_least = 1) {
  r <- floor((memory - fixed) / per_row)
  if (!is.finite(r)) r <- n
  min(n, max(at_least, r))
}

# The format of a number of bytes in messages.
.fmt_bytes <- function(b) {
  u <- c("bytes", "KB", "MB", "GB", "TB")
  i <- max(1L, min(length(u), floor(log(max(b, 1), 1024)) + 1L))
  if (i == 1L && b == 1) return("1 byte")
  sprintf("%s %s", format(b / 1024^(i - 1L), digits = 3L), u[i])
}

# ---- threads ----------------------------------------------------------------

#' Threads and memory of the collapsed bounds
#'
#' The collapsed bounds of \code{\link{sgpr}()}, \code{\link{pgpr}()} and
#' \code{\link{osgpr}()} are sums over the observations of \eqn{M \times M}{M x M} statistics
#' (Titsias 2009), and are computed accordingly. One rule decides where an
#' evaluation runs:
#' \itemize{
#'   \item \strong{in one piece}, when the work of one evaluation fits in
#'     \code{control$memory}: about \eqn{8 N (3 M + 2 D + 7)}{8 N (3 M + 2 D + 7)} bytes
#'     for \eqn{N} rows, \eqn{M} inducing inputs and \eqn{D} input columns
#'     (for example 0.6 GB at \eqn{N = 5 \times 10^4}{N = 5e4}, \eqn{M = 500},
#'     \eqn{D = 8}). The kernel matrix is computed once per evaluation.
#'   \item \strong{in chunks of rows} otherwise: the bound and its gradient
#'     are accumulated over chunks of rows that fit the budget (at most 64 MB
#'     of work each), so that memory grows as
#'     \eqn{O(M^2 + \mathrm{chunk} \cdot M)}{O(M^2 + chunk M)} beside the data. Each evaluation then
#'     computes the kernel matrix and the triangular solve of a chunk twice
#'     (once for the bound and once for its gradient), at most a third more
#'     arithmetic than in one piece. The results agree with one piece to
#'     rounding.
#' }
#' The work space is allocated once per fit and reused by every evaluation
#' (for a single kernel; a sum or product of kernels allocates its chunks
#' per evaluation). By default \code{control$memory} is an eighth of the
#' machine's physical memory (read from \file{/proc/meminfo}, a cgroup
#' limit, or \command{sysctl} on macOS), at least 256 MB and at most 2 GB (1 GB when the
#' physical memory cannot be read); give a number of bytes or a string such
#' as \code{"500MB"} or \code{"8GB"} to set it. The peak memory of a fit
#' grows by at most the budget plus a constant (the \eqn{M \times M}{M x M} algebra and
#' R's own work, about 32 MB at \eqn{N = 10^6}{N = 1e6} and \eqn{M = 100}) beyond the
#' data, at every stage: starting values, selection, every optimiser run,
#' the summary and prediction (\code{inst/bench/bench_memory.R} measures
#' it; a learned noise model and \code{pgpr()} hold a few more vectors of
#' length \eqn{N}). The \eqn{M \times M}{M x M} matrices come on top of the budget: an
#' error says so when the budget cannot hold them with at least one row.
#'
#' Within a chunk (or the one piece), the kernel matrix, the triangular
#' solves, products, per-observation adjoints and their contraction into
#' the gradient run on \code{getOption("sparsevgp.threads")} OpenMP threads
#' (when the package was built with OpenMP). The default is half the
#' processors OpenMP reports (so 1 on a two-core machine), within
#' \code{OMP_THREAD_LIMIT} and \code{OMP_NUM_THREADS}. Each thread calls the
#' BLAS on its own columns: with a multi-threaded BLAS such as OpenBLAS,
#' set its threads to 1 (\code{OPENBLAS_NUM_THREADS=1}) when using more
#' than one here, or the two will oversubscribe the processors. Sums are
#' then added in another order, which changes results at the level of
#' rounding only.
#'
#' \strong{On a cluster}: \code{sgpr(..., cluster = cl)},
#' \code{pgpr(..., cluster = cl)}, \code{osgpr(..., cluster = cl)} and
#' \code{svgp(..., cluster = cl)} with a cluster from
#' \code{parallel::makeCluster()} (PSOCK, which can span machines, or FORK)
#' split the data once into one share per worker, which stays there while
#' the model is fitted; each evaluation sends the parameters and the
#' \eqn{M \times M}{M x M} factors to the workers and receives their statistics and gradient
#' pieces, and the master does the \eqn{M \times M}{M x M} algebra. Each worker
#' computes its share in one piece or in chunks within \code{control$memory}
#' by the rule above. For \code{pgpr()} the workers also hold the local
#' parameters \eqn{c} of their rows and compute their closed-form updates;
#' the master receives the \eqn{N} values of \eqn{c} once per selection
#' pass of the double loop (for the \eqn{\theta}{theta}-weighted
#' re-selection, which runs on the master, and for the fit). For
#' \code{svgp()} the workers return their expected log-likelihood with its
#' gradient and the master adds the KL divergence; with \code{batch_size}
#' the master draws each minibatch as in one process (so \code{set.seed()}
#' reproduces the fit) and sends each worker the rows of the minibatch in
#' its share. Natural-gradient steps (\code{control$optimizer =
#' "natgrad"}) do not run on a cluster. The workers load the package from
#' the library the master loaded it from. A worker that fails or dies stops
#' the fit with an error of class \code{sparsevgp_cluster_error}, never a
#' wrong value; the cluster is not stopped by the fit, and the shares are
#' removed from the workers when the fit ends. With \code{optimize = FALSE}
#' the model is built in this process and no data are sent; evaluate it on
#' a cluster with \code{\link{objective}(fit, cluster = cl)}. Ctrl-C during
#' an evaluation on the workers takes effect when their answer arrives, so
#' that the cluster stays usable. Results equal those of one process to
#' rounding (sums are added in another order), so an optimiser can end at
#' slightly different parameters along directions where the bound is
#' flat.
#'
#' \strong{Predictions on a cluster}: \code{predict(fit, newdata, cluster =
#' cl)} and \code{fitted(fit, cluster = cl)} split the rows over the
#' workers, which receive the fitted posterior (not the training data; for
#' \code{\link{gpr}()} the training inputs too). The full covariance
#' (\code{full_cov = TRUE}) is computed on the master.
#'
#' \strong{Data that never pass through the master}: with \code{cluster =
#' cl} the master holds all of the data first. When the data do not fit on
#' one machine, or live on several hosts, \code{\link{shards}(cl, load)}
#' lets each worker load its own rows (\code{load(i)} reads worker
#' \eqn{i}'s files, say), and \code{sgpr(y ~ x1 + x2, data = sh)} fits on
#' them: the formula is applied on the workers (factor levels agreed first),
#' the optimiser's scaling and starting values come from counts, means,
#' sums of squares and ranges that the workers send, greedy selection runs
#' in rounds (each worker proposes its row of largest residual variance,
#' the master takes the largest: the selection of all rows, one exchange of
#' \eqn{O(M + D)}{O(M + D)} numbers per inducing input), the schedule of
#' \code{\link{sgpr}()} runs on a random subsample of at most 20 000 rows
#' that the workers send, and the stage on all rows evaluates on the
#' workers as with \code{cluster}. The master's memory is bounded by that
#' subsample and the \eqn{M \times M}{M x M} algebra whatever \eqn{N}; the fit it
#' keeps holds \eqn{O(M^2 + M D)}{O(M^2 + M D)} numbers (no rows), so
#' \code{predict(fit, newdata)} runs on the master, and
#' \code{fitted(fit, cluster = sh)}, \code{residuals(fit, cluster = sh)} and
#' \code{objective(fit, cluster = sh)} run on the workers. Each worker
#' keeps its data frame and the inputs built from it (about twice its
#' rows) and, during selection, an \eqn{n_i \times M}{n_i x M} factor within
#' its budget. The workers of one host share \code{control$memory}: each
#' worker's budget (for its chunks and its factor) is \code{control$memory}
#' divided by the number of workers on its host, which \code{shards()}
#' counts from the host names the workers report. Known per-point noise
#' variances (\code{noise = s2}), prior weights, \code{subset} and
#' \code{offset} are expressions in the workers' columns, evaluated there;
#' \code{fitted(fit, cluster = sh)} and \code{residuals(fit, cluster = sh)}
#' (of classifiers too) bring \eqn{N} numbers to the master. Two hosts, with PSOCK over ssh (the package
#' installed on each, each host reading its own files):
#' \preformatted{cl <- parallel::makeCluster(c("host1", "host2"))
#' sh <- shards(cl, function(i) readRDS(sprintf("/data/part-\%03d.rds", i)))
#' fit <- sgpr(y ~ ., data = sh)}
#' \code{parallel::makeCluster(2)} is the stand-in on one machine (see the
#' example of \code{\link{shards}()}). A worker that dies stops the fit with an
#' error of class \code{sparsevgp_cluster_error} whose \code{fit} element
#' holds the parameters reached; \code{update(e$fit, cluster = cl2)} loads
#' the rows on a new cluster with the load function the shards keep and
#' resumes from them. \code{sgpr()} (with one learned noise variance),
#' \code{pgpr()} and \code{svgp()} (two classes or one latent function,
#' full batch or minibatches) take shards: the classifiers start, select
#' and run their schedule on the same subsample, then update \eqn{c}
#' (pgpr) or \eqn{q(u)} (svgp) on all rows on the workers, or run Adam on
#' minibatches of all rows (see \code{\link{shards}}); \code{osgpr()} takes
#' them as \code{sgpr()} does. \code{sgpr(neighbours
#' = K)} on shards takes each row's neighbours from its own shard (each
#' worker orders and searches its own rows) and predicts new points on the
#' workers, \code{predict(fit, newdata, cluster = sh)}. Measured
#' (\code{inst/bench/bench_shards.R}, \eqn{N = 10^6}{N = 1e6}, \eqn{D = 8}, two
#' local workers, OpenBLAS on one thread): the master peaked at 194 MB, each
#' worker at 1.7--1.8 GB; the default fit took 42 s elapsed and 76 s of CPU
#' in all, and one evaluation on all rows 5.0 times the elapsed time of
#' one process on a tenth of them.
#'
#' \strong{Measured} (\code{inst/bench/bench_memory.R} and
#' \code{inst/bench/bench_large.R}; OpenBLAS on one thread, one core of an AMD
#' EPYC on a shared 2-core machine, CPU seconds): a default \code{sgpr()}
#' fit on \eqn{N = 10^6}{N = 1e6} points in 8 dimensions took 81 s user and
#' 0.7 s system time (82 s elapsed, 1.25 GB peak with the data); one all-data
#' evaluation (bound and gradient, \eqn{M = 100}) took 2.7 s in chunks and
#' 1.8 s in one piece (\code{memory = "8GB"}), against 0.9 s for its dense
#' work alone (one triangular solve and one rank update) and 1.0 s for its
#' kernel matrices; at \eqn{N = 5 \times 10^4}{N = 5e4}, \eqn{M = 500} the default
#' budget evaluates in one piece as fast as \code{memory = "8GB"}. The
#' peak memory of every stage of a default fit grew by at most the budget
#' plus 32 MB for budgets of 50 MB, 256 MB and 1 GB at
#' \eqn{N = 2 \times 10^5}{N = 2e5} and \eqn{10^6}{1e6}.
#'
#' \code{sgpr(neighbours = K)} (the Vecchia residual, see
#' \code{\link{sgpr}}) is a sum over observations too, of terms that read
#' each observation's \eqn{K} neighbours: its chunks are runs of
#' observations in a spatial order (the leaf order of a kd-tree) that hold
#' their neighbours besides, of \code{floor(memory / (8 (8 M + 2 (K+1)^2)))}
#' rows, and on a cluster each worker holds one such run with its
#' neighbours (its share changes when the neighbours are chosen anew). The
#' per-observation work of its likelihood runs in one thread.
#'
#' The prediction methods and \code{fitted()} work in blocks of rows in any
#' case. Greedy selection of inducing inputs
#' (\code{\link{select_inducing}()}, the default of \code{sgpr()} and
#' \code{pgpr()}) holds an \eqn{N \times M}{N x M} factor; when that (with
#' its workspace) exceeds \code{control$memory} (the same budget and the
#' same rule), it runs on a random subsample of rows that fits, at least
#' \eqn{10 M} of them: the inducing inputs are then chosen from the
#' subsample only, and a \code{threshold} on the trace (a sum over the
#' rows) is scaled by the subsample's share \eqn{n / N}{n / N} (the models
#' without \code{control$memory} use the default budget). Give the inducing
#' inputs to choose them otherwise. The cluster serves \code{sgpr()},
#' \code{pgpr()}, \code{osgpr()}, \code{svgp()} and prediction, not
#' \code{gpr()} or \code{\link{odvgp}()}.
#'
#' @section Measured times:
#' Times depend on the machine, the BLAS R is linked to and its threads,
#' and on what else runs; these were measured with
#' \code{inst/bench/bench_large.R 1000000 short 8} (a default
#' \code{sgpr(x, y)} on \eqn{N = 10^6}{N = 1e6} observations of a smooth
#' function of \eqn{D = 8} inputs; \eqn{M = 100} chosen by the default,
#' the schedule on a subsample of 20 000 rows, then the kernel and noise on
#' all rows: 83 evaluations, test RMSE 0.299 against a noise sd of 0.3), on
#' a two-core x86-64 machine shared with other work, the package on its
#' default one OpenMP thread, with OpenBLAS on one thread
#' (\code{OPENBLAS_NUM_THREADS=1}): 82 s elapsed, 82 s of CPU time (0.7 s of
#' it system time), 1.25 GB peak memory with the data. Before the
#' workspace was kept between evaluations the same fit took 138 s elapsed
#' and 124 s CPU on one thread; OpenBLAS's default two threads then gave
#' 148 s elapsed for 240 s of CPU time: on two cores the second BLAS
#' thread cost more CPU time than it saved elapsed time.
#' Elapsed time is what a user waits; CPU time is what the run costs the
#' machine, and is close to what one core alone would take. The BLAS
#' matters most: one evaluation of the bound and its gradient at
#' \eqn{N = 50\,000}{N = 50 000}, \eqn{M = 500}, \eqn{D = 8} took 38 s with R's
#' reference BLAS and 4.2 s with OpenBLAS on one thread
#' (\code{inst/bench/bench_sgpr.R}); \code{extSoftVersion()["BLAS"]} says
#' which BLAS R uses.
#' @name scaling
#' @aliases sparsevgp.threads
#' @references Titsias, M. (2009). Variational learning of inducing
#'   variables in sparse Gaussian processes. AISTATS.
#' @examples
#' set.seed(1)
#' x <- matrix(runif(2000, -3, 3))
#' y <- sin(2 * x[, 1]) + rnorm(2000, sd = 0.2)
#' # one piece, and chunks within a budget of 1 MB
#' a <- sgpr(x, y, inducing = 20, optimize = FALSE)
#' b <- sgpr(x, y, inducing = a$params$Z, optimize = FALSE,
#'           kernel = a$kernel, noise = a$params$noise,
#'           control = list(memory = "1MB"))
#' c(a$bound, b$bound)
#' a$control$memory     # the default budget, in bytes
#' \donttest{
#' # two workers, each holding half of the data
#' cl <- parallel::makeCluster(2)
#' fit <- sgpr(x, y, inducing = 20, cluster = cl)
#' p <- predict(fit, x[1:5, , drop = FALSE], cluster = cl)
#' # the bound of a fit evaluated on the workers
#' o <- objective(fit, cluster = cl)
#' -o$fn(o$par)
#' o$release()
#' parallel::stopCluster(cl)
#' fit
#' }
NULL

# The threads of one chunk: the option sparsevgp.threads, by default half
# of what OpenMP reports (at least 1).
.stream_threads <- function() {
  n <- getOption("sparsevgp.threads")
  if (is.null(n)) return(max(1L, .ffi_threads(0L) %/% 2L))
  if (!is.numeric(n) || length(n) != 1L || !is.finite(n) || n < 1 || n != round(n) ||
      n > .Machine$integer.max) {
    stop("the option 'sparsevgp.threads' must be one whole number >= 1", call. = FALSE)
  }
  as.integer(n)
}

# ---- the router -------------------------------------------------------------

# Where an evaluation of a collapsed bound on M inducing inputs over the
# rows of fit$x runs (with `reserve` bytes of the budget kept for results):
# list(where = "memory" | "chunks" | "cluster", rows
# (per chunk; N for one piece), threads, bytes (of the workspace), blocks
# (the row blocks, for code that loops over them in R)). The budget is
# fit$control$memory (parsed once, when the fit was built).
.collapsed_plan <- function(fit, M, reserve = 0) {
  N <- nrow(fit$x)
  D <- ncol(fit$x)
  threads <- .stream_threads()
  memory <- fit$control$memory
  if (is.null(memory)) memory <- .default_memory()
  if (!is.null(fit$cluster)) {
    return(list(where = "cluster", rows = NA_integer_, threads = threads, bytes = 0))
  }
  if (.is_combo(fit$kernel)) {
    # chunks in R: about four chunk x M matrices at once (Kuf, A, dF/dKuf
    # and the contraction's work)
    rows <- .budget_rows(memory, 32 * max(1, M), n = N)
    return(list(where = if (rows >= N) "memory" else "chunks", rows = rows,
                threads = threads, bytes = 32 * max(1, M) * rows,
                blocks = .row_blocks(N, rows)))
  }
  bytes <- function(r) 8 * .ffi_pass_work(M, D, max(1, min(r, N)), threads)
  # affine in the rows once every thread has its columns (64 each, see
  # spv_threads() in src/util.c); an upper bound below that
  ra <- 64 * threads
  w <- function(r) 8 * .ffi_pass_work(M, D, r, threads)
  per_row <- w(ra + 1) - w(ra)
  fixed <- w(ra) - per_row * ra
  # `reserve` bytes of the budget are for the results (a prediction's),
  # unless the rest could not hold chunks of 1024 rows
  if (reserve > 0) memory <- max(memory - reserve, min(memory, fixed + 1024 * per_row))
  if (N == 0L || bytes(N) <= memory) {
    return(list(where = "memory", rows = max(1L, N), threads = threads, bytes = bytes(N),
                blocks = .row_blocks(N, max(1L, N))))
  }
  if (fixed + per_row > memory) {
    stop(sprintf("control$memory (%s) cannot hold the work of one row with M = %d inducing inputs (%s, with its M x M matrices): raise control$memory or use fewer inducing inputs",
                 .fmt_bytes(memory), M, .fmt_bytes(fixed + per_row)), call. = FALSE)
  }
  rows <- .budget_rows(min(memory, max(.chunk_bytes, fixed + 1024 * per_row)), per_row, fixed,
                       n = N)
  list(where = if (rows >= N) "memory" else "chunks", rows = as.integer(rows),
       threads = threads, bytes = bytes(rows), blocks = .row_blocks(N, rows))
}

# The budget under which the plan of M inducing inputs over `rows` rows of
# D columns has chunks of `rows` rows (for tests and benchmarks).
.memory_for_rows <- function(fit, rows, M = nrow(fit$params$Z)) {
  if (.is_combo(fit$kernel)) return(32 * max(1, M) * rows)
  8 * .ffi_pass_work(M, ncol(fit$x), rows, .stream_threads())
}

# The workspace of the C passes for `plan`, from `work` (an environment
# that keeps it between evaluations: a fit's `.work`, a worker's share) or
# new. Reused while the sizes match.
.pass_work <- function(work, plan, M, D) {
  key <- c(M, D, plan$rows, plan$threads)
  n <- .ffi_pass_work(M, D, plan$rows, plan$threads)
  if (!is.null(work) && !is.null(work$ws)) {
    # the workspace held serves any plan it is large enough for
    if (length(work$ws) >= n && identical(work$key[c(1L, 2L, 4L)], key[c(1L, 2L, 4L)]) &&
        work$key[3L] >= key[3L]) return(work$ws)
    # a larger one replaces it: the old one is collected first, so that the
    # two are never held at once (large ones only)
    big <- 8 * length(work$ws) > 2^24
    work$ws <- NULL
    if (big) .collect()
  }
  ws <- numeric(n)
  if (!is.null(work)) {
    work$key <- key
    work$ws <- ws
  }
  ws
}

# A new holder of the workspace of one fit (see .build_or_fit()).
.work_new <- function() new.env(parent = emptyenv())

# Let go of a fit's workspace before a stage that needs the memory for
# something else (a re-selection): the next evaluation allocates it anew.
.work_drop <- function(fit) {
  w <- fit$.work
  if (!is.null(w) && !is.null(w$ws)) {
    big <- 8 * length(w$ws) > 2^24
    rm(list = ls(w), envir = w)
    if (big) .collect()
  }
  invisible(fit)
}

# ---- the evaluation -----------------------------------------------------------

# The collapsed bound at `params` on the inducing inputs W: the SGPR bound
# (Titsias 2009, with per-point noise as in Passerello 2022, ch. 3;
# src/bound_gaussian.c, src/bound_stream.c) or, with `variant` ("union",
# "solve", "odvgp"), the orthogonal bound whose first M1 rows of W are the
# regular inducing inputs (Fernlund 2022, Algorithm 3;
# src/bound_stream_orthogonal.c). `targets` defaults to the model's
# .targets() (the upper bound of sgpr passes others). Returns the bound
# with its terms, the factors (L, LB, v; for the orthogonal bounds also
# bounds, LBu, LBv, c, w), Kww, the jitter, the model's `sums` and, with
# grad = TRUE, `gk` (the contraction of the adjoints: list(variance,
# lengthscale, W), R/kernels.R) and `blocks` (the model's own gradient
# blocks from .targets_grad()).
.collapsed_eval <- function(fit, params, W, grad, M1 = nrow(W), variant = NULL,
                            targets = NULL) {
  k <- .kernel_at(fit$kernel, params)
  ctl <- fit$control
  M <- nrow(W)
  plan <- .collapsed_plan(fit, M)
  Kww <- .ffi_kern_matrix(k, W)
  orth <- !is.null(variant)
  ch <- if (orth) .ffi_stream_orthogonal_chol(Kww, M1, ctl$jitter, ctl$jitter_cap) else
    .stream_chol(Kww, ctl)
  want_W <- .any_free(fit, c("Z", "O"))
  a <- list(k = k, W = W, L = ch$L, params = params, plan = plan)
  if (identical(plan$where, "cluster")) {
    # other noise than the model's (the upper bound of sgpr): one variance
    # for all points, which the workers use in place of theirs, or one that
    # they add to theirs (add_lambda: their rows' variances may differ)
    if (!is.null(targets$add_lambda)) {
      a$add_lambda <- targets$add_lambda
    } else if (!is.null(targets)) {
      a$lambda <- targets$lambda
    }
    s <- .cluster_pass(fit, a, 1L)
  } else {
    t <- if (is.null(targets)) .targets(fit, params) else targets
    s <- .pass1(fit, a, t, fit$.work)
  }
  N <- .nobs(fit)
  v <- if (orth) .ffi_stream_orthogonal_value(ch$L, M1, s, N, variant, grad) else
    .ffi_stream_value(ch$L, s, N, grad)
  b <- c(v[intersect(names(v), c("bound", "bounds", "logdet", "fit", "trace", "LB", "v",
                                 "LBu", "LBv", "c", "w"))],
         list(jitter = ch$jitter, L = ch$L, Kww = Kww, sums = s$sums, plan = plan$where))
  if (grad) {
    a$v <- v[c("E", "alpha", "vt")]
    a$want_W <- want_W
    g <- if (identical(plan$where, "cluster")) .cluster_pass(fit, a, 2L) else
      .pass2(fit, a, t, fit$.work)
    Gww <- if (orth) v$Gww else v$Guu
    jitter <- if (orth) rep(ch$jitter, c(M1, M - M1)) else ch$jitter
    b$gk <- .stream_add(.stream_contract_uu(k, fit$x, W, Gww, jitter, want_W), g$gk)
    b$blocks <- g$blocks
  }
  b
}

# L = chol(Kww (+ jitter)) for the Gaussian bound, with its message.
.stream_chol <- function(Kww, control) {
  tryCatch(.ffi_chol(Kww, control$jitter, control$jitter_cap), error = function(e) {
    msg <- conditionMessage(e)
    if (grepl("not positive definite", msg)) {
      msg <- sprintf("Kuu is not positive definite even with jitter %g times its mean diagonal: are inducing inputs duplicated?",
                     control$jitter_cap)
    }
    stop(msg, call. = FALSE)
  })
}

# Pass 1 on the rows of fit$x (the whole data, or a worker's share) with
# the targets t: the summed statistics (list(AA, w, yy, kl, trace,
# sumloglam, n)) and the model's `sums`. `work`: the environment that
# keeps the workspace (NULL: a new one for this call).
.pass1 <- function(fit, a, t, work = NULL) {
  x <- fit$x
  plan <- a$plan
  s <- if (.is_combo(a$k)) {
    .combo_pass1(x, a$k, a$W, a$L, t, plan)
  } else {
    ws <- .pass_work(work, plan, nrow(a$W), ncol(x))
    .ffi_pass_stats(a$k, a$W, x, a$L, t, ws, plan$rows, plan$threads)
  }
  s$sums <- t$sums
  s
}

# Pass 2 on the rows of fit$x: list(gk = the contraction of dF/dK(W, x) and
# dF/d diag K(x, x), blocks = .targets_grad()).
.pass2 <- function(fit, a, t, work = NULL) {
  x <- fit$x
  plan <- a$plan
  if (.is_combo(a$k)) {
    r <- .combo_pass2(x, a$k, a$W, a$L, a$v, t, plan, a$want_W)
    gk <- r$gk
    adj <- r$adj
  } else {
    ws <- .pass_work(work, plan, nrow(a$W), ncol(x))
    r <- .ffi_pass_grad(a$k, a$W, x, a$L, a$v, t, ws, plan$rows, plan$threads, a$want_W,
                        isTRUE(t$per_point))
    th <- r$theta
    gk <- list(variance = th[1L], lengthscale = th[-1L],
               W = if (a$want_W) r$W else matrix(0, nrow(a$W), ncol(a$W)))
    adj <- r[c("glambda", "gytil", "glambda_points")]
  }
  list(gk = gk, blocks = .targets_grad(fit, a$params, t, adj))
}

# ---- a sum or product of kernels: the chunks in R -------------------------------

# lambda and ytil of the rows b from the targets.
.targets_rows <- function(t, b) {
  list(lambda = if (length(t$lambda) == 1L) rep(t$lambda, length(b)) else t$lambda[b],
       ytil = t$y[b] - t$shift)
}

.combo_pass1 <- function(x, k, W, L, t, plan) {
  s <- NULL
  for (b in plan$blocks) {
    xb <- x[b, , drop = FALSE]
    tb <- .targets_rows(t, b)
    sb <- .ffi_stream_stats(L, .stream_kern(k, W, xb, plan$threads), .ffi_kern_diag(k, xb),
                            tb$lambda, tb$ytil, plan$threads)
    s <- if (is.null(s)) sb else .stream_add(s, sb)
  }
  if (is.null(s)) {
    M <- nrow(W)
    s <- list(AA = matrix(0, M, M), w = numeric(M), yy = 0, kl = 0, trace = 0, sumloglam = 0,
              n = 0)
  }
  s
}

.combo_pass2 <- function(x, k, W, L, v, t, plan, want_W) {
  gk <- NULL
  gl <- gy <- 0
  pts <- if (isTRUE(t$per_point)) numeric(nrow(x))
  for (b in plan$blocks) {
    xb <- x[b, , drop = FALSE]
    tb <- .targets_rows(t, b)
    Kb <- .stream_kern(k, W, xb, plan$threads)
    r <- .ffi_stream_adjoints(L, v, Kb, .ffi_kern_diag(k, xb), tb$lambda, tb$ytil,
                              plan$threads)
    g <- .contract(k, xb, W, Gww = NULL, Gwf = r$Guf, gdiag = r$gdiag, Kwf = Kb,
                   want_W = want_W, threads = plan$threads)
    gk <- if (is.null(gk)) g else .stream_add(gk, g)
    gll <- r$glambda * tb$lambda
    gl <- gl + sum(gll)
    gy <- gy + sum(r$gytil)
    if (!is.null(pts)) pts[b] <- gll
  }
  if (is.null(gk)) {
    th <- .kern_split_theta(k, numeric(length(unlist(.kern_params(k)))))
    gk <- list(variance = th$variance, lengthscale = th$lengthscale,
               W = matrix(0, nrow(W), ncol(W)))
  }
  list(gk = gk, adj = list(glambda = gl, gytil = gy, glambda_points = pts))
}

# K(W, x) of a chunk: in threads when there are several.
.stream_kern <- function(k, W, x, threads) {
  if (threads > 1L) .ffi_stream_kern(k, W, x, threads) else .ffi_kern_matrix(k, W, x)
}

# The sum of two lists of statistics or gradient pieces (same structure).
.stream_add <- function(a, b) {
  if (is.null(a)) return(b)
  if (is.null(b)) return(a)
  if (is.list(a)) return(stats::setNames(.mapply(.stream_add, list(a, b), NULL), names(a)))
  a + b
}

# The contraction of the adjoint of K(W, W) with its jitter (once per
# evaluation, on the master).
.stream_contract_uu <- function(k, x, W, Guu, jitter, want_W) {
  .contract(k, x, W, Gww = Guu, Gwf = NULL, gdiag = NULL, jitter = jitter, want_W = want_W)
}

# ---- what the models contribute ---------------------------------------------------

# The per-point noise and targets of a collapsed model at `params`: list(
# lambda (length 1 or N), y (length N), shift (ytil = y - shift), sums (a
# named vector of model terms summed over the points, or NULL), per_point
# (TRUE when .targets_grad() needs each point's adjoint of lambda)).
.targets <- function(fit, params) UseMethod(".targets")

# The gradient blocks of the model's own parameters from the adjoints
# summed over the points: adj = list(glambda = sum_n lambda_n dF/dlambda_n,
# gytil = sum_n dF/dytil_n, glambda_points = the N terms lambda_n
# dF/dlambda_n when t$per_point). A named list of blocks (sums over the
# points, so that the workers' blocks add up).
.targets_grad <- function(fit, params, t, adj) UseMethod(".targets_grad")

# sgpr and osgpr: the noise model's variances and y - mean. Every lambda_n
# is proportional to its kind's variance, so d lambda_n / d log sigma^2 =
# lambda_n and d lambda_n / d beta = lambda_n phi_n (R/noise.R).
#' @export
.targets.sgpr <- function(fit, params) {
  list(lambda = .noise_lambda(fit, params, compact = TRUE), y = fit$y, shift = params$mean,
       sums = NULL, per_point = identical(fit$noise_model$kind, "model"))
}

#' @export
.targets_grad.sgpr <- function(fit, params, t, adj) {
  nm <- fit$noise_model
  kind <- if (is.null(nm)) "constant" else nm$kind
  c(list(mean = -adj$gytil),
    switch(kind,
           constant = list(noise = adj$glambda),
           model = list(noise_coef = drop(crossprod(nm$Phi, adj$glambda_points))),
           known = list()))
}

#' @export
.targets.osgpr <- .targets.sgpr

#' @export
.targets_grad.osgpr <- .targets_grad.sgpr
