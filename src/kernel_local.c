/*
 * kernel_local.c: the entries of a kernel matrix that a Vecchia
 * approximation reads, and the contraction of their adjoint.
 *
 * Point c of a block conditions on its neighbours N(c); the likelihood of
 * sgpr(neighbours = K) (src/vecchia.c) reads the kernel on S_c = (N(c), c)
 * only, K(S_c, S_c), and returns its adjoint G_c = dF/dK(S_c, S_c). These
 * routines compute the blocks and contract the adjoints with the kernel
 * derivatives, so that the likelihood never sees kernel parameters (the
 * adjoint design of kernels.c). Only the kernel parameters get a gradient:
 * the training inputs are fixed.
 *
 * Layout: block c is (K+1) x (K+1), column-major with leading dimension
 * K+1, rows and columns in the order of S_c (the point itself last, at
 * index |N(c)|); entries beyond |S_c| are 0. Cost: (K+1)(K+2)/2 kernel
 * evaluations per point.
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "spv.h"
#include "kernel_math.h"

/* S = (neighbours of c, c) as 0-based local indices; returns |N(c)|. */
static int kl_set(const int *nbl, int K, int c, int *S)
{
    const int *pc = nbl + (size_t) K * c;
    int k = 0;
    while (k < K && pc[k] > 0) {
        S[k] = pc[k] - 1;
        k++;
    }
    S[k] = c;
    return k;
}

void kern_local_range(const spv_kernel *k, const double *xs, const int *nbl,
                      int K, int c0, int c1, double *Kloc, int *S, double *r2,
                      int lower)
{
    const int D = k->D, K1 = K + 1;
    const spv_family fam = k->family;
    const double var = k->variance;
    for (int c = c0; c < c1; c++) {
        if ((c & 1023) == 1023) R_CheckUserInterrupt();
        double *B = Kloc + (size_t) K1 * K1 * (c - c0);
        if (!lower) memset(B, 0, (size_t) K1 * K1 * sizeof(double));
        const int kc = kl_set(nbl, K, c, S);
        /* the squared distances of the strict lower triangle, then the
         * kernel over them in one loop (no branch on the family per
         * entry), then the upper triangle and the diagonal */
        size_t n = 0;
        for (int q = 0; q < kc; q++) {
            const double *xq = xs + (size_t) D * S[q];
            for (int p = q + 1; p <= kc; p++) r2[n++] = sqdist(xs + (size_t) D * S[p], xq, D);
        }
        k_of_r2(fam, var, r2, n);
        n = 0;
        for (int q = 0; q <= kc; q++) {
            double *Bq = B + (size_t) K1 * q;
            Bq[q] = var;
            for (int p = q + 1; p <= kc; p++) Bq[p] = r2[n++];
        }
        if (!lower) {           /* the upper triangle as a copy of the lower */
            for (int q = 0; q <= kc; q++)
                for (int p = q + 1; p <= kc; p++)
                    B[q + (size_t) K1 * p] = B[p + (size_t) K1 * q];
        }
    }
}

void kern_local(const spv_kernel *k, const double *xs, const int *nbl, int K,
                int no, double *Kloc)
{
    const int K1 = K + 1;
    int *S = (int *) R_alloc((size_t) K1, sizeof(int));
    double *r2 = (double *) R_alloc((size_t) K1 * K1 + 1, sizeof(double));
    kern_local_range(k, xs, nbl, K, 0, no, Kloc, S, r2, 0);
}

