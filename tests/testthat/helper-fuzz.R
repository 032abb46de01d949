# A fuzzer of the .Call entry points (used by test-fuzz.R and, for the long
# run, by inst/bench/fuzz.R). Each registered entry point has a template: a
# function returning valid arguments for a small problem. A call of the
# corpus is (entry point, seed): the seed chooses one to three mutations of
# the template's arguments (wrong types, lengths and dims, NA/NaN/Inf,
# subnormal, huge and zero values, zero sizes, non-square matrices, broken
# lists). Calls run in batches, each in a child R process with a time limit
# (system2(timeout = )), so that a crash or a hang is caught and reported
# with the call that caused it. Every call must end in a clean R error or
# a finite result.

# ---- templates ----------------------------------------------------------------

# Valid arguments for each entry point, for one small problem: 8 points in
# 2 dimensions, 3 inducing inputs (1 regular and 2 orthogonal for the
# orthogonal bound).
fuzz_templates <- function() {
  ns <- asNamespace("sparsevgp")
  x <- cbind(seq(-1, 1, length.out = 8), cos(seq(0, 3, length.out = 8)))
  Z <- x[c(2, 5, 7), , drop = FALSE]
  kc <- list(1L, 1.3, c(0.7, 1.1))
  K <- function(a, b = NULL) .Call(ns$ffi_kern_matrix, kc, a, b)
  # (k1 + k2) * k3: a sum inside a product
  kx <- list(2L, list(list(1L, list(kc, list(4L, 0.5, 0.3))), list(3L, 1, 2)))
  Kuu <- K(Z)
  Kuf <- K(Z, x)
  kd <- rep(1.3, 8)
  lam <- rep(0.1, 8)
  yt <- sin(3 * x[, 1])
  G <- matrix(seq(-1, 1, length.out = 24), 3, 8)
  bg <- .Call(ns$ffi_bg_bound, Kuu, Kuf, kd, lam, yt, 1e-8, 1e-2, FALSE)
  pm <- c(3L, 1L, 4L, 8L, 5L, 2L, 6L, 7L)
  bs <- .Call(ns$ffi_bs_stats, bg$L, Kuf, kd, lam, yt, 1L)
  bsums <- c(bs$yy, bs$kl, bs$trace, bs$sumloglam)
  bv <- .Call(ns$ffi_bs_value, bg$L, bs$AA, bs$w, bsums, 8, TRUE)
  # the Vecchia residual (src/neighbours.c, kernel_local.c, vecchia.c):
  # point c conditions on up to three earlier points
  nbl <- matrix(0L, 3L, 8L)
  for (c in 2:8) {
    nn <- seq.int(c - 1L, max(1L, c - 3L))
    nbl[seq_along(nn), c] <- nn
  }
  Kl <- .Call(ns$ffi_kern_local, kc, x, nbl)
  vs <- .Call(ns$ffi_vf_stats, bg$L, Kuf, Kl, nbl, lam, yt, TRUE)
  vv <- .Call(ns$ffi_vf_value, vs$BB, vs$w, vs$sums, 8, TRUE)
  A <- forwardsolve(bg$L, Kuf)
  bo <- .Call(ns$ffi_bso_chol, Kuu, 1L, 1e-8, 1e-2)
  bos <- .Call(ns$ffi_bs_stats, bo$L, Kuf, kd, lam, yt, 1L)
  # the workspace of the passes over all rows (chunks of 3 rows, 2 threads)
  wk <- function() numeric(.Call(ns$ffi_bs_work, 3, 2, 3, 2L))
  list(
    ffi_bs_pass_grad = function() {
      list(kc, Z, x, bg$L, bv$E, bv$alpha, bv$vt, 0.1, yt, 0.2, wk(), 3L, 2L, TRUE, TRUE)
    },
    ffi_bs_pass_stats = function() list(kc, Z, x, bg$L, lam, yt, 0.2, wk(), 3L, 2L),
    ffi_bs_predict = function() list(kc, Z, x, bg$L, bg$LB, bg$v, 0.3, wk(), 3L, 2L),
    ffi_bs_work = function() list(3, 2, 3, 2L),
    ffi_la_colstats = function() list(x),
    ffi_la_release = function() list(),
    ffi_bs_adjoints = function() list(bg$L, bv$E, bv$alpha, bv$vt, Kuf, kd, lam, yt, 1L),
    ffi_bs_kern_cross = function() list(kc, Z, x, 2L),
    ffi_bs_stats = function() list(bg$L, Kuf, kd, lam, yt, 2L),
    ffi_bs_threads = function() list(2L),
    ffi_bs_value = function() list(bg$L, bs$AA, bs$w, bsums, 8, TRUE),
    ffi_bso_chol = function() list(Kuu, 1L, 1e-8, 1e-2),
    ffi_bso_value = function() {
      list(bo$L, 1L, bos$AA, bos$w, c(bos$yy, bos$kl, bos$trace, bos$sumloglam), 8, 1L, TRUE)
    },
    ffi_bg_bound = function() list(Kuu, Kuf, kd, lam, yt, 1e-8, 1e-2, TRUE),
    ffi_bo_bound = function() list(Kuu, Kuf, 1L, kd, lam, yt, 1L, 1e-8, 1e-2, TRUE),
    ffi_kc_diag = function() list(kx, x),
    ffi_kc_matrix = function() list(kx, Z, x),
    ffi_kern_diag = function() list(kc, x),
    ffi_kern_grad = function() list(kc, Z, x, G, TRUE),
    ffi_kern_grad_diag = function() list(kc, x, yt),
    ffi_kern_grad_given = function() list(kc, Z, x, G, Kuf, TRUE),
    ffi_kern_grad_threads = function() list(kc, Z, x, G, Kuf, TRUE, 2L),
    ffi_kern_matrix = function() list(kc, Z, x),
    ffi_kern_local = function() list(kc, x, nbl),
    ffi_kern_local_cross = function() list(kc, x, nbl),
    ffi_kern_local_grad = function() list(kc, x, nbl, matrix(seq(-1, 1, length.out = 128), 16, 8), Kl),
    ffi_kern_local_grad_fac = function() list(kc, x, nbl, matrix(seq(-1, 1, length.out = 72), 9, 8), Kl),
    ffi_la_chol = function() list(Kuu, 0, 1e-2),
    ffi_nb_ordered = function() list(x, 3L, c(3L, 1L, 4L, 8L, 5L, 2L, 6L, 7L)),
    ffi_nb_query = function() list(x, x[1:3, ], 3L),
    ffi_nb_select = function() {
      list(A, rep(0.5, 8), .Call(ns$ffi_kern_local_cross, kc, x, nbl), nbl, 2L)
    },
    ffi_nb_spatial_order = function() list(x),
    ffi_pg_kl = function() list(c(0, 1e-5, 0.3, 2, 40)),
    ffi_pg_log_cosh = function() list(c(-800, -2, 0, 1e-3, 3)),
    ffi_pg_theta = function() list(c(0, 1e-5, 0.3, 2, 40)),
    ffi_pred_gaussian = function() list(bg$L, bg$LB, bg$v, K(Z, x[1:4, ]), rep(1.3, 4), FALSE),
    ffi_sel_greedy = function() list(kc, x, rep(1, 8), 3, 0, pm, 0, 2, TRUE),
    ffi_sel_trace = function() list(kc, x, rep(1, 8), Z, 0, TRUE),
    ffi_vf_adjoints = function() list(bg$L, vv$Binv, vv$vt, Kuf, Kl, nbl, lam, yt, vs$recs),
    ffi_vf_adjoints_fac = function() {
      list(bg$L, vv$Binv, vv$vt, Kuf, NULL, nbl, lam, yt, NULL, kc, x,
           .Call(ns$ffi_vf_stats_kern, bg$L, Kuf, kc, x, nbl, lam, yt, TRUE)$A)
    },
    ffi_vf_predict = function() {
      list(bg$L, vv$Binv, vv$vt, Kuf, Kl, nbl, c(0, lam[-1]), yt, TRUE)
    },
    ffi_vf_stats = function() list(bg$L, Kuf, Kl, nbl, lam, yt, TRUE),
    ffi_vf_stats_kern = function() list(bg$L, Kuf, kc, x, nbl, lam, yt, TRUE),
    ffi_vf_stats_shares = function() list(bg$L, Kuf, NULL, kc, x, nbl, yt, c(0.5, 2), c(0.1, 0.3)),
    ffi_vf_value = function() list(vs$BB, vs$w, vs$sums, 8, TRUE),
    ffi_softmax_ell = function() {
      list(matrix(c(0.1, -0.4, 1.2, 0, 0.3, -1), 2, 3), matrix(c(0.5, 1, 0.2, 2, 0.7, 0.1), 2, 3),
           c(1L, 3L), matrix(c(-1, 0.3, 1.1, 0.2, -0.5, 0.8, 1.4, -0.2, 0.1), 3, 3))
    },
    ffi_softmax_prob = function() {
      list(matrix(c(0.1, -0.4, 1.2, 0, 0.3, -1), 2, 3), matrix(c(0.5, 1, 0.2, 0, 0.7, 0.1), 2, 3),
           matrix(c(-1, 0.3, 1.1, 0.2, -0.5, 0.8, 1.4, -0.2, 0.1), 3, 3))
    },
    ffi_svgp_ell = function() {
      list(c(0.1, -0.4, 1.2, 0), c(0.5, 1, 0.2, 2),
           list(type = 2L, y = c(1, -1, 0.5, 2), noise = 0.1, gh_x = c(-1.2247, 0, 1.2247),
                gh_w = c(0.2954, 1.1816, 0.2954), scale = 2))
    })
}

