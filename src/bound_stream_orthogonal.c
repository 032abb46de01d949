/*
 * bound_stream_orthogonal.c: the orthogonal collapsed bounds of
 * bound_orthogonal.c (Fernlund 2022, chapter 5; the SOLVE-GP family of Shi,
 * Titsias and Mnih 2020 and the ODVGP family of Salimbeni et al. 2018) over
 * row chunks of the data, so that no N x M matrix is ever held.
 *
 * With W = [Z; O] and the block lower factor L = [[Lu, 0], [dv', Lv]] of
 * Kww + blkdiag(eps_u I, eps_v I), the whitened A = L^-1 Kwf Lambda^-1/2
 * holds Au = Lu^-1 Kuf Lambda^-1/2 and Av = Lv^-1 Cvf Lambda^-1/2 (Fernlund
 * 2022, Algorithm 3, lines 3-6), and the three bounds depend on the data
 * only through the same sums over points as the SGPR bound:
 *   A A' (so B = I + A A' and tr(Av Av'), its lower-right diagonal),
 *   A Lambda^-1/2 ytil,  sum ytil_n^2 / lambda_n,  sum k_nn / lambda_n,
 *   sum (k_nn / lambda_n - |a_n|^2),  sum log lambda_n.
 * L is lower triangular, so these per-chunk sums are exactly those of
 * bound_stream.c (ffi_bs_stats) with this L in place of chol(Kuu); and the
 * adjoint of Kwf has the same per-point form, Gwf = E A Lambda^-1/2 +
 * alpha r' with E = L^-T (I - S) and alpha = L^-T w (bound_orthogonal.c),
 * which ffi_bs_adjoints computes chunk by chunk from (E, alpha, vt = w).
 * What differs is the M x M algebra between the two passes, here: the
 * block factorisations of Kww and B, the three values and the M x M part
 * of the backward pass of the chosen variant, all shared with
 * bound_orthogonal.c (bound_orthogonal.h), so that the chunked and the
 * unchunked bounds differ only in the order of the sums over points.
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"
#include "bound_orthogonal.h"

/* M1 as one integer between 0 and M. */
static int bso_m1(SEXP M1, int M)
{
    if (!isInteger(M1) || XLENGTH(M1) != 1 || INTEGER(M1)[0] == NA_INTEGER ||
        INTEGER(M1)[0] < 0 || INTEGER(M1)[0] > M)
        error("'M1' must be one integer between 0 and %d", M);
    return INTEGER(M1)[0];
}

/* The block lower factor L of Kww + blkdiag(eps_u I, eps_v I) (the first
 * M1 rows of Kww are the regular inputs): list(L, jitter = c(eps_u,
 * eps_v) relative to the mean diagonal of Kww). The messages are those of
 * the unchunked bound. */
SEXP ffi_bso_chol(SEXP Kww, SEXP M1, SEXP jitter, SEXP jitter_cap)
{
    chk_real_matrix(Kww, "Kww", -1);
    const int M = nrows(Kww);
    if (M < 1 || ncols(Kww) != M)
        error("'Kww' must be a square matrix with at least one row");
    chk_finite(Kww, "Kww");
    const int m1 = bso_m1(M1, M);
    double jb, jc;
    chk_jitter(jitter, jitter_cap, &jb, &jc);
    if (jb < 0.0 || jc < jb)
        error("'jitter' must be >= 0 and 'jitter_cap' >= 'jitter'");

    bo_factors f;
    bo_out o;
    memset(&f, 0, sizeof(f));
    memset(&o, 0, sizeof(o));
    f.M1 = m1; f.M2 = M - m1; f.M = M; f.Kww = REAL(Kww);
    const char *names[] = {"L", "jitter", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names));
    SEXP sL = allocMatrix(REALSXP, M, M);
    SET_VECTOR_ELT(out, 0, sL);
    o.L = REAL(sL);
    bo_stop(bo_factor_kww(&f, jb, jc, &o), jc);
    SEXP sjit = allocVector(REALSXP, 2);
    SET_VECTOR_ELT(out, 1, sjit);
    REAL(sjit)[0] = o.jit_u;
    REAL(sjit)[1] = o.jit_v;
    UNPROTECT(1);
    return out;
}

/* The M x M algebra from the summed statistics of ffi_bs_stats (AA = A A',
 * w = A Lambda^-1/2 ytil, sums = c(yy, kl, trace, sumloglam)) over N
 * points: list(bound, bounds, logdet, fit, trace, LB, LBu, LBv, c, w) and,
 * with grad, the adjoint Gww of Kww and the pieces E, alpha, vt of the
 * adjoint of Kwf for ffi_bs_adjoints (pass 2), all of `variant` (0 = union,
 * 1 = SOLVE-GP family, 2 = ODVGP family). */
