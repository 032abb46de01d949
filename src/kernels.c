/*
 * kernels.c: stationary kernels and the contractions of an adjoint with
 * their derivatives.
 *
 * Every kernel here is k(x, x') = variance * g(r), with
 *   r^2 = sum_d ((x_d - x'_d) / l_d)^2
 * and one shared lengthscale (nls = 1) or one per input column (ARD).
 * A family supplies k(r) and h(r) = (dk/dr) / r, which is finite at r = 0
 * for RBF and Matern 3/2, 5/2. Matern 1/2 is not differentiable at r = 0;
 * there h is taken as 0 (the symmetric choice, as in GPy), which is the
 * exact derivative of the diagonal and of the lengthscales there.
 *
 * Chain rule, with s_d = (a_d - b_d) / l_d:
 *   dk / d log variance = k
 *   dk / d log l_d      = -h * s_d^2        (shared l: -h * r^2)
 *   dk / d a_d          =  h * s_d / l_d
 *
 * The bounds return adjoints G = dF/dK; kern_grad turns them into gradients
 * with respect to the kernel parameters and the inputs without building one
 * matrix per parameter (the design of GPy's VarDTC).
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"
#include "kernel_math.h"


int kern_npar(const spv_kernel *k)
{
    return 1 + k->nls;
}

int kern_scale_points(const spv_kernel *k, const double *x, size_t n,
                      double *xs)
{
    return kern_scale_rows(k, x, n, 0, n, xs);
}

int kern_scale_rows(const spv_kernel *k, const double *x, size_t ldx,
                    size_t r0, size_t n, double *xs)
{
    const int D = k->D;
    int ok = 1;
    for (int d = 0; d < D; d++) {
        /* finite: lengthscales are normal numbers (chk_kernel) */
        const double inv = 1.0 / k->lengthscale[k->nls == 1 ? 0 : d];
        const double *xd = x + (size_t) d * ldx + r0;
        for (size_t i = 0; i < n; i++) {
            const double v = xd[i] * inv;
            xs[(size_t) D * i + d] = v;
            if (!R_FINITE(v)) ok = 0;
        }
    }
    return ok ? 0 : 1;
}

void kern_K(const spv_kernel *k, const double *As, size_t nA,
            const double *Bs, size_t nB, double *K)
{
    const int D = k->D;
    for (size_t j = 0; j < nB; j++) {
        if ((j & 1023) == 1023) R_CheckUserInterrupt();
        const double *b = Bs + (size_t) D * j;
        double *Kj = K + nA * j;
        size_t i = 0;
        /* four entries at a time: four independent sums over d instead of
         * one serial chain of D additions per entry */
        for (; i + 4 <= nA; i += 4) {
            const double *a0 = As + (size_t) D * i, *a1 = a0 + D, *a2 = a1 + D,
                         *a3 = a2 + D;
            double r0 = 0.0, r1 = 0.0, r2 = 0.0, r3 = 0.0;
            for (int d = 0; d < D; d++) {
                const double bd = b[d];
                const double s0 = a0[d] - bd, s1 = a1[d] - bd, s2 = a2[d] - bd,
                             s3 = a3[d] - bd;
                r0 += s0 * s0; r1 += s1 * s1; r2 += s2 * s2; r3 += s3 * s3;
            }
            Kj[i] = r0; Kj[i + 1] = r1; Kj[i + 2] = r2; Kj[i + 3] = r3;
        }
        for (; i < nA; i++)
            Kj[i] = sqdist(As + (size_t) D * i, b, D);
        k_of_r2(k->family, k->variance, Kj, nA);
    }
}

void kern_diag(const spv_kernel *k, size_t n, double *kdiag)
{
    for (size_t i = 0; i < n; i++)
        kdiag[i] = k->variance;
}

