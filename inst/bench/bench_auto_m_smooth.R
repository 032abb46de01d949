# A smooth and a rougher surface of 40 000 rows in 3 inputs: the default sgpr() fit, its CPU
# seconds, M, K, the rounds of the automatic M at the fitted parameters and the test NLPD.
# Usage: Rscript inst/bench/bench_auto_m_smooth.R <library>
lib <- commandArgs(TRUE)[1]
if (!is.na(lib)) .libPaths(c(lib, .libPaths()))
library(sparsevgp)
cpu <- function() sum(proc.time()[1:2])
for (cs in 1:2) {
set.seed(cs)
N <- 40000; D <- 3
x <- matrix(runif(N * D), ncol = D)
f0 <- if (cs == 1) sin(3 * x[, 1]) + cos(2 * x[, 2]) * x[, 3] else sin(8 * x[, 1]) * cos(6 * x[, 2]) + x[, 3]
y <- f0 + rnorm(N, sd = 0.1)
xt <- matrix(runif(2000 * D), ncol = D)
ft <- if (cs == 1) sin(3 * xt[, 1]) + cos(2 * xt[, 2]) * xt[, 3] else sin(8 * xt[, 1]) * cos(6 * xt[, 2]) + xt[, 3]
yt <- ft + rnorm(2000, sd = 0.1)
set.seed(1); t0 <- cpu()
fit <- sgpr(x, y)
p <- predict(fit, xt, type = "response")
cat(sprintf("case %d: cpu %.1f M %d K %s rounds %s nlpd %.4f\n", cs, cpu() - t0, nrow(fit$params$Z),
            format(if (is.null(fit$neighbours)) 0 else fit$neighbours$K), format(fit$selection$rounds),
            -mean(dnorm(yt, p$mean, sqrt(p$var), log = TRUE))))
}
