#' sparsevgp: sparse variational Gaussian processes
#'
#' Gaussian process models whose cost is \eqn{O(N M^2)}{O(N M^2)} in the number of
#' observations \eqn{N} and inducing points \eqn{M}. The numerical core
#' (bounds, their gradients, predictions) is written in C on R's BLAS and
#' LAPACK; models are fitted with \code{optim()} on analytic gradients.
#'
#' Models: \code{\link{sgpr}} (the collapsed bound of Titsias, 2009, with
#' homoscedastic or heteroscedastic noise), \code{\link{osgpr}} (orthogonal
#' inducing points: SOLVE-GPR and ODGPR), \code{\link{pgpr}} (Polya-Gamma
#' sparse classification), \code{\link{svgp}} (uncollapsed whitened SVGP) and
#' \code{\link{gpr}} (exact GP regression, the reference). Inducing inputs:
#' \code{\link{select_inducing}} and \code{\link{reinit_inducing}}. Kernels:
#' \code{\link{kernel_rbf}} and the Matern family. Every model gives its
#' optimisation objective through \code{\link{objective}}.
#'
#' The published work behind every model, bound and helper, with the
#' equations and sections the package uses from it, is listed in
#' \link{sparsevgp-references} (and in
#' \code{system.file("REFERENCES.md", package = "sparsevgp")}).
#'
#' @keywords internal
#' @useDynLib sparsevgp, .registration = TRUE, .fixes = ""
#' @importFrom stats coef confint deviance df.residual fitted formula logLik model.frame nobs
#'   predict residuals setNames simulate update weights
"_PACKAGE"
