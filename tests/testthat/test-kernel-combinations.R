# Sums and products of kernels (R/kernels.R, src/kernel_combo.c): kernel
# matrices against the parts' dense matrices, the contractions against
# finite differences of sum(G * K), every model's gradient against finite
# differences with nested combinations, the exact-GP identity, selection,
# starting values, names and printing.

# Two nested combinations of 2 inputs: a sum of a product (whose first factor
# is a sum with an ARD part) and a kernel; a product whose second factor is
# a sum (every variance free).
combo_kernels <- function() {
  list(
    nested = (kernel_rbf(c(0.7, 1.1), 0.8) + kernel_matern12(0.9, 0.5)) *
      kernel_matern52(1.3) + kernel_matern32(0.6, 0.3),
    product = kernel_rbf(0.8, 1) *
      (kernel_matern32(0.7, 0.6) + kernel_matern52(c(1, 1.5), 0.4)))
}

# Dense oracle: the combination of the parts' naive matrices.
naive_combo <- function(k, a, b) {
  if (!inherits(k, "sparsevgp_kernel_combo")) return(naive_kernel(k, a, b))
  Ks <- lapply(k$parts, naive_combo, a = a, b = b)
  Reduce(if (k$op == "sum") `+` else `*`, Ks)
}

# The kernel with the log parameters th of its parts (per part: log
# variance, then log lengthscales), the order of the contractions.
combo_set_theta <- function(k, th) {
  pos <- 0L
  sparsevgp:::.kern_map(k, function(l, i) {
    n <- length(l$lengthscale)
    l$variance <- exp(th[pos + 1L])
    l$lengthscale <- exp(th[pos + 1L + seq_len(n)])
    pos <<- pos + 1L + n
    l
  })
}

combo_theta <- function(k) {
  unlist(lapply(sparsevgp:::.kern_leaves(k), function(l) log(c(l$variance, l$lengthscale))))
}

test_that("K, diag K and k(x, x) of a combination are the sums and products of the parts' (dense check)", {
  set.seed(2)
  a <- matrix(runif(14, -1, 1), 7)
  b <- matrix(runif(10, -1, 1), 5)
  for (k in combo_kernels()) {
    expect_equal(kernel_matrix(k, a, b), naive_combo(k, a, b), tolerance = 1e-12)
    expect_equal(kernel_matrix(k, a), naive_combo(k, a, a), tolerance = 1e-12)
    expect_equal(kernel_matrix(k, a, diag = TRUE), diag(naive_combo(k, a, a)), tolerance = 1e-12)
    expect_equal(sparsevgp:::.kern_scale(k), naive_combo(k, a[1, , drop = FALSE], a[1, , drop = FALSE])[1, 1],
                 tolerance = 1e-14)
  }
  # '+' and '*' against the parts, and flattening of repeated operators
  k1 <- kernel_rbf(0.5, 2); k2 <- kernel_matern52(0.3, 0.5); k3 <- kernel_matern12(2, 1)
  expect_equal(kernel_matrix(k1 + k2, a), kernel_matrix(k1, a) + kernel_matrix(k2, a))
  expect_equal(kernel_matrix(k1 * k2, a, b), kernel_matrix(k1, a, b) * kernel_matrix(k2, a, b))
  expect_length((k1 + k2 + k3)$parts, 3L)
  expect_length((k1 * (k2 * k3))$parts, 3L)
  expect_equal(kernel_matrix((k1 + k2) * k3, a), (kernel_matrix(k1, a) + kernel_matrix(k2, a)) *
                 kernel_matrix(kernel_matern12(2, 1), a))
})

