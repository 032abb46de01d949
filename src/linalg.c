/*
 * linalg.c: thin wrappers over R's BLAS and LAPACK, and the Cholesky
 * factorisation with jitter escalation that every model uses.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"

int la_check_info(int info, const char *routine)
{
    if (info < 0)
        error("internal error: argument %d of LAPACK's %s had an illegal "
              "value", -info, routine);
    return info;
}

double *la_alloc(size_t n)
{
    return (double *) R_alloc(n > 0 ? n : 1, sizeof(double));
}

void la_copy(double *dst, const double *src, size_t n)
{
    if (n > 0) memcpy(dst, src, n * sizeof(double));
}

int la_chol(double *A, int n)
{
    int info = 0;
    if (n == 0) return 0;
    F77_CALL(dpotrf)("L", &n, A, &n, &info FCONE);
    for (int j = 1; j < n; j++)          /* dpotrf leaves the upper part */
        memset(A + (size_t) n * j, 0, (size_t) j * sizeof(double));
    return la_check_info(info, "dpotrf");
}

/* ---- Cholesky with jitter escalation ------------------------------------ */

/* The escalation starts at LA_JITTER_FIRST times the scale and grows
 * tenfold, for at most LA_JITTER_TRIES factorisations. LA_SCALE_FLOOR is
 * the smallest scale: LA_JITTER_FIRST times it is still a normal number,
 * so that no jitter of the escalation underflows to 0 or to a subnormal
 * number that adding to a diagonal would not change. */
#define LA_JITTER_FIRST 1e-10
#define LA_JITTER_TRIES 64
#define LA_SCALE_FLOOR 1e-290
/* The smallest pivot ratio L_jj^2 / (S_jj + jitter) of a usable factor
 * (la_chol_shifted). */
#define LA_PIVOT_TOL 1e-12

int la_jitter_scale(const double *S, int n, int lds, double *scale)
{
    double mx = 0.0, md = 0.0;
    for (int i = 0; i < n; i++) {
        const double d = S[i + (size_t) lds * i];
        if (!R_FINITE(d)) return LA_NONFINITE;
        if (fabs(d) > mx) mx = fabs(d);
    }
    if (mx > 0.0) {
        /* the mean of d_i / max|d|, each in [-1, 1]: no overflow */
        for (int i = 0; i < n; i++) md += S[i + (size_t) lds * i] / mx;
        md = mx * (md / n);
    }
    /* a zero, negative or subnormal mean still gets a usable scale */
    if (!(md >= LA_SCALE_FLOOR)) md = mx >= LA_SCALE_FLOOR ? mx : LA_SCALE_FLOOR;
    *scale = md;
    return LA_OK;
}

/* L <- the lower triangle of S (leading dimension lds) + jit I, n x n
 * contiguous with its upper triangle zeroed, then factorised. Returns 0 on
 * success, 1 if dpotrf failed (not positive definite) or the factor is
 * numerically unusable, 2 if the factor is not finite although dpotrf
 * succeeded (overflow).
 *
 * Unusable: a pivot L_jj^2, the variance of row j left after conditioning
 * on the rows before it (a Schur complement), below LA_PIVOT_TOL (or n eps,
 * when larger) times S_jj + jit. A factor with pivot ratios p has solves
 * with relative rounding errors of about eps / sqrt(p): at p = 1e-12 about
 * 1e-10, the accuracy the bounds are held to; below, the solves lose
 * further digits, and at p near n eps the pivot is rounding noise (S is
 * singular to working precision: duplicated or coincident inducing
 * inputs). Above it the factor is used as it is: a well-conditioned K_uu
 * (cond(K_uu) ~ 1e9, say) gets no jitter at all.
 *
 * floor (0, or that of la_chol_jitter_floor): a pivot below it is
 * unusable too. */
