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
#include <limits.h>
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

/* The statistics of pass 1 as R returns them, list(AA, w, yy, kl, trace,
 * sumloglam, n), from nt threads' partial sums: thread t's A A' (lower) at
 * AA0 + sa t, its w at w0 + sw t and its four sums at s0 + ss t, added in
 * thread order. AA is returned full (both triangles). */
static SEXP bs_stats_list(int M, int nt, const double *AA0, size_t sa, const double *w0,
                          size_t sw, const double *s0, size_t ss, double n)
{
    const size_t MM = (size_t) M * M;
    const char *names[] = {"AA", "w", "yy", "kl", "trace", "sumloglam", "n",
                           ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names));
    SEXP sAA = allocMatrix(REALSXP, M, M);
    SET_VECTOR_ELT(out, 0, sAA);
    SEXP sw_ = allocVector(REALSXP, M);
    SET_VECTOR_ELT(out, 1, sw_);
    double *AA = REAL(sAA), *w = REAL(sw_), s[4] = {0.0, 0.0, 0.0, 0.0};
    memset(AA, 0, MM * sizeof(double));
    memset(w, 0, (size_t) M * sizeof(double));
    for (int t = 0; t < nt; t++) {
        const double *a = AA0 + sa * t, *wv = w0 + sw * t, *st = s0 + ss * t;
        for (size_t i = 0; i < MM; i++) AA[i] += a[i];
        for (int m = 0; m < M; m++) w[m] += wv[m];
        for (int k = 0; k < 4; k++) s[k] += st[k];
    }
    la_symmetrize_lower(AA, M);
    for (int k = 0; k < 4; k++)
        if (!R_FINITE(s[k]))
            error("the sums of the bound overflow: noise variances too small "
                  "for the kernel variance or the targets");
    chk_result(AA, MM, "statistic A A'");
    chk_result(w, (size_t) M, "statistic A Lambda^-1/2 ytil");
    for (int k = 0; k < 4; k++) SET_VECTOR_ELT(out, 2 + k, ScalarReal(s[k]));
    SET_VECTOR_ELT(out, 6, ScalarReal(n));
    UNPROTECT(1);
    return out;
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
    return bs_stats_list(M, nt, acc, MM, wt, (size_t) M, st, 5, (double) n);
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

/* The M x M pieces of pass 2 from bs_value or bso_value: E (M x M),
 * alpha and vt (M), finite. */