test_that("the contractions of a combination are the gradients of sum(G * K): parameters and inputs, symmetric and cross", {
  set.seed(4)
  a <- matrix(runif(12, -1, 1), 6)
  b <- matrix(runif(10, -1, 1), 5)
  a[6, ] <- a[2, ]                          # coincident points
  Gc <- matrix(rnorm(30), 6, 5)
  Gs <- matrix(rnorm(36), 6, 6)             # not symmetric
  g <- rnorm(6)
  for (k in combo_kernels()) {
    th <- combo_theta(k)
    Fc <- function(t) sum(Gc * kernel_matrix(combo_set_theta(k, t), a, b))
    Fs <- function(t) sum(Gs * kernel_matrix(combo_set_theta(k, t), a))
    Fd <- function(t) sum(g * kernel_matrix(combo_set_theta(k, t), a, diag = TRUE))
    gc <- sparsevgp:::.kern_grad(k, a, b, Gc, TRUE)
    gs <- sparsevgp:::.kern_grad(k, a, NULL, Gs, TRUE)
    expect_equal(gc$theta, fd_grad(Fc, th), tolerance = 1e-7)
    expect_equal(gs$theta, fd_grad(Fs, th), tolerance = 1e-7)
    expect_equal(sparsevgp:::.kern_grad_diag(k, a, g), fd_grad(Fd, th), tolerance = 1e-7)
    # with K(a, b) given, as the models call it
    Kab <- kernel_matrix(k, a, b)
    expect_equal(sparsevgp:::.kern_grad(k, a, b, Gc, TRUE, K = Kab)$theta, gc$theta,
                 tolerance = 1e-12)
    Fa <- function(v) sum(Gc * kernel_matrix(k, matrix(v, nrow(a)), b))
    expect_equal(as.vector(gc$x), fd_grad(Fa, as.vector(a)), tolerance = 1e-7)
    Fas <- function(v) sum(Gs * kernel_matrix(k, matrix(v, nrow(a))))
    # a Matern 1/2 part is not differentiable at the coincident points:
    # compare away from them
    keep <- setdiff(seq_along(a), c(2, 6, 8, 12))
    expect_equal(as.vector(gs$x)[keep], fd_grad(Fas, as.vector(a))[keep], tolerance = 1e-7)
  }
})

test_that("every model's gradient matches finite differences with nested combinations: every parameter", {
  d <- toy_data(20, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(1, 5, 9, 14, 18), ] + 0.03
  O <- d$x[c(3, 11), ] - 0.03
  lam <- seq(0.02, 0.25, length.out = 20)
  q <- random_q(5, seed = 7)
  set.seed(9)
  c <- runif(20, 0.1, 3)
  for (kn in names(combo_kernels())) {
    k <- combo_kernels()[[kn]]
    fits <- list(
      gpr = gpr(d$x, d$y, kernel = k, noise = 0.1, optimize = FALSE),
      sgpr = sgpr_at(d, k, Z, noise = 0.05, mean = "constant"),
      sgpr_known = sgpr_at(d, k, Z, noise = lam, mean = "constant"),
      sgpr_loglinear = sgpr_at(d, k, Z, noise = ~ x1, mean = "constant"),
      osgpr_solve = osgpr_at(d, k, Z, O, type = "solve", mean = "constant"),
      osgpr_odvgp = osgpr_at(d, k, Z, O, type = "odvgp", mean = "constant"),
      osgpr_union = osgpr_at(d, k, Z, O, bound = "union", mean = "constant"),
      pgpr = pgpr_at(list(x = d$x, y = y01), k, Z, c, mean = "constant",
                     optimize_inducing = TRUE, jitter = 1e-8),
      svgp_logit = set_q(svgp(d$x, y01, kernel = k, inducing = Z, mean = "constant",
                              optimize = FALSE), q),
      svgp_gaussian = set_q(svgp(d$x, d$y, kernel = k, inducing = Z, likelihood = "gaussian",
                                 noise = 0.1, optimize = FALSE), q),
      svgp_probit_nw = set_q_nw(svgp(d$x, y01, kernel = k, inducing = Z, likelihood = "probit",
                                     mean = "constant", whiten = FALSE, optimize = FALSE), q))
    for (m in names(fits)) {
      nm <- names(objective(fits[[m]])$par)
      # every free kernel parameter of every part is in the objective
      P <- length(sparsevgp:::.kern_leaves(k))
      free <- setdiff(sprintf("log_variance[k%d]", seq_len(P)),
                      paste0("log_", sparsevgp:::.kern_held(k)))
      expect_true(all(free %in% nm), label = paste(kn, m, "variances"))
      ard <- c(nested = 1L, product = 3L)[[kn]]
      expect_true(all(sprintf("log_lengthscale[k%d,%d]", ard, 1:2) %in% nm),
                  label = paste(kn, m, "ARD lengthscales"))
      expect_grad(fits[[m]])
    }
  }
})

