/*
 * svgp.c: the uncollapsed, whitened SVGP evidence lower bound (Hensman et
 * al. 2015; seed001 sections 2.1, 5 and 7; seed004 section 6.1) for a
 * Bernoulli likelihood with a logit or probit link (Gauss-Hermite quadrature) and a Gaussian one
 * (closed form), with its gradient with respect to the variational
 * parameters and its adjoints with respect to the kernel matrices.
 *
 * Whitened parametrisation (whiten = TRUE): u = L v, L = chol(Kuu + jitter I),
 * q(v) = N(b, W W') with b = q_mu (M) and W = q_sqrt (M x M, lower).
 * Non-whitened (whiten = FALSE; seed001 section 2, items 3-4 of section 10):
 * q(u) = N(b, W W') directly. It is evaluated as the whitened form with
 * b' = L^-1 b and W' = L^-1 W (full M x M; seed001 section 7, last item),
 * which gives the predictive of seed001 section 6 (Psi' b = A' L^-1 b) and
 *   KL = 1/2 (|W'|_F^2 + |b'|^2 - M) - sum log |W_ii| + sum log L_ii
 * (seed001 section 5, closed form); the dependence of b', W' and log det L
 * on L is added to the adjoint of L before the Cholesky backward pass:
 *   Lbar += -tril(bbar b'^T + Wbar W'^T) - diag(1 / L_ii)
 * with bbar = L^-T (A g - b'), Wbar = L^-T (2 A diag(h) V' - W').
 *
 * Minibatches (seed001 section 5, "Minibatching"; target 11): Kuf, kdiag
 * and y hold the columns of a batch B and the expected log-likelihood and
 * its derivatives are multiplied by ell_scale = N / |B|, which makes the
 * ELBO and its gradient unbiased estimates of the full-batch ones.
 *   A       = L^-1 Kuf                                   M x N
 *   V       = W' A                                       M x N
 *   mu_n    = mean + a_n' b                              (seed001 sec. 6)
 *   s2_n    = k_nn - |a_n|^2 + |V_n|^2
 *   ELL     = sum_n E_N(f; mu_n, s2_n) [log p(y_n | f)]
 *   KL      = 1/2 (|W|_F^2 + |b|^2 - M - 2 sum_i log |W_ii|)  (seed001 sec. 5)
 *   ELBO    = ELL - KL
 *
 * With g_n = dELL/dmu_n and h_n = dELL/ds2_n (seed001 sec. 7):
 *   dELBO/db = A g - b
 *   dELBO/dW = tril(2 A diag(h) V') - tril(W) + diag(1 / W_ii)
 *   Abar     = b g' + 2 (W V - A) diag(h)        adjoint of A      M x N
 *   Guf      = L^-T Abar                         adjoint of Kuf    M x N
 *   Lbar     = -tril(Guf A')                     adjoint of L      M x M
 *   Guu      = sym(L^-T Phi(L' Lbar) L^-1)       adjoint of Kuu (Cholesky
 *              backward pass, Murray 2016; Phi = lower triangle with the
 *              diagonal halved)
 *   gdiag_n  = h_n
 * The KL of the whitened form does not depend on Kuu.
 *
 * Likelihoods, with y_n in {-1, +1} for Bernoulli:
 *   Bernoulli-logit: log p = log sigmoid(y f), expectation by Gauss-Hermite,
 *     E[g(f)] ~ sum_i w_i / sqrt(pi) g(mu + sqrt(2) s t_i) (seed001 sec. 5);
 *     g and h are the exact derivatives of that sum.
 *   Gaussian with variance s2y: ELL_n = log N(y_n; mu_n, s2y) - s2_n/(2 s2y).
 *
 * Cost O(N M^2 + M^3 + N n_gh); memory A, V, Guf (M x N); nothing N x N.
 */
#define USE_FC_LEN_T
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include <Rmath.h>
#include <R_ext/BLAS.h>
#include "spv.h"
#ifndef FCONE
#define FCONE
#endif

#define LOG_2PI 1.8378770664093454836
#define INV_SQRT_PI 0.56418958354775628695
#define SQRT2 1.4142135623730950488

enum { LIK_BERNOULLI = 1, LIK_GAUSSIAN = 2, LIK_PROBIT = 3 };