# ---- mutations ------------------------------------------------------------------

.fuzz_values <- c(NA, NaN, Inf, -Inf, 0, -0, -1, 5e-324, 1e-310, 1e-300, 1e-160,
                  1e154, 1e300, 1.7e308, -1.7e308, 0.5, 2)

# One mutation of the value `a`: list(value, label). A list (a kernel, or
# the structured likelihood argument of ffi_svgp_ell) may lose, rename or null a
# field, or have one field mutated.
fuzz_mutate <- function(a) {
  if (is.list(a) && length(a) > 0L && stats::runif(1) < 0.7) {
    i <- sample.int(length(a), 1L)
    fld <- if (is.null(names(a))) as.character(i) else names(a)[i]
    op <- sample(c("field", "field", "field", "drop", "rename", "null", "unname"), 1L)
    if (op == "field") {
      m <- fuzz_mutate(a[[i]])
      if (is.null(m$value)) a[i] <- list(NULL) else a[[i]] <- m$value
      return(list(value = a, label = sprintf("[[%s]]%s", fld, m$label)))
    }
    if (op == "drop") return(list(value = a[-i], label = sprintf("drop [[%s]]", fld)))
    if (op == "rename" && !is.null(names(a))) {
      names(a)[i] <- paste0(names(a)[i], "x")
      return(list(value = a, label = sprintf("rename [[%s]]", fld)))
    }
    if (op == "null") {
      a[i] <- list(NULL)
      return(list(value = a, label = sprintf("[[%s]] <- NULL", fld)))
    }
    return(list(value = unname(a), label = "unname"))
  }
  n <- length(a)
  pick <- function(v) v[sample.int(length(v), 1L)]
  # numbers more often than types, so that the numerical paths are reached
  ops <- c(rep("value", 6L), rep("values", 2L), rep("scale", 3L), "negate", "type_int",
           "type_chr", "type_lgl", "null", "as_list", "longer", "shorter", "empty", "scalar")
  if (is.matrix(a)) ops <- c(ops, "transpose", "vector", "zero_rows", "zero_cols", "add_row",
                             "add_col", "drop_row", "drop_col", "square", "square")
  op <- pick(ops)
  v <- pick(.fuzz_values)
  num <- is.numeric(a) || is.logical(a)
  switch(op,
    value = if (num && n > 0L) {
      j <- sample.int(n, 1L)
      if (is.integer(a)) {
        a[j] <- pick(c(NA_integer_, 0L, -1L, 2147483647L, -2147483647L, n + 1L))
      } else {
        storage.mode(a) <- "double"
        a[j] <- v
      }
      list(value = a, label = sprintf("[%d] <- %s", j, format(a[j])))
    } else list(value = v, label = sprintf("<- %s", format(v))),
    values = if (num && n > 0L) {
      storage.mode(a) <- "double"
      a[] <- v
      list(value = a, label = sprintf("all <- %s", format(v)))
    } else list(value = rep(v, 3L), label = "rep"),
    scale = if (is.double(a)) {
      s <- 10^sample(c(-320, -300, -160, -20, 20, 160, 300, 308), 1L)
      list(value = a * s, label = sprintf("* %g", s))
    } else list(value = a, label = "unchanged"),
    negate = if (is.double(a)) list(value = -a, label = "negate") else list(value = a, label = "unchanged"),
    type_int = list(value = suppressWarnings({b <- a; if (num) storage.mode(b) <- "integer"; b}),
                    label = "as integer"),
    type_chr = list(value = {b <- a; if (num) storage.mode(b) <- "character"; b}, label = "as character"),
    type_lgl = list(value = suppressWarnings({b <- a; if (num) storage.mode(b) <- "logical"; b}),
                    label = "as logical"),
    null = list(value = NULL, label = "NULL"),
    as_list = list(value = as.list(a), label = "as.list"),
    longer = list(value = c(a, if (n > 0L) a[[1L]] else 1), label = "one longer"),
    shorter = list(value = if (n > 0L) a[-n] else a, label = "one shorter"),
    empty = list(value = if (is.matrix(a)) a[0, 0, drop = FALSE] else a[0], label = "empty"),
    scalar = list(value = if (n > 0L) a[[1L]] else 0, label = "first element"),
    transpose = list(value = t(a), label = "transpose"),
    vector = list(value = as.vector(a), label = "as.vector"),
    zero_rows = list(value = a[0, , drop = FALSE], label = "0 rows"),
    zero_cols = list(value = a[, 0, drop = FALSE], label = "0 columns"),
    add_row = list(value = rbind(a, a[1L, ]), label = "one more row"),
    add_col = list(value = cbind(a, a[, 1L]), label = "one more column"),
    drop_row = list(value = a[-1L, , drop = FALSE], label = "one row less"),
    drop_col = list(value = a[, -1L, drop = FALSE], label = "one column less"),
    square = {
      k <- max(nrow(a), ncol(a))
      b <- matrix(v, k, k)
      list(value = b, label = sprintf("%d x %d of %s", k, k, format(v)))
    })
}

