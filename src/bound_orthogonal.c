/*
 * bound_orthogonal.c: the collapsed bounds of orthogonal SGPR (Fernlund
 * 2022, chapter 5) by the block Cholesky of Fernlund (2022), Algorithm 3,
 * in three variants, with their adjoints with respect to every kernel
 * matrix read.
 *
 * Inputs are the kernel matrices of the stacked inducing set W = [Z; O]
 * (M1 regular inputs Z, then M2 orthogonal inputs O, M = M1 + M2):
 *   Kww = [[Kuu, Kuv], [Kvu, Kvv]]  M x M,   Kwf = [Kuf; Kvf]  M x N,
 * the prior variances kdiag = diag Kff, per-point noise variances lambda
 * (Lambda = diag(lambda); sigma^2 I in the thesis) and targets ytil = y - m.
 * The adjoints are returned in the same stacked layout:
 *   Gww = [[Guu, Guv/2], [Guv'/2, Gvv]] (symmetric; dF = sum Gww o dKww),
 *   Gwf = [Guf; Gvf],  gdiag = dF/d diag Kff,  glambda, gytil.
 *
 * Block Cholesky (Algorithm 3 lines 2-16; jitter eps_u on Kuu, eps_v on Cvv):
 *   Lu  = chol(Kuu + eps_u I)                   M1 x M1   (line 2)
 *   dv  = Lu^-1 Kuv,  df = Lu^-1 Kuf            M1 x M2, M1 x N (line 3)
 *   Cvv = Kvv - dv'dv, Cvf = Kvf - dv'df        (line 4, eq. 5.5)
 *   Lv  = chol(Cvv + eps_v I)                   M2 x M2   (line 5)
 *   Au  = df Lambda^-1/2, Av = Lv^-1 Cvf Lambda^-1/2       (line 6, eq. 5.37)
 *   B   = I + A A' = [[Bu, Buv], [Buv', Bv]]    (lines 8-10, eqs 5.38-5.39)
 *   LBu = chol(Bu), gamma = LBu^-1 Buv, LQ = chol(Bv - gamma'gamma)
 *                                               (lines 11-15, eq. 5.40)
 *   c   = LB^-1 A Lambda^-1/2 ytil              (line 16)
 * L = [[Lu, 0], [dv', Lv]] is the lower Cholesky factor of
 * Kww + blkdiag(eps_u I, eps_v I), and A = L^-1 Kwf Lambda^-1/2, so every
 * quantity below is a function of that jittered Kww.
 *
 * The three bounds share the fit and trace terms (eq. 4.37 in this basis):
 *   F = -N/2 log 2 pi - 1/2 sum log lambda - 1/2 |ys|^2 + 1/2 c'c
 *       - 1/2 sum_n (k_nn / lambda_n - |a_n|^2) + D,   ys = Lambda^-1/2 ytil,
 * and differ in the log-determinant term D:
 *   union (eq. 5.33):                     D = -log|LBu| - log|LQ|
 *   SOLVE-GP family (Shi et al. 2020):    D = -log|LBu| - log|LBv|,
 *                                          LBv = chol(Bv)
 *   ODVGP family (Salimbeni et al. 2018): D = -log|LBu| - tr(Av Av')/2
 * The union bound is the SGPR bound on [Z; O] (by the block inverse, eq.
 * 5.4); the bounds of the two families are the true ELBOs of the
 * posteriors they predict with, which are lower: section 5.3.2 takes them
 * to equal eq. 5.33, which holds only when Bu,v = 0 (both facts derived
 * for this package and checked numerically in the tests).
 * In whitened coordinates e = L^-1 [u; v] with prior N(0, I) the optimal
 * q(e) = N(w, S) has w = B^-1 A ys in all three and S = B^-1 (union),
 * blkdiag(Bu^-1, Bv^-1) (SOLVE, mean-field between u and the orthogonal
 * part) or blkdiag(Bu^-1, I) (ODVGP, S_v = C_vv); the bound is the ELBO
 * -1/2 |ys - A'w|^2 - 1/2 tr(A'SA) - KL(N(w, S) || N(0, I)) + const.
 *
 * Adjoints (derived by hand for this file; verified by central finite
 * differences in tests/testthat/test-osgpr.R). By the envelope theorem the
 * adjoint of the whitened A at the optimal (w, S) is
 *   Abar = (I - S) A + w rt',   rt = ys - A'w = Lambda^1/2 r,
 *   r = (ytil - mu) / lambda,   mu = Lambda^1/2 A'w (the mean at X, the
 *   SGPR mean on [Z; O] for every variant).
 * Through A = L^-1 Kwf Lambda^-1/2:
 *   Gwf = L^-T Abar Lambda^-1/2 = L^-T (I - S) A Lambda^-1/2 + alpha r',
 *         alpha = L^-T w.
 * Through L: dF/dL = -L^-T Abar A' = -L^-T Y, Y = w w' + (I - S)(B - I).
 * F is invariant under block-diagonal orthogonal rotations of L (it depends
 * on A only through A_u'A_u and A_v'A_v), so F is a function of L L' over
 * block-lower-triangular factors, and solving
 *   [2 Gww L]_{blocks 11, 21, 22} = [dF/dL]_{blocks 11, 21, 22}
 * for a symmetric Gww gives
 *   Gww = -1/2 L^-T Psi L^-1,  Psi = Y with its upper-right block replaced
 *   by the transpose of its lower-left block (Y's diagonal blocks are
 *   symmetric, so Psi is the lower triangle of Y mirrored).
 * For the union bound Y is symmetric and this is the SGPR adjoint of
 * bound_gaussian.c on W: Gww = L^-T [I - B/2 - B^-1/2 - w w'/2] L^-1.
 * The noise and target adjoints generalise bound_gaussian.c's:
 *   glambda_n = 1/2 [r_n^2 - 1/lambda_n - q_n/lambda_n + k_nn/lambda_n^2],
 *               q_n = a_n'(I - S) a_n;   gytil_n = -r_n;
 *   gdiag_n   = -1 / (2 lambda_n).
 * The jitters are eps = jitter * mean(diag Kww), so dF/d eps_u = tr(Guu) and
 * dF/d eps_v = tr(Gvv): the caller adds their share to d/d log variance.
 *
 * Cost of the bound: the same flops as bound_gaussian.c with M = M1 + M2
 * (2 M^2 N + O(M^3), so not the saving claimed in Fernlund 2022, section
 * 6.1), plus chol(Bv) (M2^3 / 3). The adjoints add
 * one M x M x N product and O(M^3). Memory: A (M x N) and, with gradients,
 * Gwf (M x N); nothing is N x N.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"
#include "bound_orthogonal.h"

#define LOG_2PI 1.8378770664093454836

/* Copy the n x m block at (r0, c0) of X (leading dimension ldx) to Y
 * (contiguous, n x m). */
