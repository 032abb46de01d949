# The model protocol: fits are plain data, updates neither grow them nor
# change them, C is reached through one file, and every model takes the same
# argument grammar.

# update() evaluates the call where it is called, as stats::update() does:
# the data live at the top of this file. A formula keeps the environment it
# was created in (as in lm()), and serialising a fit serialises that
# environment unless it is the global one; so the formulas here belong to
# the global environment, as a user's typed at the console do, and the size
# test measures the fits alone.
proto_f <- stats::as.formula("y ~ x", env = globalenv())
proto_noise <- stats::as.formula("~ x", env = globalenv())
proto_d <- toy_data(40, 1)
proto_dc <- toy_class(40, 2)
proto_df <- data.frame(x = proto_d$x[, 1], y = proto_d$y)

protocol_fits <- function() {
  set.seed(5)
  list(
    gpr = gpr(proto_f, data = proto_df, control = list(maxit = 20)),
    sgpr = sgpr(proto_f, data = proto_df, inducing = 6, control = list(maxit = 20)),
    sgpr_known = sgpr(proto_d$x, proto_d$y, inducing = 6,
                      noise = seq(0.02, 0.1, length.out = 40), control = list(maxit = 20)),
    sgpr_model = sgpr(proto_f, data = proto_df, inducing = 6, noise = proto_noise,
                      control = list(maxit = 20)),
    osgpr = osgpr(proto_f, data = proto_df, inducing = 3, orthogonal = 3,
                  control = list(maxit = 20)),
    pgpr = pgpr(proto_dc$x, proto_dc$y, M = 6,
                control = list(outer_max = 2, inner_max = 2, maxit = 20)),
    svgp = svgp(proto_dc$x, proto_dc$y, inducing = 5, control = list(maxit = 20)),
    svgp_gaussian = svgp(proto_f, data = proto_df, inducing = 5, likelihood = "gaussian",
                         control = list(maxit = 20)),
    svgp_adam = svgp(proto_f, data = proto_df, inducing = 5, likelihood = "gaussian",
                     batch_size = 10, control = list(maxit = 20)))
}

# Paths of list elements (not attributes) that are functions or environments.
closures_in <- function(x, path = "fit") {
  if (is.function(x) || is.environment(x)) return(path)
  if (!is.list(x)) return(character())
  nm <- names(x)
  if (is.null(nm)) nm <- as.character(seq_along(x))
  unlist(lapply(seq_along(x), function(i) closures_in(x[[i]], paste0(path, "$", nm[i]))))
}

test_that("fits hold data only: no function or environment in any fitted object", {
  fits <- suppressWarnings(protocol_fits())
  for (nm in names(fits)) {
    expect_identical(closures_in(fits[[nm]]), character(0), label = nm)
  }
})

test_that("saved fits keep their size across updates, which reproduce the fit", {
  fits <- suppressWarnings(protocol_fits())
  for (nm in names(fits)) {
    f <- fits[[nm]]
    # the optimiser's trail (the bound after each evaluation) is as long as
    # the run: the size without it must not grow
    size <- function(z) {
      z$optim$trail <- NULL
      z$optim$trace <- NULL
      length(serialize(z, NULL))
    }
    # from the first update on (a classifier's schedule ends with the last
    # stage's parameters in optim$par, an update with all free ones)
    u1 <- suppressWarnings(update(f, control = list(maxit = 5)))
    u <- u1
    for (i in 1:3) u <- suppressWarnings(update(u, control = list(maxit = 5)))
    expect_lt(abs(size(u) / size(u1) - 1), 0.05, label = paste(nm, "size ratio - 1"))
    again <- suppressWarnings(update(f, optimize = FALSE))
    expect_equal(as.numeric(logLik(again)), as.numeric(logLik(f)), tolerance = 1e-10,
                 label = paste(nm, "logLik after update(optimize = FALSE)"))
  }
})

test_that("only the wrappers of R/ffi.R call C", {
  ns <- asNamespace("sparsevgp")
  calls_c <- vapply(ls(ns, all.names = TRUE), function(nm) {
    f <- get(nm, envir = ns)
    is.function(f) && any(grepl(".Call(", deparse(f), fixed = TRUE))
  }, TRUE)
  callers <- names(calls_c)[calls_c]
  expect_gt(length(callers), 10L)
  expect_true(all(startsWith(callers, ".ffi_")), label = paste(callers, collapse = ", "))
})

test_that("printed output names published work, never internal labels", {
  fits <- suppressWarnings(protocol_fits())
  for (nm in names(fits)) {
    out <- c(capture.output(print(fits[[nm]])), capture.output(print(summary(fits[[nm]]))))
    expect_false(any(grepl("seed0|\\bR[1-6]\\b|\\bT[0-9]+\\b|target [0-9]", out)), label = nm)
  }
})

