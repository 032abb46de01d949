/*
 * bound_gaussian.c: the collapsed Gaussian bound (Titsias 2009) with
 * per-point noise variances, its value in the stable Cholesky form and its
 * adjoints with respect to every matrix it reads.
 *
 * One routine serves
 *   - SGPR            (lambda_n = sigma^2, ytil = y - mean),
 *   - heteroscedastic SGPR (lambda_n per point),
 *   - PGPR            (lambda_n = 1 / theta_n, ytil = y / (2 theta_n)):
 * for fixed local parameters the Polya-Gamma bound of Passerello (2022,
 * eq. 4.7) is the heteroscedastic bound on these pseudo-targets plus terms
 * in c only (derived for this package from the augmented form, Passerello
 * 2022, eq. 4.14 and Appendix C.3, and checked in the tests). The bound
 * never sees kernel parameters: the
 * caller contracts the adjoints Guu, Guf, gdiag with the kernel derivatives.
 *
 * Stable form (Fernlund 2022, eq. 4.37; with per-point noise Passerello
 * 2022, eq. B.1), with Lambda = diag(lambda):
 *   L  = chol(Kuu + jitter I)                      M x M
 *   A  = L^-1 Kuf Lambda^-1/2                      M x N
 *   B  = I + A A' = LB LB'                         M x M
 *   v  = LB^-1 A Lambda^-1/2 ytil                  M
 *   F  = -N/2 log 2 pi - sum log LB_ii - 1/2 sum log lambda_n
 *        - 1/2 sum ytil_n^2 / lambda_n + 1/2 v'v
 *        - 1/2 sum_n (k_nn / lambda_n - |a_n|^2)
 *
 * Adjoints (derived by hand for this package in whitened form, checked
 * against central finite differences in the tests), with
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
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"

#define LOG_2PI 1.8378770664093454836

/* The inputs and the factors shared by the forward pass, the value and the
 * backward pass of one evaluation. */
typedef struct {
    int M, N;
    const double *Kuu, *Kuf, *kdiag, *lambda, *ytil;
    double *A;          /* M x N: L^-1 Kuf Lambda^-1/2 */
    double *B;          /* M x M: I + A A' */
    double *isl;        /* N: lambda^-1/2 */
    double sumloglam;   /* sum log lambda_n */
    double yy;          /* |Lambda^-1/2 ytil|^2 */
    double kl;          /* sum k_nn / lambda_n */
} bg_factors;


/* Forward pass: L = chol(Kuu + jitter I) and A = L^-1 Kuf Lambda^-1/2, with
 * the per-point sums of the bound in the same pass over A: out->v holds
 * w = A Lambda^-1/2 ytil (the right-hand side of v), out->trace the sum of
 * the residual variances k_nn / lambda_n - |a_n|^2 (summed per point, which
 * avoids the cancellation of sum k_nn / lambda_n - tr(A A')). Kuf is not
 * checked for finiteness beforehand: a non-finite column norm of A (from
 * NA/NaN/Inf in Kuf, or overflow) is reported as BG_A. */
static int bg_forward(bg_factors *f, double jit_base, double jit_cap,
                      bg_out *out)
{
    const int M = f->M, N = f->N;
    double scale;
    int st = la_jitter_scale(f->Kuu, M, M, &scale);
    if (st == LA_OK)
        st = la_chol_jitter(f->Kuu, M, M, scale, jit_base, jit_cap, out->L,
                            &out->jitter);
    if (st != LA_OK) return st == LA_NOT_PD ? BG_KUU : BG_KUU_OVERFLOW;

    f->A = la_alloc((size_t) M * N);
    la_copy(f->A, f->Kuf, (size_t) M * N);
    la_trsm_left(out->L, M, f->A, N, 'N');
    f->isl = la_alloc((size_t) N);
    double *w = out->v;
    memset(w, 0, (size_t) M * sizeof(double));
    double sumloglam = 0.0, yy = 0.0, trace = 0.0, kl = 0.0;
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        const double isl = 1.0 / sqrt(f->lambda[n]);
        const double yn = f->ytil[n] * isl;           /* Lambda^-1/2 ytil */
        double *an = f->A + (size_t) M * n, s = 0.0;
        for (int m = 0; m < M; m++) {
            an[m] *= isl;
            s += an[m] * an[m];
            w[m] += an[m] * yn;
        }
        if (!R_FINITE(s)) return BG_A;
        f->isl[n] = isl;
        sumloglam += log(f->lambda[n]);
        yy += yn * yn;
        trace += f->kdiag[n] / f->lambda[n] - s;
        kl += f->kdiag[n] / f->lambda[n];
    }
    f->sumloglam = sumloglam;
    f->yy = yy;
    f->kl = kl;
    out->trace = trace;
    return BG_OK;
}