static void bo_get_block(const double *X, int ldx, int r0, int c0, int n,
                         int m, double *Y)
{
    for (int j = 0; j < m; j++)
        memcpy(Y + (size_t) n * j, X + r0 + (size_t) ldx * (c0 + j),
               (size_t) n * sizeof(double));
}

/* Write the contiguous n x m matrix Y into the block at (r0, c0) of X. */
static void bo_put_block(double *X, int ldx, int r0, int c0, int n, int m,
                         const double *Y)
{
    for (int j = 0; j < m; j++)
        memcpy(X + r0 + (size_t) ldx * (c0 + j), Y + (size_t) n * j,
               (size_t) n * sizeof(double));
}

/* The M x M block lower-triangular factor [D1 0; X' D2] (M = M1 + M2)
 * from its diagonal blocks D1 (M1 x M1), D2 (M2 x M2) and X (M1 x M2):
 * both L (X = Lu^-1 Kuv) and LB (X = gamma) have this form. */
static void bo_block_lower(double *T, int M1, int M2, const double *D1,
                           const double *X, const double *D2)
{
    const int M = M1 + M2;
    memset(T, 0, (size_t) M * M * sizeof(double));
    bo_put_block(T, M, 0, 0, M1, M1, D1);
    bo_put_block(T, M, M1, M1, M2, M2, D2);
    for (int j = 0; j < M1; j++)
        for (int i = 0; i < M2; i++)
            T[M1 + i + (size_t) M * j] = X[j + (size_t) M1 * i];
}

