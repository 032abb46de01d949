# The starts and the training schedule of the svgp() and odvgp()
# classifiers (R/uncollapsed_training.R).

# Two classes in 2-D separated by a circle: a clear signal that a flat
# latent function (all probabilities near 1/2) misses entirely.
circle_data <- function(n = 150, seed = 1) {
  set.seed(seed)
  x <- matrix(rnorm(2 * n), n, 2, dimnames = list(NULL, c("x1", "x2")))
  y <- factor(ifelse(rowSums(x^2) > 1.4, "out", "in"))
  list(x = x, y = y)
}

test_that("q(u) at its conditional optimum: the ELBO is stationary in q(u)", {
  d <- circle_data(60)
  k <- kernel_rbf(1, 4)
  for (model in c("svgp", "odvgp")) {
    f <- if (model == "svgp") {
      svgp(d$x, d$y, kernel = k, inducing = d$x[1:8, ], optimize = FALSE)
    } else {
      odvgp(d$x, d$y, kernel = k, inducing = d$x[1:8, ], orthogonal = 0, optimize = FALSE)
    }
    o <- sparsevgp:::.uc_q_optimum(f, f$params, tol = 1e-10, iters = 50L)
    expect_gt(o$value, logLik(f) + 10)
    g <- sparsevgp:::.evaluate(f, o$params)$grad
    for (b in c("q_mu", "q_sqrt_diag", "q_sqrt_lower")) {
      expect_lt(max(abs(g[[b]])), 1e-4)
    }
  }
})

test_that("inside training, the gradient in the kernel is that of the profile ELBO (envelope theorem)", {
  d <- circle_data(60)
  f <- svgp(d$x, d$y, kernel = kernel_rbf(1, 4), inducing = d$x[1:8, ], mean = 0,
            optimize = FALSE, optimize_inducing = FALSE)
  g <- sparsevgp:::.uc_inner(f, tol = 1e-12)
  profile <- function(lp) {
    p <- g$params
    p$variance <- exp(lp[1])
    p$lengthscale <- exp(lp[2])
    p[c("q_mu", "q_sqrt_diag", "q_sqrt_lower")] <-
      f$params[c("q_mu", "q_sqrt_diag", "q_sqrt_lower")]
    sparsevgp:::.uc_q_optimum(f, p, tol = 1e-12, iters = 100L)$value
  }
  o <- objective(g)
  expect_named(o$par, c("log_variance", "log_lengthscale"))
  lp <- log(c(4, 1))
  expect_equal(-unname(o$gr(lp)), fd_grad(profile, lp), tolerance = 1e-5)
  expect_equal(-o$fn(lp), profile(lp), tolerance = 1e-8)
  # again after an evaluation elsewhere, whose q(u) the next one starts from
  lp2 <- lp + c(0.3, -0.2)
  o$fn(lp2)
  expect_equal(-unname(o$gr(lp2)), fd_grad(profile, lp2), tolerance = 1e-5)
})

test_that("a flat start is refused: default classifiers find a clear signal", {
  d <- circle_data(150)
  set.seed(2)
  flat <- svgp(d$x, d$y, kernel = kernel_rbf(lengthscale = 10, variance = 1),
               inducing = 10, mean = 0, optimize = FALSE)
  p_flat <- predict(flat, type = "prob")
  expect_lt(max(abs(p_flat - 0.5)), 0.01)
  for (model in c("svgp", "odvgp")) {
    set.seed(3)
    f <- do.call(model, list(d$x, d$y))
    acc <- mean(predict(f, type = "class") == d$y)
    expect_gt(acc, 0.9)
    # the report names the stages of the schedule, the ELBO rising
    expect_true(all(c("inducing_held", "all") %in% names(f$optim$stages)))
    expect_gte(f$optim$stages[["all"]], f$optim$stages[["inducing_held"]] - 1e-6)
    expect_true(f$optim$convergence %in% c(0L, 3L))
  }
  # the starting kernel of the grid is far from flat: its ELBO with q(u) at
  # its optimum beats that of the flat kernel
  r <- sparsevgp:::.uc_response("bernoulli", d$y, nrow(d$x), 20L, list(), NULL)
  set.seed(4)
  st <- sparsevgp:::.uc_start_classifier(kernel_rbf(), d$x, r, 10L, NULL)
  score <- function(k) {
    set.seed(5)
    g <- svgp(d$x, d$y, kernel = k, inducing = 10, optimize = FALSE)
    sparsevgp:::.uc_q_optimum(g, g$params)$value
  }
  expect_gt(score(st$kernel), score(kernel_rbf(lengthscale = 10, variance = 1)) + 20)
})