/* Contraction for a cross-covariance K(A, B) (nA x nB, e.g. Kuf) through
 * H = G o h (elementwise), whose row sums, column sums and product with the
 * B coordinates give the lengthscale and input gradients:
 *   sum_ij H_ij (a_id - b_jd)^2 = sum_i a_id^2 H1_i - 2 sum_i a_id (H B)_id
 *                                 + sum_j b_jd^2 (H'1)_j
 *   dF/da_id = (a_id H1_i - (H B)_id) / l_d
 * so the per-pair work is a few flops (none of them exp when K is given)
 * and the O(nA nB D) part is one BLAS product, done in column blocks so
 * that H is never held whole. Coordinates are centred first (the kernel is
 * translation invariant), which keeps the cancellation in these sums at
 * the scale of the data's spread. Matern 1/2 pairs closer than 1e-4
 * lengthscales, where h = -k/r is large, are accumulated directly.
 *
 * In threads (OpenMP, when the compiler supports it) the columns of B are
 * split into one contiguous block per thread; each thread accumulates its
 * own row sums, H B, variance and direct terms in memory allocated before
 * the threads start, and these are added in thread order afterwards, so a
 * given number of threads always gives the same result. The threads call
 * the BLAS but no R API. */
#define GRAD_BLOCK 256
#define CROSS_DIRECT 1e100
/* thread parts held on the stack (more threads: R_alloc) */
#define KGC_PARTS 64
/* One thread's partial sums over a block of columns of B. */
typedef struct {
    double *rowsum;     /* nA: row sums of H */
    double *P;          /* nA x D: H Bc */
    double *Hb;         /* nA x GRAD_BLOCK workspace */
    double *dls;        /* nls: directly accumulated lengthscale terms */
    double *dAt;        /* D x nA: directly accumulated input terms */
    double dvar;
} kgc_part;

/* The sums of kern_grad_cross over the columns [j0, j1) of B into *p, and
 * colsum[j0:j1); checks for interrupts only when `interrupt` is set (never
 * inside a parallel region). */
static void kgc_cols(const spv_kernel *k, const double *As, size_t nA,
                     const double *Bs, const double *Bc, size_t nB,
                     const double *G, const double *K, int all_direct,
                     size_t j0, size_t j1, int interrupt, double *colsum,
                     kgc_part *p)
{
    const int D = k->D, ard = k->nls > 1;
    const spv_family fam = k->family;
    const double var = k->variance, one = 1.0;
    const int need_r = (K == NULL) || fam != KERN_RBF;
    int iA = (int) nA, iB = (int) nB, id = D;
    double *Hb = p->Hb, *rowsum = p->rowsum, dvar = 0.0;

    for (size_t jb = j0; jb < j1; jb += GRAD_BLOCK) {
        if (interrupt) R_CheckUserInterrupt();
        const size_t nb = (j1 - jb < GRAD_BLOCK) ? j1 - jb : GRAD_BLOCK;
        for (size_t jj = 0; jj < nb; jj++) {
            const size_t j = jb + jj;
            const double *b = Bs + (size_t) D * j;
            const double *Gj = G + nA * j;
            const double *Kj = K ? K + nA * j : NULL;
            double *Hj = Hb + nA * jj, cs = 0.0;
            for (size_t i = 0; i < nA; i++) {
                const double g = Gj[i];
                const double *a = As + (size_t) D * i;
                const double r2 = need_r ? sqdist(a, b, D) : 0.0;
                double h, kv;
                if (Kj) {
                    kv = Kj[i];
                    h = h_from_k(fam, kv, r2);
                } else {
                    kv = k_and_h(fam, var, r2, &h);
                }
                dvar += g * kv;
                if (all_direct || (fam == KERN_MATERN12 && r2 > 0.0 && r2 < 1e-8)) {
                    const double gh = g * h;
                    if (gh != 0.0)      /* then r, and each |s|, is small */
                        for (int d = 0; d < D; d++) {
                            const double s = a[d] - b[d];
                            p->dls[ard ? d : 0] -= gh * s * s;
                            p->dAt[(size_t) D * i + d] += gh * s;
                        }
                    Hj[i] = 0.0;
                    continue;
                }
                const double H = g * h;
                Hj[i] = H;
                rowsum[i] += H;
                cs += H;
            }
            colsum[j] = cs;
        }
        /* P += Hb Bc[jb:jb+nb, ]: nA x D */
        int inb = (int) nb;
        F77_CALL(dgemm)("N", "N", &iA, &id, &inb, &one, Hb, &iA, Bc + jb, &iB,
                        &one, p->P, &iA FCONE FCONE);
    }
    p->dvar += dvar;
}