SEXP ffi_bso_value(SEXP L, SEXP M1, SEXP AA, SEXP w, SEXP sums, SEXP N,
                   SEXP variant, SEXP grad)
{
    chk_chol_factor(L, "L", -1);
    const int M = nrows(L);
    const int m1 = bso_m1(M1, M), m2 = M - m1;
    chk_stream_stats(AA, w, sums, M);
    const double n = chk_scalar(N, "N");
    if (!isInteger(variant) || XLENGTH(variant) != 1 ||
        INTEGER(variant)[0] < BO_UNION || INTEGER(variant)[0] > BO_ODVGP)
        error("'variant' must be 0 (union), 1 (solve) or 2 (odvgp)");
    const int var = INTEGER(variant)[0];
    const int g = chk_flag(grad, "grad");
    const size_t MM = (size_t) M * M;
    const double *s = REAL(sums);   /* yy, kl, trace, sumloglam */

    int nprot = 0;
    const char *names[] = {"bound", "bounds", "logdet", "fit", "trace", "LB",
                           "LBu", "LBv", "c", "w", "Gww", "E", "alpha", "vt",
                           ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SEXP sLB = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sLBu = PROTECT(allocMatrix(REALSXP, m1, m1)); nprot++;
    SEXP sLBv = PROTECT(allocMatrix(REALSXP, m2, m2)); nprot++;
    SEXP sc = PROTECT(allocVector(REALSXP, M)); nprot++;
    SEXP sw = PROTECT(allocVector(REALSXP, M)); nprot++;

    bo_factors f;
    bo_out o;
    memset(&f, 0, sizeof(f));
    memset(&o, 0, sizeof(o));
    f.M1 = m1; f.M2 = m2; f.M = M;
    /* zero-size blocks stay valid pointers (la_alloc gives one element) */
    double *LBu = la_alloc((size_t) m1 * m1), *LBv = la_alloc((size_t) m2 * m2);
    o.L = REAL(L); o.LB = REAL(sLB); o.LBu = LBu; o.LBv = LBv;
    o.c = REAL(sc); o.w = REAL(sw);
    f.B = la_alloc(MM);
    la_copy(f.B, REAL(AA), MM);
    double trBv = 0.0;
    for (int i = m1; i < M; i++) trBv += f.B[i + (size_t) M * i];
    for (int i = 0; i < M; i++) f.B[i + (size_t) M * i] += 1.0;
    la_copy(o.c, REAL(w), (size_t) M);
    f.yy = s[0]; f.kl = s[1]; o.trace = s[2]; f.sumloglam = s[3];
    f.trBv = trBv;
    int st = bo_factor_b(&f, &o);
    if (st == BO_OK) st = bo_value(&f, n, &o);
    bo_stop(st, 0.0);
    for (int k = 0; k < 3; k++)
        if (!R_FINITE(o.bound[k]))
            error("the bound is not finite");
    la_copy(REAL(sLBu), LBu, (size_t) m1 * m1);
    la_copy(REAL(sLBv), LBv, (size_t) m2 * m2);
    SEXP sbounds = PROTECT(allocVector(REALSXP, 3)); nprot++;
    SEXP slogdet = PROTECT(allocVector(REALSXP, 3)); nprot++;
    for (int k = 0; k < 3; k++) {
        REAL(sbounds)[k] = o.bound[k];
        REAL(slogdet)[k] = o.logdet[k];
    }
    SET_VECTOR_ELT(out, 0, ScalarReal(o.bound[var]));
    SET_VECTOR_ELT(out, 1, sbounds);
    SET_VECTOR_ELT(out, 2, slogdet);
    SET_VECTOR_ELT(out, 3, ScalarReal(o.fit));
    SET_VECTOR_ELT(out, 4, ScalarReal(o.trace));
    SET_VECTOR_ELT(out, 5, sLB);
    SET_VECTOR_ELT(out, 6, sLBu);
    SET_VECTOR_ELT(out, 7, sLBv);
    SET_VECTOR_ELT(out, 8, sc);
    SET_VECTOR_ELT(out, 9, sw);
    if (g) {
        SEXP sGww = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        SEXP sE = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        SEXP sa = PROTECT(allocVector(REALSXP, M)); nprot++;
        SEXP svt = PROTECT(allocVector(REALSXP, M)); nprot++;
        o.Gww = REAL(sGww);
        bo_backward_mm(&f, var, &o, REAL(sa), REAL(sE));
        /* the posterior mean at x is Lambda^1/2 A'w: vt = w in pass 2 */
        la_copy(REAL(svt), o.w, (size_t) M);
        chk_result(REAL(sGww), MM, "adjoint of Kww");
        chk_result(REAL(sE), MM, "adjoint of Kwf");
        chk_result(REAL(sa), (size_t) M, "adjoint of Kwf");
        SET_VECTOR_ELT(out, 10, sGww);
        SET_VECTOR_ELT(out, 11, sE);
        SET_VECTOR_ELT(out, 12, sa);
        SET_VECTOR_ELT(out, 13, svt);
    }
    UNPROTECT(nprot);
    return out;
}
