/*
 * svgp.c: the expected log-likelihoods of the uncollapsed models (svgp(),
 * odvgp(); Hensman et al. 2015; Tiao 2020, "Non-Gaussian likelihoods"; the
 * classification baseline of Passerello 2022, section 5.1.1) for given
 * marginals q(f_n) = N(mu_n, s2_n), with their derivatives g_n = dELL/dmu_n
 * and h_n = dELL/ds2_n:
 *   Bernoulli-logit: log p = log sigmoid(y f), y in {-1, +1}, by
 *     Gauss-Hermite quadrature, E[g(f)] ~ sum_i w_i / sqrt(pi)
 *     g(mu + sqrt(2) s t_i); g and h are the exact derivatives of that sum;
 *   Bernoulli-probit: log Phi(y f), the same quadrature;
 *   Gaussian with variance s2y: ELL_n = log N(y_n; mu_n, s2y) - s2_n/(2 s2y)
 *     exactly, with its derivative in s2y.
 * The rest of the ELBO (the marginals of the basis of q(u), the KL
 * divergence and every adjoint) is R/uncollapsed.R: measured against the
 * former whole-ELBO routine of this file, that R evaluator (one triangular
 * solve and one product per latent function over the data) cost less at
 * M = 500, N = 20 000 (inst/bench/bench_uncollapsed.R, NEWS.md).
 *
 * Minibatches (Hensman et al. 2013): every sum and derivative is multiplied
 * by lik$scale = N / |B|, which makes them unbiased estimates of the
 * full-batch ones.
 *
 * Cost O(N n_gh); nothing N x N.
 */
#include <float.h>
#include <math.h>
#include <R.h>
#include <Rinternals.h>
#include <Rmath.h>
#include "spv.h"

#define LOG_2PI 1.8378770664093454836
#define INV_SQRT_PI 0.56418958354775628695
#define SQRT2 1.4142135623730950488

enum { LIK_BERNOULLI = 1, LIK_GAUSSIAN = 2, LIK_PROBIT = 3 };

/* The likelihood and its data. */
typedef struct {
    int code, ngh;              /* LIK_*; Gauss-Hermite nodes */
    const double *y;            /* N: +-1 (Bernoulli) or the targets */
    const double *ght, *ghw;    /* ngh nodes and weights */
    double noise;               /* Gaussian variance */
    double scale;               /* N / |B| on a minibatch, else 1 */
} svgp_lik;

/* log sigmoid(z) and sigmoid(-z) without overflow. */
static inline double svgp_log_sigmoid(double z)
{
    return z >= 0.0 ? -log1p(exp(-z)) : z - log1p(exp(z));
}

static inline double svgp_sigmoid_neg(double z)
{
    if (z > 0.0) {
        const double e = exp(-z);
        return e / (1.0 + e);
    }
    return 1.0 / (1.0 + exp(z));
}

/* log p(y | f) of a binary likelihood as a function of z = y f, with its
 * first and second derivatives in z (y = +-1, so d/df = y d/dz and
 * d2/df2 = d2/dz2):
 *   logit:  log sigmoid(z),  sigmoid(-z),  -sigmoid(z) sigmoid(-z);
 *   probit: log Phi(z),      lam(z),       -lam(z) (z + lam(z)),
 * with the inverse Mills ratio lam = phi / Phi from R's log densities, so
 * that it stays finite far in the tail. */
static inline double svgp_binary_logp(int lik, double z, double *d1, double *d2)
{
    if (lik == LIK_PROBIT) {
        const double lp = pnorm(z, 0.0, 1.0, 1, 1);
        const double lam = exp(dnorm(z, 0.0, 1.0, 1) - lp);
        *d1 = lam;
        *d2 = -lam * (z + lam);
        return lp;
    }
    const double sn = svgp_sigmoid_neg(z);
    *d1 = sn;
    *d2 = -sn * (1.0 - sn);
    return svgp_log_sigmoid(z);
}

/* One binary-likelihood expectation by Gauss-Hermite: value, and its exact
 * derivatives with respect to the mean and the variance of q(f). For a
 * variance below 1e-16 the derivative in the variance divides by a
 * vanishing sd; there its limit, half the expected second derivative, is
 * used instead. */
static double svgp_binary_gh(int lik, double y, double mu, double s2, int ngh,
                             const double *t, const double *w, double *g,
                             double *h)
{
    const double s = sqrt(s2);
    const int tiny = s2 < 1e-16;
    double e = 0.0, dg = 0.0, dh = 0.0;
    for (int i = 0; i < ngh; i++) {
        const double f = mu + SQRT2 * s * t[i], wi = w[i] * INV_SQRT_PI;
        double d1, d2;
        e += wi * svgp_binary_logp(lik, y * f, &d1, &d2);
        dg += wi * y * d1;                           /* d/df log p */
        if (tiny)
            dh += wi * 0.5 * d2;                     /* 1/2 d2/df2 */
        else
            dh += wi * y * d1 * t[i];
    }
    *g = dg;
    *h = tiny ? dh : dh / (SQRT2 * s);
    return e;
}

/* E_N(f; mu, s2)[log p(y_n | f)] of point n, with its derivatives g in mu
 * and h in s2; the Gaussian likelihood adds its derivative in the noise
 * variance to *gnoise. */