void kern_grad_local_acc(const spv_kernel *k, const double *xs, const int *nbl,
                         int K, int c0, int c1, const double *G, int fac,
                         const double *Kloc, double *dvar_io, double *dls, int *S,
                         double *s)
{
    const int D = k->D, K1 = K + 1, ard = k->nls > 1;
    const spv_family fam = k->family;
    const double var = k->variance;
    double dvar = *dvar_io;
    for (int c = c0; c < c1; c++) {
        if ((c & 1023) == 1023) R_CheckUserInterrupt();
        /* the block G_c, or its factors t, beta~ and dbar */
        const double *Gc = fac ? NULL : G + (size_t) K1 * K1 * c;
        const double *ft = fac ? G + (size_t) (2 * K1 + 1) * c : NULL;
        const double *fb = fac ? ft + K1 : NULL, fd = fac ? ft[2 * K1] : 0.0;
        const double *Kc = Kloc ? Kloc + (size_t) K1 * K1 * (c - c0) : NULL;
        const int kc = kl_set(nbl, K, c, S);
        for (int q = 0; q <= kc; q++) {
            const double *xq = xs + (size_t) D * S[q];
            const double *Gq = fac ? NULL : Gc + (size_t) K1 * q;
            dvar += (fac ? SPV_VF_H(fd, ft, fb, q, q) : Gq[q]) * k->variance;
            for (int p = q + 1; p <= kc; p++) {
                const double g = fac ? SPV_VF_H(fd, ft, fb, p, q) + SPV_VF_H(fd, ft, fb, q, p)
                                     : Gq[p] + Gc[q + (size_t) K1 * p];
                if (g == 0.0) continue;
                const double *xp = xs + (size_t) D * S[p];
                double r2 = 0.0;
                for (int d = 0; d < D; d++) {
                    s[d] = xp[d] - xq[d];
                    r2 += s[d] * s[d];
                }
                double h, v;
                if (Kc) {
                    v = Kc[p + (size_t) K1 * q];
                    h = h_from_k(fam, v, r2);
                } else if (fac) {
                    /* the numbers of the route with the blocks: the value
                     * as kern_local() forms it, h from it */
                    v = k_of_r2_one(fam, var, r2);
                    h = h_from_k(fam, v, r2);
                } else {
                    v = k_and_h(fam, var, r2, &h);
                }
                dvar += g * v;
                if (h == 0.0) continue;
                const double gh = g * h;
                if (!ard) {
                    dls[0] -= gh * r2;
                } else {
                    for (int d = 0; d < D; d++) dls[d] -= gh * s[d] * s[d];
                }
            }
        }
    }
    *dvar_io = dvar;
}

void kern_grad_local(const spv_kernel *k, const double *xs, const int *nbl,
                     int K, int no, const double *G, int fac,
                     const double *Kloc, double *dtheta)
{
    int *S = (int *) R_alloc((size_t) K + 1, sizeof(int));
    double *dls = (double *) R_alloc((size_t) k->nls, sizeof(double));
    /* the coordinate differences of one pair, kept for the lengthscales'
     * terms so that each is formed once (the same arithmetic as sqdist()) */
    double *s = (double *) R_alloc((size_t) k->D + 1, sizeof(double));
    memset(dls, 0, (size_t) k->nls * sizeof(double));
    double dvar = 0.0;
    kern_grad_local_acc(k, xs, nbl, K, 0, no, G, fac, Kloc, &dvar, dls, S, s);
    dtheta[0] += dvar;
    for (int p = 0; p < k->nls; p++) dtheta[1 + p] += dls[p];
}

/* ---- a single kernel or a sum of single kernels --------------------------- */

