# The orthogonal collapsed bounds of osgpr() over row chunks and in threads
# (R/stream.R, src/bound_stream_orthogonal.c) against the bounds
# computed in one piece (src/bound_orthogonal.c, itself checked against
# dense formulas and finite differences in test-osgpr.R), and a central
# finite-difference check of the chunked gradient itself.

# The bound and its gradient through objective(): value and every free
# component.
ovalue_grad <- function(fit) {
  o <- objective(fit)
  c(value = -o$fn(o$par), -o$gr(o$par))
}

# The largest relative difference over the components, each relative to its
# own size (floored at 1e-6 of the largest, for components that are 0 up to
# rounding).
omax_rel <- function(a, b) {
  expect_identical(names(a), names(b))
  max(abs(a - b) / pmax(abs(a), 1e-6 * max(abs(a))))
}

# A fit with chunks of `rows` rows: control$memory is the workspace of
# chunks of that many rows for M = M1 + M2.
owith_rows <- function(fit, rows) {
  fit$control$memory <- sparsevgp:::.memory_for_rows(fit, rows,
                                                     nrow(fit$params$Z) + nrow(fit$params$O))
  fit
}

ostream_data <- function(N = 53, D = 2, seed = 3) {
  set.seed(seed)
  x <- matrix(runif(N * D, -2, 2), N, D)
  y <- sin(2 * x[, 1]) + 0.3 * x[, D]^2 + rnorm(N, sd = 0.2)
  list(x = x, y = y)
}

# the four objectives: two families and the union bound of each
ovariants <- list(c("solve", "family"), c("odvgp", "family"), c("solve", "union"),
                  c("odvgp", "union"))

test_that("osgpr in chunks equals osgpr in one piece for every kernel, noise kind and bound", {
  d <- ostream_data()
  N <- nrow(d$x)
  kernels <- list(kernel_rbf(lengthscale = 0.8, variance = 1.3),
                  kernel_rbf(lengthscale = c(0.7, 1.4), variance = 0.9),
                  kernel_matern12(lengthscale = 1.1, variance = 1),
                  kernel_matern32(lengthscale = c(0.9, 1.2), variance = 1.2),
                  kernel_matern52(lengthscale = 0.6, variance = 0.8),
                  kernel_rbf(c(0.7, 1.3), 0.8) + kernel_matern52(2, 0.3),
                  kernel_rbf(0.9, 1.1) * kernel_matern32(c(1.5, 2), 1))
  noises <- list(constant = 0.05, known = seq(0.02, 0.1, length.out = N),
                 model = ~ x1 + I(x2^2))
  Z <- d$x[c(3, 9, 17, 25), ]
  O <- d$x[c(31, 40, 44), ]
  for (i in seq_along(kernels)) for (nz in names(noises)) for (tb in ovariants) {
    fit <- osgpr(d$x, d$y, kernel = kernels[[i]], inducing = Z, orthogonal = O,
                 type = tb[1], bound = tb[2], noise = noises[[nz]], optimize = FALSE)
    ref <- ovalue_grad(fit)
    for (rows in c(1, 10, 52)) {
      expect_lt(omax_rel(ref, ovalue_grad(owith_rows(fit, rows))), 1e-10,
                label = sprintf("kernel %d, %s noise, %s %s bound, chunks of %d", i, nz,
                                tb[1], tb[2], rows))
    }
  }
})

test_that("osgpr in chunks equals one piece with weights, an offset, held sets and one empty set", {
  d <- ostream_data(N = 47, D = 1)
  w <- rep(c(1, 2, 3), length.out = 47)
  k <- kernel_matern32(0.9, 1.1)
  fits <- list(
    weights = osgpr(d$x, d$y, kernel = k, inducing = d$x[1:3, , drop = FALSE],
                    orthogonal = d$x[4:7, , drop = FALSE], noise = 0.05, weights = w,
                    offset = 0.1 * d$x[, 1], optimize = FALSE),
    held = osgpr(d$x, d$y, kernel = k, inducing = d$x[1:3, , drop = FALSE],
                 orthogonal = d$x[4:7, , drop = FALSE], type = "odvgp", noise = 0.05,
                 fixed = c("Z", "O[2,1]"), optimize = FALSE),
    no_inducing = osgpr(d$x, d$y, kernel = k, inducing = 0,
                        orthogonal = d$x[4:7, , drop = FALSE], noise = 0.05, optimize = FALSE),
    no_orthogonal = osgpr(d$x, d$y, kernel = k, inducing = d$x[1:5, , drop = FALSE],
                          orthogonal = 0, noise = 0.05, optimize = FALSE))
  for (m in names(fits)) {
    ref <- ovalue_grad(fits[[m]])
    for (rows in c(1, 6, 46)) {
      expect_lt(omax_rel(ref, ovalue_grad(owith_rows(fits[[m]], rows))), 1e-10,
                label = sprintf("%s, chunks of %d", m, rows))
    }
  }
})