test_that("odvgp's gradient matches finite differences with nested combinations, exact and column-sampled KL", {
  d <- toy_data(20, 2)
  y01 <- as.integer(d$y > 0)
  Z <- d$x[c(1, 5, 9, 14, 18), ] + 0.03
  O <- d$x[c(3, 7, 11, 16), ] - 0.03
  set.seed(11)
  with_q <- function(f) {
    f$params$q_mu <- rnorm(5)
    f$params$q_sqrt_diag <- exp(rnorm(5, sd = 0.2))
    f$params$q_sqrt_lower <- rnorm(10, sd = 0.1)
    f$params$a_gamma <- rnorm(4)
    f
  }
  for (kn in names(combo_kernels())) {
    k <- combo_kernels()[[kn]]
    fits <- list(
      gaussian = with_q(odvgp(d$x, d$y, kernel = k, inducing = Z, orthogonal = O,
                              likelihood = "gaussian", noise = 0.1, optimize = FALSE)),
      logit = with_q(odvgp(d$x, y01, kernel = k, inducing = Z, orthogonal = O,
                           optimize = FALSE)))
    for (m in names(fits)) expect_grad(fits[[m]])
    # the column-sampled KL at fixed columns
    f <- fits$gaussian
    f$control$kl_columns <- 2L
    o <- sparsevgp:::.objective(f, safe = FALSE)
    fn <- function(par) o$value_grad(par, batch = 1:20, kl_index = c(1L, 3L))$value
    g <- o$value_grad(o$par, batch = 1:20, kl_index = c(1L, 3L))$grad
    expect_lte(max(abs(g - fd_grad(fn, o$par))) / max(1, max(abs(g))), 1e-6,
               label = paste(kn, "column-sampled KL gradient"))
  }
})

test_that("with a jitter large enough to matter, its dependence on each part's variance is in the gradient", {
  # the jitter is relative to k(x, x): for a sum d k(x, x) / d log v_i = v_i,
  # for a product k(x, x) itself
  d <- toy_data(20, 2)
  Z <- d$x[c(1, 5, 9, 14, 18), ] + 0.03
  O <- d$x[c(3, 11), ] - 0.03
  y01 <- as.integer(d$y > 0)
  for (k in combo_kernels()) {
    expect_grad(sgpr_at(d, k, Z, mean = "constant", control = list(jitter = 1e-2)))
    expect_grad(osgpr_at(d, k, Z, O, mean = "constant", control = list(jitter = 1e-3)))
    expect_grad(svgp(d$x, y01, kernel = k, inducing = Z, optimize = FALSE,
                     control = list(jitter = 1e-2)))
    # the jitter's term is not negligible here: without it the gradient differs
    f <- sgpr_at(d, k, Z, mean = "constant", control = list(jitter = 1e-2))
    km <- sparsevgp:::.collapsed_matrices(sparsevgp:::.kernel_at(f$kernel, f$params),
                                          f$params$Z, d$x)
    b <- sparsevgp:::.ffi_gaussian_bound(km$Kww, km$Kwf, km$kdiag, rep(0.05, 20),
                                         d$y - f$params$mean, 1e-2, 1e-2, TRUE)
    expect_gt(abs(sum(diag(b$Guu)) * b$jitter), 1e-4)
  }
})