/* The value: B = I + A A' = LB LB', v = LB^-1 A Lambda^-1/2 ytil and the
 * bound with its terms (header). In exact arithmetic v'v <= |ys|^2 and the
 * trace term is >= 0 (so F <= -N/2 log 2 pi - 1/2 sum log lambda); a
 * violation beyond rounding means that B = I + A A' is too ill-conditioned
 * for double precision (noise variances tiny next to the kernel
 * variance), and the value would be garbage: BG_PRECISION. */
static int bg_value(bg_factors *f, bg_out *out)
{
    const int M = f->M;
    f->B = la_alloc((size_t) M * M);
    la_identity_plus_gram(f->A, M, f->N, f->B);
    return bg_value_stats(M, f->N, f->B, f->yy, f->kl, f->sumloglam, out);
}

int bg_value_stats(int M, double N, const double *B, double yy, double kl,
                   double sumloglam, bg_out *out)
{
    const int ione = 1;
    la_copy(out->LB, B, (size_t) M * M);
    if (la_chol(out->LB, M) != 0) return BG_B;
    if (M > 0)
        F77_CALL(dtrsv)("L", "N", "N", &M, out->LB, &M, out->v, &ione
                        FCONE FCONE FCONE);
    double vv = 0.0;
    for (int m = 0; m < M; m++) vv += out->v[m] * out->v[m];
    if (vv > yy * (1.0 + 1e-6) || out->trace < -1e-6 * kl)
        return BG_PRECISION;
    out->logdet = -la_half_logdet(out->LB, M) - 0.5 * sumloglam;
    out->fit = -0.5 * yy + 0.5 * vv;
    out->bound = -0.5 * N * LOG_2PI + out->logdet + out->fit -
        0.5 * out->trace;
    return BG_OK;
}

/* The backward pass: the adjoints of the header from the factors. */
static void bg_backward(const bg_factors *f, bg_out *out)
{
    const int M = f->M, N = f->N;
    const double *A = f->A;
    double *vt = la_alloc((size_t) M), *alpha = la_alloc((size_t) M);
    double *E = la_alloc((size_t) M * M);
    bg_backward_mm(M, out->L, out->LB, f->B, out->v, vt, alpha, out->Guu, E);
    /* mu = Lambda^1/2 A' vt: the posterior mean at the training inputs */
    la_gemv('T', A, M, N, vt, out->mu);
    double *r = la_alloc((size_t) N);
    for (int n = 0; n < N; n++) {
        out->mu[n] /= f->isl[n];
        r[n] = (f->ytil[n] - out->mu[n]) / f->lambda[n];
    }
    /* Guf <- E A: M x N */
    la_gemm_nn(E, M, M, A, N, out->Guf);
    bg_point_adjoints(M, N, f->Kuf, f->isl, alpha, r, f->lambda, f->kdiag,
                      out->Guf, out->gdiag, out->glambda, out->gytil);
}