void kern_klocal_args(SEXP kern, SEXP x, spv_klocal *kl)
{
    /* list(sum code, list(parts)) (R/ffi.R, .ffi_kernel()), every part a
     * single kernel; else a single kernel */
    SEXP parts = R_NilValue;
    if (TYPEOF(kern) == VECSXP && XLENGTH(kern) == 2) {
        SEXP op = VECTOR_ELT(kern, 0);
        parts = VECTOR_ELT(kern, 1);
        if (!isInteger(op) || XLENGTH(op) != 1 || INTEGER(op)[0] != 1 ||
            TYPEOF(parts) != VECSXP || XLENGTH(parts) < 2)
            error("'kern' must be a single kernel or a sum of single kernels");
        for (R_xlen_t j = 0; j < XLENGTH(parts); j++) {
            SEXP pj = VECTOR_ELT(parts, j);
            if (TYPEOF(pj) == VECSXP && XLENGTH(pj) == 2)
                error("'kern' must be a single kernel or a sum of single kernels");
        }
    }
    kl->np = isNull(parts) ? 1 : (int) XLENGTH(parts);
    kl->k = (spv_kernel *) R_alloc((size_t) kl->np, sizeof(spv_kernel));
    kl->xs = (double **) R_alloc((size_t) kl->np, sizeof(double *));
    kl->npar = 0;
    for (int j = 0; j < kl->np; j++) {
        kl->xs[j] = kern_local_args(isNull(parts) ? kern : VECTOR_ELT(parts, j), x, kl->k + j);
        kl->npar += kern_npar(kl->k + j);
    }
}

void kern_klocal_range(const spv_klocal *kl, const int *nbl, int K, int c0,
                       int c1, double *Kloc, double *Kparts, int *S, double *r2)
{
    if (kl->np == 1) {
        kern_local_range(kl->k, kl->xs[0], nbl, K, c0, c1, Kloc, S, r2, 1);
        return;
    }
    const size_t K1 = (size_t) K + 1, stride = K1 * K1 * (size_t) (c1 - c0);
    for (int j = 0; j < kl->np; j++)
        kern_local_range(kl->k + j, kl->xs[j], nbl, K, c0, c1, Kparts + stride * j, S, r2, 1);
    /* the sum of the parts in order (as .kern_local() adds them in R, so
     * that the numbers are the same), over the entries written: the
     * diagonal and strict lower triangle of each |S_c| x |S_c| block */
    for (int c = c0; c < c1; c++) {
        const int kc = kl_set(nbl, K, c, S);
        const size_t o = K1 * K1 * (c - c0);
        for (int q = 0; q <= kc; q++) {
            for (int p = q; p <= kc; p++) {
                const size_t e = o + p + K1 * q;
                double v = Kparts[e];
                for (int j = 1; j < kl->np; j++) v += Kparts[stride * j + e];
                Kloc[e] = v;
            }
        }
    }
}

void kern_klocal_grad_acc(const spv_klocal *kl, const int *nbl, int K, int c0,
                          int c1, const double *G, const double *Kloc,
                          const double *Kparts, double *dtheta, int *S, double *s)
{
    const size_t K1 = (size_t) K + 1, stride = K1 * K1 * (size_t) (c1 - c0);
    int off = 0;
    for (int j = 0; j < kl->np; j++) {
        const double *Kj = kl->np == 1 ? Kloc : Kparts != NULL ? Kparts + stride * j : NULL;
        kern_grad_local_acc(kl->k + j, kl->xs[j], nbl, K, c0, c1, G, 1, Kj,
                            dtheta + off, dtheta + off + 1, S, s);
        off += kern_npar(kl->k + j);
    }
}

/* ---- .Call entry points ------------------------------------------------ */

/* Scaled points of x (nu x D) and the kernel, checked. */
double *kern_local_args(SEXP kern, SEXP x, spv_kernel *k)
{
    chk_real_matrix(x, "x", -1);
    chk_finite(x, "x");
    chk_kernel(kern, ncols(x), k);
    double *xs = (double *) R_alloc((size_t) ncols(x) * nrows(x) + 1, sizeof(double));
    if (kern_scale_points(k, REAL(x), (size_t) nrows(x), xs)) kern_overflow_error(k);
    return xs;
}

/* The local blocks K(S_c, S_c) of the first ncol(nbl) rows of x:
 * a (K+1)^2 x no matrix, one block per column. */