# A kernel list nested `depth` levels deep (sums of a kernel and the rest),
# for the recursion limit of src/kernel_combo.c.
fuzz_deep_kernel <- function(depth, leaf = list(1L, 1.3, c(0.7, 1.1))) {
  k <- leaf
  for (i in seq_len(depth)) k <- list(1L + (i %% 2L), list(leaf, k))
  k
}

# Mutations of the whole argument list: two arguments swapped, a list
# argument nested very deep, a size argument made huge.
fuzz_mutate_args <- function(args) {
  op <- sample(c("swap", "deep", "huge"), 1L)
  n <- length(args)
  if (n == 0L) return(list(args = list(1), label = "an argument too many"))
  if (op == "swap" && n >= 2L) {
    ij <- sample.int(n, 2L)
    args[ij] <- args[rev(ij)]
    return(list(args = args, label = sprintf("swap args %d and %d", ij[1L], ij[2L])))
  }
  if (op == "deep") {
    lists <- which(vapply(args, is.list, TRUE))
    i <- if (length(lists)) lists[sample.int(length(lists), 1L)] else sample.int(n, 1L)
    depth <- sample(c(33L, 100L, 1000L, 100000L), 1L)
    # spliced in with c(): `args[[i]] <-` would walk the deep list
    # recursively (R's check for cycles) and overflow R's own C stack
    args <- c(args[seq_len(i - 1L)], list(fuzz_deep_kernel(depth)), args[-seq_len(i)])
    return(list(args = args, label = sprintf("arg %d nested %d deep", i, depth), deep = TRUE))
  }
  # a number that sets a size (M, rows, threads, a count) made huge or
  # beyond an int
  sc <- which(vapply(args, function(a) is.numeric(a) && length(a) == 1L, TRUE))
  i <- if (length(sc)) sc[sample.int(length(sc), 1L)] else sample.int(n, 1L)
  v <- sample(list(2147483647L, 2^31, 2^53, 1e15, .Machine$double.xmax, 4e9), 1L)[[1L]]
  args[[i]] <- if (is.integer(args[[i]]) && is.integer(v)) v else as.double(v)
  list(args = args, label = sprintf("arg %d <- %s", i, format(v)))
}

