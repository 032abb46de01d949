/*
 * svgp.c: the uncollapsed, whitened SVGP evidence lower bound (Hensman et
 * al. 2015; Tiao 2020, its whitened parameterisation and section
 * "Non-Gaussian likelihoods"; the classification baseline of Passerello
 * 2022, section 5.1.1) for a Bernoulli likelihood with a logit or probit
 * link (Gauss-Hermite quadrature) and a Gaussian one (closed form), with
 * its gradient with respect to the variational
 * parameters and its adjoints with respect to the kernel matrices.
 *
 * Whitened parametrisation (whiten = TRUE): u = L v, L = chol(Kuu + jitter I),
 * q(v) = N(b, W W') with b = q_mu (M) and W = q_sqrt (M x M, lower).
 * Non-whitened (whiten = FALSE; Tiao 2020's q(u) before whitening):
 * q(u) = N(b, W W') directly. It is evaluated as the
 * whitened form with b' = L^-1 b and W' = L^-1 W (full M x M), which gives
 * the predictive of Tiao 2020, Appendix II (Psi' b = A' L^-1 b) and
 *   KL = 1/2 (|W'|_F^2 + |b'|^2 - M) - sum log |W_ii| + sum log L_ii
 * (the closed form of the Gaussian KL divergence, invariant under
 * u = L u'); the dependence of b', W' and log det L
 * on L is added to the adjoint of L before the Cholesky backward pass:
 *   Lbar += -tril(bbar b'^T + Wbar W'^T) - diag(1 / L_ii)
 * with bbar = L^-T (A g - b'), Wbar = L^-T (2 A diag(h) V' - W').
 *
 * Minibatches (Hensman et al. 2013): Kuf, kdiag
 * and y hold the columns of a batch B and the expected log-likelihood and
 * its derivatives are multiplied by ell_scale = N / |B|, which makes the
 * ELBO and its gradient unbiased estimates of the full-batch ones.
 *   A       = L^-1 Kuf                                   M x N
 *   V       = W' A                                       M x N
 *   mu_n    = mean + a_n' b                        (Tiao 2020, App. II)
 *   s2_n    = k_nn - |a_n|^2 + |V_n|^2
 *   ELL     = sum_n E_N(f; mu_n, s2_n) [log p(y_n | f)]
 *   KL      = 1/2 (|W|_F^2 + |b|^2 - M - 2 sum_i log |W_ii|)
 *   ELBO    = ELL - KL
 *
 * With g_n = dELL/dmu_n and h_n = dELL/ds2_n (derived by hand for this
 * package, checked against finite differences in the tests):
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
 *     E[g(f)] ~ sum_i w_i / sqrt(pi) g(mu + sqrt(2) s t_i);
 *     g and h are the exact derivatives of that sum.
 *   Gaussian with variance s2y: ELL_n = log N(y_n; mu_n, s2y) - s2_n/(2 s2y).
 *
 * Cost O(N M^2 + M^3 + N n_gh); memory A, V, Guf (M x N); nothing N x N.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include <Rmath.h>
#include "lapack.h"
#include "spv.h"

#define LOG_2PI 1.8378770664093454836
#define INV_SQRT_PI 0.56418958354775628695
#define SQRT2 1.4142135623730950488

enum { LIK_BERNOULLI = 1, LIK_GAUSSIAN = 2, LIK_PROBIT = 3 };

/* q(u): mean and lower square root, whitened (q(v), u = L v) or not. */
typedef struct {
    const double *mu, *sqrt;    /* M, M x M (lower triangle read) */
    int whiten;
} svgp_q;

/* The likelihood and its data. */
typedef struct {
    int code, ngh;              /* LIK_*; Gauss-Hermite nodes */
    const double *y;            /* N: +-1 (Bernoulli) or the targets */
    const double *ght, *ghw;    /* ngh nodes and weights */
    double noise;               /* Gaussian variance */
    double scale;               /* N / |B| on a minibatch, else 1 */
} svgp_lik;