test_that("every model accepts the same method names for 'inducing', with M and threshold", {
  d <- toy_data(40, 1)
  dc <- toy_class(40, 2)
  for (m in c("greedy", "hgv", "gv", "kmeans", "random")) {
    set.seed(1)
    s <- sgpr(d$x, d$y, inducing = m, M = 5, optimize = FALSE)
    expect_equal(nrow(s$params$Z), 5L)
    set.seed(1)
    p <- pgpr(dc$x, dc$y, inducing = m, M = 5, optimize = FALSE)
    expect_equal(nrow(p$params$Z), 5L)
    set.seed(1)
    v <- svgp(dc$x, dc$y, inducing = m, M = 5, optimize = FALSE)
    expect_equal(nrow(v$params$Z), 5L)
    # osgpr: with a count for the other set, M1 + M2 points chosen together
    # (20 + 3 of 40 points on a line leave little residual variance, and
    # osgpr says so: that warning is not what is tested here)
    set.seed(1)
    o <- suppressWarnings(osgpr(d$x, d$y, inducing = m, orthogonal = 3, optimize = FALSE))
    expect_equal(c(nrow(o$params$Z), nrow(o$params$O)), c(20L, 3L))
    expect_false(anyDuplicated(rbind(o$params$Z, o$params$O)) > 0)
  }
  # a number is M for greedy selection: the same as "greedy" with M
  set.seed(2)
  a <- sgpr(d$x, d$y, inducing = 7, optimize = FALSE)
  set.seed(2)
  b <- sgpr(d$x, d$y, inducing = "greedy", M = 7, optimize = FALSE)
  expect_identical(a$params$Z, b$params$Z)
  # a threshold on the trace chooses M (greedy methods only); sgpr weights
  # the trace by 1 / noise, so that the threshold is on the KL scale
  set.seed(3)
  th <- sgpr(d$x, d$y, kernel = kernel_rbf(1, 1), noise = 0.1, threshold = 0.5,
             optimize = FALSE)
  set.seed(3)
  sel <- select_inducing(d$x, kernel_rbf(1, 1), threshold = 0.5, weights = rep(10, 40))
  expect_identical(unname(th$params$Z), unname(sel$Z))
  expect_error(sgpr(d$x, d$y, inducing = "kmeans", threshold = 1), "greedy")
  expect_error(svgp(dc$x, dc$y, inducing = 5, M = 5), "once")
  expect_error(sgpr(d$x, d$y, inducing = d$x[1:3, , drop = FALSE], M = 3), "fix M")
  # "uniform", pgpr's former name of "random", still works, with a warning
  set.seed(4)
  expect_warning(u <- pgpr(dc$x, dc$y, inducing = "uniform", M = 5, optimize = FALSE),
                 "\"random\"")
  set.seed(4)
  r <- pgpr(dc$x, dc$y, inducing = "random", M = 5, optimize = FALSE)
  expect_identical(u$params$Z, r$params$Z)
})

test_that("optimize_inducing = FALSE holds the inducing inputs in every model", {
  d <- toy_data(40, 1)
  Z <- d$x[c(2, 9, 17, 30), , drop = FALSE]
  # the same random numbers (the order of the neighbours, if any)
  set.seed(1)
  s <- sgpr(d$x, d$y, inducing = Z, optimize_inducing = FALSE, control = list(maxit = 30))
  expect_identical(unname(s$params$Z), unname(Z))
  set.seed(1)
  f <- sgpr(d$x, d$y, inducing = Z, fixed = "Z", control = list(maxit = 30))
  expect_equal(as.numeric(logLik(s)), as.numeric(logLik(f)), tolerance = 1e-12)
  o <- osgpr(d$x, d$y, inducing = Z[1:2, , drop = FALSE], orthogonal = Z[3:4, , drop = FALSE],
             optimize_inducing = FALSE, control = list(maxit = 30))
  expect_identical(unname(rbind(o$params$Z, o$params$O)), unname(Z))
})

test_that("at the console, a formula fit keeps its size over updates", {
  # what a user typing at the top level does: the formula's environment is
  # the global one, and update() evaluates there
  g <- globalenv()
  assign(".sparsevgp_test_df", proto_df, envir = g)
  on.exit(rm(list = c(".sparsevgp_test_df", ".sparsevgp_test_fit"), envir = g), add = TRUE)
  suppressWarnings(evalq(.sparsevgp_test_fit <- sgpr(y ~ x, data = .sparsevgp_test_df,
                                                     inducing = 5, noise = ~ x,
                                                     control = list(maxit = 5)), g))
  size <- function(z) {
    z$optim$trail <- NULL
    length(serialize(z, NULL))
  }
  first <- size(get(".sparsevgp_test_fit", envir = g))
  for (i in 1:3) suppressWarnings(evalq(.sparsevgp_test_fit <- update(.sparsevgp_test_fit), g))
  last <- size(get(".sparsevgp_test_fit", envir = g))
  expect_lt(abs(last / first - 1), 0.05)
})
