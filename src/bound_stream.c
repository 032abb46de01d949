/*
 * bound_stream.c: the collapsed Gaussian bound of bound_gaussian.c over row
 * chunks of the data, so that no N x M matrix is ever held.
 *
 * The bound depends on the data only through sums over points (Titsias
 * 2009; bound_gaussian.c for the notation):
 *   A A',  w = A Lambda^-1/2 ytil,  sum ytil_n^2 / lambda_n,
 *   sum k_nn / lambda_n,  sum (k_nn / lambda_n - |a_n|^2),  sum log lambda_n,
 * with a_n = L^-1 Kuf_n / sqrt(lambda_n). Pass 1 (bs_stats) accumulates them
 * chunk by chunk; the M x M algebra (bs_value) gives the bound and the M x M
 * adjoint pieces Guu, E = L^-T (I - B^-1), alpha and vt; pass 2
 * (bs_adjoints) recomputes a chunk's A and returns its columns of
 * dF/dKuf = E A Lambda^-1/2 + alpha r' with the per-point adjoints, which
 * the caller contracts with the kernel derivatives and adds up. The chunks
 * may live in one process or on the workers of a cluster (R/stream.R).
 *
 * Within a chunk the columns are split into one contiguous block per
 * thread (OpenMP, when the compiler supports it): each thread solves,
 * scales and multiplies its own columns, and the M x M sums of the threads
 * are added in thread order. The triangular solves and products act on
 * each column separately, so only the order of the M x M sums depends on
 * the number of threads. The threads call the BLAS but no R API; memory is
 * allocated before they start.
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "lapack.h"
#include "spv.h"

/* Columns per thread below which a chunk is not split further. */
/* The threads for n columns (spv_threads()), from the R argument. */
static int bs_threads(SEXP threads, int n)
{
    if (!isInteger(threads) || XLENGTH(threads) != 1 ||
        INTEGER(threads)[0] == NA_INTEGER || INTEGER(threads)[0] < 1)
        error("'threads' must be one whole number >= 1");
    return spv_threads(INTEGER(threads)[0], (size_t) n);
}

/* The checks shared by both passes: L (M x M Cholesky factor), Kuf (M x n)
 * and the per-point vectors of length n. Returns n. */
static int bs_check(SEXP L, SEXP Kuf, SEXP kdiag, SEXP lambda, SEXP ytil)
{
    chk_chol_factor(L, "L", -1);
    const int M = nrows(L);
    chk_real_matrix(Kuf, "Kuf", -1);
    if (nrows(Kuf) != M)
        error("'Kuf' must have %d rows", M);
    const int n = ncols(Kuf);
    chk_real_vector(kdiag, "kdiag", n);
    chk_real_vector(lambda, "lambda", n);
    chk_real_vector(ytil, "ytil", n);
    chk_finite(kdiag, "kdiag");
    chk_finite(lambda, "lambda");
    chk_finite(ytil, "ytil");
    for (int i = 0; i < n; i++)
        if (!(REAL(lambda)[i] > 0.0))
            error("noise variances 'lambda' must be positive");
    return n;
}

static void bs_a_error(void)
{
    error("NA/NaN/Inf in 'Kuf', or L^-1 Kuf Lambda^-1/2 overflows (a "
          "kernel variance too large for the noise variances)");
}

/* Pass 1 on columns [0, nb) of one thread's block: A <- L^-1 Kuf
 * Lambda^-1/2 in place, AA (M x M, lower) = A A', w = A Lambda^-1/2 ytil
 * and s = (yy, kl, trace, sumloglam, bad). The per-point loop is that of
 * bg_forward in bound_gaussian.c. */
static void bs_stats_block(int M, int nb, const double *L, double *A,
                           const double *kdiag, const double *lambda,
                           const double *ytil, double *AA, double *w,
                           double *s)
{
    la_trsm_left(L, M, A, nb, 'N');
    memset(w, 0, (size_t) M * sizeof(double));
    double yy = 0.0, kl = 0.0, trace = 0.0, sll = 0.0, bad = 0.0;
    for (int n = 0; n < nb; n++) {
        const double isl = 1.0 / sqrt(lambda[n]);
        const double yn = ytil[n] * isl;
        double *an = A + (size_t) M * n, ss = 0.0;
        for (int m = 0; m < M; m++) {
            an[m] *= isl;
            ss += an[m] * an[m];
            w[m] += an[m] * yn;
        }
        if (!R_FINITE(ss)) bad = 1.0;
        sll += log(lambda[n]);
        yy += yn * yn;
        trace += kdiag[n] / lambda[n] - ss;
        kl += kdiag[n] / lambda[n];
    }
    memset(AA, 0, (size_t) M * M * sizeof(double));
    if (!bad) la_syrk(A, M, nb, 1.0, 0.0, AA);
    s[0] = yy; s[1] = kl; s[2] = trace; s[3] = sll; s[4] = bad;
}