test_that("one lengthscale first: an input that carries nothing is not what ARD starts from", {
  set.seed(6)
  n <- 150
  x <- cbind(a = rnorm(n), b = rnorm(n), noise = rnorm(n))
  y <- factor(ifelse(x[, 1] + x[, 2] > 0, "p", "q"))
  f <- svgp(x, y)
  expect_true(all(c("inducing_held", "all", "per_input") %in% names(f$optim$stages)))
  # with ARD kept (BIC's penalty beaten) the lengthscales differ; with one
  # lengthscale they are proportional to the inputs' standard deviations
  ratio <- f$params$lengthscale / apply(x, 2, sd)
  gain <- f$optim$stages[["per_input"]] - f$optim$stages[["all"]]
  if (gain > 0.5 * log(n) * 2) {
    expect_gt(diff(range(ratio)), 1e-6)
  } else {
    expect_equal(unname(ratio / ratio[1]), rep(1, 3), tolerance = 1e-8)
  }
  expect_gt(mean(predict(f, type = "class") == y), 0.9)
})

test_that("the run of one lengthscale per input is abandoned when it gains too little too slowly", {
  set.seed(8)
  n <- 120
  x <- matrix(rnorm(n * 3), n, 3)
  y <- factor(ifelse(x[, 1] - x[, 2] + 0.5 * rnorm(n) > 0, "p", "q"))
  set.seed(1)
  f0 <- svgp(x, y, inducing = 10, optimize = FALSE)
  after <- sparsevgp:::.uc_abandon_after
  # armed with a level no run reaches: the run stops after exactly that many
  # evaluations, at its best point so far, as the min_gain rule stops one
  a <- sparsevgp:::.uc_abandon_arm(f0, Inf)
  r <- sparsevgp:::.fit_lbfgsb(a, from_start = TRUE)
  expect_true(r$abandon$hit)
  expect_identical(r$abandon$count, after)
  expect_identical(r$optim$counts[["function"]], after)
  expect_identical(r$optim$convergence, sparsevgp:::.stop_code)
  expect_equal(r$optim$value, max(r$optim$trail))
  r <- sparsevgp:::.uc_abandon_disarm(r)
  expect_false(inherits(r, "uc_abandon"))
  expect_null(r$abandon)
  # armed with a level every run passes: the run is the unarmed one
  b <- sparsevgp:::.fit_lbfgsb(sparsevgp:::.uc_abandon_arm(f0, -Inf), from_start = TRUE)
  c0 <- sparsevgp:::.fit_lbfgsb(f0, from_start = TRUE)
  expect_false(b$abandon$hit)
  expect_equal(b$optim$counts, c0$optim$counts)
  expect_equal(b$params, c0$params, tolerance = 1e-12)
  # in the schedule: an abandoned run is reported, counts at most `after`
  # evaluations and leaves the fit with one lengthscale
  set.seed(2)
  f <- svgp(x, y)
  if (isTRUE(f$optim$per_input_abandoned)) {
    expect_lte(f$optim$stage_evals[["per_input"]], after)
    expect_lt(f$optim$stages[["per_input"]] - f$optim$stages[["all"]],
              sparsevgp:::.uc_abandon_share * 0.5 * log(n) * 2)
  }
  ratio <- f$params$lengthscale / apply(x, 2, sd)
  if (!isTRUE(f$optim$stages[["per_input"]] - f$optim$stages[["all"]] > 0.5 * log(n) * 2)) {
    expect_equal(unname(ratio / ratio[1]), rep(1, 3), tolerance = 1e-8)
  }
})