test_that("a product holds the variances of its later single factors, named and reported as fixed", {
  k <- (kernel_rbf(0.5) + kernel_matern52(2, 0.3)) * kernel_rbf(3) * kernel_matern12(1, 2)
  expect_identical(sparsevgp:::.kern_held(k), c("variance[k3]", "variance[k4]"))
  expect_equal(k$parts[[2]]$variance, 1)        # unset: 1
  expect_equal(k$parts[[3]]$variance, 2)        # given: kept
  d <- toy_data(20, 1)
  f <- sgpr(d$x, d$y, kernel = k, inducing = d$x[1:5, , drop = FALSE], noise = 0.1,
            optimize = FALSE)
  expect_true(all(f$fixed[c("log_variance[k3]", "log_variance[k4]")]))
  expect_false(any(f$fixed[c("log_variance[k1]", "log_variance[k2]")]))
  expect_identical(names(coef(f))[1:4], sprintf("variance[k%d]", 1:4))
  s <- summary(f)
  expect_identical(s$parameters[sprintf("variance[k%d]", 3:4), "fixed"], c(TRUE, TRUE))
  # the user's `fixed` names parts unambiguously
  f2 <- sgpr(d$x, d$y, kernel = k, inducing = d$x[1:5, , drop = FALSE], noise = 0.1,
             optimize = FALSE, fixed = c("lengthscale[k2]", "variance[k1]"))
  expect_false("log_lengthscale[k2]" %in% names(objective(f2)$par))
  expect_false("log_variance[k1]" %in% names(objective(f2)$par))
  expect_true("log_lengthscale[k1]" %in% names(objective(f2)$par))
})

test_that("sgpr with Z = X equals gpr() for a sum and a product kernel", {
  d <- toy_data(25, 2)
  xs <- matrix(c(-1, 0.5, 1.5, 0, -0.3, 0.7), 3)
  for (k in list(kernel_matern52(0.3, 0.6) + kernel_rbf(c(1.2, 2), 0.5),
                 kernel_rbf(c(0.8, 1.5), 1.2) * kernel_matern32(1.1))) {
    g <- gpr(d$x, d$y, kernel = k, noise = 0.08, mean = 0.2, optimize = FALSE)
    s <- sgpr_at(d, k, d$x, noise = 0.08, mean = 0.2, control = list(jitter = 0))
    expect_equal(as.numeric(logLik(s)), as.numeric(logLik(g)), tolerance = 1e-8)
    expect_equal(as.numeric(logLik(g)), dense_log_normal(d$y - 0.2, naive_combo(k, d$x, d$x) +
                                                            diag(0.08, 25)), tolerance = 1e-10)
    pg <- predict(g, xs, full_cov = TRUE)
    ps <- predict(s, xs, full_cov = TRUE)
    expect_equal(ps$mean, pg$mean, tolerance = 1e-8)
    expect_equal(ps$cov, pg$cov, tolerance = 1e-8)
    expect_equal(predict(s, xs)$var, diag(pg$cov), tolerance = 1e-8)
  }
})