static int la_chol_shifted(const double *S, int n, int lds, double jit,
                           double floor, double *L)
{
    for (int j = 0; j < n; j++) {
        memset(L + (size_t) n * j, 0, (size_t) j * sizeof(double));
        memcpy(L + (size_t) n * j + j, S + (size_t) lds * j + j,
               (size_t) (n - j) * sizeof(double));
        L[j + (size_t) n * j] += jit;
    }
    if (la_chol(L, n) != 0) return 1;
    const double tol = (double) n * DBL_EPSILON > LA_PIVOT_TOL ?
        (double) n * DBL_EPSILON : LA_PIVOT_TOL;
    for (int j = 0; j < n; j++) {
        const double ljj = L[j + (size_t) n * j];
        if (!(ljj > 0.0)) return 1;
        for (int i = j; i < n; i++)
            if (!R_FINITE(L[i + (size_t) n * j])) return 2;
        if (ljj * ljj < tol * (S[j + (size_t) lds * j] + jit) ||
            ljj * ljj < floor) return 1;
    }
    return 0;
}

int la_chol_jitter(const double *S, int n, int lds, double scale,
                   double base, double cap, double *L, double *jitter)
{
    return la_chol_jitter_floor(S, n, lds, scale, base, cap, 0.0, L, jitter);
}

int la_chol_jitter_floor(const double *S, int n, int lds, double scale,
                         double base, double cap, double floor, double *L,
                         double *jitter)
{
    *jitter = 0.0;
    if (n == 0) return LA_OK;
    if (!R_FINITE(scale) || !(scale >= LA_SCALE_FLOOR) || !R_FINITE(base) ||
        !R_FINITE(cap) || base < 0.0)
        return LA_NONFINITE;
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++)
            if (!R_FINITE(S[i + (size_t) lds * j])) return LA_NONFINITE;
    double jit = base * scale;
    if (base > 0.0 && !(jit >= DBL_MIN)) jit = DBL_MIN;  /* never 0 by underflow */
    double maxjit = cap * scale;
    if (!R_FINITE(maxjit)) maxjit = DBL_MAX;
    for (int t = 0; t < LA_JITTER_TRIES; t++) {
        if (t > 0) R_CheckUserInterrupt();
        const int st = la_chol_shifted(S, n, lds, jit, floor, L);
        if (st == 0) {
            *jitter = jit;
            return LA_OK;
        }
        if (st == 2) return LA_NONFINITE;
        /* tenfold, from max(base, LA_JITTER_FIRST) times the scale */
        const double first = LA_JITTER_FIRST * scale;
        if (jit > maxjit / 10.0 && jit >= first) return LA_NOT_PD;
        jit = (10.0 * jit > first) ? 10.0 * jit : first;
        if (jit > maxjit * (1.0 + 1e-12)) return LA_NOT_PD;
    }
    return LA_NOT_PD;
}

void la_trsm_left(const double *L, int n, double *B, int m, char trans)
{
    const double one = 1.0;
    const char tr[2] = {trans, '\0'};
    if (n == 0 || m == 0) return;
    F77_CALL(dtrsm)("L", "L", tr, "N", &n, &m, &one, L, &n, B, &n
                    FCONE FCONE FCONE FCONE);
}

void la_trsm_right(const double *L, int n, double *B, int m)
{
    const double one = 1.0;
    if (n == 0 || m == 0) return;
    F77_CALL(dtrsm)("R", "L", "N", "N", &m, &n, &one, L, &n, B, &m
                    FCONE FCONE FCONE FCONE);
}

void la_gemm_nn(const double *A, int m, int k, const double *B, int n,
                double *C)
{
    const double one = 1.0, zero = 0.0;
    if (m == 0 || n == 0) return;
    if (k == 0) {
        memset(C, 0, (size_t) m * n * sizeof(double));
        return;
    }
    F77_CALL(dgemm)("N", "N", &m, &n, &k, &one, A, &m, B, &k, &zero, C, &m
                    FCONE FCONE);
}

void la_gemv(char trans, const double *A, int m, int n, const double *x,
             double *y)
{
    const double one = 1.0, zero = 0.0;
    const int ione = 1;
    const int ny = trans == 'N' ? m : n, nx = trans == 'N' ? n : m;
    const char tr[2] = {trans, '\0'};
    if (ny == 0) return;
    if (nx == 0) {
        memset(y, 0, (size_t) ny * sizeof(double));
        return;
    }
    F77_CALL(dgemv)(tr, &m, &n, &one, A, &m, x, &ione, &zero, y, &ione FCONE);
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
 * collapsed bounds (Fernlund 2022, eq. 4.37 and Algorithm 3, lines
 * 8-10). */
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
    if (la_check_info(info, "dpotri") != 0)
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
    double scale = 1.0, jit = 0.0;
    int st = la_jitter_scale(REAL(S), n, n, &scale);
    if (st == LA_OK)
        st = la_chol_jitter(REAL(S), n, n, scale, b, c, REAL(L), &jit);
    if (st == LA_NOT_PD)
        error("the matrix is not positive definite even with jitter "
              "%g times its mean diagonal", c);
    if (st != LA_OK)
        error("the Cholesky factor of the matrix overflows: its entries "
              "are too large for double precision");
    const char *names[] = {"L", "jitter", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, L);
    SET_VECTOR_ELT(out, 1, ScalarReal(jit));
    UNPROTECT(nprot);
    return out;
}