# The arguments of call `seed` for entry point `name`: the template with
# one to three mutations (seed 0: the template itself); one call in ten
# mutates the argument list as a whole (fuzz_mutate_args()). list(args,
# label).
fuzz_case <- function(templates, name, seed) {
  args <- templates[[name]]()
  if (seed == 0L) return(list(args = args, label = "valid template"))
  set.seed(seed)
  labels <- character()
  if (stats::runif(1) < 0.1 && length(args) > 0L) {
    m <- fuzz_mutate_args(args)
    args <- m$args
    labels <- m$label
    # a deep list is the whole mutation (R-level edits of it would recurse)
    if (isTRUE(m$deep)) return(list(args = args, label = labels))
  }
  # an entry point without arguments: given one or two, which it must refuse
  if (length(args) == 0L) {
    return(list(args = as.list(seq_len(sample(2L, 1L))), label = "arguments it does not take"))
  }
  for (k in seq_len(sample(c(1L, 1L, 2L, 3L), 1L))) {
    i <- sample.int(length(args), 1L)
    # a mutation that does not apply to this value (a row of an empty
    # matrix, say) leaves it unchanged
    m <- tryCatch(fuzz_mutate(args[[i]]),
                  error = function(e) list(value = args[[i]], label = "unchanged"))
    if (is.null(m$value)) args[i] <- list(NULL) else args[[i]] <- m$value
    labels <- c(labels, sprintf("arg %d: %s", i, m$label))
  }
  list(args = args, label = paste(labels, collapse = "; "))
}