/* Pass 1 over one chunk: list(AA, w, yy, kl, trace, sumloglam, n). AA is
 * full (both triangles). */
SEXP ffi_bs_stats(SEXP L, SEXP Kuf, SEXP kdiag, SEXP lambda, SEXP ytil,
                  SEXP threads)
{
    const int n = bs_check(L, Kuf, kdiag, lambda, ytil);
    const int M = nrows(L), nt = bs_threads(threads, n);
    const size_t MM = (size_t) M * M;
    double *A = la_alloc((size_t) M * n);
    la_copy(A, REAL(Kuf), (size_t) M * n);
    double *acc = la_alloc(MM * nt), *wt = la_alloc((size_t) M * nt),
           *st = la_alloc((size_t) 5 * nt);
    const double *Lp = REAL(L), *kd = REAL(kdiag), *lam = REAL(lambda),
                 *yt = REAL(ytil);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
    for (int t = 0; t < nt; t++) {
        const int j0 = (int) spv_first(n, t, nt),
                  j1 = (int) spv_first(n, t + 1, nt);
        bs_stats_block(M, j1 - j0, Lp, A + (size_t) M * j0, kd + j0,
                       lam + j0, yt + j0, acc + MM * t, wt + (size_t) M * t,
                       st + 5 * t);
    }
    for (int t = 0; t < nt; t++)
        if (st[5 * t + 4] != 0.0) bs_a_error();

    const char *names[] = {"AA", "w", "yy", "kl", "trace", "sumloglam", "n",
                           ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names));
    SEXP sAA = allocMatrix(REALSXP, M, M);
    SET_VECTOR_ELT(out, 0, sAA);
    SEXP sw = allocVector(REALSXP, M);
    SET_VECTOR_ELT(out, 1, sw);
    double *AA = REAL(sAA), *w = REAL(sw), s[4] = {0.0, 0.0, 0.0, 0.0};
    la_copy(AA, acc, MM);
    la_copy(w, wt, (size_t) M);
    for (int k = 0; k < 4; k++) s[k] = st[k];
    for (int t = 1; t < nt; t++) {
        const double *a = acc + MM * t, *wv = wt + (size_t) M * t;
        for (size_t i = 0; i < MM; i++) AA[i] += a[i];
        for (int m = 0; m < M; m++) w[m] += wv[m];
        for (int k = 0; k < 4; k++) s[k] += st[5 * t + k];
    }
    la_symmetrize_lower(AA, M);
    for (int k = 0; k < 4; k++)
        if (!R_FINITE(s[k]))
            error("the sums of the bound overflow: noise variances too small "
                  "for the kernel variance or the targets");
    chk_result(AA, MM, "statistic A A'");
    chk_result(w, (size_t) M, "statistic A Lambda^-1/2 ytil");
    for (int k = 0; k < 4; k++) SET_VECTOR_ELT(out, 2 + k, ScalarReal(s[k]));
    SET_VECTOR_ELT(out, 6, ScalarReal((double) n));
    UNPROTECT(1);
    return out;
}

/* The M x M algebra from the summed statistics (pass 1 of every chunk):
 * list(bound, logdet, fit, trace, LB, v) and, with grad, Guu, E, alpha, vt
 * for pass 2. N is the number of points (a double: a cluster may hold more
 * than INT_MAX). The messages are those of the unchunked bound. */