/* L = [[Lu, 0], [dv', Lv]] (Algorithm 3 lines 2-5). Both jitters are
 * relative to one scale, the mean prior variance of the inducing values
 * (the mean diagonal of Kww): C_vv may be nearly zero when O nearly
 * coincides with Z, and its jitter must still be on the kernel's scale. */
int bo_factor_kww(bo_factors *f, double jit_base, double jit_cap,
                         bo_out *out)
{
    const int M1 = f->M1, M2 = f->M2, M = f->M;
    const double one = 1.0, mone = -1.0;
    double scale;
    f->Lu = la_alloc((size_t) M1 * M1);
    f->Lv = la_alloc((size_t) M2 * M2);
    f->dv = la_alloc((size_t) M1 * M2);
    double *Cvv = la_alloc((size_t) M2 * M2);
    if (la_jitter_scale(f->Kww, M, M, &scale) != LA_OK) return BO_OVERFLOW;
    int st = la_chol_jitter(f->Kww, M1, M, scale, jit_base, jit_cap, f->Lu,
                            &out->jit_u);
    if (st != LA_OK) return st == LA_NOT_PD ? BO_KUU : BO_OVERFLOW;
    /* dv = Lu^-1 Kuv: M1 x M2 */
    bo_get_block(f->Kww, M, 0, M1, M1, M2, f->dv);
    la_trsm_left(f->Lu, M1, f->dv, M2, 'N');
    /* Cvv = Kvv - dv'dv: M2 x M2 (lower; Fernlund 2022, eq. 5.5) */
    bo_get_block(f->Kww, M, M1, M1, M2, M2, Cvv);
    if (M1 > 0 && M2 > 0)
        F77_CALL(dsyrk)("L", "T", &M2, &M1, &mone, f->dv, &M1, &one, Cvv,
                        &M2 FCONE FCONE);
    /* C_vv carries rounding errors of about M1 eps times the kernel's
     * scale (a difference of entries of that size), whatever its own
     * diagonal: with O on Z it is rounding noise, which dpotrf accepts or
     * not depending on the BLAS (OpenBLAS did, R's reference BLAS did
     * not), and a factor of noise is not one of C_vv. Pivots below a
     * hundred times that error count as failed, so that the jitter
     * escalates with any BLAS. Near-coincident O with C_vv well above it
     * (O = Z + 1e-6 lengthscales: the difference quotients of the kernel,
     * derivative information) is factorised as it is. */
    const double floor_v = 100.0 * (M1 + 1.0) * DBL_EPSILON * scale;
    st = la_chol_jitter_floor(Cvv, M2, M2, scale, jit_base, jit_cap, floor_v, f->Lv,
                              &out->jit_v);
    if (st != LA_OK) return st == LA_NOT_PD ? BO_CVV : BO_OVERFLOW;
    bo_block_lower(out->L, M1, M2, f->Lu, f->dv, f->Lv);     /* L21 = dv' */
    return BO_OK;
}

/* A = [Au; Av] = L^-1 Kwf Lambda^-1/2 (Algorithm 3 lines 3, 4 and 6) and
 * the per-point sums of the bounds: |ys|^2, sum log lambda, tr(Av Av') and
 * the residual variances k_nn / lambda_n - |a_n|^2, summed. */