# ---- outcomes -----------------------------------------------------------------

# Errors that come from a missing check rather than from one (R's C API
# refusing an object, a BLAS argument error, an internal error).
.fuzz_unclean <- paste(c("can only be applied to", "LENGTH or similar", "applied to NULL",
                         "internal error", "BLAS/LAPACK", "error code", "invalid 'type'",
                         "non-numeric", "long vectors not supported"), collapse = "|")

# TRUE when every double in `res` (recursively) is finite; for the
# elementwise maps, wherever their input is finite; for the column
# summaries, in the columns flagged finite.
.fuzz_finite <- function(name, args, res) {
  if (name %in% c("ffi_pg_kl", "ffi_pg_log_cosh", "ffi_pg_theta")) {
    return(length(res) == length(args[[1L]]) && all(is.finite(res) | !is.finite(args[[1L]])))
  }
  # column summaries: NA for a column that is not all finite, which the
  # last row (the flag) says
  if (name == "ffi_la_colstats") {
    ok <- res[5L, ] == 1
    return(all(is.finite(res[5L, ])) && all(is.finite(res[1:4, ok & !is.na(res[2L, ])])))
  }
  leaves <- unlist(res, use.names = FALSE)
  !is.double(leaves) || all(is.finite(leaves))
}

# Run the calls (data frame with name, seed) and write one line per call
# to `out`: "i<TAB>start" before it, "i<TAB>outcome<TAB>message" after it.
fuzz_run_batch <- function(calls, out) {
  ns <- asNamespace("sparsevgp")
  templates <- fuzz_templates()
  con <- file(out, open = "w")
  on.exit(close(con))
  for (i in seq_len(nrow(calls))) {
    writeLines(sprintf("%d\tstart", i), con)
    flush(con)
    cs <- fuzz_case(templates, calls$name[i], calls$seed[i])
    res <- tryCatch(do.call(.Call, c(list(get(calls$name[i], ns)), cs$args)),
                    error = function(e) structure(list(msg = conditionMessage(e)),
                                                  class = "fuzz_error"))
    outcome <- if (inherits(res, "fuzz_error")) {
      if (grepl(.fuzz_unclean, res$msg)) "unclean error" else "error"
    } else if (.fuzz_finite(calls$name[i], cs$args, res)) "finite" else "non-finite"
    msg <- if (inherits(res, "fuzz_error")) gsub("[\t\n]", " ", res$msg) else ""
    writeLines(sprintf("%d\t%s\t%s", i, outcome, msg), con)
    flush(con)
  }
}

