/*
 * kernel_combo.c: sums and products of kernels, for the routines that
 * evaluate kernel matrices (the greedy selection of select.c and the
 * kernel matrices of a combination).
 *
 * A combination is a tree whose leaves are the stationary kernels of
 * kernels.c:
 *   k_sum(x, x')     = sum_i k_i(x, x'),
 *   k_product(x, x') = prod_i k_i(x, x'),
 * both stationary, so diag K is the constant k(x, x) obtained by the same
 * sums and products of the parts' variances. Each part has its own
 * lengthscales, so the points are kept unscaled and every leaf scales them
 * into the workspace before calling kern_K: O((nA + nB) D) extra work per
 * leaf and call, next to the O(nA nB D) of the kernel itself. The
 * gradients of a combination are contractions of the parts' adjoints
 * (G for each part of a sum, G times the other factors' kernel matrices
 * for a factor of a product), formed in R/kernels.R from kern_grad.
 *
 * A single kernel goes straight to kern_K on points scaled once, so it
 * costs exactly what it did before combinations existed.
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "spv.h"
#include "kernel_combo.h"

/* Parse the node `kern` at nesting level `depth` (0 at the root) into
 * *node; returns its height (operators on the longest path to a leaf) and
 * sets *kd to its k(x, x). The recursion is bounded by KC_MAX_DEPTH (the
 * limit R/kernels.R enforces when kernels are combined), so that a deeply
 * nested list from R is an error, never a C stack overflow. */
static int kc_parse_node(SEXP kern, int D, kc_node *node, double *kd,
                         int depth)
{
    if (TYPEOF(kern) == VECSXP && XLENGTH(kern) == 2) {
        if (depth >= KC_MAX_DEPTH)
            error("the kernel combination nests more than %d levels of sums "
                  "and products", KC_MAX_DEPTH);
        R_CheckStack();
        SEXP op = VECTOR_ELT(kern, 0), parts = VECTOR_ELT(kern, 1);
        if (!isInteger(op) || XLENGTH(op) != 1 ||
            (INTEGER(op)[0] != KC_SUM && INTEGER(op)[0] != KC_PRODUCT))
            error("unknown kernel combination");
        if (TYPEOF(parts) != VECSXP || XLENGTH(parts) < 2)
            error("a kernel combination must have at least two parts");
        node->op = INTEGER(op)[0];
        node->n = (int) XLENGTH(parts);
        node->child = (kc_node *) R_alloc((size_t) node->n, sizeof(kc_node));
        int h = 0;
        for (int c = 0; c < node->n; c++) {
            double kc;
            const int hc = kc_parse_node(VECTOR_ELT(parts, c), D,
                                         node->child + c, &kc, depth + 1);
            if (hc > h) h = hc;
            /* the order of kc_K, so that k(p, p) is bitwise the diagonal
             * of K (select.c compares them to find copies of a pivot) */
            if (c == 0) *kd = kc;
            else if (node->op == KC_SUM) *kd += kc;
            else *kd *= kc;
        }
        return h + 1;
    }
    node->op = KC_LEAF;
    node->n = 0;
    node->child = NULL;
    chk_kernel(kern, D, &node->leaf);
    *kd = node->leaf.variance;
    return 0;
}

void kc_parse(SEXP kern, int D, spv_kfun *k)
{
    if (D < 1)
        error("the inputs must have at least one column");
    k->D = D;
    k->height = kc_parse_node(kern, D, &k->root, &k->kdiag, 0);
    k->combo = k->root.op != KC_LEAF;
    if (!R_FINITE(k->kdiag) || !(k->kdiag > 0.0))
        error("the variance k(x, x) of the kernel combination is not a "
              "positive finite number");
    k->work = NULL;
    k->cap = 0;
}

int kc_points(const spv_kfun *k, const double *x, size_t n, double *xs)
{
    if (!k->combo) return kern_scale_points(&k->root.leaf, x, n, xs);
    const int D = k->D;
    for (int d = 0; d < D; d++) {
        const double *xd = x + (size_t) d * n;
        for (size_t i = 0; i < n; i++) xs[(size_t) D * i + d] = xd[i];
    }
    return 0;
}

void kc_overflow_error(const spv_kfun *k)
{
    /* combinations scale inside kc_K and raise the error there */
    kern_overflow_error(&k->root.leaf);
}