typedef struct {
    double elbo, ell, kl, jitter;
    double *L, *mu, *var;                       /* M x M, N, N */
    /* gradients (NULL when not wanted) */
    double *Guu, *Guf, *gdiag, *gmu, *gq_mu, *gq_sqrt;
    double gmean, gnoise;
} svgp_out;

/* The factors shared by the forward pass, the value and the backward
 * pass of one evaluation. */
typedef struct {
    int M, N;
    const double *Kuf, *kdiag;
    double *Wt;         /* M x M: tril(q_sqrt) */
    double *Wl;         /* M x M: W' = Wt (whitened) or L^-1 Wt */
    double *b;          /* M: b' = q_mu (whitened) or L^-1 q_mu */
    double *A;          /* M x N: L^-1 Kuf */
    double *V;          /* M x N: W'^T A */
    double *g, *h;      /* N: dELL/dmu_n, dELL/ds2_n (scaled) */
    double gnoise;      /* dELL/d noise (scaled) */
} svgp_factors;

/* Status of svgp_elbo(). */
enum { SVGP_OK = 0, SVGP_KUU = 1, SVGP_KUU_OVERFLOW = 2 };

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
 * variance to *gnoise. Shared by the SVGP ELBO and ffi_svgp_ell(). */
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

/* Forward pass: L = chol(Kuu + jitter I), the whitened factors b', W',
 * A = L^-1 Kuf and V = W'^T A. */
static int svgp_forward(svgp_factors *f, const double *Kuu, const svgp_q *q,
                        double jit_base, double jit_cap, svgp_out *out)
{
    const int M = f->M, N = f->N;
    const size_t MM = (size_t) M * M;
    double scale;
    int st = la_jitter_scale(Kuu, M, M, &scale);
    if (st == LA_OK)
        st = la_chol_jitter(Kuu, M, M, scale, jit_base, jit_cap, out->L,
                            &out->jitter);
    if (st != LA_OK) return st == LA_NOT_PD ? SVGP_KUU : SVGP_KUU_OVERFLOW;
    const double *L = out->L;
    /* Wt = tril(W): the upper triangle of the argument is ignored */
    f->Wt = la_alloc(MM);
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++)
            f->Wt[i + (size_t) M * j] = i >= j ? q->sqrt[i + (size_t) M * j]
                                               : 0.0;
    f->Wl = f->Wt;
    f->b = la_alloc((size_t) M);
    la_copy(f->b, q->mu, (size_t) M);
    if (!q->whiten) {
        f->Wl = la_alloc(MM);
        la_copy(f->Wl, f->Wt, MM);
        la_trsm_left(L, M, f->Wl, M, 'N');
        la_trsm_left(L, M, f->b, 1, 'N');
    }
    f->A = la_alloc((size_t) M * N);
    la_copy(f->A, f->Kuf, (size_t) M * N);
    la_trsm_left(L, M, f->A, N, 'N');
    /* V = W'^T A: M x N */
    f->V = la_alloc((size_t) M * N);
    if (N > 0) {
        const double one = 1.0, zero = 0.0;
        F77_CALL(dgemm)("T", "N", &M, &N, &M, &one, f->Wl, &M, f->A, &M,
                        &zero, f->V, &M FCONE FCONE);
    }
    return SVGP_OK;
}

/* The expected log-likelihood: the marginals of q(f_n), mu_n = mean +
 * a_n' b and s2_n = k_nn - |a_n|^2 + |V_n|^2, and their expectations with
 * the derivatives g_n, h_n, all multiplied by the minibatch factor. */
static void svgp_ell(svgp_factors *f, const svgp_lik *lik, double mean,
                     svgp_out *out)
{
    const int M = f->M, N = f->N;
    f->g = la_alloc((size_t) N);
    f->h = la_alloc((size_t) N);
    la_gemv('T', f->A, M, N, f->b, out->mu);
    double ell = 0.0, gnoise = 0.0;
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        const double *an = f->A + (size_t) M * n, *vn = f->V + (size_t) M * n;
        double aa = 0.0, vv = 0.0;
        for (int m = 0; m < M; m++) {
            aa += an[m] * an[m];
            vv += vn[m] * vn[m];
        }
        out->mu[n] += mean;
        double s2 = f->kdiag[n] - aa + vv;
        if (s2 < 0.0) s2 = 0.0;        /* rounding when Z contains x_n */
        out->var[n] = s2;
        ell += svgp_ell_point(lik, n, out->mu[n], s2, f->g + n, f->h + n,
                              &gnoise);
    }
    /* minibatch scaling N / |B| of the data term (1 for the full batch) */
    out->ell = ell * lik->scale;
    f->gnoise = gnoise * lik->scale;
    for (int n = 0; n < N; n++) {
        f->g[n] *= lik->scale;
        f->h[n] *= lik->scale;
    }
}