static double svgp_ell_point(const svgp_lik *lik, int n, double mu, double s2,
                             double *g, double *h, double *gnoise)
{
    if (lik->code != LIK_GAUSSIAN)
        return svgp_binary_gh(lik->code, lik->y[n], mu, s2, lik->ngh,
                              lik->ght, lik->ghw, g, h);
    const double s2y = lik->noise, r = lik->y[n] - mu;
    *g = r / s2y;
    *h = -0.5 / s2y;
    *gnoise += -0.5 / s2y + 0.5 * (r * r + s2) / (s2y * s2y);
    return -0.5 * (LOG_2PI + log(s2y)) - 0.5 * (r * r + s2) / s2y;
}

/* ---- .Call entry point ------------------------------------------------ */

/* lik = list(type, y, noise, gh_x, gh_w, scale), checked field by field. */
static void svgp_read_lik(SEXP lik, int N, svgp_lik *sl)
{
    SEXP type = chk_field(lik, "lik", "type"), y = chk_field(lik, "lik", "y");
    if (!isInteger(type) || XLENGTH(type) != 1 ||
        INTEGER(type)[0] < LIK_BERNOULLI || INTEGER(type)[0] > LIK_PROBIT)
        error("'lik$type' must be 1 (Bernoulli-logit), 2 (Gaussian) or 3 "
              "(Bernoulli-probit)");
    sl->code = INTEGER(type)[0];
    chk_real_vector(y, "lik$y", N);
    chk_finite(y, "lik$y");
    sl->y = REAL(y);
    sl->noise = chk_scalar(chk_field(lik, "lik", "noise"), "lik$noise");
    if (sl->code == LIK_GAUSSIAN && !(sl->noise >= DBL_MIN))
        error("'lik$noise' must be a positive normal number for the "
              "Gaussian likelihood");
    if (sl->code != LIK_GAUSSIAN)
        for (int n = 0; n < N; n++)
            if (sl->y[n] != 1.0 && sl->y[n] != -1.0)
                error("'lik$y' must be -1 or 1 for the Bernoulli likelihood");
    SEXP gh_x = chk_field(lik, "lik", "gh_x"),
         gh_w = chk_field(lik, "lik", "gh_w");
    chk_real_vector(gh_x, "lik$gh_x", -1);
    sl->ngh = (int) XLENGTH(gh_x);
    if (sl->ngh < 1) error("'lik$gh_x' must have at least one node");
    chk_real_vector(gh_w, "lik$gh_w", sl->ngh);
    chk_finite(gh_x, "lik$gh_x");
    chk_finite(gh_w, "lik$gh_w");
    sl->ght = REAL(gh_x);
    sl->ghw = REAL(gh_w);
    sl->scale = chk_scalar(chk_field(lik, "lik", "scale"), "lik$scale");
    if (!(sl->scale > 0.0)) error("'lik$scale' must be positive");
}

/* The expected log-likelihood of given marginals q(f_n) = N(mu_n, var_n):
 * list(ell = scale sum_n E[log p(y_n | f_n)], g = scale dE/dmu_n,
 * h = scale dE/dvar_n, gnoise = scale dE/d noise), with
 *   lik = list(type (integer: 1 Bernoulli-logit, 2 Gaussian, 3
 *         Bernoulli-probit), y (N; -1 or 1 for Bernoulli), noise (the
 *         Gaussian variance; ignored for Bernoulli), gh_x, gh_w
 *         (Gauss-Hermite nodes and weights for int exp(-t^2) g(t) dt),
 *         scale (the factor N / |B| of a minibatch, 1 for the full batch)).
 * The likelihood classes of R/likelihoods.R call it for these families.
 * Cost O(N n_gh). */
SEXP ffi_svgp_ell(SEXP mu, SEXP var, SEXP lik)
{
    chk_real_vector(mu, "mu", -1);
    const int N = (int) XLENGTH(mu);
    chk_real_vector(var, "var", N);
    chk_finite(mu, "mu");
    chk_finite(var, "var");
    svgp_lik sl;
    svgp_read_lik(lik, N, &sl);
    int nprot = 0;
    SEXP sg = PROTECT(allocVector(REALSXP, N)); nprot++;
    SEXP sh = PROTECT(allocVector(REALSXP, N)); nprot++;
    double *g = REAL(sg), *h = REAL(sh);
    const double *m = REAL(mu), *v = REAL(var);
    double ell = 0.0, gnoise = 0.0;
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        if (v[n] < 0.0) error("'var' must be non-negative");
        ell += svgp_ell_point(&sl, n, m[n], v[n], g + n, h + n, &gnoise);
    }
    for (int n = 0; n < N; n++) {
        g[n] *= sl.scale;
        h[n] *= sl.scale;
    }
    ell *= sl.scale;
    gnoise *= sl.scale;
    if (!R_FINITE(ell)) error("the expected log-likelihood is not finite");
    chk_result(g, (size_t) N, "derivative in mu");
    chk_result(h, (size_t) N, "derivative in var");
    chk_result(&gnoise, 1, "derivative in the noise");
    const char *names[] = {"ell", "g", "h", "gnoise", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, ScalarReal(ell));
    SET_VECTOR_ELT(out, 1, sg);
    SET_VECTOR_ELT(out, 2, sh);
    SET_VECTOR_ELT(out, 3, ScalarReal(gnoise));
    UNPROTECT(nprot);
    return out;
}
