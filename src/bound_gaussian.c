/*
 * bound_gaussian.c: the collapsed Gaussian bound (Titsias 2009) with
 * per-point noise variances, its value in the stable Cholesky form and its
 * adjoints with respect to every matrix it reads.
 *
 * One routine serves
 *   - SGPR            (lambda_n = sigma^2, ytil = y - mean),
 *   - heteroscedastic SGPR (lambda_n per point),
 *   - PGPR            (lambda_n = 1 / theta_n, ytil = y / (2 theta_n)),
 * see seed004 section 5.6. The bound never sees kernel parameters: the
 * caller contracts the adjoints Guu, Guf, gdiag with the kernel derivatives.
 *
 * Stable form (seed000 eq. 4.37; seed004 eq. B.1), with Lambda = diag(lambda):
 *   L  = chol(Kuu + jitter I)                      M x M
 *   A  = L^-1 Kuf Lambda^-1/2                      M x N
 *   B  = I + A A' = LB LB'                         M x M
 *   v  = LB^-1 A Lambda^-1/2 ytil                  M
 *   F  = -N/2 log 2 pi - sum log LB_ii - 1/2 sum log lambda_n
 *        - 1/2 sum ytil_n^2 / lambda_n + 1/2 v'v
 *        - 1/2 sum_n (k_nn / lambda_n - |a_n|^2)
 *
 * Adjoints (seed004 section 3.8, rewritten in whitened form), with
 *   vt = LB^-T v, alpha = L^-T vt = Kuu^-1 m*, mu = Kfu alpha,
 *   r_n = (ytil_n - mu_n) / lambda_n:
 *   Guu     = L^-T [ I - B/2 - B^-1/2 - vt vt'/2 ] L^-1
 *   Guf     = L^-T (I - B^-1) A Lambda^-1/2 + alpha r'
 *   gdiag_n = -1 / (2 lambda_n)
 *   glambda_n = 1/2 [ r_n^2 - 1/lambda_n - q_n / lambda_n + k_nn / lambda_n^2 ],
 *               q_n = a_n' (I - B^-1) a_n
 *   gytil_n = -r_n
 *
 * Cost: one M x M x N triangular solve and one rank-N update for the bound
 * (the BLAS floor), plus one M x M x N product for the adjoints. Memory:
 * A (M x N) and, with gradients, Guf (M x N). Nothing is N x N.
 */
#define USE_FC_LEN_T
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/BLAS.h>
#include "spv.h"
#ifndef FCONE
#define FCONE
#endif

#define LOG_2PI 1.8378770664093454836

typedef struct {
    /* value */
    double bound, logdet, fit, trace, jitter;
    double *L, *LB, *v;                  /* M x M, M x M, M */
    /* adjoints (NULL when not wanted) */
    double *Guu, *Guf, *gdiag, *glambda, *gytil, *mu;
} bg_out;

/* Returns 0 on success, 1 if Kuu could not be factorised within the jitter
 * cap, 2 if B could not be factorised, 3 if Kuf is not finite (checked on
 * the fly rather than in a separate pass over the M x N input). */