typedef struct {
    double elbo, ell, kl, jitter;
    double *L, *mu, *var;                       /* M x M, N, N */
    /* gradients (NULL when not wanted) */
    double *Guu, *Guf, *gdiag, *gmu, *gq_mu, *gq_sqrt;
    double gmean, gnoise;
} svgp_out;

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

/* Returns 0 on success, 1 if Kuu could not be factorised within the jitter
 * cap. */
static int svgp_elbo(const double *Kuu, const double *Kuf, const double *kdiag,
                     const double *bq, const double *W, const double *y,
                     int lik, double noise, double mean, int ngh,
                     const double *ght, const double *ghw, int M, int N,
                     double jit_base, double jit_cap, int whiten,
                     double ell_scale, svgp_out *out)
{
    const size_t MN = (size_t) M * N, MM = (size_t) M * M;
    const int grad = out->Guf != NULL;
    const double one = 1.0, mone = -1.0, zero = 0.0;
    const int ione = 1;

    out->jitter = la_chol_jitter(Kuu, M, jit_base, jit_cap, out->L);
    if (out->jitter < 0.0) return 1;
    const double *L = out->L;

    /* Wt = tril(W): the upper triangle of the argument is ignored */
    double *Wt = (double *) R_alloc(MM, sizeof(double));
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++)
            Wt[i + (size_t) M * j] = i >= j ? W[i + (size_t) M * j] : 0.0;
    /* whitened factors: b = b', Wl = W' (lower when whiten, else full
     * W' = L^-1 W and b' = L^-1 b) */
    double *Wl = Wt, *b = (double *) R_alloc((size_t) M, sizeof(double));
    memcpy(b, bq, (size_t) M * sizeof(double));
    if (!whiten) {
        Wl = (double *) R_alloc(MM, sizeof(double));
        memcpy(Wl, Wt, MM * sizeof(double));
        la_trsm_left(L, M, Wl, M, 'N');
        la_trsm_left(L, M, b, 1, 'N');
    }

    /* A = L^-1 Kuf: M x N */
    double *A = (double *) R_alloc(MN, sizeof(double));
    memcpy(A, Kuf, MN * sizeof(double));
    la_trsm_left(L, M, A, N, 'N');
    /* V = W'^T A: M x N */
    double *V = (double *) R_alloc(MN, sizeof(double));
    F77_CALL(dgemm)("T", "N", &M, &N, &M, &one, Wl, &M, A, &M, &zero, V, &M
                    FCONE FCONE);
    /* mu = mean + A' b */
    F77_CALL(dgemv)("T", &M, &N, &one, A, &M, b, &ione, &zero, out->mu, &ione
                    FCONE);

    double *g = (double *) R_alloc((size_t) N, sizeof(double));
    double *h = (double *) R_alloc((size_t) N, sizeof(double));
    double ell = 0.0, gnoise = 0.0;
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        const double *an = A + (size_t) M * n, *vn = V + (size_t) M * n;
        double aa = 0.0, vv = 0.0;
        for (int m = 0; m < M; m++) {
            aa += an[m] * an[m];
            vv += vn[m] * vn[m];
        }
        out->mu[n] += mean;
        double s2 = kdiag[n] - aa + vv;
        if (s2 < 0.0) s2 = 0.0;        /* rounding when Z contains x_n */
        out->var[n] = s2;
        if (lik != LIK_GAUSSIAN) {
            ell += svgp_binary_gh(lik, y[n], out->mu[n], s2, ngh, ght, ghw,
                                  g + n, h + n);
        } else {
            const double r = y[n] - out->mu[n];
            ell += -0.5 * (LOG_2PI + log(noise)) - 0.5 * (r * r + s2) / noise;
            g[n] = r / noise;
            h[n] = -0.5 / noise;
            gnoise += -0.5 / noise + 0.5 * (r * r + s2) / (noise * noise);
        }
    }
    /* minibatch scaling N / |B| of the data term (1 for the full batch) */
    ell *= ell_scale;
    gnoise *= ell_scale;
    for (int n = 0; n < N; n++) {
        g[n] *= ell_scale;
        h[n] *= ell_scale;
    }

    /* KL = 1/2 (|W'|_F^2 + |b'|^2 - M) - log|det W'|, with
     * log|det W'| = sum log |W_ii| - [non-whitened] sum log L_ii */
    double kl = 0.0;
    for (int j = 0; j < M; j++) {
        kl += b[j] * b[j] - 1.0 - 2.0 * log(fabs(Wt[j + (size_t) M * j]));
        if (!whiten) kl += 2.0 * log(L[j + (size_t) M * j]);
        for (int i = whiten ? j : 0; i < M; i++) {
            const double wij = Wl[i + (size_t) M * j];
            kl += wij * wij;
        }
    }
    kl *= 0.5;
    out->ell = ell;
    out->kl = kl;
    out->elbo = ell - kl;
    if (!grad) return 0;

    out->gnoise = gnoise;
    double gm = 0.0;
    for (int n = 0; n < N; n++) gm += g[n];
    out->gmean = gm;
    memcpy(out->gdiag, h, (size_t) N * sizeof(double));
    memcpy(out->gmu, g, (size_t) N * sizeof(double));

    /* bbar = dELBO/db' = A g - b' */
    double *bbar = (double *) R_alloc((size_t) M, sizeof(double));
    F77_CALL(dgemv)("N", &M, &N, &one, A, &M, g, &ione, &zero, bbar,
                    &ione FCONE);
    for (int m = 0; m < M; m++) bbar[m] -= b[m];

    /* Ah = A diag(h): M x N */
    double *Ah = (double *) R_alloc(MN, sizeof(double));
    for (int n = 0; n < N; n++) {
        const double *an = A + (size_t) M * n;
        double *o = Ah + (size_t) M * n;
        for (int m = 0; m < M; m++) o[m] = an[m] * h[n];
    }
    /* Wbar = dELBO/dW' (full) = 2 Ah V' - W' (the log det part is added
     * to the triangular W below) */
    const double two = 2.0;
    double *Wbar = (double *) R_alloc(MM, sizeof(double));
    F77_CALL(dgemm)("N", "T", &M, &M, &N, &two, Ah, &M, V, &M, &zero,
                    Wbar, &M FCONE FCONE);
    for (size_t ij = 0; ij < MM; ij++) Wbar[ij] -= Wl[ij];
    if (!whiten) {
        /* chain through b' = L^-1 b, W' = L^-1 W: bbar <- L^-T bbar,
         * Wbar <- L^-T Wbar */
        la_trsm_left(L, M, bbar, 1, 'T');
        la_trsm_left(L, M, Wbar, M, 'T');
    }
    memcpy(out->gq_mu, bbar, (size_t) M * sizeof(double));
    /* dELBO/dW = tril(Wbar) + diag(1 / W_ii) */
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++) {
            const size_t ij = i + (size_t) M * j;
            out->gq_sqrt[ij] = i < j ? 0.0 : Wbar[ij];
        }
    for (int i = 0; i < M; i++)
        out->gq_sqrt[i + (size_t) M * i] += 1.0 / Wt[i + (size_t) M * i];

    /* Abar = b' g' + 2 (W' V - A) diag(h), built in Guf: W' V - A into V */
    double *WV = (double *) R_alloc(MN, sizeof(double));
    F77_CALL(dgemm)("N", "N", &M, &N, &M, &one, Wl, &M, V, &M, &zero, WV, &M
                    FCONE FCONE);
    double *Gf = out->Guf;
    for (int n = 0; n < N; n++) {
        const double *an = A + (size_t) M * n, *vn = WV + (size_t) M * n;
        double *o = Gf + (size_t) M * n;
        for (int m = 0; m < M; m++)
            o[m] = b[m] * g[n] + 2.0 * (vn[m] - an[m]) * h[n];
    }
    /* Guf = L^-T Abar */
    la_trsm_left(L, M, Gf, N, 'T');

    /* Lbar = -tril(Guf A' [+ bbar b'^T + Wbar W'^T - diag(1/L_ii)]) */
    double *Lbar = (double *) R_alloc(MM, sizeof(double));
    F77_CALL(dgemm)("N", "T", &M, &M, &N, &mone, Gf, &M, A, &M, &zero, Lbar,
                    &M FCONE FCONE);
    if (!whiten) {
        F77_CALL(dger)(&M, &M, &mone, bbar, &ione, b, &ione, Lbar, &M);
        F77_CALL(dgemm)("N", "T", &M, &M, &M, &mone, Wbar, &M, Wl, &M, &one,
                        Lbar, &M FCONE FCONE);
        for (int i = 0; i < M; i++)
            Lbar[i + (size_t) M * i] -= 1.0 / L[i + (size_t) M * i];
    }
    for (int j = 1; j < M; j++)
        memset(Lbar + (size_t) M * j, 0, (size_t) j * sizeof(double));
    /* X = L' Lbar; Phi(X) = tril(X) with halved diagonal */
    F77_CALL(dtrmm)("L", "L", "T", "N", &M, &M, &one, L, &M, Lbar, &M
                    FCONE FCONE FCONE FCONE);
    for (int j = 0; j < M; j++) {
        memset(Lbar + (size_t) M * j, 0, (size_t) j * sizeof(double));
        Lbar[j + (size_t) M * j] *= 0.5;
    }
    /* P = L^-T Phi L^-1, then Guu = (P + P')/2 */
    la_trsm_left(L, M, Lbar, M, 'T');
    F77_CALL(dtrsm)("R", "L", "N", "N", &M, &M, &one, L, &M, Lbar, &M
                    FCONE FCONE FCONE FCONE);
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++)
            out->Guu[i + (size_t) M * j] =
                0.5 * (Lbar[i + (size_t) M * j] + Lbar[j + (size_t) M * i]);
    return 0;
}