static void bs_check_pieces(SEXP E, SEXP alpha, SEXP vt, int M)
{
    chk_real_matrix(E, "E", M);
    if (nrows(E) != M)
        error("'E' must have %d rows", M);
    chk_finite(E, "E");
    chk_real_vector(alpha, "alpha", M);
    chk_finite(alpha, "alpha");
    chk_real_vector(vt, "vt", M);
    chk_finite(vt, "vt");
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
    bs_check_pieces(E, alpha, vt, M);

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

#define BS_KERN_PIECE 1000

/* K = K(W, x) (M x n) from scaled points Ws (D x M) and xs (D x n), in nt
 * threads, each on its block of columns cut into pieces of fewer than 1024
 * (kern_K checks for interrupts every 1024 columns, and R's API must stay
 * out of the threads). */
static void bs_kern_threads(const spv_kernel *k, const double *Ws, int M, const double *xs,
                            int n, int nt, double *K)
{
    const int D = k->D;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
    for (int t = 0; t < nt; t++) {
        const int j1 = (int) spv_first(n, t + 1, nt);
        for (int j = (int) spv_first(n, t, nt); j < j1; j += BS_KERN_PIECE) {
            const int nb = j1 - j < BS_KERN_PIECE ? j1 - j : BS_KERN_PIECE;
            kern_K(k, Ws, (size_t) M, xs + (size_t) D * j, (size_t) nb, K + (size_t) M * j);
        }
    }
}

/* K(W, x) (M x n) for a chunk x (n x D) in threads: kern_K of kernels.c on
 * one block of columns per thread, cut into pieces of fewer than 1024
 * columns (kern_K checks for interrupts every 1024 columns, and R's API
 * must stay out of the threads). The same values as ffi_kern_matrix. */
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
    if (kern_scale_points(&k, REAL_RO(W), (size_t) M, Ws) |
        kern_scale_points(&k, REAL_RO(x), (size_t) n, xs))
        kern_overflow_error(&k);
    SEXP K = PROTECT(allocMatrix(REALSXP, M, n));
    bs_kern_threads(&k, Ws, M, xs, n, nt, REAL(K));
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

/* ---- both passes over all rows, with a workspace held by the caller ----- */

/* The two passes above take one chunk's kernel matrix from R, so every
 * chunk of every evaluation allocated its buffers afresh (and the kernel
 * matrix travelled through R). bs_pass_stats and bs_pass_grad instead run
 * over all N rows of x themselves, in chunks of `rows` rows, with every
 * buffer in a workspace that the caller allocates once per fit (an R
 * double vector of bs_work_doubles() entries, R/stream.R) and hands to
 * every evaluation: nothing is allocated per chunk or per evaluation but
 * the small results. With one chunk (rows >= N) the kernel matrix K(W, x)
 * and A = L^-1 K Lambda^-1/2 of pass 1 stay in the workspace, and pass 2
 * of the same evaluation reuses them instead of recomputing them; a stamp
 * of everything they depend on (sizes, kernel, W, L, lambda, targets, x)
 * decides, so a stale workspace is never read. Single kernels only: the
 * contraction of a sum or product of kernels is formed in R (R/kernels.R)
 * and goes through bs_stats and bs_adjoints chunk by chunk.
 *
 * Workspace layout (doubles), for M inducing inputs, D columns, chunks of
 * c rows and nt threads:
 *   stamp   BS_STAMP           what the held K and A were computed from
 *   Ws      D x M              W scaled by the lengthscales
 *   xs      D x c              the chunk's points, scaled
 *   K, A, G M x c each         K(W, chunk), L^-1 K Lambda^-1/2, dF/dK
 *   lam, yt, kd, mu, gd, gl, gy   c each: the chunk's per-point values
 *   acc     nt x (M^2 + M + 8) each thread's sums (pass 1 and pass 2)
 *   kgw     the contraction's workspace (kern_grad_work). */
#define BS_STAMP 16
#define BS_ACC_EXTRA 8

/* In doubles (exact below 2^53), so that no size overflows. */
static double bs_work_doubles(int M, int D, int c, int nt, int nls)
{
    const double m = M, d = D, cc = c;
    return BS_STAMP + d * m + cc * (d + 3.0 * m + 7.0) +
        nt * (m * m + m + BS_ACC_EXTRA) + kern_grad_work(D, nls, m, cc, nt);
}

typedef struct {
    int M, D, N, rows, nt, nlam;
    spv_kernel k;
    const double *x, *W, *L, *lam, *y;
    double shift;
    double *stamp, *Ws, *xs, *K, *A, *G, *lc, *yc, *kd, *mu, *gd, *gl, *gy,
           *acc, *kgw;
} bs_pass;

static void bs_pass_layout(bs_pass *p, SEXP W, SEXP x, SEXP L, SEXP work,
                           SEXP rows, SEXP threads);

/* Validates the arguments shared by both passes and lays out the
 * workspace. lambda: length 1 (one variance for all points) or N; y:
 * length N; ytil = y - shift. */
static void bs_pass_setup(bs_pass *p, SEXP kern, SEXP W, SEXP x, SEXP L,
                          SEXP lambda, SEXP y, SEXP shift, SEXP work,
                          SEXP rows, SEXP threads)
{
    chk_real_matrix(W, "W", -1);
    chk_finite(W, "W");
    const int D = ncols(W), M = nrows(W);
    chk_real_matrix(x, "x", D);
    chk_finite(x, "x");
    const int N = nrows(x);
    chk_chol_factor(L, "L", M);
    chk_kernel(kern, D, &p->k);
    if (TYPEOF(lambda) != REALSXP || (XLENGTH(lambda) != 1 && XLENGTH(lambda) != N))
        error("'lambda' must be a double vector of length 1 or %d", N);
    chk_finite(lambda, "lambda");
    for (R_xlen_t i = 0; i < XLENGTH(lambda); i++)
        if (!(REAL_RO(lambda)[i] > 0.0))
            error("noise variances 'lambda' must be positive");
    chk_real_vector(y, "y", N);
    chk_finite(y, "y");
    p->shift = chk_scalar(shift, "shift");
    if (!isInteger(rows) || XLENGTH(rows) != 1 || INTEGER(rows)[0] == NA_INTEGER ||
        INTEGER(rows)[0] < 1)
        error("'rows' must be one whole number >= 1");
    p->nlam = (int) XLENGTH(lambda);
    /* read only (REAL_RO): a wrapped vector is not copied */
    p->lam = REAL_RO(lambda);
    p->y = REAL_RO(y);
    bs_pass_layout(p, W, x, L, work, rows, threads);
}

/* The sizes, the points and the workspace of a pass (shared by the two
 * passes of the bound and the pass of the predictive): W, x and L
 * checked, p->k set. */
static void bs_pass_layout(bs_pass *p, SEXP W, SEXP x, SEXP L, SEXP work,
                           SEXP rows, SEXP threads)
{
    const int D = ncols(W), M = nrows(W), N = nrows(x);
    p->M = M;
    p->D = D;
    p->N = N;
    p->rows = INTEGER(rows)[0] < N ? INTEGER(rows)[0] : (N > 0 ? N : 1);
    p->nt = bs_threads(threads, p->rows);
    p->x = REAL_RO(x);
    p->W = REAL_RO(W);
    p->L = REAL_RO(L);
    const double need = bs_work_doubles(M, D, p->rows, p->nt, p->k.nls);
    if (TYPEOF(work) != REALSXP || (double) XLENGTH(work) < need)
        error("'work' must be a double vector of at least %.0f entries "
              "(bs_work_doubles)", need);
    const size_t c = (size_t) p->rows;
    double *q = REAL(work);
    p->stamp = q;            q += BS_STAMP;
    p->Ws = q;               q += (size_t) D * M;
    p->xs = q;               q += (size_t) D * c;
    p->K = q;                q += (size_t) M * c;
    p->A = q;                q += (size_t) M * c;
    p->G = q;                q += (size_t) M * c;
    p->lc = q;               q += c;
    p->yc = q;               q += c;
    p->kd = q;               q += c;
    p->mu = q;               q += c;
    p->gd = q;               q += c;
    p->gl = q;               q += c;
    p->gy = q;               q += c;
    p->acc = q;              q += (size_t) p->nt * ((size_t) M * M + M + BS_ACC_EXTRA);
    p->kgw = q;
    if (kern_scale_points(&p->k, p->W, (size_t) M, p->Ws))
        kern_overflow_error(&p->k);
}

/* The stamp of what pass 1 computes K and A from (see above). */
static void bs_stamp(const bs_pass *p, double *s)
{
    double sw = 0.0, sl = 0.0, sls = 0.0, slam = 0.0, sy = 0.0, sx = 0.0;
    for (size_t i = 0; i < (size_t) p->M * p->D; i++) sw += p->W[i];
    for (size_t i = 0; i < (size_t) p->M * p->M; i++) sl += p->L[i];
    for (int i = 0; i < p->k.nls; i++) sls += p->k.lengthscale[i];
    for (int i = 0; i < p->nlam; i++) slam += p->lam[i];
    for (int i = 0; i < p->N; i++) sy += p->y[i];
    for (size_t i = 0; i < (size_t) p->N * p->D; i++) sx += p->x[i];
    const double v[BS_STAMP] = {1.0, (double) p->N, (double) p->rows,
                                (double) p->M, (double) p->D,
                                (double) p->k.family, p->k.variance, sls,
                                (double) p->k.nls, sw, sl, slam,
                                (double) p->nlam, sy, p->shift, sx};
    memcpy(s, v, sizeof(v));
}

/* The chunk of rows [r0, r0 + c): scaled points, K(W, chunk) in threads
 * (in pieces of fewer than 1024 columns, so that kern_K never checks for
 * interrupts inside a thread), and the per-point lambda, ytil, k_nn. */
static void bs_chunk_kernel(bs_pass *p, int r0, int c)
{
    if (kern_scale_rows(&p->k, p->x, (size_t) p->N, (size_t) r0, (size_t) c, p->xs))
        kern_overflow_error(&p->k);
    bs_kern_threads(&p->k, p->Ws, p->M, p->xs, c, p->nt, p->K);
    for (int i = 0; i < c; i++) {
        p->lc[i] = p->lam[p->nlam == 1 ? 0 : r0 + i];
        p->yc[i] = p->y[r0 + i] - p->shift;
        p->kd[i] = p->k.variance;
    }
}

/* A <- L^-1 K Lambda^-1/2 on the chunk's columns, in threads; returns 1 if
 * a column norm is not finite. */
static int bs_chunk_solve(bs_pass *p, int c)
{
    const int M = p->M, nt = p->nt;
    int bad = 0;
    la_copy(p->A, p->K, (size_t) M * c);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1) reduction(|:bad)
#endif
    for (int t = 0; t < nt; t++) {
        const int j0 = (int) spv_first(c, t, nt), nb = (int) spv_first(c, t + 1, nt) - j0;
        double *Ab = p->A + (size_t) M * j0;
        la_trsm_left(p->L, M, Ab, nb, 'N');
        for (int i = 0; i < nb; i++) {
            const double isl = 1.0 / sqrt(p->lc[j0 + i]);
            double *an = Ab + (size_t) M * i, ss = 0.0;
            for (int m = 0; m < M; m++) {
                an[m] *= isl;
                ss += an[m] * an[m];
            }
            if (!R_FINITE(ss)) bad = 1;
        }
    }
    return bad;
}

