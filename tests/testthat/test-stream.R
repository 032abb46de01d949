# The collapsed bounds over row chunks, in threads and on a cluster
# (R/stream.R, src/bound_stream.c) against the bound computed in one piece
# (src/bound_gaussian.c, itself checked against the exact GP and finite
# differences elsewhere).

# The bound and its gradient of a fit through objective(): value and every
# free component.
value_grad <- function(fit) {
  o <- objective(fit)
  c(value = -o$fn(o$par), -o$gr(o$par))
}

# The largest relative difference over the components, each relative to its
# own size (floored at 1e-6 of the largest, for components that are 0 up to
# rounding).
max_rel <- function(a, b) {
  expect_identical(names(a), names(b))
  max(abs(a - b) / pmax(abs(a), 1e-6 * max(abs(a))))
}

# A fit with chunks of `rows` rows: control$memory is the workspace of
# chunks of that many rows.
with_rows <- function(fit, rows) {
  fit$control$memory <- sparsevgp:::.memory_for_rows(fit, rows)
  fit
}

stream_data <- function(N = 53, D = 2, seed = 3) {
  set.seed(seed)
  x <- matrix(runif(N * D, -2, 2), N, D)
  y <- sin(2 * x[, 1]) + 0.3 * x[, D]^2 + rnorm(N, sd = 0.2)
  list(x = x, y = y)
}

test_that("sgpr in chunks equals sgpr in one piece for every kernel and noise kind", {
  d <- stream_data()
  N <- nrow(d$x)
  kernels <- list(kernel_rbf(lengthscale = 0.8, variance = 1.3),
                  kernel_rbf(lengthscale = c(0.7, 1.4), variance = 0.9),
                  kernel_matern12(lengthscale = 1.1, variance = 1),
                  kernel_matern32(lengthscale = c(0.9, 1.2), variance = 1.2),
                  kernel_matern52(lengthscale = 0.6, variance = 0.8))
  noises <- list(constant = 0.05, known = seq(0.02, 0.1, length.out = N),
                 model = ~ x1 + I(x2^2))
  Z <- d$x[c(3, 9, 17, 25, 31, 40, 44), ]
  for (k in kernels) for (nz in names(noises)) {
    fit <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = noises[[nz]], optimize = FALSE)
    ref <- value_grad(fit)
    for (rows in c(1, 7, 10, 52)) {
      got <- value_grad(with_rows(fit, rows))
      expect_lt(max_rel(ref, got), 1e-10,
                label = sprintf("%s kernel, %s noise, chunks of %d", k$family, nz, rows))
    }
  }
})

test_that("the chunked path holds no N x M matrix and reports the same fit", {
  d <- stream_data(N = 40)
  fit <- sgpr(d$x, d$y, inducing = d$x[1:6, ], kernel = kernel_rbf(0.9, 1), noise = 0.1,
              optimize = FALSE)
  ch <- with_rows(fit, 9)
  expect_identical(sparsevgp:::.collapsed_plan(ch, 6L)$where, "chunks")
  expect_identical(sparsevgp:::.collapsed_plan(ch, 6L)$rows, 9L)
  expect_identical(sparsevgp:::.collapsed_plan(fit, 6L)$where, "memory")
  b <- sparsevgp:::.collapsed_eval(ch, ch$params, ch$params$Z, TRUE)
  expect_null(b$Kwf)
  a <- sparsevgp:::.collapsed_eval(fit, fit$params, fit$params$Z, TRUE)
  expect_equal(b$bound, a$bound, tolerance = 1e-12)
  expect_equal(b$LB, a$LB, tolerance = 1e-12)
  expect_equal(b$blocks, a$blocks, tolerance = 1e-10)
  # the fit built in chunks: the same bound, posterior, upper bound and
  # predictions
  fc <- sgpr(d$x, d$y, inducing = d$x[1:6, ], kernel = kernel_rbf(0.9, 1), noise = 0.1,
             optimize = FALSE, control = list(memory = sparsevgp:::.memory_for_rows(fit, 9)))
  expect_equal(fc$bound, fit$bound, tolerance = 1e-12)
  expect_equal(fc$upper_bound, fit$upper_bound, tolerance = 1e-12)
  expect_equal(predict(fc, d$x[1:5, ]), predict(fit, d$x[1:5, ]), tolerance = 1e-10)
  expect_equal(fitted(fc), fitted(fit), tolerance = 1e-10)
})