/* KL = 1/2 (|W'|_F^2 + |b'|^2 - M) - log|det W'|, with
 * log|det W'| = sum log |W_ii| - [non-whitened] sum log L_ii. */
static double svgp_kl(const svgp_factors *f, int whiten, const double *L)
{
    const int M = f->M;
    double kl = 0.0;
    for (int j = 0; j < M; j++) {
        kl += f->b[j] * f->b[j] - 1.0 -
            2.0 * log(fabs(f->Wt[j + (size_t) M * j]));
        if (!whiten) kl += 2.0 * log(L[j + (size_t) M * j]);
        for (int i = whiten ? j : 0; i < M; i++) {
            const double wij = f->Wl[i + (size_t) M * j];
            kl += wij * wij;
        }
    }
    return 0.5 * kl;
}

/* Gradient in q: bbar = dELBO/db' = A g - b' and Wbar = dELBO/dW' (full)
 * = 2 A diag(h) V' - W', chained through b' = L^-1 b, W' = L^-1 W when not
 * whitened; then gq_mu = bbar and gq_sqrt = tril(Wbar) + diag(1 / W_ii).
 * bbar and Wbar (M, M x M) are kept for the adjoint of L. */
static void svgp_grad_q(const svgp_factors *f, int whiten, svgp_out *out,
                        double *bbar, double *Wbar)
{
    const int M = f->M, N = f->N;
    const size_t MM = (size_t) M * M;
    la_gemv('N', f->A, M, N, f->g, bbar);
    for (int m = 0; m < M; m++) bbar[m] -= f->b[m];
    double *Ah = la_alloc((size_t) M * N);            /* A diag(h) */
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            Ah[m + (size_t) M * n] = f->A[m + (size_t) M * n] * f->h[n];
    if (N > 0) {
        const double two = 2.0, zero = 0.0;
        F77_CALL(dgemm)("N", "T", &M, &M, &N, &two, Ah, &M, f->V, &M, &zero,
                        Wbar, &M FCONE FCONE);
    } else {
        memset(Wbar, 0, MM * sizeof(double));
    }
    for (size_t ij = 0; ij < MM; ij++) Wbar[ij] -= f->Wl[ij];
    if (!whiten) {
        la_trsm_left(out->L, M, bbar, 1, 'T');
        la_trsm_left(out->L, M, Wbar, M, 'T');
    }
    la_copy(out->gq_mu, bbar, (size_t) M);
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++) {
            const size_t ij = i + (size_t) M * j;
            out->gq_sqrt[ij] = i < j ? 0.0 : Wbar[ij];
        }
    for (int i = 0; i < M; i++)
        out->gq_sqrt[i + (size_t) M * i] += 1.0 / f->Wt[i + (size_t) M * i];
}

/* Guf = L^-T Abar, Abar = b' g' + 2 (W' V - A) diag(h), the adjoint of A. */
static void svgp_grad_kuf(const svgp_factors *f, svgp_out *out)
{
    const int M = f->M, N = f->N;
    double *WV = la_alloc((size_t) M * N);
    la_gemm_nn(f->Wl, M, M, f->V, N, WV);
    for (int n = 0; n < N; n++) {
        const double *an = f->A + (size_t) M * n, *vn = WV + (size_t) M * n;
        double *o = out->Guf + (size_t) M * n;
        for (int m = 0; m < M; m++)
            o[m] = f->b[m] * f->g[n] + 2.0 * (vn[m] - an[m]) * f->h[n];
    }
    la_trsm_left(out->L, M, out->Guf, N, 'T');
}