double kern_grad_work(int D, int nls, double nA, double nB, int nt)
{
    if (nt < 1) nt = 1;
    const double per = nA * (1.0 + 2.0 * D + GRAD_BLOCK) + nls;
    return D + (D * nA + 1.0) + (D * nB + 1.0) + (nB + 1.0) + (nt * per + 1.0);
}

/* `work` holds kern_grad_work(D, nls, nA, nB, nt) doubles, or is NULL (then
 * R_alloc). */
static void kern_grad_cross(const spv_kernel *k, const double *As, size_t nA,
                            const double *Bs, size_t nB, const double *G,
                            const double *K, double *dtheta, double *dA,
                            int nt, double *work)
{
    const int D = k->D, ard = k->nls > 1;

    if (nt < 1) nt = 1;
    if (work == NULL)
        work = la_alloc((size_t) kern_grad_work(D, k->nls, (double) nA, (double) nB, nt));
    double *ctr = work;
    for (int d = 0; d < D; d++) {
        double s = 0.0;                 /* the mean, without overflow */
        for (size_t j = 0; j < nB; j++) s += Bs[(size_t) D * j + d] / (double) nB;
        ctr[d] = s;
    }
    /* centred coordinates in R layout: Ac nA x D, Bc nB x D. Beyond
     * CROSS_DIRECT (scaled units) their squares in the sums below could
     * overflow (and Inf x 0 is NaN): every pair is then accumulated
     * directly, skipping the pairs whose kernel derivative is 0. */
    double *Ac = ctr + D;
    double *Bc = Ac + ((size_t) D * nA + 1);
    double big = 0.0;
    for (int d = 0; d < D; d++) {
        for (size_t i = 0; i < nA; i++) {
            Ac[i + nA * d] = As[(size_t) D * i + d] - ctr[d];
            if (!(fabs(Ac[i + nA * d]) <= big)) big = fabs(Ac[i + nA * d]);
        }
        for (size_t j = 0; j < nB; j++) {
            Bc[j + nB * d] = Bs[(size_t) D * j + d] - ctr[d];
            if (!(fabs(Bc[j + nB * d]) <= big)) big = fabs(Bc[j + nB * d]);
        }
    }
    const int all_direct = !(big <= CROSS_DIRECT);
    double *colsum = Bc + ((size_t) D * nB + 1);

    /* the threads' partial sums, all in the workspace (and zeroed) here */
    const size_t per = nA * (1 + 2 * (size_t) D + GRAD_BLOCK) + (size_t) k->nls;
    double *buf = colsum + (nB + 1);
    memset(buf, 0, (size_t) nt * per * sizeof(double));
    kgc_part part_small[KGC_PARTS];
    kgc_part *part = nt <= KGC_PARTS ? part_small :
        (kgc_part *) R_alloc((size_t) nt, sizeof(kgc_part));
    for (int t = 0; t < nt; t++) {
        double *q = buf + (size_t) t * per;
        part[t].rowsum = q;
        part[t].P = q + nA;
        part[t].dAt = q + nA * (1 + (size_t) D);
        part[t].Hb = q + nA * (1 + 2 * (size_t) D);
        part[t].dls = q + nA * (1 + 2 * (size_t) D + GRAD_BLOCK);
        part[t].dvar = 0.0;
    }
    if (nt == 1) {
        kgc_cols(k, As, nA, Bs, Bc, nB, G, K, all_direct, 0, nB, 1, colsum,
                 part);
    } else {
        R_CheckUserInterrupt();
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
        for (int t = 0; t < nt; t++)
            kgc_cols(k, As, nA, Bs, Bc, nB, G, K, all_direct,
                     spv_first(nB, t, nt), spv_first(nB, t + 1, nt), 0,
                     colsum, part + t);
        /* the threads' sums, added in thread order into the first */
        for (int t = 1; t < nt; t++) {
            for (size_t i = 0; i < nA; i++)
                part[0].rowsum[i] += part[t].rowsum[i];
            for (size_t i = 0; i < (size_t) D * nA; i++) {
                part[0].P[i] += part[t].P[i];
                part[0].dAt[i] += part[t].dAt[i];
            }
            for (int q = 0; q < k->nls; q++)
                part[0].dls[q] += part[t].dls[q];
            part[0].dvar += part[t].dvar;
        }
    }
    const double *rowsum = part[0].rowsum, *P = part[0].P,
                 *dls_direct = part[0].dls, *dAt_direct = part[0].dAt;

    dtheta[0] += part[0].dvar;
    for (int d = 0; d < D; d++) {
        const double *ad = Ac + nA * (size_t) d, *bd = Bc + nB * (size_t) d,
                     *pd = P + nA * (size_t) d;
        double sa2 = 0.0, sap = 0.0, sb2 = 0.0;
        if (!all_direct) {
            for (size_t i = 0; i < nA; i++) {
                sa2 += ad[i] * ad[i] * rowsum[i];
                sap += ad[i] * pd[i];
            }
            for (size_t j = 0; j < nB; j++) sb2 += bd[j] * bd[j] * colsum[j];
        }
        dtheta[1 + (ard ? d : 0)] -= sa2 - 2.0 * sap + sb2;
        if (dA) {
            const double inv = 1.0 / k->lengthscale[ard ? d : 0];
            double *dAd = dA + nA * (size_t) d;
            for (size_t i = 0; i < nA; i++)
                dAd[i] += ((all_direct ? 0.0 : ad[i] * rowsum[i] - pd[i]) +
                           dAt_direct[(size_t) D * i + d]) * inv;
        }
    }
    for (int p = 0; p < k->nls; p++)
        dtheta[1 + p] += dls_direct[p];
}