test_that("the passes equal the bound and adjoints of the dense one-piece routine", {
  # an independent route: src/bound_gaussian.c on the whole N x M kernel
  # matrix (itself checked against the exact GP and finite differences),
  # contracted by R/kernels.R
  d <- stream_data(N = 57, D = 2)
  Z <- d$x[c(3, 8, 20, 33, 41, 50), ]
  lam <- seq(0.03, 0.2, length.out = 57)
  for (k in list(kernel_rbf(c(0.8, 1.2), 1.1), kernel_matern32(0.9, 0.7))) {
    fit <- sgpr(d$x, d$y, kernel = k, inducing = Z, noise = lam, optimize = FALSE)
    ytil <- d$y - fit$params$mean
    km <- sparsevgp:::.collapsed_matrices(k, Z, d$x)
    ref <- sparsevgp:::.ffi_gaussian_bound(km$Kww, km$Kwf, km$kdiag, lam, ytil, 0, 1e-2, TRUE)
    gref <- sparsevgp:::.contract(k, d$x, Z, Gww = ref$Guu, Gwf = ref$Guf, gdiag = ref$gdiag,
                                  jitter = ref$jitter)
    for (rows in c(57, 10)) {
      f <- with_rows(fit, rows)
      b <- sparsevgp:::.collapsed_eval(f, f$params, Z, TRUE)
      expect_equal(b$bound, ref$bound, tolerance = 1e-12)
      expect_equal(b$trace, ref$trace, tolerance = 1e-12)
      expect_equal(b$gk$variance, gref$variance, tolerance = 1e-10)
      expect_equal(b$gk$lengthscale, gref$lengthscale, tolerance = 1e-10)
      expect_equal(b$gk$W, gref$W, tolerance = 1e-10)
      expect_equal(b$blocks$mean, sum(ref$gytil) * -1, tolerance = 1e-10)
    }
  }
})

test_that("the predictive over chunks equals the one-piece predictive routine", {
  d <- stream_data(N = 70, D = 2)
  fit <- sgpr(d$x, d$y, kernel = kernel_matern52(c(0.7, 1.1), 1.2), inducing = d$x[1:6, ],
              noise = 0.05, optimize = FALSE)
  k <- sparsevgp:::.kernel_at(fit$kernel, fit$params)
  post <- fit$posterior
  Z <- fit$params$Z
  xs <- matrix(runif(2600, -2, 2), 1300, 2)
  ref <- sparsevgp:::.ffi_predict_gaussian(post$L, post$LB, post$v, kernel_matrix(k, Z, xs),
                                           kernel_matrix(k, xs, diag = TRUE), FALSE)
  for (rows in c(1300, 7, 1)) {
    for (nt in 1:2) {
      ws <- numeric(sparsevgp:::.ffi_pass_work(6, 2, rows, nt))
      p <- sparsevgp:::.ffi_pass_predict(k, Z, xs, post$L, post$LB, post$v, 0.5, ws, rows, nt)
      expect_equal(p$mean, ref$mean + 0.5, tolerance = 1e-12)
      expect_equal(p$var, ref$var, tolerance = 1e-12)
    }
  }
  # predict() uses it, with the fit's budget
  fc <- with_rows(fit, 9)
  expect_equal(predict(fc, xs), predict(fit, xs), tolerance = 1e-12)
  expect_equal(unname(predict(fit, xs)$mean), ref$mean + fit$params$mean, tolerance = 1e-12)
})