/* Raw points (D x n) divided by the lengthscales of the leaf. */
static void kc_scale(const spv_kernel *lf, const double *A, size_t n,
                     double *As)
{
    const int D = lf->D;
    int ok = 1;
    for (int d = 0; d < D; d++) {
        const double inv = 1.0 / lf->lengthscale[lf->nls == 1 ? 0 : d];
        for (size_t i = 0; i < n; i++) {
            const double v = A[(size_t) D * i + d] * inv;
            As[(size_t) D * i + d] = v;
            if (!R_FINITE(v)) ok = 0;
        }
    }
    if (!ok) kern_overflow_error(lf);
}

/* K of the node into out (nA x nB); temporaries of level `lev` and below
 * from the workspace laid out by kc_K. */
static void kc_eval(spv_kfun *k, const kc_node *node, const double *A,
                    size_t nA, const double *B, size_t nB, double *out,
                    int lev)
{
    const size_t D = (size_t) k->D, nK = nA * nB;
    if (node->op == KC_LEAF) {
        double *sA = k->work, *sB = k->work + D * nA;
        kc_scale(&node->leaf, A, nA, sA);
        if (B != A) kc_scale(&node->leaf, B, nB, sB);
        kern_K(&node->leaf, sA, nA, B != A ? sB : sA, nB, out);
        return;
    }
    double *tmp = k->work + D * (nA + nB) + nK * (size_t) lev;
    kc_eval(k, node->child, A, nA, B, nB, out, lev + 1);
    for (int c = 1; c < node->n; c++) {
        kc_eval(k, node->child + c, A, nA, B, nB, tmp, lev + 1);
        if (node->op == KC_SUM)
            for (size_t i = 0; i < nK; i++) out[i] += tmp[i];
        else
            for (size_t i = 0; i < nK; i++) out[i] *= tmp[i];
    }
}

void kc_K(spv_kfun *k, const double *As, size_t nA, const double *Bs,
          size_t nB, double *K)
{
    if (!k->combo) {
        kern_K(&k->root.leaf, As, nA, Bs, nB, K);
        return;
    }
    if (nA == 0 || nB == 0) return;
    const size_t need = (size_t) k->D * (nA + nB) +
        (size_t) k->height * nA * nB;
    if (need > k->cap) {
        /* grown geometrically: callers such as the selection ask for
         * slowly growing sizes, and R_alloc memory lives until .Call ends */
        const size_t cap = need > 2 * k->cap ? need : 2 * k->cap;
        k->work = (double *) R_alloc(cap, sizeof(double));
        k->cap = cap;
    }
    kc_eval(k, &k->root, As, nA, Bs, nB, K, 0);
}

void kc_diag(const spv_kfun *k, size_t n, double *kdiag)
{
    if (!k->combo) {
        kern_diag(&k->root.leaf, n, kdiag);
        return;
    }
    for (size_t i = 0; i < n; i++) kdiag[i] = k->kdiag;
}

/* ---- .Call entry points ----------------------------------------------- */

/* K(x, y) of a combination (K(x, x) when y is NULL): x n x D, y m x D. */
SEXP ffi_kc_matrix(SEXP kern, SEXP x, SEXP y)
{
    chk_real_matrix(x, "x", -1);
    chk_finite(x, "x");
    const int D = ncols(x);
    if (!isNull(y)) {
        chk_real_matrix(y, "y", D);
        chk_finite(y, "y");
    }
    spv_kfun k;
    kc_parse(kern, D, &k);
    const size_t n = (size_t) nrows(x), m = isNull(y) ? n : (size_t) nrows(y);
    double *xs = la_alloc((size_t) D * n), *ys = xs;
    int over = kc_points(&k, REAL(x), n, xs);
    if (!isNull(y)) {
        ys = la_alloc((size_t) D * m);
        over |= kc_points(&k, REAL(y), m, ys);
    }
    if (over) kc_overflow_error(&k);
    SEXP K = PROTECT(allocMatrix(REALSXP, (int) n, (int) m));
    kc_K(&k, xs, n, ys, m, REAL(K));
    UNPROTECT(1);
    return K;
}

/* diag K(x, x) of a combination. */
SEXP ffi_kc_diag(SEXP kern, SEXP x)
{
    chk_real_matrix(x, "x", -1);
    chk_finite(x, "x");
    spv_kfun k;
    kc_parse(kern, ncols(x), &k);
    SEXP out = PROTECT(allocVector(REALSXP, nrows(x)));
    kc_diag(&k, (size_t) nrows(x), REAL(out));
    UNPROTECT(1);
    return out;
}
