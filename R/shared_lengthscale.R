# The classifiers' stage of one lengthscale for all inputs in units of their
# standard deviations s (pgpr(), and svgp() and odvgp() with a classifying
# likelihood): the fit on the inputs divided by s, with an isotropic kernel
# whose lengthscale is the geometric mean of the scaled ones and the
# inducing blocks `blocks` divided alike; the same model as the ARD kernel
# with lengthscales l * s_d. On a cluster the workers divide their own rows
# (.cluster_rescale()). The models set their own masks of held parameters.
.to_shared_lengthscale <- function(fit, s, blocks) {
  sh <- fit
  sh$x <- sweep(fit$x, 2L, s, "/")
  .cluster_rescale(fit, s)
  sh$kernel$ard <- FALSE
  sh$params$lengthscale <- exp(mean(log(fit$params$lengthscale / s)))
  for (b in blocks) sh$params[[b]] <- sweep(fit$params[[b]], 2L, s, "/")
  sh
}

# Back from the stage of one lengthscale: the lengthscales l * s_d per
# input, the inducing blocks in the inputs' units, the inputs as they were.
.from_shared_lengthscale <- function(fit, sh, s, blocks) {
  out <- sh
  out$x <- fit$x
  .cluster_rescale(fit, NULL)
  out$kernel <- fit$kernel
  out$params$lengthscale <- sh$params$lengthscale * s
  names(out$params$lengthscale) <- names(fit$params$lengthscale)
  for (b in blocks) {
    out$params[[b]] <- sweep(sh$params[[b]], 2L, s, "*")
    dimnames(out$params[[b]]) <- dimnames(fit$params[[b]])
  }
  out
}