test_that("the chunked gradient matches central finite differences of the chunked bound", {
  d <- ostream_data(N = 41)
  for (tb in ovariants[1:2]) {
    fit <- osgpr(d$x, d$y, kernel = kernel_rbf(c(0.8, 1.2), 1), inducing = d$x[1:3, ],
                 orthogonal = d$x[4:6, ], type = tb[1], noise = ~ x1, optimize = FALSE)
    expect_grad(owith_rows(fit, 7), tol = 1e-6)
  }
})

test_that("the chunked path holds no N x M matrix and gives the same fit, posterior and predictions", {
  d <- ostream_data(N = 45)
  Z <- d$x[1:4, ]
  O <- d$x[5:8, ]
  for (type in c("solve", "odvgp")) {
    fit <- osgpr(d$x, d$y, kernel = kernel_rbf(0.9, 1), inducing = Z, orthogonal = O,
                 type = type, noise = 0.1, optimize = FALSE)
    ch <- owith_rows(fit, 9)
    expect_identical(sparsevgp:::.collapsed_plan(ch, 8L)$where, "chunks")
    lambda <- rep(0.1, 45)
    b <- sparsevgp:::.collapsed_eval(ch, ch$params, rbind(Z, O), TRUE, M1 = 4L,
                                     variant = type)
    expect_null(b$Kwf)
    expect_null(b$kdiag)
    # the dense one-piece routine (src/bound_orthogonal.c) on the whole
    # kernel matrices, contracted in R: an independent route
    k <- sparsevgp:::.kernel_at(fit$kernel, fit$params)
    km <- sparsevgp:::.collapsed_matrices(k, rbind(Z, O), d$x)
    a <- sparsevgp:::.ffi_orthogonal_bound(km$Kww, km$Kwf, 4L, km$kdiag, lambda,
                                           d$y - fit$params$mean, type, 0, 1e-2, TRUE)
    for (nm in c("bound", "bounds", "logdet", "fit", "trace", "jitter", "L", "LB", "LBu",
                 "LBv", "c", "w")) {
      expect_equal(b[[nm]], a[[nm]], tolerance = 1e-12, label = nm)
    }
    ga <- sparsevgp:::.contract(k, d$x, rbind(Z, O), Gww = a$Gww, Gwf = a$Gwf, gdiag = a$gdiag,
                                jitter = rep(a$jitter, c(4, 4)))
    expect_equal(b$gk, ga, tolerance = 1e-10)
    expect_equal(b$blocks$mean, -sum(a$gytil), tolerance = 1e-10)
    expect_equal(b$blocks$noise, sum(a$glambda * lambda), tolerance = 1e-10)
    # a fit built with the budget: the same bounds, posterior and predictions
    fc <- osgpr(d$x, d$y, kernel = kernel_rbf(0.9, 1), inducing = Z, orthogonal = O,
                type = type, noise = 0.1, optimize = FALSE,
                control = list(memory = ch$control$memory))
    expect_equal(fc$control$memory, ch$control$memory)
    expect_equal(fc$bound, fit$bound, tolerance = 1e-12)
    expect_equal(fc$bounds, fit$bounds, tolerance = 1e-12)
    expect_equal(posterior_orthogonal(fc), posterior_orthogonal(fit), tolerance = 1e-10)
    expect_equal(predict(fc, d$x[1:5, ]), predict(fit, d$x[1:5, ]), tolerance = 1e-10)
    expect_equal(fitted(fc), fitted(fit), tolerance = 1e-10)
    expect_equal(osgpr_components(fc), osgpr_components(fit), tolerance = 1e-10)
    expect_false(is.null(fc$bounds))
    expect_equal(fc$posterior$bounds, fit$posterior$bounds, tolerance = 1e-12)
  }
})

test_that("osgpr_components in blocks of rows equals the components row by row", {
  d <- ostream_data(N = 60, D = 1)
  fit <- osgpr(d$x, d$y, kernel = kernel_rbf(0.7, 1), inducing = d$x[1:4, , drop = FALSE],
               orthogonal = d$x[5:8, , drop = FALSE], noise = 0.05, optimize = FALSE)
  xs <- matrix(seq(-2.5, 2.5, length.out = 2300))
  all <- osgpr_components(fit, xs)
  idx <- c(1, 999, 1000, 1001, 2001, 2300)
  some <- osgpr_components(fit, xs[idx, , drop = FALSE])
  for (part in c("g", "h", "l", "total")) {
    expect_equal(unname(all[[part]]$mean[idx]), unname(some[[part]]$mean), tolerance = 1e-12)
    expect_equal(unname(all[[part]]$var[idx]), unname(some[[part]]$var), tolerance = 1e-12)
  }
  # the parts add up to the prediction at every block
  p <- predict(fit, xs)
  expect_equal(unname(all$total$mean + all$constant), unname(p$mean), tolerance = 1e-10)
})