test_that("the workspace is allocated once per fit and a stale one is never read", {
  d <- stream_data(N = 80, D = 2)
  fit <- sgpr(d$x, d$y, kernel = kernel_rbf(1, 1), inducing = d$x[1:7, ], noise = 0.1,
              optimize = FALSE)
  o <- objective(fit)
  w <- environment(o$fn)$fit$.work
  v1 <- -o$fn(o$par)
  ws <- w$ws
  expect_true(is.double(ws) && length(ws) > 0)
  p2 <- o$par + 0.1
  v2 <- -o$fn(p2)
  # the same vector, reused (not reallocated) by the second evaluation
  expect_identical(tracemem(w$ws) == tracemem(ws), TRUE)
  untracemem(ws)
  # pass 2 after a pass 1 at other parameters recomputes, never reuses
  g2 <- o$gr(p2)
  o2 <- objective(fit)
  expect_equal(v2, -o2$fn(p2), tolerance = 1e-12)
  expect_equal(g2, o2$gr(p2), tolerance = 1e-12)
  a <- list(k = sparsevgp:::.kernel_at(fit$kernel, fit$params), W = fit$params$Z)
  k <- a$k
  L <- t(chol(kernel_matrix(k, a$W)))
  t1 <- list(lambda = 0.1, y = d$y, shift = 0)
  plan <- sparsevgp:::.collapsed_plan(fit, 7L)
  work <- numeric(sparsevgp:::.ffi_pass_work(7, 2, plan$rows, plan$threads))
  s1 <- sparsevgp:::.ffi_pass_stats(k, a$W, d$x, L, t1, work, plan$rows, plan$threads)
  v <- sparsevgp:::.ffi_stream_value(L, s1, 80, TRUE)
  t2 <- t1
  t2$lambda <- 0.2
  g_stale <- sparsevgp:::.ffi_pass_grad(k, a$W, d$x, L, v, t2, work, plan$rows, plan$threads,
                                        TRUE, FALSE)
  g_fresh <- sparsevgp:::.ffi_pass_grad(k, a$W, d$x, L, v, t2, numeric(length(work)),
                                        plan$rows, plan$threads, TRUE, FALSE)
  expect_identical(g_stale, g_fresh)
  expect_error(sparsevgp:::.ffi_pass_stats(k, a$W, d$x, L, t1, numeric(10), plan$rows, 1L),
               "'work' must be a double vector")
})

test_that("a fit with a memory budget ends where the fit in one piece does", {
  d <- stream_data(N = 60, D = 1)
  set.seed(4)
  a <- sgpr(d$x, d$y, inducing = 8)
  mem <- sparsevgp:::.memory_for_rows(a, 7, 8)
  set.seed(4)
  b <- sgpr(d$x, d$y, inducing = 8, control = list(memory = mem))
  expect_equal(b$control$memory, mem)
  # the same objective up to rounding, so L-BFGS-B ends at the same optimum
  expect_equal(b$bound, a$bound, tolerance = 1e-6)
  expect_equal(b$params$lengthscale, a$params$lengthscale, tolerance = 1e-3)
})

test_that("pgpr in chunks equals pgpr in one piece, c updates included", {
  d <- classification_data("banana")[1:90, ]
  set.seed(2)
  fit <- pgpr(y ~ x1 + x2, data = d, inducing = "kmeans", M = 8, optimize = FALSE)
  fit$c <- runif(90, 0.1, 2)
  ref <- value_grad(fit)
  for (rows in c(1, 13, 89)) {
    ch <- with_rows(fit, rows)
    expect_lt(max_rel(ref, value_grad(ch)), 1e-10)
    u1 <- sparsevgp:::.pgpr_update_c(fit, 3)
    u2 <- sparsevgp:::.pgpr_update_c(ch, 3)
    expect_equal(u2$c, u1$c, tolerance = 1e-10)
    expect_equal(u2$bound, u1$bound, tolerance = 1e-10)
  }
})

test_that("one and two threads give the same bound and gradient", {
  d <- stream_data(N = 700, D = 3)
  fit <- sgpr(d$x, d$y, inducing = 25, noise = ~ x1, optimize = FALSE)
  old <- options(sparsevgp.threads = 1L)
  on.exit(options(old))
  one <- value_grad(with_rows(fit, 300))
  options(sparsevgp.threads = 2L)
  two <- value_grad(with_rows(fit, 300))
  whole <- value_grad(fit)
  # relative to the largest component (the thread blocks add the M x M
  # sums in another order), and each component to 1e-10
  expect_lt(max(abs(one - two)) / max(abs(one)), 1e-12)
  expect_lt(max_rel(one, two), 1e-10)
  expect_lt(max_rel(one, whole), 1e-10)
  # the kernel matrix of a chunk in threads: the same numbers
  k <- kernel_matern52(lengthscale = c(0.5, 1, 2), variance = 1.5)
  expect_identical(sparsevgp:::.stream_kern(k, fit$params$Z, d$x, 2L),
                   kernel_matrix(k, fit$params$Z, d$x))
  options(sparsevgp.threads = 0)
  expect_error(value_grad(fit), "sparsevgp.threads")
})