# The corpus: for each entry point, the valid template and `n` mutated
# calls with seeds seed0 + 1.., in a data frame (name, seed).
fuzz_corpus <- function(names, n, seed0 = 0L) {
  do.call(rbind, lapply(seq_along(names), function(e) {
    data.frame(name = names[e], seed = c(0L, seed0 + (e - 1L) * 100000L + seq_len(n)),
               stringsAsFactors = FALSE)
  }))
}

# Run the corpus in batches of `batch` calls, each in a child R process
# limited to `timeout` seconds, and return the calls with their outcome:
# "finite", "error", "unclean error", "non-finite", "crash" or "hang".
fuzz_run <- function(calls, helper, batch = 100L, timeout = 120) {
  child_batches(calls, c("name", "seed"), helper, "fuzz_run_batch", batch, timeout)
}

# The rows of `items` run in batches of `batch`, each in a child R process
# limited to `timeout` seconds: the child loads sparsevgp from this
# session's library paths, sources the files `helper` and calls
# `fun(items[rows, cols], out)`, which writes "i<TAB>start" before item i and
# "i<TAB>outcome<TAB>message" after it. An item the child died on is a
# "crash", one it was stopped on (exit status 124) a "hang"; the next batch
# resumes after it. Returns `items` with columns outcome and message.
child_batches <- function(items, cols, helper, fun, batch, timeout) {
  items$outcome <- NA_character_
  items$message <- NA_character_
  libs <- paste(deparse(.libPaths()), collapse = " ")
  rscript <- file.path(R.home("bin"), "Rscript")
  todo <- seq_len(nrow(items))
  while (length(todo)) {
    idx <- todo[seq_len(min(batch, length(todo)))]
    items_file <- tempfile(fileext = ".rds")
    out <- tempfile(fileext = ".txt")
    err <- tempfile(fileext = ".txt")
    script <- tempfile(fileext = ".R")
    saveRDS(items[idx, cols, drop = FALSE], items_file)
    writeLines(c(sprintf(".libPaths(%s)", libs),
                 "suppressMessages(library(sparsevgp))",
                 sprintf("source(%s)", vapply(helper, deparse, "")),
                 sprintf("%s(readRDS(%s), %s)", fun, deparse(items_file), deparse(out))),
               script)
    status <- suppressWarnings(system2(rscript, c("--vanilla", script), stdout = FALSE,
                                       stderr = err, timeout = timeout))
    lines <- if (file.exists(out)) readLines(out, warn = FALSE) else character()
    done <- 0L
    for (p in strsplit(lines, "\t", fixed = TRUE)) {
      j <- as.integer(p[1L])
      if (length(p) >= 2L && p[2L] != "start") {
        items$outcome[idx[j]] <- p[2L]
        items$message[idx[j]] <- if (length(p) >= 3L) p[3L] else ""
        done <- j
      }
    }
    if (done < length(idx)) {
      # the child died (crash) or was stopped (hang, exit status 124) on the
      # item after the last one it finished
      tail_err <- if (file.exists(err)) utils::tail(readLines(err, warn = FALSE), 5L)
      items$outcome[idx[done + 1L]] <- if (identical(as.integer(status), 124L)) "hang" else "crash"
      items$message[idx[done + 1L]] <- paste(c(sprintf("child exit status %s", format(status)),
                                               tail_err), collapse = " | ")
      done <- done + 1L
    }
    todo <- setdiff(todo, idx[seq_len(done)])
    unlink(c(items_file, out, script, err))
  }
  items
}

# The description of a call, to reproduce it: the entry point, the seed
# and the mutations.
fuzz_describe <- function(calls) {
  templates <- fuzz_templates()
  if (exists(".Random.seed", globalenv())) {
    old <- get(".Random.seed", globalenv())
    on.exit(assign(".Random.seed", old, globalenv()))
  }
  vapply(seq_len(nrow(calls)), function(i) {
    sprintf("%s seed %d (%s): %s %s", calls$name[i], calls$seed[i],
            fuzz_case(templates, calls$name[i], calls$seed[i])$label, calls$outcome[i],
            calls$message[i])
  }, "")
}