test_that("selection with a combination: the weighted traces are those of the dense residual K - Q", {
  d <- toy_data(40, 2)
  k <- (kernel_rbf(c(0.5, 1), 1) + kernel_matern12(2, 0.2)) * kernel_matern32(1.5)
  w <- seq(0.5, 2, length.out = 40)
  for (method in c("greedy", "kmeans", "random")) {
    set.seed(3)
    s <- select_inducing(d$x, k, M = 6, method = method, weights = w)
    Kff <- naive_combo(k, d$x, d$x)
    Kuf <- naive_combo(k, s$Z, d$x)
    Q <- crossprod(Kuf, solve(naive_combo(k, s$Z, s$Z), Kuf))
    expect_equal(s$trace0, sum(w * diag(Kff)), tolerance = 1e-12)
    expect_equal(s$trace[6], sum(w * diag(Kff - Q)), tolerance = 1e-6)
  }
  # greedy picks the maximiser of w_n [K - Q]_nn at each step
  s <- select_inducing(d$x, k, M = 4, method = "greedy", weights = w)
  Kff <- naive_combo(k, d$x, d$x)
  for (m in 1:3) {
    Zm <- d$x[s$index[seq_len(m)], , drop = FALSE]
    Kuf <- naive_combo(k, Zm, d$x)
    r <- diag(Kff) - colSums(Kuf * solve(naive_combo(k, Zm, Zm), Kuf))
    expect_identical(s$index[m + 1L], which.max(w * r))
  }
  # a single kernel selects exactly as before combinations (same C path)
  set.seed(5)
  s1 <- select_inducing(d$x, kernel_rbf(0.7, 1), M = 8)
  expect_equal(s1$trace[8], {
    Kuf <- naive_kernel(kernel_rbf(0.7, 1), s1$Z, d$x)
    sum(diag(naive_kernel(kernel_rbf(0.7, 1), d$x, d$x)) -
          colSums(Kuf * solve(naive_kernel(kernel_rbf(0.7, 1), s1$Z, s1$Z), Kuf)))
  }, tolerance = 1e-6)
})

test_that("starting values: unset parts start apart (from the data) and share the variance; given values are kept", {
  d <- toy_data(60, 1)
  f <- sgpr(d$x, d$y, kernel = kernel_matern52() + kernel_rbf(), inducing = 10, optimize = FALSE)
  ls <- f$params$lengthscale
  # the median distance between inputs over its 1% quantile (no longer a
  # power of ten)
  dd <- as.vector(dist(d$x))
  apart <- unname(quantile(dd, 0.5) / quantile(dd, 0.01))
  expect_equal(unname(ls[["k2"]] / ls[["k1"]]), apart, tolerance = 1e-10)
  expect_equal(unname(f$params$variance[["k1"]]), unname(f$params$variance[["k2"]]))
  expect_equal(sum(f$params$variance), var(d$y))
  k <- kernel_matern52(lengthscale = 0.1, variance = 0.4) + kernel_rbf()
  f <- sgpr(d$x, d$y, kernel = k, inducing = 10, optimize = FALSE)
  expect_equal(f$params$lengthscale[["k1"]], 0.1)
  expect_equal(f$params$variance[["k1"]], 0.4)
  # the grid start keeps given values and scans the unset parts jointly
  st <- sparsevgp:::.start_regression(k, d$x, d$y, M = 10)
  lv <- sparsevgp:::.kern_leaves(st$kernel)
  expect_equal(lv[[1]]$lengthscale, 0.1)
  expect_equal(lv[[1]]$variance, 0.4)
  expect_true(lv[[2]]$lengthscale %in% (2^(-5:3) * sd(d$x)))
  k2 <- kernel_matern52() + kernel_rbf()
  st2 <- sparsevgp:::.start_regression(k2, d$x, d$y, M = 10)
  lv2 <- sparsevgp:::.kern_leaves(st2$kernel)
  expect_equal(lv2[[2]]$lengthscale / lv2[[1]]$lengthscale, apart, tolerance = 1e-10)
  # ARD parts: one lengthscale per column
  d2 <- toy_data(40, 2)
  f <- gpr(d2$x, d2$y, kernel = kernel_rbf() * kernel_matern32(ard = FALSE), optimize = FALSE)
  expect_named(f$params$lengthscale, c("k1,1", "k1,2", "k2"))
})