static int bg_collapsed(const double *Kuu, const double *Kuf,
                        const double *kdiag, const double *lambda,
                        const double *ytil, int M, int N, double jit_base,
                        double jit_cap, bg_out *out)
{
    const size_t MN = (size_t) M * N, MM = (size_t) M * M;
    const int grad = out->Guf != NULL;
    const double one = 1.0, zero = 0.0;
    const int ione = 1;

    /* L = chol(Kuu + jitter I) */
    out->jitter = la_chol_jitter(Kuu, M, jit_base, jit_cap, out->L);
    if (out->jitter < 0.0) return 1;
    const double *L = out->L;

    /* A = L^-1 Kuf Lambda^-1/2: M x N */
    double *A = (double *) R_alloc(MN, sizeof(double));
    memcpy(A, Kuf, MN * sizeof(double));
    la_trsm_left(L, M, A, N, 'N');
    double *isl = (double *) R_alloc((size_t) N, sizeof(double));
    double *ys = (double *) R_alloc((size_t) N, sizeof(double));
    double *anorm2 = (double *) R_alloc((size_t) N, sizeof(double));
    double sumloglam = 0.0, yy = 0.0, trace = 0.0;
    /* one pass over A: scale its columns, take their norms and accumulate
     * w = A Lambda^-1/2 ytil (the right-hand side of v) */
    double *w = out->v;
    memset(w, 0, (size_t) M * sizeof(double));
    for (int n = 0; n < N; n++) {
        isl[n] = 1.0 / sqrt(lambda[n]);
        ys[n] = ytil[n] * isl[n];                 /* Lambda^-1/2 ytil */
        double *an = A + (size_t) M * n, s = 0.0;
        const double yn = ys[n];
        for (int m = 0; m < M; m++) {
            an[m] *= isl[n];
            s += an[m] * an[m];
            w[m] += an[m] * yn;
        }
        if (!R_FINITE(s)) return 3;              /* NA/NaN/Inf in Kuf */
        anorm2[n] = s;
        sumloglam += log(lambda[n]);
        yy += ys[n] * ys[n];
        /* per-point residual variance, summed: avoids the cancellation of
         * sum k_nn / lambda_n - tr(A A') */
        trace += kdiag[n] / lambda[n] - s;
    }

    /* B = I + A A' and LB */
    double *B = (double *) R_alloc(MM, sizeof(double));
    la_identity_plus_gram(A, M, N, B);
    memcpy(out->LB, B, MM * sizeof(double));
    if (la_chol(out->LB, M) != 0) return 2;
    const double *LB = out->LB;

    /* v = LB^-1 A ys (A ys accumulated above) */
    F77_CALL(dtrsv)("L", "N", "N", &M, LB, &M, out->v, &ione
                    FCONE FCONE FCONE);
    double vv = 0.0;
    for (int m = 0; m < M; m++) vv += out->v[m] * out->v[m];

    const double hld = la_half_logdet(LB, M);
    out->logdet = -hld - 0.5 * sumloglam;
    out->fit = -0.5 * yy + 0.5 * vv;
    out->trace = trace;
    out->bound = -0.5 * N * LOG_2PI + out->logdet + out->fit - 0.5 * trace;
    if (!grad) return 0;

    /* vt = LB^-T v; alpha = L^-T vt */
    double *vt = (double *) R_alloc((size_t) M, sizeof(double));
    double *alpha = (double *) R_alloc((size_t) M, sizeof(double));
    memcpy(vt, out->v, (size_t) M * sizeof(double));
    F77_CALL(dtrsv)("L", "T", "N", &M, LB, &M, vt, &ione FCONE FCONE FCONE);
    memcpy(alpha, vt, (size_t) M * sizeof(double));
    F77_CALL(dtrsv)("L", "T", "N", &M, L, &M, alpha, &ione FCONE FCONE FCONE);

    /* mu = Lambda^1/2 A' vt: the posterior mean at the training inputs */
    F77_CALL(dgemv)("T", &M, &N, &one, A, &M, vt, &ione, &zero, out->mu,
                    &ione FCONE);
    double *r = (double *) R_alloc((size_t) N, sizeof(double));
    for (int n = 0; n < N; n++) {
        out->mu[n] /= isl[n];
        r[n] = (ytil[n] - out->mu[n]) / lambda[n];
    }

    /* Binv = B^-1 */
    double *Binv = (double *) R_alloc(MM, sizeof(double));
    la_chol_inverse(LB, M, Binv);

    /* Guu = L^-T [I - B/2 - Binv/2 - vt vt'/2] L^-1 */
    double *Guu = out->Guu;
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++) {
            const size_t ij = i + (size_t) M * j;
            Guu[ij] = -0.5 * B[ij] - 0.5 * Binv[ij] - 0.5 * vt[i] * vt[j];
        }
    for (int i = 0; i < M; i++) Guu[i + (size_t) M * i] += 1.0;
    la_trsm_left(L, M, Guu, M, 'T');
    F77_CALL(dtrsm)("R", "L", "N", "N", &M, &M, &one, L, &M, Guu, &M
                    FCONE FCONE FCONE FCONE);

    /* E = L^-T (I - Binv): M x M; Guf <- E A: M x N */
    double *E = Binv;
    for (size_t i = 0; i < MM; i++) E[i] = -E[i];
    for (int i = 0; i < M; i++) E[i + (size_t) M * i] += 1.0;
    la_trsm_left(L, M, E, M, 'T');
    F77_CALL(dgemm)("N", "N", &M, &N, &M, &one, E, &M, A, &M, &zero,
                    out->Guf, &M FCONE FCONE);

    bg_point_adjoints(M, N, Kuf, isl, alpha, r, lambda, kdiag, out->Guf,
                      out->gdiag, out->glambda, out->gytil);
    return 0;
}

void bg_point_adjoints(int M, int N, const double *Kuf, const double *isl,
                       const double *alpha, const double *r,
                       const double *lambda, const double *kdiag, double *G,
                       double *gdiag, double *glambda, double *gytil)
{
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        double *g = G + (size_t) M * n;
        const double *kn = Kuf + (size_t) M * n;
        double q = 0.0;                       /* a_n'(I - B^-1) a_n */
        for (int m = 0; m < M; m++) q += kn[m] * g[m];
        q *= isl[n];
        for (int m = 0; m < M; m++) g[m] = g[m] * isl[n] + alpha[m] * r[n];
        const double il = 1.0 / lambda[n];
        gdiag[n] = -0.5 * il;
        glambda[n] = 0.5 * (r[n] * r[n] - il - q * il + kdiag[n] * il * il);
        gytil[n] = -r[n];
    }
}