/* The chunk of rows from r0: its size, after a check for interrupts and,
 * with `compute`, its kernel matrix and A (bs_chunk_kernel,
 * bs_chunk_solve). */
static int bs_chunk_begin(bs_pass *p, int r0, int compute)
{
    R_CheckUserInterrupt();
    const int c = p->N - r0 < p->rows ? p->N - r0 : p->rows;
    if (compute) {
        bs_chunk_kernel(p, r0, c);
        if (bs_chunk_solve(p, c)) bs_a_error();
    }
    return c;
}

/* Pass 1 over all rows: list(AA, w, yy, kl, trace, sumloglam, n), as the
 * sum of bs_stats over the chunks. */
SEXP ffi_bs_pass_stats(SEXP kern, SEXP W, SEXP x, SEXP L, SEXP lambda,
                       SEXP y, SEXP shift, SEXP work, SEXP rows,
                       SEXP threads)
{
    bs_pass p;
    bs_pass_setup(&p, kern, W, x, L, lambda, y, shift, work, rows, threads);
    const int M = p.M, N = p.N, nt = p.nt;
    const size_t MM = (size_t) M * M, per = MM + M + BS_ACC_EXTRA;
    memset(p.acc, 0, (size_t) nt * per * sizeof(double));
    p.stamp[0] = 0.0;                  /* nothing held while this runs */
    for (int r0 = 0; r0 < N; r0 += p.rows) {
        const int c = bs_chunk_begin(&p, r0, 1);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
        for (int t = 0; t < nt; t++) {
            const int j0 = (int) spv_first(c, t, nt),
                      nb = (int) spv_first(c, t + 1, nt) - j0;
            double *AA = p.acc + per * t, *w = AA + MM, *s = w + M;
            const double *Ab = p.A + (size_t) M * j0;
            for (int i = 0; i < nb; i++) {
                const int j = j0 + i;
                const double isl = 1.0 / sqrt(p.lc[j]), yn = p.yc[j] * isl;
                const double *an = Ab + (size_t) M * i;
                double ss = 0.0;
                for (int m = 0; m < M; m++) {
                    ss += an[m] * an[m];
                    w[m] += an[m] * yn;
                }
                s[0] += yn * yn;
                s[1] += p.kd[j] / p.lc[j];
                s[2] += p.kd[j] / p.lc[j] - ss;
                s[3] += log(p.lc[j]);
            }
            la_syrk(Ab, M, nb, 1.0, 1.0, AA);
        }
    }

    SEXP out = PROTECT(bs_stats_list(M, nt, p.acc, per, p.acc + MM, per, p.acc + MM + M, per,
                                     (double) N));
    /* one chunk: K and A stay for pass 2 of this evaluation */
    if (p.rows >= N && N > 0) bs_stamp(&p, p.stamp);
    UNPROTECT(1);
    return out;
}

