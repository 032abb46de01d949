# The kernel family of sgpr()'s default on small data (N <= 669, R/kernel_choice.R): on
# ten small sets from R's datasets and MASS and two simulated functions, 10 random 90/10
# splits each, inputs and response standardised on the training rows, fit sgpr(neighbours = 0)
# with RBF and with Matern 5/2 and print each fit's bound per observation, test NLPD (in
# standardised units), CPU s and M. The rule's choice is read off the two bounds.
# Usage (from the package root):
#   Rscript inst/bench/bench_kernel_small.R --lib=<library with sparsevgp>
args <- commandArgs(trailingOnly = TRUE)
lib <- sub("^--lib=", "", grep("^--lib=", args, value = TRUE))
.libPaths(c(lib, .libPaths()))
suppressMessages(library(sparsevgp))
library(MASS)
reps <- 10L
sets <- list(
  mcycle = with(MASS::mcycle, list(x = cbind(times), y = accel)),
  GAGurine = with(MASS::GAGurine, list(x = cbind(Age), y = log(GAG))),
  cpus = with(MASS::cpus, list(x = cbind(log(syct), log(mmin), log(mmax), cach, chmin, chmax), y = log(perf))),
  faithful = with(datasets::faithful, list(x = cbind(eruptions), y = waiting)),
  airquality = with(na.omit(datasets::airquality), list(x = cbind(Solar.R, Wind, Temp, Day + 31 * (Month - 5)), y = log(Ozone))),
  swiss = with(datasets::swiss, list(x = cbind(Agriculture, Examination, Education, Catholic, Infant.Mortality), y = Fertility)),
  mtcars = with(datasets::mtcars, list(x = cbind(cyl, disp, hp, drat, wt, qsec), y = mpg)),
  trees = with(datasets::trees, list(x = cbind(Girth, Height), y = log(Volume))),
  rock = with(datasets::rock, list(x = cbind(area, peri, shape), y = log(perm))),
  Cars93 = with(na.omit(MASS::Cars93[, c("Price", "Horsepower", "EngineSize", "Weight", "MPG.city", "Length")]),
                list(x = cbind(Horsepower, EngineSize, Weight, MPG.city, Length), y = log(Price))),
  sin2d = local({ set.seed(99); x <- matrix(runif(600 * 2), ncol = 2); list(x = x, y = sin(12 * x[, 1]) * cos(9 * x[, 2]) + rnorm(600, sd = 0.2)) }),
  rough1d = local({ set.seed(98); x <- sort(runif(400)); f <- cumsum(rnorm(400)) / 10; list(x = cbind(x), y = f + rnorm(400, sd = 0.1)) })
)
cpu <- function() { t <- proc.time(); t[["user.self"]] + t[["sys.self"]] }
for (nm in names(sets)) {
  d <- sets[[nm]]
  N <- nrow(d$x)
  for (r in seq_len(reps)) {
    set.seed(1000 + r)
    te <- sample.int(N, max(3L, round(N / 10)))
    xm <- colMeans(d$x[-te, , drop = FALSE]); xs <- apply(d$x[-te, , drop = FALSE], 2, sd)
    ym <- mean(d$y[-te]); ys <- sd(d$y[-te])
    X <- scale(d$x, xm, xs); Y <- (d$y - ym) / ys
    out <- c()
    for (fam in c("R", "M")) {
      set.seed(r)
      t0 <- cpu()
      f <- suppressWarnings(sgpr(X[-te, , drop = FALSE], Y[-te], neighbours = 0,
                                 kernel = if (fam == "R") kernel_rbf() else kernel_matern52()))
      t1 <- cpu()
      p <- predict(f, X[te, , drop = FALSE], type = "response")
      nlpd <- -mean(dnorm(Y[te], p$mean, sqrt(p$var), log = TRUE))
      out <- c(out, sprintf("%s obj %.4f nlpd %.4f cpu %.2f M %d", fam, as.numeric(logLik(f)) / nrow(f$x),
                            nlpd, t1 - t0, nrow(f$params$Z)))
    }
    cat(nm, N, r, out, "\n")
  }
}
