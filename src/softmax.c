/*
 * softmax.c: the Monte Carlo expected log-likelihood of the softmax
 * likelihood p(y = k | f) = exp(f_k) / sum_j exp(f_j) under independent
 * marginals f_j ~ N(mu_j, s_j), with a fixed S x K matrix of standard-normal
 * draws eps shared by all rows, reparametrised as f = mu + sd eps (Kingma
 * and Welling 2014), and its gradients, exact for the fixed draws:
 *   ell_n    = mean_s (f_sy - lse_s),   lse_s = log sum_j exp(f_sj),
 *   d/dmu_k  = mean_s (1[k = y] - p_k(f_s)),
 *   d/ds_k   = mean_s (1[k = y] - p_k(f_s)) eps_sk / (2 sd_k).
 * The same estimator as the vectorised R code it replaces (R/likelihoods.R,
 * .softmax_ell()), computed row by row without the n x S matrices of every
 * class: the work is n S K exponentials, with O(K) memory.
 * Also the class probabilities mean_s p_k(f_s) (.softmax_prob()).
 */
#include <math.h>
#include <R.h>
#include <Rinternals.h>
#include "ffi.h"

/* The softmax of the draw f (K values) into p, returning log sum exp f. */
static double softmax_draw(const double *f, int K, double *p)
{
    double mx = f[0];
    for (int k = 1; k < K; k++) if (f[k] > mx) mx = f[k];
    double tot = 0.0;
    for (int k = 0; k < K; k++) {
        p[k] = exp(f[k] - mx);
        tot += p[k];
    }
    for (int k = 0; k < K; k++) p[k] /= tot;
    return mx + log(tot);
}

/* MU and SD n x K, draws S x K (K, S >= 1), all finite, SD >= 0 (> 0
 * with positive_sd). */
static void check_args(SEXP MU, SEXP SD, SEXP draws, int positive_sd)
{
    if (!isReal(MU) || !isMatrix(MU) || !isReal(SD) || !isMatrix(SD) ||
        !isReal(draws) || !isMatrix(draws))
        error("softmax: 'MU', 'sd' and 'draws' must be double matrices");
    if (nrows(SD) != nrows(MU) || ncols(SD) != ncols(MU) || ncols(MU) < 1 ||
        ncols(draws) != ncols(MU) || nrows(draws) < 1)
        error("softmax: 'MU' and 'sd' must be n x K and 'draws' S x K, K >= 1 and S >= 1");
    const double *mu = REAL(MU), *sd = REAL(SD), *eps = REAL(draws);
    const R_xlen_t nk = XLENGTH(MU), sk = XLENGTH(draws);
    for (R_xlen_t i = 0; i < nk; i++) {
        if (!R_FINITE(mu[i]) || !R_FINITE(sd[i]) || sd[i] < 0 ||
            (positive_sd && sd[i] == 0))
            error("softmax: 'MU' must be finite and 'sd' finite and %s",
                  positive_sd ? "positive" : "non-negative");
    }
    for (R_xlen_t i = 0; i < sk; i++)
        if (!R_FINITE(eps[i])) error("softmax: 'draws' must be finite");
}

static void check_result(double v)
{
    if (!R_FINITE(v))
        error("softmax: the expected log-likelihood or its derivatives are not finite at these means and standard deviations");
}

/* ELL summed over rows (not scaled), with g and h (n x K); y holds the
 * classes 1..K. list(ell, g, h). */