/* Pass 2 over all rows, from the M x M pieces E, alpha, vt of bs_value (or
 * bso_value): list(theta, W, glambda, gytil, glambda_points) where theta
 * is the contraction of dF/dK(W, x) and dF/d diag K(x, x) with the kernel
 * derivatives (log variance, log lengthscales), W = dF/dW from K(W, x)
 * (M x D; NULL unless want_W), glambda = sum_n lambda_n dF/dlambda_n (the
 * derivative in the log of a common noise variance), gytil = sum_n
 * dF/dytil_n, and glambda_points the N terms lambda_n dF/dlambda_n when
 * per_point is TRUE (a noise model; else NULL). */
SEXP ffi_bs_pass_grad(SEXP kern, SEXP W, SEXP x, SEXP L, SEXP E, SEXP alpha,
                      SEXP vt, SEXP lambda, SEXP y, SEXP shift, SEXP work,
                      SEXP rows, SEXP threads, SEXP want_W, SEXP per_point)
{
    bs_pass p;
    bs_pass_setup(&p, kern, W, x, L, lambda, y, shift, work, rows, threads);
    const int M = p.M, N = p.N, D = p.D, nt = p.nt;
    bs_check_pieces(E, alpha, vt, M);
    const int wW = chk_flag(want_W, "want_W"), pp = chk_flag(per_point, "per_point");
    const size_t per = (size_t) M * M + M + BS_ACC_EXTRA;

    /* the held K and A of pass 1, when its stamp is this evaluation's */
    int held = 0;
    if (p.rows >= N && N > 0 && p.stamp[0] == 1.0) {
        double s[BS_STAMP];
        bs_stamp(&p, s);
        held = memcmp(s, p.stamp, sizeof(s)) == 0;
    }

    int nprot = 0;
    const int npar = kern_npar(&p.k);
    SEXP theta = PROTECT(allocVector(REALSXP, npar)); nprot++;
    memset(REAL(theta), 0, (size_t) npar * sizeof(double));
    SEXP dW = R_NilValue;
    if (wW) {
        dW = PROTECT(allocMatrix(REALSXP, M, D)); nprot++;
        memset(REAL(dW), 0, (size_t) M * D * sizeof(double));
    }
    SEXP gpts = R_NilValue;
    if (pp) {
        gpts = PROTECT(allocVector(REALSXP, N)); nprot++;
    }
    const double *Ep = REAL_RO(E), *al = REAL_RO(alpha), *vtp = REAL_RO(vt);
    for (int t = 0; t < nt; t++) memset(p.acc + per * t, 0, 2 * sizeof(double));
    for (int r0 = 0; r0 < N; r0 += p.rows) {
        const int c = bs_chunk_begin(&p, r0, !held);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
        for (int t = 0; t < nt; t++) {
            const int j0 = (int) spv_first(c, t, nt),
                      nb = (int) spv_first(c, t + 1, nt) - j0;
            double *Ab = p.A + (size_t) M * j0, *Gb = p.G + (size_t) M * j0,
                   *sums = p.acc + per * t;
            la_gemv('T', Ab, M, nb, vtp, p.mu + j0);
            la_gemm_nn(Ep, M, M, Ab, nb, Gb);
            for (int i = 0; i < nb; i++) {
                const int j = j0 + i;
                const double isl = 1.0 / sqrt(p.lc[j]);
                const double mu = p.mu[j] / isl;
                const double r = (p.yc[j] - mu) / p.lc[j];
                bg_point_adjoint(M, p.K + (size_t) M * j, Gb + (size_t) M * i,
                                 isl, al, r, p.lc[j], p.kd[j], p.gd + j,
                                 p.gl + j, p.gy + j);
                p.gl[j] *= p.lc[j];
                sums[0] += p.gl[j];
                sums[1] += p.gy[j];
            }
        }
        if (pp) la_copy(REAL(gpts) + r0, p.gl, (size_t) c);
        kern_grad_given_work(&p.k, p.Ws, (size_t) M, p.xs, (size_t) c, p.G, p.K,
                             REAL(theta), wW ? REAL(dW) : NULL, nt, p.kgw);
        kern_grad_diag(&p.k, (size_t) c, p.gd, REAL(theta));
    }
    double gl = 0.0, gy = 0.0;
    for (int t = 0; t < nt; t++) {
        gl += p.acc[per * t];
        gy += p.acc[per * t + 1];
    }
    chk_result(REAL(theta), (size_t) npar, "gradient in the kernel parameters");
    if (wW) chk_result(REAL(dW), (size_t) M * D, "gradient in the inducing inputs");
    if (pp) chk_result(REAL(gpts), (size_t) N, "adjoint of lambda");
    if (!R_FINITE(gl)) error("the adjoint of lambda is not finite");
    if (!R_FINITE(gy)) error("the adjoint of ytil is not finite");
    const char *names[] = {"theta", "W", "glambda", "gytil", "glambda_points",
                           ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, theta);
    SET_VECTOR_ELT(out, 1, dW);
    SET_VECTOR_ELT(out, 2, ScalarReal(gl));
    SET_VECTOR_ELT(out, 3, ScalarReal(gy));
    SET_VECTOR_ELT(out, 4, gpts);
    UNPROTECT(nprot);
    return out;
}