void bg_backward_mm(int M, const double *L, const double *LB,
                    const double *B, const double *v, double *vt,
                    double *alpha, double *Guu, double *E)
{
    const int ione = 1;
    const size_t MM = (size_t) M * M;
    /* vt = LB^-T v; alpha = L^-T vt */
    la_copy(vt, v, (size_t) M);
    if (M > 0)
        F77_CALL(dtrsv)("L", "T", "N", &M, LB, &M, vt, &ione
                        FCONE FCONE FCONE);
    la_copy(alpha, vt, (size_t) M);
    if (M > 0)
        F77_CALL(dtrsv)("L", "T", "N", &M, L, &M, alpha, &ione
                        FCONE FCONE FCONE);

    /* Guu = L^-T [I - B/2 - Binv/2 - vt vt'/2] L^-1 */
    double *Binv = E;
    la_chol_inverse(LB, M, Binv);
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++) {
            const size_t ij = i + (size_t) M * j;
            Guu[ij] = -0.5 * B[ij] - 0.5 * Binv[ij] - 0.5 * vt[i] * vt[j];
        }
    for (int i = 0; i < M; i++) Guu[i + (size_t) M * i] += 1.0;
    la_trsm_left(L, M, Guu, M, 'T');
    la_trsm_right(L, M, Guu, M);

    /* E = L^-T (I - Binv): M x M */
    for (size_t i = 0; i < MM; i++) E[i] = -E[i];
    for (int i = 0; i < M; i++) E[i + (size_t) M * i] += 1.0;
    la_trsm_left(L, M, E, M, 'T');
}

/* The bound and, when out->Guf is set, its adjoints. Returns a BG_ status:
 * Kuu not positive definite within the jitter cap (BG_KUU) or overflowing
 * (BG_KUU_OVERFLOW), A not finite (BG_A), B not factorised (BG_B). */
static int bg_collapsed(const double *Kuu, const double *Kuf,
                        const double *kdiag, const double *lambda,
                        const double *ytil, int M, int N, double jit_base,
                        double jit_cap, bg_out *out)
{
    bg_factors f = {.M = M, .N = N, .Kuu = Kuu, .Kuf = Kuf, .kdiag = kdiag,
                    .lambda = lambda, .ytil = ytil};
    int st = bg_forward(&f, jit_base, jit_cap, out);
    if (st == BG_OK) st = bg_value(&f, out);
    if (st == BG_OK && out->Guf != NULL) bg_backward(&f, out);
    return st;
}

void bg_point_adjoint(int M, const double *kn, double *g, double isl,
                      const double *alpha, double r, double lambda,
                      double kdiag, double *gdiag, double *glambda,
                      double *gytil)
{
    double q = 0.0;                           /* a_n'(I - B^-1) a_n */
    for (int m = 0; m < M; m++) q += kn[m] * g[m];
    q *= isl;
    for (int m = 0; m < M; m++) g[m] = g[m] * isl + alpha[m] * r;
    const double il = 1.0 / lambda;
    *gdiag = -0.5 * il;
    *glambda = 0.5 * (r * r - il - q * il + kdiag * il * il);
    *gytil = -r;
}

void bg_point_adjoints(int M, int N, const double *Kuf, const double *isl,
                       const double *alpha, const double *r,
                       const double *lambda, const double *kdiag, double *G,
                       double *gdiag, double *glambda, double *gytil)
{
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        bg_point_adjoint(M, Kuf + (size_t) M * n, G + (size_t) M * n, isl[n],
                         alpha, r[n], lambda[n], kdiag[n], gdiag + n,
                         glambda + n, gytil + n);
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
    if (status == BG_KUU)
        error("Kuu is not positive definite even with jitter %g times its "
              "mean diagonal: are inducing inputs duplicated?", jc);
    if (status == BG_KUU_OVERFLOW)
        error("the Cholesky factor of Kuu overflows: the kernel variance is "
              "too large for double precision");
    if (status == BG_B)
        error("the Cholesky factorisation of B = I + A A' failed");
    if (status == BG_A)
        error("NA/NaN/Inf in 'Kuf', or L^-1 Kuf Lambda^-1/2 overflows (a "
              "kernel variance too large for the noise variances)");
    if (status == BG_PRECISION)
        error("the bound has lost its precision: B = I + A A' is too "
              "ill-conditioned for double precision (noise variances tiny "
              "next to the kernel variance)");
    if (!R_FINITE(o.bound))
        error("the bound is not finite");
    if (g) {
        chk_result(o.Guu, (size_t) M * M, "adjoint of Kuu");
        chk_result(o.Guf, (size_t) M * N, "adjoint of Kuf");
        chk_result(o.glambda, (size_t) N, "adjoint of lambda");
        chk_result(o.gytil, (size_t) N, "adjoint of ytil");
    }

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