static int bo_whiten(bo_factors *f, bo_out *out)
{
    const int M1 = f->M1, M2 = f->M2, M = f->M, N = f->N;
    const double one = 1.0, mone = -1.0;
    f->A = la_alloc((size_t) M * N);
    la_copy(f->A, f->Kwf, (size_t) M * N);
    double *A = f->A;
    if (M1 > 0 && N > 0) {
        /* rows 1..M1: df = Lu^-1 Kuf */
        F77_CALL(dtrsm)("L", "L", "N", "N", &M1, &N, &one, f->Lu, &M1, A, &M
                        FCONE FCONE FCONE FCONE);
        /* rows M1+1..M: Cvf = Kvf - dv' df (the test-point analogue of
         * this line is misprinted in Fernlund 2022, Algorithm 3, line 20;
         * prediction uses the corrected form) */
        if (M2 > 0)
            F77_CALL(dgemm)("T", "N", &M2, &N, &M1, &mone, f->dv, &M1, A, &M,
                            &one, A + M1, &M FCONE FCONE);
    }
    if (M2 > 0 && N > 0)  /* Av = Lv^-1 Cvf */
        F77_CALL(dtrsm)("L", "L", "N", "N", &M2, &N, &one, f->Lv, &M2, A + M1,
                        &M FCONE FCONE FCONE FCONE);
    f->isl = la_alloc((size_t) N);
    double sumloglam = 0.0, yy = 0.0, trace = 0.0, trBv = 0.0, kl = 0.0;
    for (int n = 0; n < N; n++) {
        if ((n & 1023) == 1023) R_CheckUserInterrupt();
        const double isl = 1.0 / sqrt(f->lambda[n]), ys = f->ytil[n] * isl;
        double *an = A + (size_t) M * n, su = 0.0, sv = 0.0;
        for (int m = 0; m < M1; m++) {
            an[m] *= isl;
            su += an[m] * an[m];
        }
        for (int m = M1; m < M; m++) {
            an[m] *= isl;
            sv += an[m] * an[m];
        }
        if (!R_FINITE(su + sv)) return BO_A;
        f->isl[n] = isl;
        trBv += sv;
        sumloglam += log(f->lambda[n]);
        yy += ys * ys;
        trace += f->kdiag[n] / f->lambda[n] - (su + sv);
        kl += f->kdiag[n] / f->lambda[n];
    }
    f->kl = kl;
    f->sumloglam = sumloglam;
    f->yy = yy;
    f->trBv = trBv;
    out->trace = trace;
    return BO_OK;
}

/* The block Cholesky factor LB = [[LBu, 0], [gamma', LQ]] (lines 11-15)
 * of f->B = I + A A' = [[Bu, Buv], [Buv', Bv]] (lines 8-10, formed by the
 * caller), with LBv = chol(Bv) for the SOLVE-GP family. */
int bo_factor_b(bo_factors *f, bo_out *out)
{
    const int M1 = f->M1, M2 = f->M2, M = f->M;
    const double one = 1.0, mone = -1.0;
    double *gam = la_alloc((size_t) M1 * M2);
    f->LQ = la_alloc((size_t) M2 * M2);
    bo_get_block(f->B, M, 0, 0, M1, M1, out->LBu);
    if (la_chol(out->LBu, M1) != 0) return BO_B;
    bo_get_block(f->B, M, 0, M1, M1, M2, gam);           /* Buv */
    la_trsm_left(out->LBu, M1, gam, M2, 'N');            /* gamma */
    bo_get_block(f->B, M, M1, M1, M2, M2, f->LQ);        /* Bv */
    la_copy(out->LBv, f->LQ, (size_t) M2 * M2);
    if (M1 > 0 && M2 > 0)                                /* Bv - gamma'gamma */
        F77_CALL(dsyrk)("L", "T", &M2, &M1, &mone, gam, &M1, &one, f->LQ,
                        &M2 FCONE FCONE);
    if (la_chol(f->LQ, M2) != 0) return BO_B;
    if (la_chol(out->LBv, M2) != 0) return BO_B;
    bo_block_lower(out->LB, M1, M2, out->LBu, gam, f->LQ);   /* LB21 = gamma' */
    return BO_OK;
}

/* c = LB^-1 A ys (line 16) from out->c = A ys (formed by the caller), the
 * three bounds (line 17 and the header) and w = LB^-T c = B^-1 A ys. N is
 * a double (the number of points, for the constant). As in
 * bound_gaussian.c, c'c <= |ys|^2 and a non-negative trace hold in exact
 * arithmetic; a violation beyond rounding is BO_PRECISION. */