test_that("several classes: a default iris fit beats the constant predictor, in probabilities that sum to one", {
  set.seed(7)
  it <- sample(150, 100)
  tr <- iris[it, ]
  te <- iris[-it, ]
  const <- sum(table(tr$Species) * log(table(tr$Species) / nrow(tr)))
  for (lik in c("robustmax", "softmax")) {
    set.seed(8)
    expect_no_warning(f <- svgp(Species ~ ., data = tr, likelihood = lik))
    expect_gt(logLik(f), const + 40)
    # M from the data and the classes, not min(N, 100)
    expect_lt(nrow(f$params$Z), 60)
    expect_gte(nrow(f$params$Z), 3)
    P <- predict(f, te, type = "prob")
    expect_equal(unname(rowSums(P)), rep(1, nrow(te)), tolerance = 1e-10)
    expect_gt(mean(predict(f, te, type = "class") == te$Species), 0.85)
    nll <- -mean(log(P[cbind(seq_len(nrow(te)), as.integer(te$Species))]))
    expect_lt(nll, 0.5)
  }
  set.seed(9)
  o <- odvgp(Species ~ ., data = tr, likelihood = "softmax")
  expect_gt(logLik(o), const + 40)
  P <- predict(o, te, type = "prob")
  # not uniform: the classes are told apart
  expect_gt(mean(apply(P, 1, max)), 0.8)
})

test_that("robust-max scores one kernel variance; the other classifiers a grid", {
  rm <- sparsevgp:::.new_lik("robustmax")
  expect_equal(sparsevgp:::.lik_start_variances(rm), 1)
  expect_gt(length(sparsevgp:::.lik_start_variances(sparsevgp:::.new_lik("bernoulli"))), 3)
  # the robust-max ELBO at the conditional optimum does not depend on the
  # kernel variance (scaling f leaves argmax_k f_k alone)
  set.seed(10)
  x <- matrix(rnorm(60), 30, 2)
  y <- factor(rep(c("a", "b", "c"), 10))
  val <- vapply(c(1, 9), function(v) {
    f <- svgp(x, y, kernel = kernel_rbf(1, v), inducing = x[1:6, ], likelihood = "robustmax",
              optimize = FALSE)
    sparsevgp:::.uc_q_optimum(f, f$params, tol = 1e-10, iters = 200L)$value
  }, 1)
  expect_equal(val[1], val[2], tolerance = 1e-3)
})

test_that("minibatch classifiers start from q(u) at its optimum on a subsample", {
  d <- circle_data(200)
  # 20 Adam steps of size 0.01 barely move q(u): the classes are told apart
  # because the run starts at its conditional optimum for the grid's kernel
  set.seed(11)
  f <- svgp(d$x, d$y, batch_size = 50, control = list(maxit = 20))
  expect_gt(mean(predict(f, type = "class") == d$y), 0.85)
})

