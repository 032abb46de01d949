#' <% cl <- identical(classifier, "yes"); sp <- model != "gpr" %>@return A fit is a list of plain data (no functions or environments, so
#'   it can be saved and reloaded); its components include
#'   \describe{
#'     \item{\code{call}}{the call, as \code{update()} re-evaluates it;}
#'     \item{\code{x}, \code{y}}{the inputs (the model matrix, without
#'       intercept, of the formula interface) and the response<%= if (cl) " coded as 0/1" else "" %>, after
#'       \code{subset} and \code{na.action};}
#'     \item{\code{kernel}, \code{params}}{the kernel and all parameters on
#'       their natural scale (\code{params$variance},
#'       \code{params$lengthscale}<%= if (!cl) ", \\code{params$noise} or the noise coefficients" else "" %>,
#'       \code{params$mean}<%= if (sp) ", the inducing inputs \\code{params$Z}" else "" %>); \code{coef(fit)}
#'       gives the hyperparameters as a named vector;}
#'     \item{\code{fixed}}{a logical vector naming every free parameter on
#'       the optimiser's scale, \code{TRUE} where it was held;}
#'     \item{\code{bound}, \code{bound_terms}}{the <%= if (model == "gpr") "log marginal likelihood" else "bound (ELBO)" %> at the fitted parameters and its
#'       terms (also \code{logLik(fit)});}
#'     \item{\code{optim}}{the optimiser's report: \code{convergence}
#'       (0 when it converged), \code{message}, \code{counts}, and
#'       \code{trail}, the best bound after each evaluation, which
#'       \code{plot(fit, which = "convergence")} draws<%= if (model %in% c("sgpr", "osgpr", "svgp")) " (with \\code{stages}, the bound after each stage of training)" else "" %>;
#'       \code{NULL} with \code{optimize = FALSE};}
#'     \item{\code{posterior}, \code{jitter}}{the Cholesky factors
#'       prediction uses, and the jitter that their factorisation needed;}
#'     \item{\code{time}}{the seconds the fit took;}<%= if (model == "sgpr") "\n#'     \\item{\\code{selection}}{how the inducing inputs were chosen: \\code{method}, \\code{M} (with an automatic \\eqn{M}, its cap) and \\code{threshold}; with an automatic \\eqn{M} whose cap is below \\eqn{N} and no neighbours, \\code{rounds}, the selections made again at the fitted parameters, \\code{trace}, the weighted trace term \\eqn{t} there, and \\code{settled}, the size of a selection not refitted because it was within 10\\% of \\eqn{M} (Details);}" else "" %>
#'     \item{\code{terms}, \code{xlevels}, \code{frame}, \code{na.action}}{for
#'       the formula interface: what \code{terms()}, \code{model.frame()}
#'       and \code{predict()} use, and the rows that \code{na.action}
#'       dropped;}<%= if (!cl) "\n#'     \\item{\\code{weights}, \\code{offset}}{the prior weights and offset, or \\code{NULL}.}" else "" %>
#'   }
#'   Methods: \code{print}, \code{summary}, \code{predict}, \code{simulate},
#'   \code{plot}, \code{fitted}, \code{residuals}, \code{logLik} (and so
#'   \code{AIC} and \code{BIC}), \code{deviance}, \code{nobs}, \code{coef},
#'   \code{formula}, \code{model.frame}, \code{update} and
#'   \code{\link{objective}}; see \code{\link{sparsevgp-methods}}.