/* Guu by the Cholesky backward pass (Murray 2016) from the adjoint of L,
 * Lbar = -tril(Guf A' [+ bbar b'^T + Wbar W'^T - diag(1/L_ii)]):
 * Guu = sym(L^-T Phi(L' Lbar) L^-1), Phi = lower triangle, diagonal
 * halved. */
static void svgp_grad_kuu(const svgp_factors *f, int whiten,
                          const double *bbar, const double *Wbar,
                          svgp_out *out)
{
    const int M = f->M, N = f->N, ione = 1;
    const double one = 1.0, mone = -1.0, zero = 0.0;
    const double *L = out->L;
    double *Lbar = la_alloc((size_t) M * M);
    if (N > 0)
        F77_CALL(dgemm)("N", "T", &M, &M, &N, &mone, out->Guf, &M, f->A, &M,
                        &zero, Lbar, &M FCONE FCONE);
    else
        memset(Lbar, 0, (size_t) M * M * sizeof(double));
    if (!whiten) {
        F77_CALL(dger)(&M, &M, &mone, bbar, &ione, f->b, &ione, Lbar, &M);
        F77_CALL(dgemm)("N", "T", &M, &M, &M, &mone, Wbar, &M, f->Wl, &M,
                        &one, Lbar, &M FCONE FCONE);
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
    la_trsm_right(L, M, Lbar, M);
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++)
            out->Guu[i + (size_t) M * j] =
                0.5 * (Lbar[i + (size_t) M * j] + Lbar[j + (size_t) M * i]);
}

/* The ELBO and, when out->Guf is set, its gradient. Returns an SVGP_
 * status. */
static int svgp_elbo(const double *Kuu, const double *Kuf, const double *kdiag,
                     const svgp_q *q, const svgp_lik *lik, double mean, int M,
                     int N, double jit_base, double jit_cap, svgp_out *out)
{
    svgp_factors f;
    memset(&f, 0, sizeof(f));
    f.M = M; f.N = N; f.Kuf = Kuf; f.kdiag = kdiag;
    const int st = svgp_forward(&f, Kuu, q, jit_base, jit_cap, out);
    if (st != SVGP_OK) return st;
    svgp_ell(&f, lik, mean, out);
    out->kl = svgp_kl(&f, q->whiten, out->L);
    out->elbo = out->ell - out->kl;
    if (out->Guf == NULL) return SVGP_OK;

    out->gnoise = f.gnoise;
    double gm = 0.0;
    for (int n = 0; n < N; n++) gm += f.g[n];
    out->gmean = gm;
    la_copy(out->gdiag, f.h, (size_t) N);
    la_copy(out->gmu, f.g, (size_t) N);
    double *bbar = la_alloc((size_t) M), *Wbar = la_alloc((size_t) M * M);
    svgp_grad_q(&f, q->whiten, out, bbar, Wbar);
    svgp_grad_kuf(&f, out);
    svgp_grad_kuu(&f, q->whiten, bbar, Wbar, out);
    return SVGP_OK;
}

/* ---- .Call entry point ------------------------------------------------ */

/* q = list(mu, sqrt, whiten), checked field by field. */
static void svgp_read_q(SEXP q, int M, svgp_q *sq)
{
    SEXP q_mu = chk_field(q, "q", "mu"), q_sqrt = chk_field(q, "q", "sqrt");
    chk_real_vector(q_mu, "q$mu", M);
    chk_finite(q_mu, "q$mu");
    chk_real_matrix(q_sqrt, "q$sqrt", M);
    if (nrows(q_sqrt) != M) error("'q$sqrt' must be %d x %d", M, M);
    chk_finite(q_sqrt, "q$sqrt");
    for (int i = 0; i < M; i++)
        if (REAL(q_sqrt)[i + (size_t) M * i] == 0.0)
            error("'q$sqrt' must have a non-zero diagonal");
    sq->mu = REAL(q_mu);
    sq->sqrt = REAL(q_sqrt);
    sq->whiten = chk_flag(chk_field(q, "q", "whiten"), "q$whiten");
}

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