void kern_grad_given(const spv_kernel *k, const double *As, size_t nA,
                     const double *Bs, size_t nB, const double *G,
                     const double *K, double *dtheta, double *dA, int nt)
{
    if (nA == 0 || nB == 0) return;
    kern_grad_cross(k, As, nA, Bs, nB, G, K, dtheta, dA, nt, NULL);
}

void kern_grad_given_work(const spv_kernel *k, const double *As, size_t nA,
                          const double *Bs, size_t nB, const double *G,
                          const double *K, double *dtheta, double *dA, int nt,
                          double *work)
{
    if (nA == 0 || nB == 0) return;
    kern_grad_cross(k, As, nA, Bs, nB, G, K, dtheta, dA, nt, work);
}

void kern_grad(const spv_kernel *k, const double *As, size_t nA,
               const double *Bs, size_t nB, const double *G,
               double *dtheta, double *dA, int nt)
{
    const int D = k->D, ard = k->nls > 1;
    const spv_family fam = k->family;
    const double var = k->variance;
    const int sym = (Bs == NULL);
    if (nA == 0 || (!sym && nB == 0)) return;   /* nothing to contract */
    if (!sym) {
        kern_grad_cross(k, As, nA, Bs, nB, G, NULL, dtheta, dA, nt, NULL);
        return;
    }
    Bs = As;
    nB = nA;
    /* dA accumulated D x nA (contiguous per point), added in R layout last */
    double *dAt = NULL;
    if (dA) {
        dAt = (double *) R_alloc((size_t) D * nA, sizeof(double));
        memset(dAt, 0, (size_t) D * nA * sizeof(double));
    }
    double *dls = (double *) R_alloc((size_t) k->nls, sizeof(double));
    memset(dls, 0, (size_t) k->nls * sizeof(double));
    double dvar = 0.0;

    for (size_t j = 0; j < nB; j++) {
        if ((j & 1023) == 1023) R_CheckUserInterrupt();
        const double *b = Bs + (size_t) D * j;
        const double *Gj = G + nA * j;
        for (size_t i = 0; i < nA; i++) {
            const double g = Gj[i];
            /* in K(A, A) the point a_i also enters K_ji */
            const double gA = sym ? g + G[j + nA * i] : g;
            if (g == 0.0 && gA == 0.0) continue;
            const double *a = As + (size_t) D * i;
            double h;
            const double r2 = sqdist(a, b, D);
            const double kv = k_and_h(fam, var, r2, &h);
            dvar += g * kv;
            if (h == 0.0) continue;     /* also r = Inf: h r^2 -> 0 */
            if (!ard) {
                dls[0] -= g * h * r2;
            }
            if (ard || dAt) {
                double *dAi = dAt ? dAt + (size_t) D * i : NULL;
                const double gh = g * h, gAh = gA * h;
                for (int d = 0; d < D; d++) {
                    const double s = a[d] - b[d];
                    if (ard) dls[d] -= gh * s * s;
                    if (dAi) dAi[d] += gAh * s;
                }
            }
        }
    }
    dtheta[0] += dvar;
    for (int p = 0; p < k->nls; p++)
        dtheta[1 + p] += dls[p];
    if (dA) {
        /* s_d above is in scaled units: divide by l_d once per entry */
        for (int d = 0; d < D; d++) {
            const double inv = 1.0 / k->lengthscale[ard ? d : 0];
            double *dAd = dA + nA * (size_t) d;
            for (size_t i = 0; i < nA; i++)
                dAd[i] += dAt[(size_t) D * i + d] * inv;
        }
    }
}