test_that("the starting grid scores the variances in rising order and stops at the first fall", {
  d <- circle_data(150)
  rec <- new.env()
  rec$v <- list()
  # every scoring of the grid (q(u)'s steps with iters = 15): its kernel
  # and its score
  orig <- sparsevgp:::.uc_q_optimum
  assignInNamespace(".uc_q_optimum", function(fit, params, batch = NULL, iters = 20L,
                                              tol = NULL) {
    o <- orig(fit, params, batch, iters, tol)
    if (identical(iters, 15L)) {
      rec$v[[length(rec$v) + 1L]] <- c(ls = unname(params$lengthscale[1L]),
                                       variance = unname(params$variance),
                                       value = o$value)
    }
    o
  }, "sparsevgp")
  on.exit(assignInNamespace(".uc_q_optimum", orig, "sparsevgp"), add = TRUE)
  set.seed(3)
  f <- svgp(d$x, d$y)
  assignInNamespace(".uc_q_optimum", orig, "sparsevgp")
  g <- do.call(rbind, rec$v)
  cols <- split(as.data.frame(g), match(g[, "ls"], unique(g[, "ls"])))
  expect_length(cols, length(sparsevgp:::.class_start_multipliers))
  vars <- sort(sparsevgp:::.lik_start_variances(sparsevgp:::.new_lik("bernoulli")))
  skipped <- 0
  for (cl in cols) {
    k <- nrow(cl)
    expect_equal(cl$variance, vars[seq_len(k)])
    fall <- which(diff(cl$value) < 0)
    if (k < length(vars)) {
      # stopped: the last score is the first that fell
      expect_equal(fall, k - 1L)
    } else {
      expect_true(length(fall) == 0L || fall[1L] == k - 1L)
    }
    skipped <- skipped + length(vars) - k
  }
  # on this set the larger variances fall off: some are skipped
  expect_gt(skipped, 0)
  expect_gt(mean(predict(f, type = "class") == d$y), 0.9)
})

test_that("mid-size classifiers fit the schedule on half of the rows, then q(u) on all", {
  set.seed(1)
  n <- 4100
  x <- matrix(rnorm(2 * n), n, 2)
  y <- factor(ifelse(rowSums(x^2) + 0.5 * rnorm(n) > 1.4, "out", "in"))
  f0 <- svgp(x[1:100, ], y[1:100], kernel = kernel_rbf(1, 4), inducing = 10, optimize = FALSE)
  rows <- function(N) {
    f0$x <- matrix(0, N, 2)
    sparsevgp:::.uc_schedule_rows(f0)
  }
  # all rows below twice .uc_schedule_min (2000), then half, at most
  # .uc_subsample_rows() (10 000 for one latent function at M = 10)
  expect_identical(rows(150L), 150L)
  expect_identical(rows(3999L), 3999L)
  expect_identical(rows(4000L), 2000L)
  expect_identical(rows(5001L), 2501L)
  expect_identical(rows(19000L), 9500L)
  expect_identical(rows(50000L), sparsevgp:::.uc_subsample_rows(f0))
  expect_identical(sparsevgp:::.uc_subsample_rows(f0), 10000L)
  set.seed(2)
  f <- svgp(x, y, kernel = kernel_rbf(1, 4), inducing = 10)
  expect_identical(f$optim$subsample, 2050L)
  expect_identical(names(f$optim$stages),
                   c("subsample_inducing_held", "subsample_all", "all_data_q"))
  expect_equal(f$optim$stages[["all_data_q"]], f$bound)
  # q(u) at its conditional optimum on all rows: more natural steps gain
  # (next to) nothing
  o <- sparsevgp:::.uc_q_optimum(f, f$params, tol = 1e-8, iters = 50L)
  expect_lt(o$value - f$bound, 1e-2)
  expect_gt(mean(predict(f, type = "class") == y), 0.85)
})

test_that("A diag(h) A' is the same by every route, for h of either sign", {
  set.seed(5)
  A <- matrix(rnorm(6 * 40), 6, 40)
  ref <- function(h) A %*% diag(h) %*% t(A)
  wg <- sparsevgp:::.uc_weighted_gram
  for (h in list(-abs(rnorm(40)), abs(rnorm(40)), rnorm(40),
                 replace(-abs(rnorm(40)), 3, 0.2), replace(rnorm(40), 1:10, 0))) {
    expect_equal(wg(A, h), ref(h), tolerance = 1e-12)
    expect_true(isSymmetric(wg(A, h)))
  }
  expect_equal(wg(A, numeric(40)), matrix(0, 6, 6))
  h <- replace(rnorm(40), 2, Inf)
  expect_identical(wg(A, h), tcrossprod(A * rep(h, each = 6), A))
})
