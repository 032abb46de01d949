/*
 * linalg.c: thin wrappers over R's BLAS and LAPACK, and the Cholesky
 * factorisation with jitter escalation that every model uses.
 */
#define USE_FC_LEN_T
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/BLAS.h>
#include <R_ext/Lapack.h>
#include "spv.h"
#ifndef FCONE
#define FCONE
#endif

int la_chol(double *A, int n)
{
    int info = 0;
    if (n == 0) return 0;
    F77_CALL(dpotrf)("L", &n, A, &n, &info FCONE);
    for (int j = 1; j < n; j++)          /* dpotrf leaves the upper part */
        memset(A + (size_t) n * j, 0, (size_t) j * sizeof(double));
    return info;
}

double la_chol_jitter(const double *S, int n, double base, double cap,
                      double *L)
{
    if (n == 0) return 0.0;
    double md = 0.0;
    for (int i = 0; i < n; i++) {
        const double sii = S[i + (size_t) n * i];
        if (!R_FINITE(sii)) return -1.0;
        md += sii;
    }
    md /= n;
    if (!(md > 0.0)) md = 1.0;   /* a zero matrix still gets a scale */
    double jit = base * md;
    const double maxjit = cap * md;
    for (;;) {
        for (int j = 0; j < n; j++)
            memcpy(L + (size_t) n * j + j, S + (size_t) n * j + j,
                   (size_t) (n - j) * sizeof(double));
        for (int i = 0; i < n; i++)
            L[i + (size_t) n * i] += jit;
        if (la_chol(L, n) == 0) {
            int ok = 1;
            for (int i = 0; i < n; i++)
                if (!(L[i + (size_t) n * i] > 0.0)) ok = 0;
            if (ok) return jit;
        }
        jit = (jit <= 0.0) ? 1e-10 * md : 10.0 * jit;
        if (jit > maxjit * (1.0 + 1e-12)) return -1.0;
    }
}

void la_trsm_left(const double *L, int n, double *B, int m, char trans)
{
    const double one = 1.0;
    const char tr[2] = {trans, '\0'};
    if (n == 0 || m == 0) return;
    F77_CALL(dtrsm)("L", "L", tr, "N", &n, &m, &one, L, &n, B, &n
                    FCONE FCONE FCONE FCONE);
}

void la_syrk(const double *A, int n, int k, double alpha, double beta,
             double *C)
{
    if (n == 0) return;
    if (k == 0) {
        for (size_t i = 0; i < (size_t) n * n; i++) C[i] *= beta;
        return;
    }
    F77_CALL(dsyrk)("L", "N", &n, &k, &alpha, A, &n, &beta, C, &n
                    FCONE FCONE);
}

/* B = I + A A' (n x n, both triangles) for A n x k: the matrix B of the
 * collapsed bounds (seed000 eq. 4.37, Algorithm 3 lines 8-10). */
void la_identity_plus_gram(const double *A, int n, int k, double *B)
{
    memset(B, 0, (size_t) n * n * sizeof(double));
    la_syrk(A, n, k, 1.0, 0.0, B);
    for (int i = 0; i < n; i++) B[i + (size_t) n * i] += 1.0;
    la_symmetrize_lower(B, n);
}

void la_symmetrize_lower(double *A, int n)
{
    for (int j = 0; j < n; j++)
        for (int i = j + 1; i < n; i++)
            A[j + (size_t) n * i] = A[i + (size_t) n * j];
}

void la_chol_inverse(const double *L, int n, double *Ainv)
{
    int info = 0;
    if (n == 0) return;
    memcpy(Ainv, L, (size_t) n * n * sizeof(double));
    F77_CALL(dpotri)("L", &n, Ainv, &n, &info FCONE);
    if (info != 0)
        error("internal error: dpotri failed (info = %d)", info);
    la_symmetrize_lower(Ainv, n);
}

double la_half_logdet(const double *L, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += log(L[i + (size_t) n * i]);
    return s;
}

/* ---- .Call entry point ------------------------------------------------ */

/* Cholesky of a symmetric matrix with jitter escalation:
 * list(L = lower factor, jitter = absolute jitter added). base and cap are
 * relative to the mean diagonal. Errors past the cap. */
SEXP ffi_la_chol(SEXP S, SEXP base, SEXP cap)
{
    chk_real_matrix(S, "S", -1);
    const int n = nrows(S);
    if (ncols(S) != n)
        error("'S' must be square");
    chk_finite(S, "S");
    double b, c;
    chk_jitter(base, cap, &b, &c);
    int nprot = 0;
    SEXP L = PROTECT(allocMatrix(REALSXP, n, n)); nprot++;
    memset(REAL(L), 0, (size_t) n * n * sizeof(double));
    const double jit = la_chol_jitter(REAL(S), n, b, c, REAL(L));
    if (jit < 0.0)
        error("the matrix is not positive definite even with jitter "
              "%g times its mean diagonal", c);
    const char *names[] = {"L", "jitter", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, L);
    SET_VECTOR_ELT(out, 1, ScalarReal(jit));
    UNPROTECT(nprot);
    return out;
}

/* The BLAS floor of the collapsed bound, for inst/bench: the operations the
 * bound cannot avoid at sizes (N, M), namely one triangular solve of the
 * M x M factor L into a copy of the M x N matrix Kuf and one rank-N update
 * A A'. Returns tr(A A') so that nothing is optimised away. */
SEXP ffi_la_floor(SEXP L, SEXP Kuf)
{
    chk_real_matrix(L, "L", -1);
    const int M = nrows(L);
    chk_real_matrix(Kuf, "Kuf", -1);
    if (nrows(Kuf) != M) error("'Kuf' must have %d rows", M);
    const int N = ncols(Kuf);
    double *A = (double *) R_alloc((size_t) M * N + 1, sizeof(double));
    double *C = (double *) R_alloc((size_t) M * M + 1, sizeof(double));
    memcpy(A, REAL(Kuf), (size_t) M * N * sizeof(double));
    la_trsm_left(REAL(L), M, A, N, 'N');
    memset(C, 0, (size_t) M * M * sizeof(double));
    la_syrk(A, M, N, 1.0, 0.0, C);
    double tr = 0.0;
    for (int i = 0; i < M; i++) tr += C[i + (size_t) M * i];
    return ScalarReal(tr);
}
