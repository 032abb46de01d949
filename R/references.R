# The references page: every published work the package uses, with the
# equations, sections and algorithms taken from it and the functions that
# use them. inst/REFERENCES.md holds the same list in Markdown; keep the two
# in step.

#' References: the published work behind sparsevgp
#'
#' Every model, bound and helper of the package comes from published work.
#' This page lists each work with the equations, sections, algorithms and
#' tables the package uses from it, and the functions that use them.
#' Equation, section, figure and table numbers are those of the cited work.
#' Where the package goes beyond a source (a corrected misprint, an identity
#' derived for the package) the entry says so; the package's tests check
#' every such identity numerically. The same list, in Markdown, is in
#' \code{system.file("REFERENCES.md", package = "sparsevgp")}.
#'
#' @section Collapsed sparse regression:
#' \describe{
#'   \item{Titsias, M. (2009). Variational learning of inducing variables in
#'     sparse Gaussian processes. Proceedings of the 12th International
#'     Conference on Artificial Intelligence and Statistics (AISTATS), PMLR 5,
#'     567--574.}{The collapsed evidence lower bound (eq. 9)
#'     \eqn{F = \log N(y; 0, Q_{ff} + \sigma^2 I) -
#'     \mathrm{tr}(K_{ff} - Q_{ff}) / (2\sigma^2)}{F = log N(y; 0, Qff + s2 I)
#'     - tr(Kff - Qff) / (2 s2)}, \eqn{Q_{ff} = K_{fu}K_{uu}^{-1}K_{uf}}{Qff
#'     = Kfu Kuu^-1 Kuf}, and its optimal \eqn{q(u)}: \code{\link{sgpr}()},
#'     \code{\link{posterior_inducing}()} and \code{predict()} of
#'     \code{sgpr} fits. The same C routine evaluates the bounds of
#'     \code{\link{osgpr}()} and \code{\link{pgpr}()}.}
#'   \item{Hensman, J. and Matthews, A. G. de G. (2016). Derivation of SGPR
#'     equations. GPflow documentation.}{The Cholesky form of the bound and
#'     of the predictions, with \eqn{A = L^{-1}K_{uf}/\sigma}{A = L^-1 Kuf /
#'     s} and \eqn{B = I + AA^\top}{B = I + A A'} (restated by Fernlund
#'     2022, eqs. 4.27--4.44 and Algorithm 2): the bound and
#'     predictions of \code{sgpr()}, \code{osgpr()} and \code{pgpr()}.}
#'   \item{Titsias, M. K. (2014). Variational inference for Gaussian and
#'     determinantal point processes. Advances in Variational Inference
#'     workshop, NIPS 2014.}{The upper bound on \eqn{\log p(y)}{log p(y)}
#'     (with per-point noise: Passerello 2022, eq. 3.4), reported by
#'     \code{summary()} of \code{sgpr} fits with the bracket
#'     \eqn{KL \le U - F}{KL <= U - F} on the divergence from the sparse to
#'     the exact posterior, and by \code{anova()} of \code{sgpr} fits
#'     (column \code{Upper}).}
#'   \item{Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes
#'     for Machine Learning. MIT Press.}{Algorithm 2.1, the log marginal
#'     likelihood (eq. 2.30) and its gradient (eq. 5.9): \code{\link{gpr}()},
#'     the exact reference the sparse models are tested against. The Matern
#'     covariance functions (section 4.2.1): \code{\link{kernel_matern12}()},
#'     \code{kernel_matern32()}, \code{kernel_matern52()}.}
#' }
#'
#' @section Heteroscedastic regression, Polya-Gamma classification and weighted selection:
#' \describe{
#'   \item{Passerello, G. (2022). Heteroscedastic inducing point selection for
#'     sparse Gaussian process classification. MEng thesis, Department of
#'     Computing, Imperial College London.}{
#'     \itemize{
#'       \item Chapter 3 and Appendix B: the collapsed bound and optimal
#'         \eqn{q(u)} with per-point noise variances (eqs. 3.1--3.3, B.1,
#'         B.2): \code{sgpr(noise = )} with known variances or a learned
#'         noise model (the log-linear model is this package's choice; the
#'         thesis leaves the noise model open); the upper bound (eq. 3.4)
#'         and the bracket on the KL divergence (eq. 3.6): \code{summary()};
#'         the average-case bounds \eqn{t/2 \le E[KL] \le t}{t/2 <= E[KL] <=
#'         t}, \eqn{t = \mathrm{tr}(\Lambda^{-1}(K_{ff} - Q_{ff}))}{t =
#'         tr(Lambda^-1 (Kff - Qff))} (eq. 3.7): \code{\link{kl_threshold}()},
#'         \code{\link{n_inducing}()}.
#'       \item Heteroscedastic greedy variance (sections 3.3.2 and 4.3.2):
#'         \code{\link{select_inducing}(weights = )}, the default selection
#'         of \code{pgpr()}, and \code{\link{reinit_inducing}()} on
#'         heteroscedastic \code{sgpr} fits; the example threshold
#'         \eqn{10^{-3}}{1e-3} and its growth with \eqn{N} (section 7.1.3).
#'       \item Chapter 4 and Appendix C: the collapsed Polya-Gamma bound
#'         (eq. 4.7; Cholesky form eq. C.1), its optimal \eqn{q(u)} (eq. 4.5),
#'         the closed-form local parameters \eqn{c_n^2 = \mu_n^2 +
#'         \sigma_n^2}{c_n^2 = mu_n^2 + s_n^2} (eqs. 4.9--4.11), the
#'         predictions (eq. C.2) and the augmented form (eq. 4.14, Appendix
#'         C.3): \code{pgpr()}, \code{posterior_inducing()},
#'         \code{\link{predict.pgpr}()}. Derived for this package and checked
#'         numerically: for fixed \eqn{c} the bound equals the heteroscedastic
#'         Gaussian bound on the pseudo-targets \eqn{y_n/(2\theta_n)}{y_n /
#'         (2 theta_n)} with noise variances \eqn{1/\theta_n}{1 / theta_n}
#'         plus terms in \eqn{c} only, so one routine serves both models; each
#'         update of \eqn{c} never lowers the bound.
#'       \item The double loop ("double-layered variational EM", sections
#'         4.3.2 and 5.4; its inner loop, section 4.1.3): \code{pgpr()}.
#'       \item The Polya-Gamma variance map (Fig. 5.1):
#'         \code{predict.pgpr(type = "pg_variance")},
#'         \code{plot(what = "pg_variance")}.
#'       \item The data sets (Table 5.1): \code{\link{classification_data}()};
#'         the evaluation protocol and scoring rules (sections 5.1.2 and 5.7)
#'         and Tables 5.2--5.5, D.1 and D.2: \code{\link{summarise_runs}()},
#'         \code{award_points()}, \code{rank_table()}, the file
#'         \code{extdata/passerello2022_tables_D1_D2.csv} (two misprints
#'         corrected, marked in its \code{note} column) and
#'         \code{vignette("classification", package = "sparsevgp")}.
#'     }}
#'   \item{Polson, N. G., Scott, J. G. and Windle, J. (2013). Bayesian
#'     inference for logistic models using Polya-Gamma latent variables.
#'     Journal of the American Statistical Association 108(504),
#'     1339--1349.}{The Polya-Gamma distribution, its mean
#'     \eqn{E[\omega] = \tanh(c/2)/(2c)}{E[omega] = tanh(c/2) / (2c)} and the
#'     exponential tilting behind \eqn{KL[PG(1, c) \| PG(1, 0)]}{KL[PG(1, c)
#'     || PG(1, 0)]}: \code{\link{pg_theta}()}, \code{pg_kl()},
#'     \code{pgpr()}.}
#'   \item{Wenzel, F., Galy-Fajou, T., Donner, C., Kloft, M. and Opper, M.
#'     (2019). Efficient Gaussian process classification using Polya-Gamma
#'     data augmentation. Proceedings of the AAAI Conference on Artificial
#'     Intelligence 33(01), 5417--5424.}{The augmentation of the logistic
#'     likelihood with \eqn{q(\omega_n) = PG(1, c_n)}{q(omega_n) = PG(1,
#'     c_n)} and the closed-form optimal \eqn{c_n}{c_n}, on which the collapsed
#'     bound of \code{pgpr()} is built.}
#'   \item{Jaakkola, T. S. and Jordan, M. I. (2000). Bayesian parameter
#'     estimation via variational methods. Statistics and Computing 10,
#'     25--37.}{The quadratic lower bound on \eqn{\log\sigma(z)}{log
#'     sigmoid(z)}, which the Polya-Gamma bound of \code{pgpr()} equals once
#'     \eqn{\omega}{omega} is integrated out (derived for this package; see the
#'     example of \code{\link{pg_theta}}).}
#' }
#'
#' @section Orthogonal inducing points:
#' \describe{
#'   \item{Fernlund, O. (2022). Orthogonal sparse variational approximations
#'     for Gaussian processes. MSc thesis, Department of Computing, Imperial
#'     College London.}{
#'     \itemize{
#'       \item The optimal \eqn{q(u)} and \eqn{q(v^\perp)}{q(v_perp)}
#'         (eq. 5.26): \code{\link{posterior_orthogonal}()}.
#'       \item The orthogonal collapsed bound (eq. 5.33):
#'         \code{osgpr(bound = "union")}; its block-Cholesky evaluation
#'         (eqs. 5.35--5.40, Algorithm 3): the bounds of \code{osgpr()}. Line 20 of
#'         Algorithm 3 omits \eqn{K_{v*}}{Kv*}; the package uses
#'         \eqn{C_{v*} = K_{v*} - \delta_v^\top\delta_*}{Cv* = Kv* - dv' d*}.
#'       \item The predictive mean (eq. 5.55) and the ODGPR and SOLVE-GPR
#'         covariances (eqs. 5.56, 5.57): \code{predict()} of \code{osgpr}
#'         fits, with the mean computed without the \eqn{N \times N}{N x N}
#'         matrices of Algorithm 3.
#'       \item The posterior decomposition into \eqn{g}, \eqn{h} and \eqn{l}
#'         (eqs. 4.6, 5.11, 5.16): \code{\link{osgpr_components}()}; the KL
#'         divergence between Gaussians (eq. 3.11):
#'         \code{\link{kl_gaussian}()}, \code{kl_predictive()}; the edge case
#'         of coinciding sets (section 6.3.1): the warning of \code{osgpr()}.
#'       \item Figs. 6.1 to 6.4 and the cost count of section 6.1 (Table
#'         6.1): \code{vignette("orthogonal", package = "sparsevgp")} and
#'         \code{inst/bench/bench_osgpr.R}.
#'       \item Derived for this package and checked numerically: eq. 5.33
#'         equals the SGPR bound on \code{rbind(Z, O)} (by the block inverse,
#'         eq. 5.4), and so does the predictive mean of both families; the
#'         true ELBOs of the SOLVE-GP and ODVGP posteriors are lower, in
#'         closed form (\code{osgpr(bound = "family")}, the default), where
#'         section 5.3.2 takes them to equal eq. 5.33; the bound costs the
#'         same flops as SGPR with \eqn{M = M_1 + M_2}{M = M1 + M2} inducing
#'         inputs, so the 25--50 \% saving claimed in section 6.1 does not
#'         hold.
#'     }}
#'   \item{Shi, J., Titsias, M. and Mnih, A. (2020). Sparse orthogonal
#'     variational inference for Gaussian processes. Proceedings of the 23rd
#'     International Conference on Artificial Intelligence and Statistics
#'     (AISTATS), PMLR 108, 1932--1942.}{The SOLVE-GP variational family:
#'     \code{osgpr(type = "solve")}.}
#'   \item{Salimbeni, H., Cheng, C.-A., Boots, B. and Deisenroth, M. (2018).
#'     Orthogonally decoupled variational Gaussian processes. Advances in
#'     Neural Information Processing Systems 31, 8711--8720.}{The ODVGP
#'     family: \code{osgpr(type = "odvgp")}, whose collapsed optimum is their
#'     Appendix E with the noise variance put back (the printed optimum
#'     omits the factor \eqn{1/\sigma^2}{1 / s2}); the uncollapsed model
#'     (eq. 12) with the predictive of Appendix A.2 (section 3.2 misprints a
#'     missing \eqn{K_\beta^{-1}}{Kb^-1} and a sign) and the KL divergence of
#'     Prop. A.1: \code{\link{odvgp}()}; the natural-gradient update on the
#'     \eqn{\beta}{beta}-block (section 3.4, eqs. 16b and 16c) with Adam on
#'     the rest, step 0.005 and the warm-up of Appendix F:
#'     \code{\link{natgrad_step}()}, \code{control$optimizer = "natgrad"} of
#'     \code{svgp()} and \code{odvgp()}.}
#' }
#'
#' @section Uncollapsed and stochastic variational inference:
#' \describe{
#'   \item{Hensman, J., Fusi, N. and Lawrence, N. D. (2013). Gaussian
#'     processes for big data. Proceedings of the 29th Conference on
#'     Uncertainty in Artificial Intelligence (UAI), 282--290.}{The
#'     uncollapsed bound with an explicit \eqn{q(u)}, its unbiased minibatch
#'     estimate (data term scaled by \eqn{N/B}{N / B}): \code{\link{svgp}(batch_size
#'     = )}; natural-gradient steps on \eqn{q(u)}: \code{natgrad_step()}.}
#'   \item{Hensman, J., Matthews, A. G. de G. and Ghahramani, Z. (2015).
#'     Scalable variational Gaussian process classification. Proceedings of
#'     the 18th International Conference on Artificial Intelligence and
#'     Statistics (AISTATS), PMLR 38, 351--360.}{The uncollapsed bound
#'     \eqn{\sum_n E_{q(f_n)}[\log p(y_n | f_n)] - KL[q(u) \| p(u)]}{sum_n
#'     E_q(f_n)[log p(y_n | f_n)] - KL[q(u) || p(u)]} for non-Gaussian
#'     likelihoods by one-dimensional quadrature, and the whitened
#'     parameterisation: \code{svgp()}.}
#'   \item{Tiao, L. C. (2020). A handbook for sparse variational Gaussian
#'     processes. Online handbook, tiao.io.}{The whitened parameterisation,
#'     the uncollapsed bound (section "Non-Gaussian likelihoods") and the
#'     predictive algorithm of its Appendix II: \code{svgp()} and its
#'     predictions.}
#'   \item{Salimbeni, H., Eleftheriadis, S. and Hensman, J. (2018). Natural
#'     gradients in practice: non-conjugate variational inference in
#'     Gaussian process models. Proceedings of the 21st International
#'     Conference on Artificial Intelligence and Statistics (AISTATS), PMLR
#'     84, 689--697.}{Natural-gradient steps on \eqn{q(u)} alternated with
#'     Adam on the other parameters, and the step size warmed up from
#'     \eqn{10^{-5}}{1e-5} for non-conjugate likelihoods:
#'     \code{control$optimizer = "natgrad"} of \code{svgp()} and
#'     \code{odvgp()}.}
#'   \item{Hernandez-Lobato, D., Hernandez-Lobato, J. M. and Dupont, P.
#'     (2011). Robust multi-class Gaussian process classification. Advances
#'     in Neural Information Processing Systems 24.}{The robust-max
#'     likelihood: \code{odvgp(likelihood = "robustmax")}, its expectation
#'     by one-dimensional Gauss-Hermite quadrature of
#'     \eqn{P(\arg\max_k f_k = y)}{P(argmax_k f_k = y)}.}
#'   \item{Cheng, C.-A. and Boots, B. (2017). Variational inference for
#'     Gaussian process models with linear complexity. Advances in Neural
#'     Information Processing Systems 30.}{Decoupled bases for the mean and
#'     the covariance, which \code{odvgp()} makes orthogonal; their decoupled
#'     (eq. 8 of Salimbeni et al. 2018) and hybrid (eq. 11) bases and KL
#'     divergences: \code{odvgp(basis = "decoupled")},
#'     \code{odvgp(basis = "hybrid")}.}
#'   \item{Kingma, D. P. and Welling, M. (2014). Auto-encoding variational
#'     Bayes. International Conference on Learning Representations
#'     (ICLR).}{The reparametrisation \eqn{f = \mu + \sqrt{s}\,\epsilon}{f =
#'     mu + sqrt(s) eps} with fixed draws: the Monte Carlo softmax expectation
#'     of \code{odvgp(likelihood = "softmax")} and its gradients.}
#'   \item{Kingma, D. P. and Ba, J. (2015). Adam: a method for stochastic
#'     optimization. International Conference on Learning Representations
#'     (ICLR).}{Adam with its default \eqn{\beta_1 = 0.9}{beta1 = 0.9},
#'     \eqn{\beta_2 = 0.999}{beta2 = 0.999}, \eqn{\epsilon = 10^{-8}}{eps =
#'     1e-8}: \code{svgp(batch_size = )}.}
#'   \item{Murray, I. (2016). Differentiation of the Cholesky decomposition.
#'     arXiv:1602.07527.}{The backward pass through
#'     \eqn{L = \mathrm{chol}(K_{uu})}{L = chol(Kuu)} in the gradients of the
#'     whitened \code{svgp()}.}
#'   \item{Golub, G. H. and Welsch, J. H. (1969). Calculation of Gauss
#'     quadrature rules. Mathematics of Computation 23(106), 221--230.}{The
#'     Gauss-Hermite nodes and weights from the eigen-decomposition of the
#'     Jacobi matrix: \code{svgp(quadrature = )} and
#'     \code{predict.pgpr(method = "quadrature")}.}
#'   \item{MacKay, D. J. C. (1992). The evidence framework applied to
#'     classification networks. Neural Computation 4(5), 720--736.}{The
#'     probit approximation \eqn{\sigma(\mu/\sqrt{1 + \pi s^2/8})}{sigmoid(mu
#'     / sqrt(1 + pi s2 / 8))}: \code{predict.pgpr(method = "probit")}.}
#' }
#'
#' @section Local structure: the Vecchia residual of sgpr(neighbours = K):
#' \describe{
#'   \item{Gyger, T., Furrer, R. and Sigrist, F. (2025). Vecchia-inducing-points
#'     full-scale approximations for Gaussian processes. arXiv:2507.05064.}{The
#'     model of \code{\link{sgpr}(neighbours = K)}: inducing points for the
#'     global process and a Vecchia approximation of the residual process
#'     \eqn{K_{ff} - Q_{ff}}{Kff - Qff} with the noise (VIF), its neighbours chosen by the
#'     correlation of the residual process, a random ordering. The package
#'     computes the likelihood by the Woodbury identity with the sparse
#'     Vecchia precision and its gradients through the adjoints of the
#'     kernel blocks it reads (derived for this package, stated in
#'     \code{src/vecchia.c} and checked by finite differences in the
#'     tests); the candidates of the correlation-based choice are the
#'     \eqn{2K} Euclidean nearest earlier points in the scaled inputs
#'     (the authors search all earlier points with a cover tree).}
#'   \item{Vecchia, A. V. (1988). Estimation and model identification for
#'     continuous spatial processes. Journal of the Royal Statistical Society
#'     B 50(2), 297--312.}{The product of conditionals given a few earlier
#'     observations.}
#'   \item{Katzfuss, M. and Guinness, J. (2021). A general framework for
#'     Vecchia approximations of Gaussian processes. Statistical Science
#'     36(1), 124--141.}{The sparse inverse Cholesky form of the Vecchia
#'     precision, \eqn{\tilde\Sigma^{-1} = B^\top D^{-1} B}{Sigma~^-1 = B' D^-1 B} with the regression
#'     coefficients on the neighbours in \eqn{B} and the conditional
#'     variances in \eqn{D} (eqs. 1--3), used for the residual process.}
#'   \item{Guinness, J. (2018). Permutation and grouping methods for
#'     sharpening Gaussian process approximations. Technometrics 60(4),
#'     415--429.}{Random orderings give far sharper Vecchia approximations
#'     than coordinate-based ones: the ordering of \code{sgpr(neighbours = )}
#'     is random.}
#' }
#'
#' @section Inducing-point selection:
#' \describe{
#'   \item{Burt, D. R., Rasmussen, C. E. and van der Wilk, M. (2019). Rates
#'     of convergence for sparse variational Gaussian process regression.
#'     Proceedings of the 36th International Conference on Machine Learning
#'     (ICML), PMLR 97, 862--871.}{Bounds on the KL divergence of the sparse
#'     posterior through the trace \eqn{\mathrm{tr}(K_{ff} -
#'     Q_{ff})/\sigma^2}{tr(Kff - Qff) / s2}, and how \eqn{M} must grow with
#'     \eqn{N}: the background of \code{kl_threshold()}.}
#'   \item{Burt, D. R., Rasmussen, C. E. and van der Wilk, M. (2020).
#'     Convergence of sparse variational inference in Gaussian processes
#'     regression. Journal of Machine Learning Research 21(131), 1--63.}{Greedy
#'     conditional-variance selection (a pivoted partial Cholesky
#'     factorisation of \eqn{K_{ff}}{Kff}): \code{select_inducing(method =
#'     "greedy")} and the methods \code{"greedy"} and \code{"gv"} of the
#'     \code{inducing} argument of every model; the alternation
#'     of selection and hyperparameter fitting ("greedy variance
#'     reinitialisation"): \code{reinit_inducing()}; the average-case bounds
#'     on the expected KL divergence for homoscedastic noise:
#'     \code{kl_threshold()}.}
#' }
#'
#' @section Data:
#' \describe{
#'   \item{Snelson, E. and Ghahramani, Z. (2006). Sparse Gaussian processes
#'     using pseudo-inputs. Advances in Neural Information Processing Systems
#'     18, 1257--1264.}{The one-dimensional toy data \code{\link{snelson}}.}
#'   \item{Passerello (2022), Table 5.1.}{The classification data sets of
#'     \code{classification_data()}; their sources are listed in
#'     \code{system.file("extdata", "classification", "README.md", package =
#'     "sparsevgp")}.}
#' }
#'
#' @section Software the package follows or compares with:
#' \describe{
#'   \item{GPflow: Matthews, A. G. de G., van der Wilk, M., Nickson, T.,
#'     Fujii, K., Boukouvalas, A., Leon-Villagra, P. et al. (2017). GPflow: a
#'     Gaussian process library using TensorFlow. Journal of Machine
#'     Learning Research 18(40), 1--6.}{The conventions the package shares:
#'     predictions without a diagonal correction, the whitened \eqn{q(u)} of
#'     \code{svgp()} and its 20 Gauss-Hermite points.}
#'   \item{robustgp (github.com/markvdw/RobustGP), the code of Burt, Rasmussen
#'     and van der Wilk (2020).}{Its greedy selection and re-initialisation loop, which
#'     \code{select_inducing()} and \code{reinit_inducing()} follow (with
#'     the off-by-one of its threshold stop corrected).}
#'   \item{SHGP (github.com/GiovanniPasserello/SHGP), the code of Passerello
#'     (2022).}{Details the thesis leaves open, which \code{pgpr()} and the
#'     classification vignette follow: the starting value \eqn{c_n = 0.1}{c_n
#'     = 0.1}, plug-in class probabilities in the tables, the padding of
#'     k-means centres, the preprocessing of the data sets, and the
#'     non-sparse optima from its logs that \code{extdata/pgpr_nonsparse.csv}
#'     compares with.}
#'   \item{bayesian_benchmarks (github.com/hughsalimbeni/bayesian_benchmarks).}{The
#'     published SGPR (\eqn{M = 100}{M = 100}) results on UCI data sets that
#'     \code{inst/bench/bench_uci_sgpr.R} compares with.}
#' }
#'
#' @name sparsevgp-references
#' @aliases sparsevgp-references
NULL