/* ---- .Call entry point ------------------------------------------------ */

/* The SVGP ELBO and, when grad is TRUE, its gradient.
 * Kuu: M x M; Kuf: M x N; kdiag, y: length N; q_mu: M; q_sqrt: M x M (lower
 * triangle read, non-zero diagonal); lik: 1 Bernoulli-logit (y in {-1, 1}),
 * 2 Gaussian; noise: Gaussian variance (ignored for Bernoulli); mean: the
 * constant prior mean; gh_x, gh_w: Gauss-Hermite nodes and weights for
 * int exp(-t^2) g(t) dt; jitter, jitter_cap relative to mean diag Kuu;
 * whiten: TRUE for q(v) = N(q_mu, q_sqrt q_sqrt'), u = L v, FALSE for
 * q(u) itself; ell_scale: the factor N / |B| of the data term of a
 * minibatch (1 for the full batch). */
SEXP ffi_svgp_elbo(SEXP Kuu, SEXP Kuf, SEXP kdiag, SEXP q_mu, SEXP q_sqrt,
                   SEXP y, SEXP lik, SEXP noise, SEXP mean, SEXP gh_x,
                   SEXP gh_w, SEXP jitter, SEXP jitter_cap, SEXP whiten,
                   SEXP ell_scale, SEXP grad)
{
    chk_real_matrix(Kuu, "Kuu", -1);
    const int M = nrows(Kuu);
    if (M < 1 || ncols(Kuu) != M)
        error("'Kuu' must be a square matrix with at least one row");
    chk_real_matrix(Kuf, "Kuf", -1);
    if (nrows(Kuf) != M) error("'Kuf' must have %d rows", M);
    const int N = ncols(Kuf);
    chk_real_vector(kdiag, "kdiag", N);
    chk_real_vector(q_mu, "q_mu", M);
    chk_real_matrix(q_sqrt, "q_sqrt", M);
    if (nrows(q_sqrt) != M) error("'q_sqrt' must be %d x %d", M, M);
    chk_real_vector(y, "y", N);
    chk_finite(Kuu, "Kuu");
    chk_finite(Kuf, "Kuf");
    chk_finite(kdiag, "kdiag");
    chk_finite(q_mu, "q_mu");
    chk_finite(q_sqrt, "q_sqrt");
    chk_finite(y, "y");
    for (int i = 0; i < M; i++)
        if (REAL(q_sqrt)[i + (size_t) M * i] == 0.0)
            error("'q_sqrt' must have a non-zero diagonal");
    if (!isInteger(lik) || XLENGTH(lik) != 1 ||
        INTEGER(lik)[0] < LIK_BERNOULLI || INTEGER(lik)[0] > LIK_PROBIT)
        error("'lik' must be 1 (Bernoulli-logit), 2 (Gaussian) or 3 (Bernoulli-probit)");
    const int lk = INTEGER(lik)[0];
    const double s2y = chk_scalar(noise, "noise");
    if (lk == LIK_GAUSSIAN && !(s2y > 0.0))
        error("'noise' must be positive");
    if (lk != LIK_GAUSSIAN)
        for (int n = 0; n < N; n++)
            if (REAL(y)[n] != 1.0 && REAL(y)[n] != -1.0)
                error("'y' must be -1 or 1 for the Bernoulli likelihood");
    const double mn = chk_scalar(mean, "mean");
    chk_real_vector(gh_x, "gh_x", -1);
    const int ngh = (int) XLENGTH(gh_x);
    if (ngh < 1) error("'gh_x' must have at least one node");
    chk_real_vector(gh_w, "gh_w", ngh);
    chk_finite(gh_x, "gh_x");
    chk_finite(gh_w, "gh_w");
    double jb, jc;
    chk_jitter(jitter, jitter_cap, &jb, &jc);
    const int wh = chk_flag(whiten, "whiten");
    const double es = chk_scalar(ell_scale, "ell_scale");
    if (!(es > 0.0)) error("'ell_scale' must be positive");
    const int gr = chk_flag(grad, "grad");

    int nprot = 0;
    svgp_out o;
    memset(&o, 0, sizeof(o));
    SEXP sL = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP smu = PROTECT(allocVector(REALSXP, N)); nprot++;
    SEXP svar = PROTECT(allocVector(REALSXP, N)); nprot++;
    memset(REAL(sL), 0, (size_t) M * M * sizeof(double));
    o.L = REAL(sL); o.mu = REAL(smu); o.var = REAL(svar);
    SEXP sGuu = R_NilValue, sGuf = R_NilValue, sgd = R_NilValue,
         sgf = R_NilValue, sgm = R_NilValue, sgs = R_NilValue;
    if (gr) {
        sGuu = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        sGuf = PROTECT(allocMatrix(REALSXP, M, N)); nprot++;
        sgd = PROTECT(allocVector(REALSXP, N)); nprot++;
        sgf = PROTECT(allocVector(REALSXP, N)); nprot++;
        sgm = PROTECT(allocVector(REALSXP, M)); nprot++;
        sgs = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        o.Guu = REAL(sGuu); o.Guf = REAL(sGuf); o.gdiag = REAL(sgd);
        o.gmu = REAL(sgf);
        o.gq_mu = REAL(sgm); o.gq_sqrt = REAL(sgs);
    }
    const int status = svgp_elbo(REAL(Kuu), REAL(Kuf), REAL(kdiag),
                                 REAL(q_mu), REAL(q_sqrt), REAL(y), lk, s2y,
                                 mn, ngh, REAL(gh_x), REAL(gh_w), M, N, jb,
                                 jc, wh, es, &o);
    if (status == 1)
        error("Kuu is not positive definite even with jitter %g times its "
              "mean diagonal: are inducing inputs duplicated?", jc);
    if (!R_FINITE(o.elbo))
        error("the SVGP ELBO is not finite");

    const char *names[] = {"elbo", "ell", "kl", "jitter", "L", "mu", "var",
                           "Guu", "Guf", "gdiag", "gq_mu", "gq_sqrt",
                           "gmean", "gnoise", "gmu", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, ScalarReal(o.elbo));
    SET_VECTOR_ELT(out, 1, ScalarReal(o.ell));
    SET_VECTOR_ELT(out, 2, ScalarReal(o.kl));
    SET_VECTOR_ELT(out, 3, ScalarReal(o.jitter));
    SET_VECTOR_ELT(out, 4, sL);
    SET_VECTOR_ELT(out, 5, smu);
    SET_VECTOR_ELT(out, 6, svar);
    SET_VECTOR_ELT(out, 7, sGuu);
    SET_VECTOR_ELT(out, 8, sGuf);
    SET_VECTOR_ELT(out, 9, sgd);
    SET_VECTOR_ELT(out, 10, sgm);
    SET_VECTOR_ELT(out, 11, sgs);
    SET_VECTOR_ELT(out, 12, gr ? ScalarReal(o.gmean) : R_NilValue);
    SET_VECTOR_ELT(out, 13, gr ? ScalarReal(o.gnoise) : R_NilValue);
    SET_VECTOR_ELT(out, 14, sgf);
    UNPROTECT(nprot);
    return out;
}