void kern_grad_diag(const spv_kernel *k, size_t n, const double *g,
                    double *dtheta)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += g[i];
    dtheta[0] += k->variance * s;
}

/* ---- .Call entry points ----------------------------------------------- */

/* The error of an input divided by its lengthscale overflowing. */
void kern_overflow_error(const spv_kernel *k)
{
    double lmin = k->lengthscale[0];
    for (int p = 1; p < k->nls; p++)
        if (k->lengthscale[p] < lmin) lmin = k->lengthscale[p];
    error("the inputs divided by the kernel lengthscale overflow: a "
          "lengthscale of %g is too small for inputs of this size", lmin);
}

/* Shared by the entry points that take a kernel and one or two input
 * matrices (x: n x D; y: m x D or NULL for K(x, x)): validates them and
 * returns the scaled points; *ys is NULL when y is NULL. */
static void kern_args(SEXP kern, SEXP x, SEXP y, spv_kernel *k, double **xs,
                      double **ys)
{
    chk_real_matrix(x, "x", -1);
    chk_finite(x, "x");
    const int D = ncols(x);
    if (!isNull(y)) {
        chk_real_matrix(y, "y", D);
        chk_finite(y, "y");
    }
    chk_kernel(kern, D, k);
    *xs = la_alloc((size_t) D * nrows(x));
    int over = kern_scale_points(k, REAL_RO(x), (size_t) nrows(x), *xs);
    *ys = NULL;
    if (!isNull(y)) {
        *ys = la_alloc((size_t) D * nrows(y));
        over |= kern_scale_points(k, REAL_RO(y), (size_t) nrows(y), *ys);
    }
    if (over) kern_overflow_error(k);
}

/* K(x, y), or K(x, x) when y is NULL. x: n x D, y: m x D. */
SEXP ffi_kern_matrix(SEXP kern, SEXP x, SEXP y)
{
    spv_kernel k;
    double *xs, *ys;
    kern_args(kern, x, y, &k, &xs, &ys);
    const size_t n = (size_t) nrows(x), m = ys ? (size_t) nrows(y) : n;
    SEXP K = PROTECT(allocMatrix(REALSXP, (int) n, (int) m));
    kern_K(&k, xs, n, ys ? ys : xs, m, REAL(K));
    UNPROTECT(1);
    return K;
}

/* diag K(x, x) */
SEXP ffi_kern_diag(SEXP kern, SEXP x)
{
    chk_real_matrix(x, "x", -1);
    chk_finite(x, "x");
    spv_kernel k;
    chk_kernel(kern, ncols(x), &k);
    SEXP out = PROTECT(allocVector(REALSXP, nrows(x)));
    kern_diag(&k, (size_t) nrows(x), REAL(out));
    UNPROTECT(1);
    return out;
}

/* The two contraction entry points: validate, allocate, delegate. K is
 * R_NilValue, or the kernel matrix K(x, y) the caller already holds. The
 * columns of a cross-covariance are split over `threads` threads; K(x, x)
 * is contracted in one. */