/* The doubles of the workspace of both passes for M inducing inputs, D
 * input columns, chunks of `rows` rows and `threads` threads (with one
 * lengthscale per column, the most a kernel has): a + b * rows, so that
 * R/stream.R can find the rows that fit a memory budget. */
SEXP ffi_bs_work(SEXP M, SEXP D, SEXP rows, SEXP threads)
{
    const double m = chk_scalar(M, "M"), d = chk_scalar(D, "D"),
                 r = chk_scalar(rows, "rows");
    if (m < 0 || m > INT_MAX || m != floor(m))
        error("'M' must be a whole number from 0 to %d", INT_MAX);
    if (d < 1 || d > INT_MAX || d != floor(d))
        error("'D' must be a whole number from 1 to %d", INT_MAX);
    if (r < 1 || r > INT_MAX || r != floor(r))
        error("'rows' must be a whole number from 1 to %d", INT_MAX);
    const int nt = bs_threads(threads, (int) r);
    const double need = bs_work_doubles((int) m, (int) d, (int) r, nt, (int) d);
    if (!(need < 4503599627370496.0))
        error("the workspace of M = %.0f inducing inputs, D = %.0f columns and "
              "%.0f rows per chunk is too large to address", m, d, r);
    return ScalarReal(need);
}

/* The predictive distribution of the collapsed models (the latent mean,
 * with the constant `shift` added, and the variance; predict.c,
 * pred_gaussian) at
 * every row of x, in chunks of `rows` rows with the workspace of the
 * passes: P1 = L^-1 K(W, chunk), P2 = LB^-1 P1, mean = P2'v, var = k(x, x)
 * - |P1|^2 + |P2|^2 per point. Nothing is allocated per chunk, so the
 * training inputs of a large fit (PGPR's updates of c, fitted values) are
 * predicted within the fit's budget. list(mean, var). */