test_that("one and two threads give the same orthogonal bound and gradient", {
  d <- ostream_data(N = 700, D = 3)
  old <- options(sparsevgp.threads = 1L)
  on.exit(options(old))
  for (type in c("solve", "odvgp")) {
    fit <- osgpr(d$x, d$y, inducing = d$x[1:12, ], orthogonal = d$x[13:25, ], type = type,
                 kernel = kernel_matern52(c(0.8, 1, 1.3), 1.1), noise = ~ x1,
                 optimize = FALSE)
    options(sparsevgp.threads = 1L)
    one <- ovalue_grad(owith_rows(fit, 300))
    whole <- ovalue_grad(fit)
    options(sparsevgp.threads = 2L)
    two <- ovalue_grad(owith_rows(fit, 300))
    # relative to the largest component (the thread blocks add the M x M
    # sums in another order), and each component to 1e-10
    expect_lt(max(abs(one - two)) / max(abs(one)), 1e-12)
    expect_lt(omax_rel(one, two), 1e-10)
    expect_lt(omax_rel(one, whole), 1e-10)
  }
})

test_that("an osgpr fit with a memory budget ends where the fit in one piece does", {
  d <- ostream_data(N = 60, D = 1)
  Z <- d$x[c(5, 20, 35), , drop = FALSE]
  O <- d$x[c(12, 28, 50), , drop = FALSE]
  a <- osgpr(d$x, d$y, inducing = Z, orthogonal = O, control = list(schedule = "joint"))
  b <- osgpr(d$x, d$y, inducing = Z, orthogonal = O,
             control = list(schedule = "joint",
                            memory = sparsevgp:::.memory_for_rows(a, 7, 6)))
  expect_equal(b$bound, a$bound, tolerance = 1e-6)
  expect_equal(b$params$lengthscale, a$params$lengthscale, tolerance = 1e-3)
})

test_that("osgpr checks control$memory and selects within it", {
  d <- ostream_data(N = 30, D = 1)
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, optimize = FALSE,
                     control = list(memory = "lots")), "control\\$memory")
  expect_error(osgpr(d$x, d$y, inducing = 2, orthogonal = 2, optimize = FALSE,
                     control = list(memory = 0)), "control\\$memory")
  f <- osgpr(d$x, d$y, inducing = 2, orthogonal = 2, optimize = FALSE,
             control = list(memory = "1GB"))
  expect_equal(f$control$memory, 2^30)
  # the default budget: small data stay in one piece
  g <- osgpr(d$x, d$y, inducing = 2, orthogonal = 2, optimize = FALSE)
  expect_equal(g$control$memory, sparsevgp:::.default_memory())
  expect_identical(sparsevgp:::.collapsed_plan(g, 4L)$where, "memory")
  # a budget too small for greedy selection on all rows: the selection runs
  # on a subsample of 10 (M1 + M2) rows, and the two sets stay disjoint
  d <- ostream_data(N = 100, D = 1)
  mem <- sparsevgp:::.memory_for_rows(g, 50, 4)
  set.seed(1)
  h <- osgpr(d$x, d$y, inducing = 2, orthogonal = 2, optimize = FALSE,
             control = list(memory = mem))
  expect_identical(nrow(unique(rbind(h$params$Z, h$params$O))), 4L)
  set.seed(1)
  sub <- select_inducing(d$x, h$kernel, M = 4, memory = mem)
  expect_lt(length(sub$subsample), 100L)
  expect_equal(rbind(h$params$Z, h$params$O), sub$Z, ignore_attr = TRUE)
})

test_that("df.residual() in chunks equals df.residual() in one piece", {
  d <- ostream_data(N = 45)
  for (nz in list(0.05, ~ x1)) {
    o <- osgpr(d$x, d$y, kernel = kernel_rbf(0.9, 1), inducing = d$x[1:4, ],
               orthogonal = d$x[5:8, ], noise = nz, optimize = FALSE)
    s <- sgpr(d$x, d$y, kernel = kernel_rbf(0.9, 1), inducing = d$x[1:8, ], noise = nz,
              optimize = FALSE)
    for (rows in c(1, 7, 44)) {
      expect_equal(df.residual(owith_rows(o, rows)), df.residual(o), tolerance = 1e-10)
      sc <- s
      sc$control$memory <- sparsevgp:::.memory_for_rows(s, rows)
      expect_equal(df.residual(sc), df.residual(s), tolerance = 1e-10)
    }
  }
})