test_that("control$memory is checked and parsed, and one formula gives the rows", {
  d <- stream_data(N = 20, D = 1)
  expect_error(sgpr(d$x, d$y, inducing = 3, optimize = FALSE, control = list(memory = "lots")),
               "control\\$memory")
  expect_error(sgpr(d$x, d$y, inducing = 3, optimize = FALSE, control = list(memory = -1)),
               "control\\$memory")
  expect_error(sgpr(d$x, d$y, inducing = 3, optimize = FALSE, control = list(memory = NA)),
               "control\\$memory")
  expect_equal(sparsevgp:::.check_memory("2GB"), 2 * 2^30)
  expect_equal(sparsevgp:::.check_memory("512 mb"), 512 * 2^20)
  expect_equal(sparsevgp:::.check_memory(1e6), 1e6)
  expect_equal(sparsevgp:::.budget_rows(2^20, 32 * 500), floor(2^20 / (32 * 500)))
  expect_equal(sparsevgp:::.budget_rows(1, 32 * 500), 1)
  expect_equal(sparsevgp:::.budget_rows(1e9, 8, fixed = 1e3, n = 77), 77)
  f <- sgpr(d$x, d$y, inducing = 3, optimize = FALSE, control = list(memory = "1GB"))
  expect_equal(f$control$memory, 2^30)
  # a budget that cannot hold one row is an error naming it
  big <- sgpr(d$x, d$y, inducing = d$x[1:15, , drop = FALSE], kernel = kernel_rbf(1, 1),
              optimize = FALSE)
  big$control$memory <- 100
  expect_error(sparsevgp:::.collapsed_plan(big, 15L), "cannot hold the work of one row")
  # the default: an eighth of the physical memory, within [256 MB, 2 GB]
  def <- sparsevgp:::.default_memory()
  expect_gte(def, 256 * 2^20)
  expect_lte(def, 2 * 2^30)
  ram <- sparsevgp:::.physical_memory()
  if (is.finite(ram)) {
    expect_equal(def, min(2 * 2^30, max(256 * 2^20, ram / 8)))
  }
  expect_equal(sgpr(d$x, d$y, inducing = 3, optimize = FALSE)$control$memory, def)
  # the plan: one piece when the workspace fits, else chunks that do
  f2 <- sgpr(d$x, d$y, inducing = 3, optimize = FALSE, kernel = kernel_rbf(1, 1))
  need <- 8 * sparsevgp:::.ffi_pass_work(3, 1, 20, sparsevgp:::.stream_threads())
  f2$control$memory <- need
  expect_identical(sparsevgp:::.collapsed_plan(f2, 3L)$where, "memory")
  f2$control$memory <- need - 1
  p <- sparsevgp:::.collapsed_plan(f2, 3L)
  expect_identical(p$where, "chunks")
  expect_lte(p$bytes, need - 1)
  expect_lt(p$rows, 20L)
})

# ---- a cluster --------------------------------------------------------------

start_cluster <- function() {
  skip_on_cran()
  cl <- tryCatch(parallel::makePSOCKcluster(2L), error = function(e) NULL)
  if (is.null(cl)) skip("a PSOCK cluster cannot start here")
  cl
}