SEXP ffi_bs_value(SEXP L, SEXP AA, SEXP w, SEXP sums, SEXP N, SEXP grad)
{
    chk_chol_factor(L, "L", -1);
    const int M = nrows(L);
    chk_stream_stats(AA, w, sums, M);
    const double n = chk_scalar(N, "N");
    const int g = chk_flag(grad, "grad");
    const size_t MM = (size_t) M * M;
    const double *s = REAL(sums);   /* yy, kl, trace, sumloglam */

    int nprot = 0;
    const char *names[] = {"bound", "logdet", "fit", "trace", "LB", "v",
                           "Guu", "E", "alpha", "vt", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SEXP sLB = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sv = PROTECT(allocVector(REALSXP, M)); nprot++;
    double *B = la_alloc(MM);
    la_copy(B, REAL(AA), MM);
    for (int i = 0; i < M; i++) B[i + (size_t) M * i] += 1.0;
    bg_out o;
    memset(&o, 0, sizeof(o));
    o.LB = REAL(sLB);
    o.v = REAL(sv);
    la_copy(o.v, REAL(w), (size_t) M);
    o.trace = s[2];
    const int st = bg_value_stats(M, n, B, s[0], s[1], s[3], &o);
    if (st == BG_B)
        error("the Cholesky factorisation of B = I + A A' failed");
    if (st == BG_PRECISION)
        error("the bound has lost its precision: B = I + A A' is too "
              "ill-conditioned for double precision (noise variances tiny "
              "next to the kernel variance)");
    if (!R_FINITE(o.bound))
        error("the bound is not finite");
    SET_VECTOR_ELT(out, 0, ScalarReal(o.bound));
    SET_VECTOR_ELT(out, 1, ScalarReal(o.logdet));
    SET_VECTOR_ELT(out, 2, ScalarReal(o.fit));
    SET_VECTOR_ELT(out, 3, ScalarReal(o.trace));
    SET_VECTOR_ELT(out, 4, sLB);
    SET_VECTOR_ELT(out, 5, sv);
    if (g) {
        SEXP sGuu = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        SEXP sE = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        SEXP sa = PROTECT(allocVector(REALSXP, M)); nprot++;
        SEXP svt = PROTECT(allocVector(REALSXP, M)); nprot++;
        bg_backward_mm(M, REAL(L), o.LB, B, o.v, REAL(svt), REAL(sa),
                       REAL(sGuu), REAL(sE));
        chk_result(REAL(sGuu), MM, "adjoint of Kuu");
        chk_result(REAL(sE), MM, "adjoint of Kuf");
        chk_result(REAL(sa), (size_t) M, "adjoint of Kuf");
        chk_result(REAL(svt), (size_t) M, "adjoint of Kuf");
        SET_VECTOR_ELT(out, 6, sGuu);
        SET_VECTOR_ELT(out, 7, sE);
        SET_VECTOR_ELT(out, 8, sa);
        SET_VECTOR_ELT(out, 9, svt);
    }
    UNPROTECT(nprot);
    return out;
}

/* Pass 2 over one chunk: list(Guf, gdiag, glambda, gytil, mu) for its
 * columns, from the M x M pieces of ffi_bs_value (E, alpha, vt). The
 * operations and their order per column are those of bg_backward in
 * bound_gaussian.c. */
SEXP ffi_bs_adjoints(SEXP L, SEXP E, SEXP alpha, SEXP vt, SEXP Kuf,
                     SEXP kdiag, SEXP lambda, SEXP ytil, SEXP threads)
{
    const int n = bs_check(L, Kuf, kdiag, lambda, ytil);
    const int M = nrows(L), nt = bs_threads(threads, n);
    chk_real_matrix(E, "E", M);
    if (nrows(E) != M)
        error("'E' must have %d rows", M);
    chk_finite(E, "E");
    chk_real_vector(alpha, "alpha", M);
    chk_finite(alpha, "alpha");
    chk_real_vector(vt, "vt", M);
    chk_finite(vt, "vt");

    int nprot = 0;
    const char *names[] = {"Guf", "gdiag", "glambda", "gytil", "mu", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SEXP sG = PROTECT(allocMatrix(REALSXP, M, n)); nprot++;
    SEXP sgd = PROTECT(allocVector(REALSXP, n)); nprot++;
    SEXP sgl = PROTECT(allocVector(REALSXP, n)); nprot++;
    SEXP sgy = PROTECT(allocVector(REALSXP, n)); nprot++;
    SEXP smu = PROTECT(allocVector(REALSXP, n)); nprot++;
    double *A = la_alloc((size_t) M * n), *flag = la_alloc((size_t) nt);
    la_copy(A, REAL(Kuf), (size_t) M * n);
    const double *Lp = REAL(L), *Ep = REAL(E), *al = REAL(alpha),
                 *vtp = REAL(vt), *K = REAL(Kuf), *kd = REAL(kdiag),
                 *lam = REAL(lambda), *yt = REAL(ytil);
    double *G = REAL(sG), *gd = REAL(sgd), *gl = REAL(sgl), *gy = REAL(sgy),
           *mu = REAL(smu);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
    for (int t = 0; t < nt; t++) {
        const int j0 = (int) spv_first(n, t, nt),
                  nb = (int) spv_first(n, t + 1, nt) - j0;
        double *Ab = A + (size_t) M * j0, *Gb = G + (size_t) M * j0;
        flag[t] = 0.0;
        la_trsm_left(Lp, M, Ab, nb, 'N');
        for (int i = 0; i < nb; i++) {
            const double isl = 1.0 / sqrt(lam[j0 + i]);
            double *an = Ab + (size_t) M * i, ss = 0.0;
            for (int m = 0; m < M; m++) {
                an[m] *= isl;
                ss += an[m] * an[m];
            }
            if (!R_FINITE(ss)) flag[t] = 1.0;
        }
        if (flag[t] == 0.0) {
            la_gemv('T', Ab, M, nb, vtp, mu + j0);
            la_gemm_nn(Ep, M, M, Ab, nb, Gb);
            for (int i = 0; i < nb; i++) {
                const int j = j0 + i;
                const double isl = 1.0 / sqrt(lam[j]);
                mu[j] /= isl;
                const double r = (yt[j] - mu[j]) / lam[j];
                bg_point_adjoint(M, K + (size_t) M * j, Gb + (size_t) M * i,
                                 isl, al, r, lam[j], kd[j], gd + j, gl + j,
                                 gy + j);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        if (flag[t] != 0.0) bs_a_error();
    chk_result(G, (size_t) M * n, "adjoint of Kuf");
    chk_result(gd, (size_t) n, "adjoint of diag Kff");
    chk_result(gl, (size_t) n, "adjoint of lambda");
    chk_result(mu, (size_t) n, "posterior mean");
    chk_result(gy, (size_t) n, "adjoint of ytil");
    SET_VECTOR_ELT(out, 0, sG);
    SET_VECTOR_ELT(out, 1, sgd);
    SET_VECTOR_ELT(out, 2, sgl);
    SET_VECTOR_ELT(out, 3, sgy);
    SET_VECTOR_ELT(out, 4, smu);
    UNPROTECT(nprot);
    return out;
}

/* K(W, x) (M x n) for a chunk x (n x D) in threads: kern_K of kernels.c on
 * one block of columns per thread, cut into pieces of fewer than 1024
 * columns (kern_K checks for interrupts every 1024 columns, and R's API
 * must stay out of the threads). The same values as ffi_kern_matrix. */
#define BS_KERN_PIECE 1000
SEXP ffi_bs_kern_cross(SEXP kern, SEXP W, SEXP x, SEXP threads)
{
    chk_real_matrix(W, "W", -1);
    chk_finite(W, "W");
    const int D = ncols(W), M = nrows(W);
    chk_real_matrix(x, "x", D);
    chk_finite(x, "x");
    const int n = nrows(x), nt = bs_threads(threads, n);
    spv_kernel k;
    chk_kernel(kern, D, &k);
    double *Ws = la_alloc((size_t) D * M), *xs = la_alloc((size_t) D * n);
    if (kern_scale_points(&k, REAL(W), (size_t) M, Ws) |
        kern_scale_points(&k, REAL(x), (size_t) n, xs))
        kern_overflow_error(&k);
    SEXP K = PROTECT(allocMatrix(REALSXP, M, n));
    double *Kp = REAL(K);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
    for (int t = 0; t < nt; t++) {
        const int j1 = (int) spv_first(n, t + 1, nt);
        for (int j = (int) spv_first(n, t, nt); j < j1; j += BS_KERN_PIECE) {
            const int nb = j1 - j < BS_KERN_PIECE ? j1 - j : BS_KERN_PIECE;
            kern_K(&k, Ws, (size_t) M, xs + (size_t) D * j, (size_t) nb,
                   Kp + (size_t) M * j);
        }
    }
    UNPROTECT(1);
    return K;
}

/* The threads a chunk would use for `want` (a whole number >= 1) within
 * OpenMP's thread limit, or for want = 0 the most an OpenMP region may use
 * (OMP_NUM_THREADS or the processors); 1 without OpenMP. */
SEXP ffi_bs_threads(SEXP want)
{
    if (!isInteger(want) || XLENGTH(want) != 1 ||
        INTEGER(want)[0] == NA_INTEGER || INTEGER(want)[0] < 0)
        error("'threads' must be one whole number >= 0");
    int nt = INTEGER(want)[0];
#ifdef _OPENMP
    if (nt == 0) nt = omp_get_max_threads();
    const int lim = omp_get_thread_limit();
    if (lim > 0 && nt > lim) nt = lim;
#else
    nt = 1;
#endif
    return ScalarInteger(nt < 1 ? 1 : nt);
}