SEXP ffi_bs_predict(SEXP kern, SEXP W, SEXP x, SEXP L, SEXP LB, SEXP v,
                    SEXP shift, SEXP work, SEXP rows, SEXP threads)
{
    const double m0 = chk_scalar(shift, "shift");
    chk_real_matrix(W, "W", -1);
    chk_finite(W, "W");
    const int D = ncols(W), M = nrows(W);
    chk_real_matrix(x, "x", D);
    chk_finite(x, "x");
    chk_chol_factor(L, "L", M);
    chk_chol_factor(LB, "LB", M);
    chk_real_vector(v, "v", M);
    chk_finite(v, "v");
    if (!isInteger(rows) || XLENGTH(rows) != 1 || INTEGER(rows)[0] == NA_INTEGER ||
        INTEGER(rows)[0] < 1)
        error("'rows' must be one whole number >= 1");
    bs_pass p;
    chk_kernel(kern, D, &p.k);
    bs_pass_layout(&p, W, x, L, work, rows, threads);
    const int N = p.N, nt = p.nt;
    p.stamp[0] = 0.0;                  /* K and A are overwritten here */
    int nprot = 0;
    SEXP mean = PROTECT(allocVector(REALSXP, N)); nprot++;
    SEXP var = PROTECT(allocVector(REALSXP, N)); nprot++;
    const double *LBp = REAL_RO(LB), *vp = REAL_RO(v);
    double *mp = REAL(mean), *vr = REAL(var);
    for (int r0 = 0; r0 < N; r0 += p.rows) {
        R_CheckUserInterrupt();
        const int c = N - r0 < p.rows ? N - r0 : p.rows;
        if (kern_scale_rows(&p.k, p.x, (size_t) N, (size_t) r0, (size_t) c, p.xs))
            kern_overflow_error(&p.k);
        bs_kern_threads(&p.k, p.Ws, M, p.xs, c, nt, p.K);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
        for (int t = 0; t < nt; t++) {
            const int j0 = (int) spv_first(c, t, nt),
                      nb = (int) spv_first(c, t + 1, nt) - j0;
            double *P1 = p.K + (size_t) M * j0, *P2 = p.A + (size_t) M * j0;
            la_trsm_left(p.L, M, P1, nb, 'N');
            la_copy(P2, P1, (size_t) M * nb);
            la_trsm_left(LBp, M, P2, nb, 'N');
            la_gemv('T', P2, M, nb, vp, mp + r0 + j0);
            for (int i = 0; i < nb; i++) mp[r0 + j0 + i] += m0;
            for (int i = 0; i < nb; i++) {
                const double *a1 = P1 + (size_t) M * i, *a2 = P2 + (size_t) M * i;
                double s1 = 0.0, s2 = 0.0;
                for (int m = 0; m < M; m++) {
                    s1 += a1[m] * a1[m];
                    s2 += a2[m] * a2[m];
                }
                vr[r0 + j0 + i] = p.k.variance - s1 + s2;
            }
        }
    }
    chk_result(mp, (size_t) N, "predictive mean");
    chk_result(vr, (size_t) N, "predictive variance");
    const char *names[] = {"mean", "var", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, mean);
    SET_VECTOR_ELT(out, 1, var);
    UNPROTECT(nprot);
    return out;
}