/* Column summaries of a double matrix x (n x D; a vector is one column)
 * without copying it: a
 * 5 x D matrix with rows mean, sd (denominator n - 1; NA for n < 2), min,
 * max and finite (1 when every entry of the column is finite, else 0; the
 * other rows are then NA). Two passes per column (the mean, then the
 * centred squares), as stats::sd computes it. */
SEXP ffi_la_colstats(SEXP x)
{
    /* a matrix, or a vector as one column */
    if (TYPEOF(x) != REALSXP)
        error("'x' must be a double matrix or vector");
    const int ismat = isMatrix(x);
    const R_xlen_t n = ismat ? (R_xlen_t) nrows(x) : XLENGTH(x);
    const int D = ismat ? ncols(x) : 1;
    SEXP out = PROTECT(allocMatrix(REALSXP, 5, D));
    double *o = REAL(out);
    const double *xp = REAL_RO(x);
    for (int d = 0; d < D; d++) {
        const double *c = xp + (size_t) n * d;
        double *od = o + 5 * (size_t) d;
        int fin = 1;
        double s = 0.0, mn = R_PosInf, mx = R_NegInf;
        for (R_xlen_t i = 0; i < n; i++) {
            const double v = c[i];
            if (!R_FINITE(v)) {
                fin = 0;
                break;
            }
            s += v;
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
        if (!fin || n == 0) {
            od[0] = od[1] = od[2] = od[3] = NA_REAL;
            od[4] = fin ? 1.0 : 0.0;
            continue;
        }
        /* the mean without overflow: sums of huge finite values */
        double mean = s / (double) n;
        if (!R_FINITE(mean)) {
            mean = 0.0;
            for (R_xlen_t i = 0; i < n; i++) mean += c[i] / (double) n;
        }
        double ss = 0.0, sd;
        for (R_xlen_t i = 0; i < n; i++) {
            const double e = c[i] - mean;
            ss += e * e;
        }
        sd = sqrt(ss / (double) (n - 1));
        if (!R_FINITE(sd)) {
            /* squares beyond double precision: scaled by the largest
             * deviation (the sd itself is below it) */
            double big = 0.0;
            for (R_xlen_t i = 0; i < n; i++) {
                const double e = fabs(c[i] / 2.0 - mean / 2.0);
                if (e > big) big = e;
            }
            ss = 0.0;
            for (R_xlen_t i = 0; i < n; i++) {
                const double e = (c[i] / 2.0 - mean / 2.0) / big;
                ss += e * e;
            }
            sd = 2.0 * big * sqrt(ss / (double) (n - 1));
        }
        od[0] = mean;
        od[1] = n > 1 ? sd : NA_REAL;
        od[2] = mn;
        od[3] = mx;
        od[4] = 1.0;
    }
    UNPROTECT(1);
    return out;
}

/* Hand the memory that R has freed back to the system: glibc keeps freed
 * blocks in its heap (below its mmap threshold, which rises to 32 MB once
 * a large block has been freed), so after the large temporaries of one
 * stage of a fit the process keeps their memory resident although nothing
 * uses it, and a memory budget measured as the process's peak would not
 * hold (R/interrupt.R, .stage_mark(), calls this after a garbage
 * collection). malloc_trim() returns free pages of the heap to the system;
 * elsewhere than glibc, nothing is done. TRUE when memory was released. */
SEXP ffi_la_release(void)
{
#ifdef __GLIBC__
    return ScalarLogical(malloc_trim(0) != 0);
#else
    return ScalarLogical(FALSE);
#endif
}