/* ---- .Call entry point ------------------------------------------------ */

/* The collapsed bound and, when grad is TRUE, its adjoints.
 * Kuu: M x M, Kuf: M x N, kdiag, lambda, ytil: length N.
 * jitter, jitter_cap: relative to the mean diagonal of Kuu. */
SEXP ffi_bg_bound(SEXP Kuu, SEXP Kuf, SEXP kdiag, SEXP lambda, SEXP ytil,
                  SEXP jitter, SEXP jitter_cap, SEXP grad)
{
    chk_real_matrix(Kuu, "Kuu", -1);
    const int M = nrows(Kuu);
    if (M < 1 || ncols(Kuu) != M)
        error("'Kuu' must be a square matrix with at least one row");
    chk_real_matrix(Kuf, "Kuf", -1);
    if (nrows(Kuf) != M)
        error("'Kuf' must have %d rows", M);
    const int N = ncols(Kuf);
    chk_real_vector(kdiag, "kdiag", N);
    chk_real_vector(lambda, "lambda", N);
    chk_real_vector(ytil, "ytil", N);
    chk_finite(Kuu, "Kuu");
    chk_finite(kdiag, "kdiag");
    chk_finite(lambda, "lambda");
    chk_finite(ytil, "ytil");
    for (int n = 0; n < N; n++)
        if (!(REAL(lambda)[n] > 0.0))
            error("noise variances 'lambda' must be positive");
    double jb, jc;
    chk_jitter(jitter, jitter_cap, &jb, &jc);
    const int g = chk_flag(grad, "grad");

    int nprot = 0;
    bg_out o;
    memset(&o, 0, sizeof(o));
    SEXP sL = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sLB = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sv = PROTECT(allocVector(REALSXP, M)); nprot++;
    memset(REAL(sL), 0, (size_t) M * M * sizeof(double));
    o.L = REAL(sL); o.LB = REAL(sLB); o.v = REAL(sv);
    SEXP sGuu = R_NilValue, sGuf = R_NilValue, sgd = R_NilValue,
         sgl = R_NilValue, sgy = R_NilValue, smu = R_NilValue;
    if (g) {
        sGuu = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        sGuf = PROTECT(allocMatrix(REALSXP, M, N)); nprot++;
        sgd = PROTECT(allocVector(REALSXP, N)); nprot++;
        sgl = PROTECT(allocVector(REALSXP, N)); nprot++;
        sgy = PROTECT(allocVector(REALSXP, N)); nprot++;
        smu = PROTECT(allocVector(REALSXP, N)); nprot++;
        o.Guu = REAL(sGuu); o.Guf = REAL(sGuf); o.gdiag = REAL(sgd);
        o.glambda = REAL(sgl); o.gytil = REAL(sgy); o.mu = REAL(smu);
    }
    const int status = bg_collapsed(REAL(Kuu), REAL(Kuf), REAL(kdiag),
                                    REAL(lambda), REAL(ytil), M, N, jb, jc,
                                    &o);
    if (status == 1)
        error("Kuu is not positive definite even with jitter %g times its "
              "mean diagonal: are inducing inputs duplicated?", jc);
    if (status == 2)
        error("the Cholesky factorisation of B = I + A A' failed");
    if (status == 3)
        error("NA/NaN/Inf in 'Kuf'");
    if (!R_FINITE(o.bound))
        error("the bound is not finite");

    const char *names[] = {"bound", "logdet", "fit", "trace", "jitter", "L",
                           "LB", "v", "Guu", "Guf", "gdiag", "glambda",
                           "gytil", "mu", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, ScalarReal(o.bound));
    SET_VECTOR_ELT(out, 1, ScalarReal(o.logdet));
    SET_VECTOR_ELT(out, 2, ScalarReal(o.fit));
    SET_VECTOR_ELT(out, 3, ScalarReal(o.trace));
    SET_VECTOR_ELT(out, 4, ScalarReal(o.jitter));
    SET_VECTOR_ELT(out, 5, sL);
    SET_VECTOR_ELT(out, 6, sLB);
    SET_VECTOR_ELT(out, 7, sv);
    SET_VECTOR_ELT(out, 8, sGuu);
    SET_VECTOR_ELT(out, 9, sGuf);
    SET_VECTOR_ELT(out, 10, sgd);
    SET_VECTOR_ELT(out, 11, sgl);
    SET_VECTOR_ELT(out, 12, sgy);
    SET_VECTOR_ELT(out, 13, smu);
    UNPROTECT(nprot);
    return out;
}