SEXP ffi_kern_local(SEXP kern, SEXP x, SEXP nbl)
{
    spv_kernel k;
    const double *xs = kern_local_args(kern, x, &k);
    chk_local_index(nbl, "nbl", nrows(x));
    const int K = nrows(nbl), no = ncols(nbl);
    SEXP out = PROTECT(allocMatrix(REALSXP, (K + 1) * (K + 1), no));
    kern_local(&k, xs, INTEGER(nbl), K, no, REAL(out));
    UNPROTECT(1);
    return out;
}

/* The contraction of the adjoint G of the local blocks ((K+1)^2 x no) with
 * the kernel derivatives: d/d(log variance, log lengthscales), or with
 * fac, of the adjoint given by its factors ((2K+3) x no, src/vecchia.c).
 * Kloc: the blocks themselves, or NULL. */
static SEXP kl_grad_call(SEXP kern, SEXP x, SEXP nbl, SEXP G, SEXP Kloc, int fac)
{
    spv_kernel k;
    const double *xs = kern_local_args(kern, x, &k);
    chk_local_index(nbl, "nbl", nrows(x));
    const int K = nrows(nbl), no = ncols(nbl);
    const int gr = fac ? 2 * (K + 1) + 1 : (K + 1) * (K + 1);
    chk_real_matrix(G, "G", no);
    if (nrows(G) != gr) error("'G' must have %d rows", gr);
    chk_finite(G, "G");
    if (!isNull(Kloc)) {
        chk_real_matrix(Kloc, "Kloc", no);
        if (nrows(Kloc) != (K + 1) * (K + 1))
            error("'Kloc' must have %d rows", (K + 1) * (K + 1));
    }
    SEXP theta = PROTECT(allocVector(REALSXP, kern_npar(&k)));
    memset(REAL(theta), 0, (size_t) kern_npar(&k) * sizeof(double));
    kern_grad_local(&k, xs, INTEGER(nbl), K, no, REAL(G), fac,
                    isNull(Kloc) ? NULL : REAL(Kloc), REAL(theta));
    chk_result(REAL(theta), (size_t) kern_npar(&k),
               "gradient in the kernel parameters");
    UNPROTECT(1);
    return theta;
}

SEXP ffi_kern_local_grad(SEXP kern, SEXP x, SEXP nbl, SEXP G, SEXP Kloc)
{
    return kl_grad_call(kern, x, nbl, G, Kloc, 0);
}

SEXP ffi_kern_local_grad_fac(SEXP kern, SEXP x, SEXP nbl, SEXP G, SEXP Kloc)
{
    return kl_grad_call(kern, x, nbl, G, Kloc, 1);
}

/* k(x_c, x_j) for the candidates j = cand[, c] (1-based rows of x, 0 =
 * none) of the first ncol(cand) rows c of x: a Kc x no matrix (0 where
 * there is no candidate). */
SEXP ffi_kern_local_cross(SEXP kern, SEXP x, SEXP cand)
{
    spv_kernel k;
    const double *xs = kern_local_args(kern, x, &k);
    const int nu = nrows(x), D = ncols(x);
    if (!isInteger(cand) || !isMatrix(cand))
        error("'cand' must be an integer matrix");
    const int Kc = nrows(cand), no = ncols(cand);
    if (no > nu) error("'cand' has more columns than 'x' has rows");
    const int *pc = INTEGER(cand);
    SEXP out = PROTECT(allocMatrix(REALSXP, Kc, no));
    double *o = REAL(out);
    for (int c = 0; c < no; c++) {
        for (int j = 0; j < Kc; j++) {
            const int v = pc[(size_t) Kc * c + j];
            if (v == NA_INTEGER || v < 0 || v > nu)
                error("'cand' must hold row numbers in 0..%d", nu);
            double h;
            o[(size_t) Kc * c + j] = v == 0 ? 0.0 :
                k_and_h(k.family, k.variance, sqdist(xs + (size_t) D * c, xs + (size_t) D * (v - 1), D), &h);
        }
    }
    UNPROTECT(1);
    return out;
}
