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

# The titles and axis labels of each plot of `expr`, read from the device's
# display list: list(main, xlab, ylab) per plot, from its title() calls
# (the axis labels come with the plot, the title after the legend above
# it, R/plot.R).
plot_titles <- function(expr) {
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  force(expr)
  dl <- grDevices::recordPlot()[[1L]]
  ti <- Filter(function(e) identical(e[[2L]][[1L]]$name, "C_title"), dl)
  one <- lapply(ti, function(e) list(main = e[[2L]][[2L]], xlab = e[[2L]][[4L]],
                                     ylab = e[[2L]][[5L]]))
  # the calls of one plot: those with axis labels, and the title after them
  out <- list()
  for (t in one) {
    if (!is.null(t$xlab) || !is.null(t$ylab) || !length(out) || !is.null(out[[length(out)]]$main)) {
      out[[length(out) + 1L]] <- t
    } else {
      out[[length(out)]]$main <- t$main
    }
  }
  lapply(out, function(t) t[c("main", "xlab", "ylab")])
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

# The text drawn by the last plot: each text() call's labels and y, read
# from the display list (legend() draws its labels with text()).
plot_texts <- function(expr) {
  grDevices::pdf(NULL, width = 7, height = 5)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  force(expr)
  usr <- graphics::par("usr")
  dl <- grDevices::recordPlot()[[1L]]
  tx <- Filter(function(e) identical(e[[2L]][[1L]]$name, "C_text"), dl)
  list(usr = usr,
       text = do.call(rbind, lapply(tx, function(e) {
         xy <- e[[2L]][[2L]]
         data.frame(label = as.character(e[[2L]][[3L]]), y = rep_len(xy$y, length(e[[2L]][[3L]])))
       })))
}

test_that("legends sit above the plot region and titles say when the noise varies", {
  d <- data.frame(times = snelson$x, accel = snelson$y)
  het <- sgpr(accel ~ times, data = d, inducing = 8, noise = ~ times, optimize = FALSE)
  ti <- plot_titles(plot(het, n = 30))
  expect_identical(ti[[1L]]$main, "SGPR, M = 8, heteroscedastic noise model")
  expect_identical(ti[[1L]][c("xlab", "ylab")], list(xlab = "times", ylab = "accel"))
  known <- sgpr(accel ~ times, data = d, inducing = 8, noise = rep(0.1, 200), optimize = FALSE)
  expect_match(plot_titles(plot(known, n = 30))[[1L]]$main, "known noise variances")
  homo <- sgpr(accel ~ times, data = d, inducing = 8, optimize = FALSE)
  expect_identical(plot_titles(plot(homo, n = 30))[[1L]]$main, "SGPR, M = 8")
  # every legend label is above the data's region
  pt <- plot_texts(plot(het, n = 30))
  leg <- pt$text[pt$text$label %in% c("data", "mean", "inducing inputs"), ]
  expect_equal(nrow(leg), 3L)
  expect_true(all(leg$y > pt$usr[4L]))
  # classifiers too, in one and two inputs
  v <- data.frame(row = c(row(volcano)), col = c(col(volcano)),
                  height = c(volcano))[seq(1, length(volcano), by = 53), ]
  dc <- transform(v, tall = factor(height > 130, labels = c("low", "tall")))
  pc <- pgpr(tall ~ row + col, data = dc, inducing = 8, optimize = FALSE)
  pt <- plot_texts(plot(pc, n = 10))
  leg <- pt$text[pt$text$label %in% c("low", "tall", "inducing inputs"), ]
  expect_equal(nrow(leg), 3L)
  expect_true(all(leg$y > pt$usr[4L]))
  # the key's title is written along the key, right of the plot, not above it
  key <- pt$text[pt$text$label == "p(tall = tall)", ]
  expect_equal(nrow(key), 1L)
  expect_lt(key$y, pt$usr[4L])
})

test_that("maps put longitude across and latitude up; inputs = swaps the axes", {
  q <- quakes[seq(1, 1000, by = 10), ]
  fit <- sgpr(depth ~ lat + long, data = q, inducing = 8, optimize = FALSE)
  expect_identical(plot_titles(plot(fit, n = 10))[[1L]][c("xlab", "ylab")],
                   list(xlab = "long", ylab = "lat"))
  # the aspect ratio of a map at the mean latitude: a degree of latitude is
  # 1 / cos(lat) times a degree of longitude on the page (plot.window()'s
  # asp, read from the display list)
  grDevices::pdf(NULL)
  grDevices::dev.control("enable")
  pd <- plot(fit, n = 10)
  dl <- grDevices::recordPlot()[[1L]]
  grDevices::dev.off()
  pw <- Filter(function(e) identical(e[[2L]][[1L]]$name, "C_plot_window"), dl)[[1L]][[2L]]
  expect_equal(pw[[5L]], 1 / cos(mean(range(q$lat)) * pi / 180), tolerance = 1e-12)
  expect_equal(pw[[2L]][1L] < min(q$long) && pw[[2L]][2L] > max(q$long), TRUE)
  expect_identical(names(pd)[1:2], c("long", "lat"))
  # the grid and its predictions follow the axes
  expect_equal(pd$mean, unname(predict(fit, data.frame(lat = pd$lat, long = pd$long))$mean),
               tolerance = 1e-10)
  expect_identical(plot_titles(plot(fit, n = 10, inputs = c("lat", "long")))[[1L]][c("xlab", "ylab")],
                   list(xlab = "lat", ylab = "long"))
  expect_identical(plot_titles(plot(fit, n = 10, inputs = c(1, 2)))[[1L]]$xlab, "lat")
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_error(plot(fit, inputs = c("lat", "depth")), "'inputs' must give the two inputs")
  # other inputs keep their order
  v <- data.frame(row = c(row(volcano)), col = c(col(volcano)),
                  height = c(volcano))[seq(1, length(volcano), by = 53), ]
  s <- sgpr(height ~ row + col, data = v, inducing = 8, optimize = FALSE)
  expect_identical(names(plot(s, n = 10))[1:2], c("row", "col"))
  expect_identical(names(plot(s, n = 10, inputs = c(2, 1)))[1:2], c("col", "row"))
})

test_that("dense data do not hide a surface: points shrink, and go beyond a density", {
  v <- data.frame(row = c(row(volcano)), col = c(col(volcano)), height = c(volcano))
  s <- sgpr(height ~ row + col, data = v[seq(1, nrow(v), by = 17), ], inducing = 8,
            optimize = FALSE)
  full <- s
  full$x <- as.matrix(v[, c("row", "col")])
  full$y <- v$height
  drawn <- function(fit, ...) {
    grDevices::pdf(NULL, width = 4, height = 4)
    on.exit(grDevices::dev.off())
    grDevices::dev.control("enable")
    plot(fit, n = 10, ...)
    dl <- grDevices::recordPlot()[[1L]]
    pts <- Filter(function(e) identical(e[[2L]][[1L]]$name, "C_plotXY"), dl)
    max(vapply(pts, function(e) length(e[[2L]][[2L]]$x), 0L))
  }
  expect_equal(drawn(s), nrow(s$x))          # 313 points: drawn
  expect_lt(drawn(full), nrow(full$x))       # 5307 points in 4 inches: left out
  expect_equal(drawn(full, points = TRUE), nrow(full$x))
  expect_lt(drawn(s, points = FALSE), nrow(s$x))
  # the style: total area about a tenth of the region, never above cex 0.6
  grDevices::pdf(NULL, width = 7, height = 5)
  on.exit(grDevices::dev.off(), add = TRUE)
  graphics::plot.new()
  few <- sparsevgp:::.point_style(50)
  many <- sparsevgp:::.point_style(20000)
  expect_equal(few$cex, 0.6)
  expect_equal(few$alpha, 1)
  expect_lt(many$cex, few$cex)
  expect_lt(many$alpha, few$alpha)
  expect_false(many$draw)
  expect_true(sparsevgp:::.point_style(20000, drop = FALSE)$draw)
})

test_that("the convergence plot shows every stage, subsample stages included, on one axis", {
  set.seed(3)
  n <- 20400
  big <- data.frame(x = runif(n, 0, 10))
  big$y <- sin(big$x) + rnorm(n, sd = 0.3)
  fit <- sgpr(y ~ x, data = big, inducing = 6, control = list(schedule = "staged"))
  o <- fit$optim
  sub <- startsWith(names(o$stages), "subsample_")
  expect_true(any(sub) && any(!sub))
  expect_identical(names(o$stage_evals), names(o$stages))
  expect_true(all(o$stage_evals > 0L))
  expect_equal(sum(o$stage_evals), length(o$trail))
  expect_equal(o$counts[[1L]], length(o$trail))
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  pd <- plot(fit, which = "convergence")
  # every evaluation of every stage, in order, read back from the trail
  expect_identical(pd$stage, rep(names(o$stages), o$stage_evals))
  expect_equal(pd$bound, o$trail)
  expect_equal(pd$evaluation, seq_along(o$trail))
  # per observation, since the stages ran on different numbers of them
  n_obs <- ifelse(startsWith(pd$stage, "subsample_"), o$subsample, n)
  expect_equal(pd$bound_per_observation, o$trail / n_obs)
  # each stage ends at the bound it reported
  expect_equal(pd$bound[cumsum(o$stage_evals)], unname(o$stages), tolerance = 1e-8)
  # the legend names each stage
  ti <- plot_texts(plot(fit, which = "convergence"))
  expect_true(all(vapply(c("subsample: inducing inputs held", "all data, inducing inputs held"),
                         function(s) any(startsWith(ti$text$label, s)), TRUE)))
})
