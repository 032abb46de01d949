# Plots run for every model, input dimension and panel, label their axes
# by the names of the data, and take the user's labels and title.

plot_fits <- function(D) {
  set.seed(10 + D)
  n <- 40
  dat <- as.data.frame(matrix(runif(n * D, -2, 2), n, D,
                              dimnames = list(NULL, paste0("in", seq_len(D)))))
  dat$resp <- sin(2 * dat$in1) + if (D > 1) 0.5 * dat$in2 else 0
  dat$resp <- dat$resp + rnorm(n, sd = 0.1)
  dat$cls <- factor(ifelse(dat$resp > 0, "high", "low"))
  rhs <- paste(paste0("in", seq_len(D)), collapse = " + ")
  fr <- stats::as.formula(paste("resp ~", rhs))
  fc <- stats::as.formula(paste("cls ~", rhs))
  ctl <- list(maxit = 15)
  list(
    gpr = gpr(fr, data = dat, control = ctl),
    sgpr = sgpr(fr, data = dat, inducing = 6, control = ctl),
    sgpr_noise = sgpr(fr, data = dat, inducing = 6, noise = ~ in1, control = ctl),
    osgpr = osgpr(fr, data = dat, inducing = 3, orthogonal = 3, control = ctl),
    svgp_gaussian = svgp(fr, data = dat, inducing = 6, likelihood = "gaussian",
                         control = ctl),
    pgpr = pgpr(fc, data = dat, inducing = 6, control = list(maxit = 15, outer_max = 2)),
    svgp = svgp(fc, data = dat, inducing = 6, control = ctl))
}

test_that("every model plots its fit, its convergence and its residuals in 1, 2 and 3 inputs", {
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  for (D in 1:3) {
    fits <- suppressWarnings(plot_fits(D))
    for (nm in names(fits)) {
      fit <- fits[[nm]]
      lab <- sprintf("%s, D = %d", nm, D)
      pd <- plot(fit, n = 12)
      expect_true(is.data.frame(pd) && nrow(pd) > 0L, label = lab)
      expect_true(all(is.finite(unlist(pd[vapply(pd, is.numeric, TRUE)]))), label = lab)
      expect_true(is.data.frame(plot(fit, which = "convergence")), label = lab)
      r <- plot(fit, which = "residuals")
      expect_equal(nrow(r), nobs(fit), label = lab)
    }
  }
})

# The titles and axis labels of the last plot, read from the device's
# display list: list(main, xlab, ylab) of each title() call.
plot_titles <- function(expr) {
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  force(expr)
  dl <- grDevices::recordPlot()[[1L]]
  ti <- Filter(function(e) identical(e[[2L]][[1L]]$name, "C_title"), dl)
  lapply(ti, function(e) list(main = e[[2L]][[2L]], xlab = e[[2L]][[4L]], ylab = e[[2L]][[5L]]))
}

test_that("axes are labelled by the input and response names, and labels can be overridden", {
  d <- data.frame(times = snelson$x[1:60], accel = snelson$y[1:60])
  fit <- gpr(accel ~ times, data = d)
  ti <- plot_titles(plot(fit, n = 20))
  expect_identical(ti[[1L]][c("xlab", "ylab")], list(xlab = "times", ylab = "accel"))
  ti <- plot_titles(plot(fit, n = 20, xlab = "time (ms)", ylab = "acceleration (g)",
                         main = "mcycle"))
  expect_identical(ti[[1L]], list(main = "mcycle", xlab = "time (ms)",
                                  ylab = "acceleration (g)"))
  ti <- plot_titles(plot(fit, which = "residuals"))
  expect_identical(ti[[1L]][c("xlab", "ylab")],
                   list(xlab = "fitted accel", ylab = "Pearson residual"))
  # two inputs: the image is labelled by both inputs
  v <- data.frame(row = c(row(volcano)), col = c(col(volcano)),
                  height = c(volcano))[seq(1, length(volcano), by = 53), ]
  s <- sgpr(height ~ row + col, data = v, inducing = 8, optimize = FALSE)
  ti <- plot_titles(plot(s, n = 10))
  expect_identical(ti[[1L]][c("xlab", "ylab")], list(xlab = "row", ylab = "col"))
  # the matrix interface: the expression given as y
  accel <- d$accel
  fm <- gpr(d$times, accel)
  expect_identical(plot_titles(plot(fm, n = 10))[[1L]]$ylab, "accel")
  # a classifier names its classes in the legend and the probability it maps
  dc <- transform(v, tall = factor(height > 130, labels = c("low", "tall")))
  pc <- pgpr(tall ~ row + col, data = dc, inducing = 8, optimize = FALSE)
  grDevices::pdf(NULL)
  grDevices::dev.control("enable")
  plot(pc, n = 10)
  dl <- grDevices::recordPlot()[[1L]]
  grDevices::dev.off()
  txt <- unlist(lapply(Filter(function(e) identical(e[[2L]][[1L]]$name, "C_text"), dl),
                       function(e) e[[2L]][[3L]]))
  expect_true(all(c("low", "tall") %in% txt))
})

test_that("convergence plots say why there is nothing to show", {
  fit <- gpr(y ~ x, data = snelson[1:30, ], optimize = FALSE)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_error(plot(fit, which = "convergence"), "not optimised")
  expect_error(plot(fit, which = "bogus"), "'arg' should be one of")
})