int bo_value(const bo_factors *f, double N, bo_out *out)
{
    const int M = f->M, ione = 1;
    F77_CALL(dtrsv)("L", "N", "N", &M, out->LB, &M, out->c, &ione
                    FCONE FCONE FCONE);
    double cc = 0.0;
    for (int m = 0; m < M; m++) cc += out->c[m] * out->c[m];
    if (cc > f->yy * (1.0 + 1e-6) || out->trace < -1e-6 * f->kl)
        return BO_PRECISION;
    const double hu = la_half_logdet(out->LBu, f->M1),
                 hq = la_half_logdet(f->LQ, f->M2),
                 hv = la_half_logdet(out->LBv, f->M2);
    out->fit = -0.5 * f->yy + 0.5 * cc;
    out->logdet[BO_UNION] = -hu - hq - 0.5 * f->sumloglam;
    out->logdet[BO_SOLVE] = -hu - hv - 0.5 * f->sumloglam;
    out->logdet[BO_ODVGP] = -hu - 0.5 * f->trBv - 0.5 * f->sumloglam;
    for (int k = 0; k < 3; k++)
        out->bound[k] = -0.5 * N * LOG_2PI + out->logdet[k] + out->fit -
            0.5 * out->trace;
    la_copy(out->w, out->c, (size_t) M);
    F77_CALL(dtrsv)("L", "T", "N", &M, out->LB, &M, out->w, &ione
                    FCONE FCONE FCONE);
    return BO_OK;
}

/* R = I - S (M x M), S the whitened posterior covariance of the variant:
 * B^-1 (union), blkdiag(Bu^-1, Bv^-1) (SOLVE-GP), blkdiag(Bu^-1, I)
 * (ODVGP). */
static double *bo_complement(const bo_factors *f, const bo_out *out,
                             int variant)
{
    const int M1 = f->M1, M2 = f->M2, M = f->M;
    const size_t MM = (size_t) M * M;
    double *Rm = la_alloc(MM);
    if (variant == BO_UNION) {
        la_chol_inverse(out->LB, M, Rm);                  /* B^-1 */
    } else {
        memset(Rm, 0, MM * sizeof(double));
        double *tmp = la_alloc(MM);
        la_chol_inverse(out->LBu, M1, tmp);               /* Bu^-1 */
        bo_put_block(Rm, M, 0, 0, M1, M1, tmp);
        if (variant == BO_SOLVE) {
            la_chol_inverse(out->LBv, M2, tmp);           /* Bv^-1 */
            bo_put_block(Rm, M, M1, M1, M2, M2, tmp);
        } else {
            for (int i = M1; i < M; i++) Rm[i + (size_t) M * i] = 1.0;
        }
    }
    for (size_t i = 0; i < MM; i++) Rm[i] = -Rm[i];
    for (int i = 0; i < M; i++) Rm[i + (size_t) M * i] += 1.0;
    return Rm;
}

/* Gww = -1/2 L^-T Psi L^-1 with Y = w w' + R (B - I) and Psi its lower
 * triangle mirrored (header); f->B becomes A A'. */
static void bo_gww(bo_factors *f, const double *Rm, bo_out *out)
{
    const int M = f->M;
    const double *w = out->w;
    double *Gww = out->Gww, *B = f->B;
    for (int i = 0; i < M; i++) B[i + (size_t) M * i] -= 1.0;   /* A A' */
    la_gemm_nn(Rm, M, M, B, M, Gww);
    for (int j = 0; j < M; j++)
        for (int i = j; i < M; i++)
            Gww[i + (size_t) M * j] = -0.5 * (Gww[i + (size_t) M * j] +
                                              w[i] * w[j]);
    la_symmetrize_lower(Gww, M);
    la_trsm_left(out->L, M, Gww, M, 'T');
    la_trsm_right(out->L, M, Gww, M);
    /* round-off can leave Gww slightly asymmetric: it is symmetric in exact
     * arithmetic (L^-T Psi L^-1 with Psi symmetric) */
    for (int j = 0; j < M; j++)
        for (int i = j + 1; i < M; i++) {
            const double a = 0.5 * (Gww[i + (size_t) M * j] +
                                    Gww[j + (size_t) M * i]);
            Gww[i + (size_t) M * j] = Gww[j + (size_t) M * i] = a;
        }
}