test_that("every model fits and predicts with a combination; print, summary, coef and update name the parts", {
  d <- toy_data(40, 1)
  dc <- toy_class(40, 2)
  k <- kernel_matern52(lengthscale = 0.1) + kernel_rbf(lengthscale = 1)
  fits <- list(gpr = gpr(d$x, d$y, kernel = k),
               sgpr = sgpr(d$x, d$y, kernel = k, inducing = 8),
               osgpr = osgpr(d$x, d$y, kernel = k, inducing = 5, orthogonal = 3),
               svgp = suppressWarnings(svgp(d$x, d$y, kernel = k, inducing = 8,
                                            likelihood = "gaussian", control = list(maxit = 30))),
               pgpr = pgpr(dc$x, dc$y, kernel = kernel_rbf() * kernel_matern32(), inducing = 8),
               svgp_class = suppressWarnings(svgp(dc$x, dc$y, inducing = 8,
                                                  kernel = kernel_rbf() + kernel_matern12(),
                                                  control = list(maxit = 30))))
  for (m in names(fits)) {
    f <- fits[[m]]
    expect_true(is.finite(logLik(f)), label = m)
    xn <- if (m %in% c("pgpr", "svgp_class")) dc$x[1:5, ] else d$x[1:5, , drop = FALSE]
    p <- predict(f, xn)
    expect_true(all(is.finite(p$mean)) && all(p$var >= 0), label = m)
    out <- capture.output(print(f))
    expect_true(any(grepl("kernel: k1 [+*] k2", out)), label = m)
    expect_true(any(grepl("^    k2: ", out)), label = m)
    expect_lte(length(out), 12L)
    expect_true(all(c("variance[k1]", "variance[k2]") %in% names(coef(f))), label = m)
    expect_true(any(grepl("^lengthscale\\[k1(,1)?\\]$", names(coef(f)))), label = m)
    expect_match(summary(f)$kernel, "\\[k2\\]")
  }
  # a warm start from a fit with another kernel keeps the new kernel's own values
  u1 <- update(fits$sgpr, kernel = kernel_rbf(0.3, 1), optimize = FALSE)
  expect_equal(u1$params$lengthscale, 0.3)
  u2 <- update(sgpr(d$x, d$y, kernel = kernel_rbf(0.3, 1), inducing = 8, optimize = FALSE),
               kernel = k, optimize = FALSE)
  expect_equal(unname(u2$params$lengthscale), c(0.1, 1))
  u <- update(fits$sgpr)
  expect_equal(names(coef(u)), names(coef(fits$sgpr)))
  expect_gte(as.numeric(logLik(u)), as.numeric(logLik(fits$sgpr)) - 1e-6)
  out <- capture.output(print((kernel_rbf(0.5) + kernel_matern12(c(1, 2))) * kernel_rbf()))
  expect_identical(out, c("Product of kernels: (k1 + k2) * k3",
                          "  k1: RBF, variance (from data), lengthscale 0.5",
                          "  k2: Matern 1/2, variance (from data), lengthscale (ARD) 1 2",
                          "  k3: RBF, variance 1 (fixed), lengthscale (from data)"))
})

test_that("kernels combine only with kernels, by + and *", {
  k <- kernel_rbf(1, 1)
  expect_error(k - k, "only by '\\+' and '\\*'")
  expect_error(2 * k, "both sides of '\\*' must be kernels")
  expect_error(k + 1, "both sides of '\\+' must be kernels")
  expect_error(kernel_matrix(k + kernel_rbf(c(1, 2, 3), 1), matrix(0, 2, 2)),
               "3 lengthscales but 'x' has 2 columns")
  expect_error(kernel_matrix(k + kernel_rbf(), matrix(0, 2, 2)), "must be set")
})