/* The SVGP ELBO and, when grad is TRUE, its gradient. Structured
 * arguments, each list checked field by field:
 *   Kuu: M x M; Kuf: M x N; kdiag: length N;
 *   q    = list(mu (M), sqrt (M x M, lower triangle read, non-zero
 *          diagonal), whiten (TRUE: q(v) = N(mu, sqrt sqrt'), u = L v;
 *          FALSE: q(u) itself));
 *   lik  = list(type (integer: 1 Bernoulli-logit, 2 Gaussian, 3
 *          Bernoulli-probit), y (N; -1 or 1 for Bernoulli), noise (the
 *          Gaussian variance; ignored for Bernoulli), gh_x, gh_w
 *          (Gauss-Hermite nodes and weights for int exp(-t^2) g(t) dt),
 *          scale (the factor N / |B| of the data term of a minibatch, 1
 *          for the full batch));
 *   opts = list(mean (the constant prior mean), jitter, jitter_cap
 *          (relative to the mean diagonal of Kuu)). */
SEXP ffi_svgp_elbo(SEXP Kuu, SEXP Kuf, SEXP kdiag, SEXP q, SEXP lik,
                   SEXP opts, SEXP grad)
{
    chk_real_matrix(Kuu, "Kuu", -1);
    const int M = nrows(Kuu);
    if (M < 1 || ncols(Kuu) != M)
        error("'Kuu' must be a square matrix with at least one row");
    chk_real_matrix(Kuf, "Kuf", -1);
    if (nrows(Kuf) != M) error("'Kuf' must have %d rows", M);
    const int N = ncols(Kuf);
    chk_real_vector(kdiag, "kdiag", N);
    chk_finite(Kuu, "Kuu");
    chk_finite(Kuf, "Kuf");
    chk_finite(kdiag, "kdiag");

    svgp_q sq;
    svgp_lik sl;
    svgp_read_q(q, M, &sq);
    svgp_read_lik(lik, N, &sl);

    /* opts */
    const double mn = chk_scalar(chk_field(opts, "opts", "mean"), "opts$mean");
    double jb, jc;
    chk_jitter(chk_field(opts, "opts", "jitter"),
               chk_field(opts, "opts", "jitter_cap"), &jb, &jc);
    const int gr = chk_flag(grad, "grad");

    int nprot = 0;
    svgp_out o;
    memset(&o, 0, sizeof(o));
    SEXP sL = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP smu = PROTECT(allocVector(REALSXP, N)); nprot++;
    SEXP svar = PROTECT(allocVector(REALSXP, N)); nprot++;
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
    const int status = svgp_elbo(REAL(Kuu), REAL(Kuf), REAL(kdiag), &sq, &sl,
                                 mn, M, N, jb, jc, &o);
    if (status == SVGP_KUU)
        error("Kuu is not positive definite even with jitter %g times its "
              "mean diagonal: are inducing inputs duplicated?", jc);
    if (status == SVGP_KUU_OVERFLOW)
        error("the Cholesky factor of Kuu overflows: the kernel variance is "
              "too large for double precision");
    if (!R_FINITE(o.elbo))
        error("the SVGP ELBO is not finite");
    if (gr) {
        chk_result(o.Guu, (size_t) M * M, "adjoint of Kuu");
        chk_result(o.Guf, (size_t) M * N, "adjoint of Kuf");
        chk_result(o.gq_mu, (size_t) M, "gradient in q$mu");
        chk_result(o.gq_sqrt, (size_t) M * M, "gradient in q$sqrt");
        chk_result(o.gdiag, (size_t) N, "adjoint of kdiag");
        chk_result(&o.gnoise, 1, "gradient in the noise");
    }

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

/* The expected log-likelihood of given marginals q(f_n) = N(mu_n, var_n):
 * list(ell = scale sum_n E[log p(y_n | f_n)], g = scale dE/dmu_n,
 * h = scale dE/dvar_n, gnoise = scale dE/d noise), with lik as for
 * ffi_svgp_elbo(). Models whose marginals are not those of one q(u) (the
 * orthogonally decoupled basis, R/odvgp.R) compute mu and var themselves
 * and use the same likelihoods and quadrature through this entry point.
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
