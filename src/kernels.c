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
#include "spv.h"

#define SQRT3 1.7320508075688772
#define SQRT5 2.2360679774997898

int kern_npar(const spv_kernel *k)
{
    return 1 + k->nls;
}

void kern_scale_points(const spv_kernel *k, const double *x, size_t n,
                       double *xs)
{
    const int D = k->D;
    for (int d = 0; d < D; d++) {
        const double inv = 1.0 / k->lengthscale[k->nls == 1 ? 0 : d];
        const double *xd = x + (size_t) d * n;
        for (size_t i = 0; i < n; i++)
            xs[(size_t) D * i + d] = xd[i] * inv;
    }
}

static inline double sqdist(const double *a, const double *b, int D)
{
    double r2 = 0.0;
    for (int d = 0; d < D; d++) {
        const double s = a[d] - b[d];
        r2 += s * s;
    }
    return r2;
}

/* k(r) from r^2, without the derivative. */
static inline double k_of_r2(spv_family fam, double var, double r2)
{
    double r;
    switch (fam) {
    case KERN_RBF:
        return var * exp(-0.5 * r2);
    case KERN_MATERN12:
        return var * exp(-sqrt(r2));
    case KERN_MATERN32:
        r = SQRT3 * sqrt(r2);
        return var * (1.0 + r) * exp(-r);
    case KERN_MATERN52:
        r = SQRT5 * sqrt(r2);
        return var * (1.0 + r + r * r / 3.0) * exp(-r);
    }
    return NA_REAL; /* not reached: families are validated at entry */
}

/* k(r) and h(r) = (dk/dr) / r from r^2. */
static inline double k_and_h(spv_family fam, double var, double r2, double *h)
{
    double r, e, kv;
    switch (fam) {
    case KERN_RBF:
        kv = var * exp(-0.5 * r2);
        *h = -kv;
        return kv;
    case KERN_MATERN12:
        r = sqrt(r2);
        kv = var * exp(-r);
        *h = r > 0.0 ? -kv / r : 0.0;
        return kv;
    case KERN_MATERN32:
        r = SQRT3 * sqrt(r2);
        e = exp(-r);
        *h = -3.0 * var * e;
        return var * (1.0 + r) * e;
    case KERN_MATERN52:
        r = SQRT5 * sqrt(r2);
        e = exp(-r);
        *h = -(5.0 / 3.0) * var * (1.0 + r) * e;
        return var * (1.0 + r + r * r / 3.0) * e;
    }
    *h = NA_REAL;
    return NA_REAL;
}

void kern_K(const spv_kernel *k, const double *As, size_t nA,
            const double *Bs, size_t nB, double *K)
{
    const int D = k->D;
    const spv_family fam = k->family;
    const double var = k->variance;
    for (size_t j = 0; j < nB; j++) {
        if ((j & 1023) == 1023) R_CheckUserInterrupt();
        const double *b = Bs + (size_t) D * j;
        double *Kj = K + nA * j;
        for (size_t i = 0; i < nA; i++)
            Kj[i] = k_of_r2(fam, var, sqdist(As + (size_t) D * i, b, D));
    }
}

void kern_diag(const spv_kernel *k, size_t n, double *kdiag)
{
    for (size_t i = 0; i < n; i++)
        kdiag[i] = k->variance;
}

void kern_grad(const spv_kernel *k, const double *As, size_t nA,
               const double *Bs, size_t nB, const double *G,
               double *dtheta, double *dA)
{
    const int D = k->D, ard = k->nls > 1;
    const spv_family fam = k->family;
    const double var = k->variance;
    const int sym = (Bs == NULL);
    if (sym) {
        Bs = As;
        nB = nA;
    }
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
    *xs = (double *) R_alloc((size_t) D * nrows(x) + 1, sizeof(double));
    kern_scale_points(k, REAL(x), (size_t) nrows(x), *xs);
    *ys = NULL;
    if (!isNull(y)) {
        *ys = (double *) R_alloc((size_t) D * nrows(y) + 1, sizeof(double));
        kern_scale_points(k, REAL(y), (size_t) nrows(y), *ys);
    }
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

/* Contraction of the adjoint G (n x m, or n x n when y is NULL) with the
 * derivatives of K(x, y): list(theta = d/d(log variance, log lengthscales),
 * x = d/dx (n x D) when want_x is TRUE). */
SEXP ffi_kern_grad(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP want_x)
{
    spv_kernel k;
    double *xs, *ys;
    kern_args(kern, x, y, &k, &xs, &ys);
    const int n = nrows(x), m = ys ? nrows(y) : n, D = ncols(x);
    chk_real_matrix(G, "G", m);
    if (nrows(G) != n)
        error("'G' must have %d rows", n);
    chk_finite(G, "G");
    const int wx = chk_flag(want_x, "want_x");
    int nprot = 0;
    SEXP theta = PROTECT(allocVector(REALSXP, kern_npar(&k))); nprot++;
    memset(REAL(theta), 0, (size_t) kern_npar(&k) * sizeof(double));
    SEXP dx = R_NilValue;
    if (wx) {
        dx = PROTECT(allocMatrix(REALSXP, n, D)); nprot++;
        memset(REAL(dx), 0, (size_t) n * D * sizeof(double));
    }
    kern_grad(&k, xs, (size_t) n, ys, (size_t) m, REAL(G), REAL(theta),
              wx ? REAL(dx) : NULL);
    const char *names[] = {"theta", "x", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, theta);
    SET_VECTOR_ELT(out, 1, dx);
    UNPROTECT(nprot);
    return out;
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
    UNPROTECT(1);
    return theta;
}