test_that("kernel trees nest at most 32 levels, with a clear error in R and in C", {
  k <- kernel_rbf(1, 1)
  for (i in 1:31) k <- if (i %% 2) k + kernel_rbf(1, 1) else k * kernel_rbf(1, 1)
  expect_identical(sparsevgp:::.kern_check_depth(k), 31L)
  # k is a sum: a product adds a level, another sum flattens into it
  expect_identical(sparsevgp:::.kern_check_depth(k + kernel_rbf(1, 1)), 31L)
  k32 <- k * kernel_matern12(2, 1)
  expect_identical(sparsevgp:::.kern_check_depth(k32), 32L)
  expect_error(k32 + kernel_rbf(1, 1), "nest sums and products 33 levels deep")
  expect_identical(sparsevgp:::.kern_check_depth(k32 * kernel_rbf(1, 1)), 32L)
  # 1000 alternating levels are refused at the 33rd, not by R's stack
  k <- kernel_rbf(1, 1)
  expect_error(for (i in 1:1000) k <- if (i %% 2) k + kernel_rbf(1, 1) else k * kernel_rbf(1, 1),
               "more than the 32 allowed")
  # a tree built by hand is checked without recursion
  deep <- kernel_rbf(1, 1)
  for (i in 1:5000) {
    deep <- structure(list(op = if (i %% 2) "sum" else "product",
                           parts = list(kernel_rbf(1, 1), deep)),
                      class = c("sparsevgp_kernel_combo", "sparsevgp_kernel"))
  }
  x <- matrix(as.double(1:4))
  expect_error(kernel_matrix(deep, x), "more than 32 levels deep")
  expect_error(sgpr(x, c(1, 3, 2, 4), kernel = deep), "more than 32 levels deep")
  # C refuses a deeper list itself (R_CheckStack and a depth limit)
  ns <- asNamespace("sparsevgp")
  leaf <- list(1L, 1, 1)
  nest <- function(depth) {
    kk <- leaf
    for (i in seq_len(depth)) kk <- list(1L + (i %% 2L), list(leaf, kk))
    kk
  }
  expect_equal(dim(.Call(ns$ffi_kc_matrix, nest(32), x, NULL)), c(4L, 4L))
  expect_error(.Call(ns$ffi_kc_matrix, nest(33), x, NULL), "more than 32 levels")
  expect_error(.Call(ns$ffi_kc_matrix, nest(200000), x, NULL), "more than 32 levels")
  expect_error(.Call(ns$ffi_sel_greedy, nest(100), x, rep(1, 4), 2, 0, 1:4, 0, 1, FALSE),
               "more than 32 levels")
})

test_that("a sum of many default kernels starts each part from the data, within its distances", {
  set.seed(4)
  x <- matrix(runif(600, -3, 3), 300, 2)
  y <- sin(2 * x[, 1]) + 0.3 * x[, 2] + rnorm(300, sd = 0.1)
  k <- kernel_rbf()
  for (i in 1:19) k <- k + kernel_rbf()
  sp <- sparsevgp:::.kern_part_spread(k, x)
  expect_length(sp, 20L)
  expect_true(all(diff(sp) > 0))
  # the 1% and 50% quantiles of the distances between standardised inputs,
  # relative to their median
  d <- as.vector(dist(scale(x)))
  expect_equal(sp[c(1, 20)], unname(quantile(d, c(0.01, 0.5)) / median(d)),
               tolerance = 1e-10)
  # no part starts beyond the data's scale: the fit is not refused
  f <- sgpr(x, y, kernel = k, inducing = 20, optimize = FALSE)
  ls <- f$params$lengthscale
  expect_length(ls, 40L)
  expect_true(all(is.finite(ls) & ls > 1e-3 & ls < 1e3))
  # one part, or parts whose lengthscales are given: no spread
  expect_identical(sparsevgp:::.kern_part_spread(kernel_rbf(), x), 1)
  expect_identical(sparsevgp:::.kern_part_spread(kernel_rbf(1) + kernel_rbf(), x), c(1, 1))
  # inputs with few distinct distances fall back to factors of 2
  xg <- matrix(rep(c(0, 1), 50))
  expect_equal(sparsevgp:::.kern_part_spread(kernel_rbf() + kernel_rbf() + kernel_rbf(), xg),
               c(0.25, 0.5, 1))
})