SEXP ffi_softmax_ell(SEXP MU, SEXP SD, SEXP y, SEXP draws)
{
    check_args(MU, SD, draws, 1);
    const int n = nrows(MU), K = ncols(MU), S = nrows(draws);
    if (!isInteger(y) || XLENGTH(y) != n)
        error("softmax: 'y' must be %d integers", n);
    const double *mu = REAL(MU), *sd = REAL(SD), *eps = REAL(draws);
    const int *yy = INTEGER(y);
    for (int i = 0; i < n; i++)
        if (yy[i] == NA_INTEGER || yy[i] < 1 || yy[i] > K)
            error("softmax: 'y' must hold classes 1 to %d", K);
    SEXP g = PROTECT(allocMatrix(REALSXP, n, K));
    SEXP h = PROTECT(allocMatrix(REALSXP, n, K));
    double *gp = REAL(g), *hp = REAL(h);
    double *f = (double *) R_alloc((size_t) 2 * K, sizeof(double));
    double *p = f + K;
    double ell = 0.0;
    for (int i = 0; i < n; i++) {
        if ((i & 1023) == 1023) R_CheckUserInterrupt();
        const int yi = yy[i] - 1;
        double acc = 0.0;
        for (int k = 0; k < K; k++) {
            gp[i + (size_t) n * k] = 0.0;
            hp[i + (size_t) n * k] = 0.0;
        }
        for (int s = 0; s < S; s++) {
            for (int k = 0; k < K; k++)
                f[k] = mu[i + (size_t) n * k] + sd[i + (size_t) n * k] * eps[s + (size_t) S * k];
            for (int k = 0; k < K; k++) check_result(f[k]);
            const double lse = softmax_draw(f, K, p);
            acc += f[yi] - lse;
            for (int k = 0; k < K; k++) {
                const double r = (k == yi) - p[k];
                gp[i + (size_t) n * k] += r;
                hp[i + (size_t) n * k] += r * eps[s + (size_t) S * k];
            }
        }
        ell += acc;
        for (int k = 0; k < K; k++) {
            gp[i + (size_t) n * k] /= S;
            hp[i + (size_t) n * k] /= 2.0 * sd[i + (size_t) n * k] * S;
            check_result(hp[i + (size_t) n * k]);
        }
        check_result(ell);
    }
    SEXP out = PROTECT(allocVector(VECSXP, 3));
    SET_VECTOR_ELT(out, 0, ScalarReal(ell / S));
    SET_VECTOR_ELT(out, 1, g);
    SET_VECTOR_ELT(out, 2, h);
    SEXP nms = PROTECT(allocVector(STRSXP, 3));
    SET_STRING_ELT(nms, 0, mkChar("ell"));
    SET_STRING_ELT(nms, 1, mkChar("g"));
    SET_STRING_ELT(nms, 2, mkChar("h"));
    setAttrib(out, R_NamesSymbol, nms);
    UNPROTECT(4);
    return out;
}

/* The class probabilities mean_s p_k(f_s): n x K. */
SEXP ffi_softmax_prob(SEXP MU, SEXP SD, SEXP draws)
{
    check_args(MU, SD, draws, 0);
    const int n = nrows(MU), K = ncols(MU), S = nrows(draws);
    const double *mu = REAL(MU), *sd = REAL(SD), *eps = REAL(draws);
    SEXP P = PROTECT(allocMatrix(REALSXP, n, K));
    double *pp = REAL(P);
    double *f = (double *) R_alloc((size_t) 2 * K, sizeof(double));
    double *p = f + K;
    for (int i = 0; i < n; i++) {
        if ((i & 1023) == 1023) R_CheckUserInterrupt();
        for (int k = 0; k < K; k++) pp[i + (size_t) n * k] = 0.0;
        for (int s = 0; s < S; s++) {
            for (int k = 0; k < K; k++)
                f[k] = mu[i + (size_t) n * k] + sd[i + (size_t) n * k] * eps[s + (size_t) S * k];
            for (int k = 0; k < K; k++) check_result(f[k]);
            softmax_draw(f, K, p);
            for (int k = 0; k < K; k++) pp[i + (size_t) n * k] += p[k];
        }
        for (int k = 0; k < K; k++) {
            pp[i + (size_t) n * k] /= S;
            check_result(pp[i + (size_t) n * k]);
        }
    }
    UNPROTECT(1);
    return P;
}