/* The M x M part of the backward pass of the variant: alpha = L^-T w,
 * out->Gww and E = L^-T R (M x M), from which the adjoint of Kwf is
 * Gwf = E A Lambda^-1/2 + alpha r' (header). f->B becomes A A'. */
void bo_backward_mm(bo_factors *f, int variant, bo_out *out, double *alpha,
                    double *E)
{
    const int M = f->M, ione = 1;
    la_copy(alpha, out->w, (size_t) M);
    F77_CALL(dtrsv)("L", "T", "N", &M, out->L, &M, alpha, &ione
                    FCONE FCONE FCONE);
    double *Rm = bo_complement(f, out, variant);
    bo_gww(f, Rm, out);
    la_trsm_left(out->L, M, Rm, M, 'T');
    la_copy(E, Rm, (size_t) M * M);
}

/* The backward pass: the adjoints of the variant (header). */
static void bo_backward(bo_factors *f, int variant, bo_out *out)
{
    const int M = f->M, N = f->N;
    double *alpha = la_alloc((size_t) M), *E = la_alloc((size_t) M * M);
    bo_backward_mm(f, variant, out, alpha, E);
    /* mu = Lambda^1/2 A'w; r = (ytil - mu) / lambda */
    la_gemv('T', f->A, M, N, out->w, out->mu);
    double *r = la_alloc((size_t) N);
    for (int n = 0; n < N; n++) {
        out->mu[n] /= f->isl[n];
        r[n] = (f->ytil[n] - out->mu[n]) / f->lambda[n];
    }
    /* Gwf <- E A: M x N */
    la_gemm_nn(E, M, M, f->A, N, out->Gwf);
    /* q_n = a_n' R a_n = Kwf_n' (E A)_n / sqrt(lambda_n), since
     * Kwf_n = L a_n sqrt(lambda_n); then Gwf_n = (E A)_n / sqrt(lambda_n)
     * + alpha r_n */
    bg_point_adjoints(M, N, f->Kwf, f->isl, alpha, r, f->lambda, f->kdiag,
                      out->Gwf, out->gdiag, out->glambda, out->gytil);
}

/* The three bounds and, when out->Gwf is set, the adjoints of `variant`.
 * Returns a BO_ status. */
static int bo_collapsed(const double *Kww, const double *Kwf, int M1, int M2,
                        int N, const double *kdiag, const double *lambda,
                        const double *ytil, double jit_base, double jit_cap,
                        int variant, bo_out *out)
{
    bo_factors f;
    memset(&f, 0, sizeof(f));
    f.M1 = M1; f.M2 = M2; f.M = M1 + M2; f.N = N;
    f.Kww = Kww; f.Kwf = Kwf; f.kdiag = kdiag; f.lambda = lambda;
    f.ytil = ytil;
    int st = bo_factor_kww(&f, jit_base, jit_cap, out);
    if (st == BO_OK) st = bo_whiten(&f, out);
    if (st == BO_OK) {
        /* B = I + A A' and A ys: the sums over points of the bounds */
        f.B = la_alloc((size_t) f.M * f.M);
        la_identity_plus_gram(f.A, f.M, N, f.B);
        double *ys = la_alloc((size_t) N);
        for (int n = 0; n < N; n++) ys[n] = ytil[n] * f.isl[n];
        la_gemv('N', f.A, f.M, N, ys, out->c);
        st = bo_factor_b(&f, out);
    }
    if (st == BO_OK) st = bo_value(&f, (double) N, out);
    if (st != BO_OK) return st;
    if (out->Gwf != NULL) bo_backward(&f, variant, out);
    return BO_OK;
}

/* Stop with the message of a BO_ status (nothing for BO_OK); jc is the
 * jitter cap, relative to the mean diagonal of Kww. */