test_that("a two-worker PSOCK cluster equals one process", {
  cl <- start_cluster()
  on.exit(parallel::stopCluster(cl))
  d <- stream_data(N = 101, D = 2)
  noises <- list(constant = 0.05, known = seq(0.02, 0.1, length.out = 101),
                 model = ~ x1 + I(x2^2))
  for (nz in names(noises)) {
    fit <- sgpr(d$x, d$y, kernel = kernel_matern32(c(0.8, 1.1), 1.1), inducing = d$x[1:9, ],
                noise = noises[[nz]], optimize = FALSE)
    ref <- value_grad(fit)
    h <- sparsevgp:::.cluster_setup(cl, with_rows(fit, 17))
    on <- fit
    on$cluster <- h
    expect_lt(max_rel(ref, value_grad(on)), 1e-10, label = sprintf("%s noise", nz))
    sparsevgp:::.cluster_release(h)
  }
  # a whole fit: the same bound at the same parameters, and no data left on
  # the workers afterwards
  a <- sgpr(d$x, d$y, inducing = d$x[1:9, ], optimize = FALSE)
  b <- sgpr(d$x, d$y, inducing = d$x[1:9, ], optimize = FALSE, cluster = cl)
  expect_equal(b$bound, a$bound, tolerance = 1e-10)
  expect_null(b$cluster)
  f <- sgpr(d$x, d$y, inducing = 9, cluster = cl)
  expect_s3_class(f, "sgpr")
  expect_null(f$cluster)
  expect_equal(bound_at(f), f$bound, tolerance = 1e-10)
  left <- parallel::clusterCall(cl, function() ls(asNamespace("sparsevgp")$.shards))
  expect_identical(unlist(left), character(0))
  expect_error(sgpr(d$x, d$y, inducing = 9, cluster = "cl"), "'cluster' must be a cluster")
})

test_that("a worker that dies gives a clear error, never a wrong bound", {
  cl <- start_cluster()
  on.exit(try(parallel::stopCluster(cl), silent = TRUE))
  d <- stream_data(N = 60, D = 1)
  fit <- sgpr(d$x, d$y, inducing = 6, optimize = FALSE)
  h <- sparsevgp:::.cluster_setup(cl, fit)
  fit$cluster <- h
  expect_equal(value_grad(fit)[["value"]], fit$bound, tolerance = 1e-10)
  # a worker that lost its share
  parallel::clusterCall(cl[2], function(key) {
    rm(list = key, envir = asNamespace("sparsevgp")$.shards)
  }, h$key)
  expect_error(value_grad(fit), "holds no share", class = "sparsevgp_cluster_error")
  # a worker that is gone: also inside the fitting loop, which otherwise
  # steps back from failed evaluations
  try(parallel::clusterCall(cl[2], function() quit(save = "no", runLast = FALSE)),
      silent = TRUE)
  on.exit(try(close(cl[[2L]]$con), silent = TRUE), add = TRUE)
  fit$fixed[] <- FALSE
  expect_error(sparsevgp:::.fit_lbfgsb(fit), "the cluster failed", class = "sparsevgp_cluster_error")
})

test_that("chunks and a cluster equal one piece for kernel sums and products and with prior weights", {
  d <- stream_data(N = 61, D = 2)
  Z <- d$x[c(2, 8, 15, 23, 37, 44, 58), ]
  w <- rep(c(1, 2, 3), length.out = 61)
  kernels <- list(sum = kernel_rbf(c(0.7, 1.3), 0.8) + kernel_matern52(2, 0.3),
                  product = kernel_rbf(0.9, 1.1) * kernel_matern32(c(1.5, 2), 1))
  fits <- list()
  for (kn in names(kernels)) {
    fits[[kn]] <- sgpr(d$x, d$y, kernel = kernels[[kn]], inducing = Z, noise = 0.05,
                       optimize = FALSE)
  }
  fits$weights <- sgpr(d$x, d$y, kernel = kernel_rbf(0.8, 1), inducing = Z, noise = 0.05,
                       weights = w, optimize = FALSE)
  for (m in names(fits)) {
    ref <- value_grad(fits[[m]])
    for (rows in c(1, 9, 60)) {
      expect_lt(max_rel(ref, value_grad(with_rows(fits[[m]], rows))), 1e-10,
                label = sprintf("%s, chunks of %d", m, rows))
    }
  }
  cl <- start_cluster()
  on.exit(parallel::stopCluster(cl))
  for (m in names(fits)) {
    h <- sparsevgp:::.cluster_setup(cl, with_rows(fits[[m]], 11))
    on <- fits[[m]]
    on$cluster <- h
    expect_lt(max_rel(value_grad(fits[[m]]), value_grad(on)), 1e-10,
              label = sprintf("%s on a cluster", m))
    sparsevgp:::.cluster_release(h)
  }
})