static SEXP kern_grad_entry(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP K,
                            SEXP want_x, int threads)
{
    spv_kernel k;
    double *xs, *ys;
    kern_args(kern, x, y, &k, &xs, &ys);
    const int n = nrows(x), m = ys ? nrows(y) : n, D = ncols(x);
    const int nt = ys ? spv_threads(threads, (size_t) m) : 1;
    chk_real_matrix(G, "G", m);
    if (nrows(G) != n)
        error("'G' must have %d rows", n);
    chk_finite(G, "G");
    if (!isNull(K)) {
        chk_real_matrix(K, "K", m);
        if (nrows(K) != n)
            error("'K' must have %d rows", n);
        chk_finite(K, "K");
    }
    const int wx = chk_flag(want_x, "want_x");
    int nprot = 0;
    SEXP theta = PROTECT(allocVector(REALSXP, kern_npar(&k))); nprot++;
    memset(REAL(theta), 0, (size_t) kern_npar(&k) * sizeof(double));
    SEXP dx = R_NilValue;
    if (wx) {
        dx = PROTECT(allocMatrix(REALSXP, n, D)); nprot++;
        memset(REAL(dx), 0, (size_t) n * D * sizeof(double));
    }
    if (isNull(K))
        kern_grad(&k, xs, (size_t) n, ys, (size_t) m, REAL(G), REAL(theta),
                  wx ? REAL(dx) : NULL, nt);
    else
        kern_grad_given(&k, xs, (size_t) n, ys, (size_t) m, REAL(G), REAL(K),
                        REAL(theta), wx ? REAL(dx) : NULL, nt);
    chk_result(REAL(theta), (size_t) kern_npar(&k),
               "gradient in the kernel parameters");
    if (wx) chk_result(REAL(dx), (size_t) n * D, "gradient in the inputs");
    const char *names[] = {"theta", "x", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, theta);
    SET_VECTOR_ELT(out, 1, dx);
    UNPROTECT(nprot);
    return out;
}

/* Contraction of the adjoint G (n x m, or n x n when y is NULL) with the
 * derivatives of K(x, y): list(theta = d/d(log variance, log lengthscales),
 * x = d/dx (n x D) when want_x is TRUE). */
SEXP ffi_kern_grad(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP want_x)
{
    return kern_grad_entry(kern, x, y, G, R_NilValue, want_x, 1);
}

/* As ffi_kern_grad for a cross-covariance, given the kernel matrix
 * K = K(x, y) (n x m) that the caller already holds, which saves
 * recomputing its exponentials. */
SEXP ffi_kern_grad_given(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP K,
                         SEXP want_x)
{
    if (isNull(y))
        error("'y' must be given: use ffi_kern_grad for K(x, x)");
    if (isNull(K))
        error("'K' must be the kernel matrix K(x, y)");
    return kern_grad_entry(kern, x, y, G, K, want_x, 1);
}

/* As ffi_kern_grad (K = R_NilValue) or ffi_kern_grad_given (K = K(x, y))
 * for a cross-covariance, with the columns (the rows of y) split over
 * `threads` OpenMP threads. */
SEXP ffi_kern_grad_threads(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP K,
                           SEXP want_x, SEXP threads)
{
    if (isNull(y))
        error("'y' must be given: K(x, x) is contracted in one thread");
    if (!isInteger(threads) || XLENGTH(threads) != 1 ||
        INTEGER(threads)[0] == NA_INTEGER || INTEGER(threads)[0] < 1)
        error("'threads' must be one whole number >= 1");
    return kern_grad_entry(kern, x, y, G, K, want_x, INTEGER(threads)[0]);
}

/* Contraction of the adjoint g (length n) with d diag K / d theta. */
SEXP ffi_kern_grad_diag(SEXP kern, SEXP x, SEXP g)
{
    chk_real_matrix(x, "x", -1);
    spv_kernel k;
    chk_kernel(kern, ncols(x), &k);
    chk_real_vector(g, "g", nrows(x));
    chk_finite(g, "g");
    SEXP theta = PROTECT(allocVector(REALSXP, kern_npar(&k)));
    memset(REAL(theta), 0, (size_t) kern_npar(&k) * sizeof(double));
    kern_grad_diag(&k, (size_t) nrows(x), REAL(g), REAL(theta));
    chk_result(REAL(theta), (size_t) kern_npar(&k),
               "gradient in the kernel parameters");
    UNPROTECT(1);
    return theta;
}