void bo_stop(int status, double jc)
{
    if (status == BO_KUU)
        error("Kuu is not positive definite even with jitter %g times its "
              "mean diagonal: are regular inducing inputs duplicated?", jc);
    if (status == BO_CVV)
        error("the orthogonal covariance Cvv = Kvv - Kvu Kuu^-1 Kuv is not "
              "positive definite even with jitter %g times the mean "
              "diagonal of Kww: do orthogonal inputs coincide with each "
              "other or with regular ones?", jc);
    if (status == BO_B)
        error("the Cholesky factorisation of B = I + A A' failed");
    if (status == BO_A)
        error("L^-1 Kwf Lambda^-1/2 overflows (a kernel variance too large "
              "for the noise variances)");
    if (status == BO_PRECISION)
        error("the bound has lost its precision: B = I + A A' is too "
              "ill-conditioned for double precision (noise variances tiny "
              "next to the kernel variance)");
    if (status == BO_OVERFLOW)
        error("the Cholesky factor of Kww overflows: the kernel variance is "
              "too large for double precision");
}

/* ---- .Call entry point ------------------------------------------------ */

/* The three orthogonal collapsed bounds and, when grad is TRUE, the
 * adjoints of the one chosen by variant (0 = union, 1 = SOLVE-GP family,
 * 2 = ODVGP family).
 * Kww: M x M, Kwf: M x N (rows: M1 regular inputs, then the orthogonal
 * ones); kdiag, lambda, ytil: length N; jitter, jitter_cap: relative to the
 * mean diagonal of Kww. */