# The largest difference within each block of components (the value, the
# variance, the lengthscales, the inducing inputs, ...) relative to the
# block's largest component: the threads add sums in another order, so a
# component much smaller than the others of its block (by cancellation)
# carries the rounding of the large ones.
max_rel_block <- function(a, b) {
  expect_identical(names(a), names(b))
  blocks <- split(seq_along(a), sub("\\[.*$", "", names(a)))
  max(vapply(blocks, function(i) max(abs(a[i] - b[i])) / max(abs(a[i])), 1))
}

test_that("the gradient contraction in 1, 2 and 3 threads equals one piece for every kernel", {
  d <- stream_data(N = 1001, D = 3)
  Z <- d$x[seq(5, 995, length.out = 24), ]
  # a point 1e-6 from an inducing input: Matern 1/2 accumulates that pair
  # directly, which the threads must add up too
  d$x[1, ] <- Z[1, ] + 1e-6
  kernels <- list(rbf = kernel_rbf(0.8, 1.3),
                  rbf_ard = kernel_rbf(c(0.7, 1.4, 1), 0.9),
                  matern12 = kernel_matern12(c(1.1, 0.8, 1.5), 1),
                  matern32 = kernel_matern32(0.9, 1.2),
                  matern52 = kernel_matern52(c(0.6, 1, 1.3), 0.8),
                  sum = kernel_rbf(c(0.7, 1.3, 1), 0.8) + kernel_matern52(2, 0.3),
                  product = kernel_rbf(0.9, 1.1) * kernel_matern32(c(1.5, 2, 1), 1))
  old <- options(sparsevgp.threads = 1L)
  on.exit(options(old))
  for (kn in names(kernels)) {
    fit <- sgpr(d$x, d$y, kernel = kernels[[kn]], inducing = Z, noise = 0.05,
                optimize = FALSE)
    options(sparsevgp.threads = 1L)
    whole <- value_grad(fit)
    expect_true(any(grepl("Z", names(whole))))
    # chunks of 450 (450, 450, 101 rows) and 1000 (1000, 1): 7, 7, 1, 15
    # and 1 blocks of 64 points, so up to 3 threads per chunk
    for (rows in c(450, 1000)) {
      got <- lapply(1:3, function(nt) {
        options(sparsevgp.threads = nt)
        value_grad(with_rows(fit, rows))
      })
      for (nt in 2:3) {
        expect_lt(max_rel_block(got[[1]], got[[nt]]), 1e-12,
                  label = sprintf("%s, chunks of %d, %d threads vs 1", kn, rows, nt))
      }
      for (nt in 1:3) {
        expect_lt(max_rel(whole, got[[nt]]), 1e-10,
                  label = sprintf("%s, chunks of %d, %d threads vs one piece", kn, rows, nt))
      }
    }
    # the contraction itself, with and without the kernel matrix at hand:
    # each kernel parameter, and the inputs relative to the largest, of 2
    # and 3 threads against 1
    k <- sparsevgp:::.kernel_at(fit$kernel, fit$params)
    set.seed(7)
    G <- matrix(rnorm(nrow(Z) * nrow(d$x)), nrow(Z))
    K <- if (!sparsevgp:::.is_combo(k)) kernel_matrix(k, Z, d$x)
    one <- sparsevgp:::.kern_grad(k, Z, d$x, G, TRUE, K = K)
    one_k <- sparsevgp:::.kern_grad(k, Z, d$x, G, TRUE)
    for (nt in 2:3) {
      for (g in list(sparsevgp:::.kern_grad(k, Z, d$x, G, TRUE, K = K, threads = nt),
                     sparsevgp:::.kern_grad(k, Z, d$x, G, TRUE, threads = nt))) {
        expect_lt(max(abs(g$theta - one$theta) / abs(one$theta)), 1e-12,
                  label = sprintf("%s kernel parameters, %d threads", kn, nt))
        expect_lt(max(abs(g$x - one$x)) / max(abs(one$x)), 1e-12,
                  label = sprintf("%s inputs, %d threads", kn, nt))
      }
    }
    expect_lt(max(abs(one_k$theta - one$theta) / abs(one$theta)), 1e-12)
  }
  expect_error(sparsevgp:::.ffi_kern_grad(kernels$rbf, Z, d$x, G, TRUE, threads = 0L),
               "'threads' must be one whole number")
})
