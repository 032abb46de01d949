#' <% cl <- identical(classifier, "yes"); sp <- model != "gpr" %>@section Practice:
#' \strong{Scaling.} Fits do not depend on the units of the data: the
#' optimiser works on standardised inputs and response and reports every
#' parameter on the data's own scale. Transform skewed inputs (for example
#' \code{log(x)} in the formula) as in any regression: a stationary kernel
#' assumes that the function varies about equally fast over an input's
#' range. With several inputs each gets its own lengthscale (ARD); a long
#' fitted lengthscale means that the input hardly matters.
#'
#' \strong{Starting values.} <%= if (cl) "Kernel parameters left \\code{NULL} start from values chosen from the data (see \\code{\\link{kernels}})." else "Kernel and noise parameters left \\code{NULL} start at the best point of a small grid scored by the bound on at most 1000 rows (see \\code{\\link{kernels}})." %> Give your own starting values in the kernel
#' (\code{kernel_rbf(lengthscale = 2, variance = 1)})<%= if (!cl) " and \\code{noise}" else "" %>,
#' hold any of them with \code{fixed}, and continue a fit from where it
#' stopped with \code{update(fit)}, which starts from the fitted values.
#'
#' \strong{When the fit is flat or does not converge.} A warning says when
#' a run stopped at \code{control$maxit} (continue with \code{update(fit)})
#' or when <%= if (cl) "the optimiser stopped without converging" else "the fit explains almost nothing by the inputs (signal variance below 1\\% of the noise, or every lengthscale far beyond its input's range)" %>.
#' \code{plot(fit, which = "convergence")} shows the bound during
#' training; compare \code{logLik()} of fits from other starting values
#' (a shorter lengthscale, <%= if (cl) "a larger kernel variance" else "a smaller noise" %>)<%= if (sp) " and with more inducing points" else "" %>, and
#' keep the highest<%= if (sp) ": the bound is a lower bound on the log marginal likelihood, so a higher one is a better approximation as well as a better fit" else "" %>.
#'
#' \strong{Missing values.} With the formula interface, rows with missing
#' values are dropped by \code{na.action} (by default
#' \code{getOption("na.action")}, that is \code{na.omit}), as in
#' \code{lm()}; \code{na.exclude} pads \code{fitted()} and
#' \code{residuals()} with \code{NA}, and \code{nobs()} counts the rows
#' used. \code{predict()} gives \code{NA} for new rows with missing inputs.
#'
#' \strong{Intervals and uncertainty.} <%= if (cl) "\\code{predict(fit, newdata, type = \"prob\")} gives the predictive probabilities, \\code{interval = \"confidence\"} an interval for them from the latent distribution and \\code{type = \"class\"} the classes; \\code{simulate()} draws labels." else "\\code{predict(fit, newdata, interval = \"confidence\")} gives intervals for the function, \\code{interval = \"prediction\"} for new observations (with \\code{level}), \\code{se.fit = TRUE} standard errors, and \\code{simulate()} joint draws from the posterior. They are conditional on the fitted hyperparameters." %>