SEXP ffi_bo_bound(SEXP Kww, SEXP Kwf, SEXP M1, SEXP kdiag, SEXP lambda,
                  SEXP ytil, SEXP variant, SEXP jitter, SEXP jitter_cap,
                  SEXP grad)
{
    chk_real_matrix(Kww, "Kww", -1);
    const int M = nrows(Kww);
    if (M < 1 || ncols(Kww) != M)
        error("'Kww' must be a square matrix with at least one row");
    chk_real_matrix(Kwf, "Kwf", -1);
    if (nrows(Kwf) != M)
        error("'Kwf' must have %d rows", M);
    const int N = ncols(Kwf);
    if (!isInteger(M1) || XLENGTH(M1) != 1 || INTEGER(M1)[0] == NA_INTEGER ||
        INTEGER(M1)[0] < 0 || INTEGER(M1)[0] > M)
        error("'M1' must be one integer between 0 and %d", M);
    const int m1 = INTEGER(M1)[0], m2 = M - m1;
    chk_real_vector(kdiag, "kdiag", N);
    chk_real_vector(lambda, "lambda", N);
    chk_real_vector(ytil, "ytil", N);
    chk_finite(Kww, "Kww");
    chk_finite(Kwf, "Kwf");
    chk_finite(kdiag, "kdiag");
    chk_finite(lambda, "lambda");
    chk_finite(ytil, "ytil");
    for (int n = 0; n < N; n++)
        if (!(REAL(lambda)[n] > 0.0))
            error("noise variances 'lambda' must be positive");
    if (!isInteger(variant) || XLENGTH(variant) != 1 ||
        INTEGER(variant)[0] < BO_UNION || INTEGER(variant)[0] > BO_ODVGP)
        error("'variant' must be 0 (union), 1 (solve) or 2 (odvgp)");
    const int var = INTEGER(variant)[0];
    double jb, jc;
    chk_jitter(jitter, jitter_cap, &jb, &jc);
    if (jb < 0.0 || jc < jb)
        error("'jitter' must be >= 0 and 'jitter_cap' >= 'jitter'");
    const int g = chk_flag(grad, "grad");

    int nprot = 0;
    bo_out o;
    memset(&o, 0, sizeof(o));
    SEXP sL = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sLB = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sLBu = PROTECT(allocMatrix(REALSXP, m1, m1)); nprot++;
    SEXP sLBv = PROTECT(allocMatrix(REALSXP, m2, m2)); nprot++;
    SEXP sc = PROTECT(allocVector(REALSXP, M)); nprot++;
    SEXP sw = PROTECT(allocVector(REALSXP, M)); nprot++;
    /* workers write m x m factors contiguously; R_alloc'd buffers of at
     * least one element keep zero-size blocks valid pointers */
    double *LBu = la_alloc((size_t) m1 * m1);
    double *LBv = la_alloc((size_t) m2 * m2);
    o.L = REAL(sL); o.LB = REAL(sLB); o.LBu = LBu; o.LBv = LBv;
    o.c = REAL(sc); o.w = REAL(sw);
    SEXP sGww = R_NilValue, sGwf = R_NilValue, sgd = R_NilValue,
         sgl = R_NilValue, sgy = R_NilValue, smu = R_NilValue;
    if (g) {
        sGww = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        sGwf = PROTECT(allocMatrix(REALSXP, M, N)); nprot++;
        sgd = PROTECT(allocVector(REALSXP, N)); nprot++;
        sgl = PROTECT(allocVector(REALSXP, N)); nprot++;
        sgy = PROTECT(allocVector(REALSXP, N)); nprot++;
        smu = PROTECT(allocVector(REALSXP, N)); nprot++;
        o.Gww = REAL(sGww); o.Gwf = REAL(sGwf); o.gdiag = REAL(sgd);
        o.glambda = REAL(sgl); o.gytil = REAL(sgy); o.mu = REAL(smu);
    }
    const int status = bo_collapsed(REAL(Kww), REAL(Kwf), m1, m2, N,
                                    REAL(kdiag), REAL(lambda), REAL(ytil),
                                    jb, jc, var, &o);
    bo_stop(status, jc);
    for (int k = 0; k < 3; k++)
        if (!R_FINITE(o.bound[k]))
            error("the bound is not finite");
    if (g) {
        chk_result(o.Gww, (size_t) M * M, "adjoint of Kww");
        chk_result(o.Gwf, (size_t) M * N, "adjoint of Kwf");
        chk_result(o.glambda, (size_t) N, "adjoint of lambda");
        chk_result(o.gytil, (size_t) N, "adjoint of ytil");
    }
    la_copy(REAL(sLBu), LBu, (size_t) m1 * m1);
    la_copy(REAL(sLBv), LBv, (size_t) m2 * m2);

    SEXP sbounds = PROTECT(allocVector(REALSXP, 3)); nprot++;
    SEXP slogdet = PROTECT(allocVector(REALSXP, 3)); nprot++;
    SEXP sjit = PROTECT(allocVector(REALSXP, 2)); nprot++;
    for (int k = 0; k < 3; k++) {
        REAL(sbounds)[k] = o.bound[k];
        REAL(slogdet)[k] = o.logdet[k];
    }
    REAL(sjit)[0] = o.jit_u;
    REAL(sjit)[1] = o.jit_v;
    const char *names[] = {"bound", "bounds", "logdet", "fit", "trace",
                           "jitter", "L", "LB", "LBu", "LBv", "c", "w",
                           "Gww", "Gwf", "gdiag", "glambda", "gytil", "mu",
                           ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, ScalarReal(o.bound[var]));
    SET_VECTOR_ELT(out, 1, sbounds);
    SET_VECTOR_ELT(out, 2, slogdet);
    SET_VECTOR_ELT(out, 3, ScalarReal(o.fit));
    SET_VECTOR_ELT(out, 4, ScalarReal(o.trace));
    SET_VECTOR_ELT(out, 5, sjit);
    SET_VECTOR_ELT(out, 6, sL);
    SET_VECTOR_ELT(out, 7, sLB);
    SET_VECTOR_ELT(out, 8, sLBu);
    SET_VECTOR_ELT(out, 9, sLBv);
    SET_VECTOR_ELT(out, 10, sc);
    SET_VECTOR_ELT(out, 11, sw);
    SET_VECTOR_ELT(out, 12, sGww);
    SET_VECTOR_ELT(out, 13, sGwf);
    SET_VECTOR_ELT(out, 14, sgd);
    SET_VECTOR_ELT(out, 15, sgl);
    SET_VECTOR_ELT(out, 16, sgy);
    SET_VECTOR_ELT(out, 17, smu);
    UNPROTECT(nprot);
    return out;
}
