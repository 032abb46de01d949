/*
 * neighbours.c: nearest neighbours for the Vecchia approximation of the
 * residual process of sgpr(neighbours = K) (R/neighbours.R, src/vecchia.c).
 *
 *   - ordered neighbours: for each point in the Vecchia order, its Kc
 *     Euclidean nearest among the points earlier in that order;
 *   - neighbours of new points among all training points (prediction);
 *   - a spatial order of the points (the leaf order of a kd-tree), in which
 *     the likelihood's per-point terms are computed so that a chunk of rows
 *     and its neighbours are close (R/neighbours.R);
 *   - the selection of K of the Kc candidates by the correlation of the
 *     residual process, as in the Vecchia-inducing-points full-scale
 *     approximation (VIF) of Gyger, Furrer and Sigrist (2025).
 *
 * Points arrive already divided by the kernel lengthscales (the R caller
 * scales them), so that distances are the kernel's scaled distances and the
 * R reference (brute force, in the tests) computes the same numbers. The
 * order between two candidates is (squared distance, position): ties are
 * broken towards the earlier point, so results are deterministic.
 *
 * kd-tree: median splits on the coordinate of largest spread, leaves of at
 * most NB_LEAF points, a bounding box per node for pruning. A query visits
 * the nearer child first and skips a node whose box is farther than the
 * current Kc-th candidate. Ordered neighbours of the points at positions
 * [s, 2s) are searched in a tree over the positions [0, 2s) with the filter
 * "position < p", so at least half of the tree's points qualify; the trees
 * over s = 1, 2, 4, ... cost O(N log N) in all, and each query O(log N)
 * for data in general position (Friedman, Bentley and Finkel 1977).
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "spv.h"
#include "kernel_math.h"

#define NB_LEAF 16
/* positions below which ordered neighbours are found by brute force */
#define NB_BRUTE 64

typedef struct {
    int D;
    const double *x;    /* D x n coordinates, one point per column */
    int *idx;           /* the points, permuted into leaf order */
    double *xl;         /* their coordinates in leaf order (D x n): a leaf's
                         * points are contiguous in memory */
    int nnode;
    int *lo, *hi;       /* node ranges [lo, hi) in idx */
    int *left, *right;  /* children, -1 for a leaf */
    double *bmin, *bmax;/* D x nnode bounding boxes */
} nb_tree;

/* The Kc best candidates so far: a max-heap on (d2, id). */
typedef struct {
    int K, n;
    double *d2;
    int *id;
} nb_heap;

static inline int nb_worse(double da, int ia, double db, int ib)
{
    return da > db || (da == db && ia > ib);
}

static void nb_heap_push(nb_heap *h, double d2, int id)
{
    if (h->n < h->K) {
        int i = h->n++;
        while (i > 0) {
            const int p = (i - 1) / 2;
            if (!nb_worse(d2, id, h->d2[p], h->id[p])) break;
            h->d2[i] = h->d2[p];
            h->id[i] = h->id[p];
            i = p;
        }
        h->d2[i] = d2;
        h->id[i] = id;
        return;
    }
    if (!nb_worse(h->d2[0], h->id[0], d2, id)) return;
    /* replace the worst and sift down */
    int i = 0;
    for (;;) {
        const int l = 2 * i + 1, r = l + 1;
        int m = i;
        double dm = d2;
        int im = id;
        if (l < h->n && nb_worse(h->d2[l], h->id[l], dm, im)) {
            m = l; dm = h->d2[l]; im = h->id[l];
        }
        if (r < h->n && nb_worse(h->d2[r], h->id[r], dm, im)) {
            m = r;
        }
        if (m == i) break;
        h->d2[i] = h->d2[m];
        h->id[i] = h->id[m];
        i = m;
    }
    h->d2[i] = d2;
    h->id[i] = id;
}

/* The heap's contents sorted from best to worst into out_id (1-based),
 * padded with 0 up to K (insertion sort: K is small). Empties the heap. */
static void nb_heap_sorted(nb_heap *h, int *out_id)
{
    const int n = h->n;
    for (int i = 1; i < n; i++) {
        const double d = h->d2[i];
        const int id = h->id[i];
        int j = i - 1;
        while (j >= 0 && nb_worse(h->d2[j], h->id[j], d, id)) {
            h->d2[j + 1] = h->d2[j];
            h->id[j + 1] = h->id[j];
            j--;
        }
        h->d2[j + 1] = d;
        h->id[j + 1] = id;
    }
    for (int j = 0; j < h->K; j++) out_id[j] = j < n ? h->id[j] + 1 : 0;
    h->n = 0;
}

/* idx[lo..hi) partially sorted so that idx[mid] holds the point whose
 * coordinate `dim` is the mid-th smallest (ties by point id), smaller ones
 * before it: quickselect with a median-of-three pivot. */
static void nb_select(const double *x, int D, int *idx, int lo, int hi,
                      int mid, int dim)
{
#define KEY(i) x[(size_t) D * idx[i] + dim]
#define LESS(i, j) (KEY(i) < KEY(j) || (KEY(i) == KEY(j) && idx[i] < idx[j]))
#define SWAP(i, j) { int t_ = idx[i]; idx[i] = idx[j]; idx[j] = t_; }
    int l = lo, r = hi - 1;
    while (r > l) {
        const int m = l + (r - l) / 2;
        if (LESS(m, l)) SWAP(m, l);
        if (LESS(r, l)) SWAP(r, l);
        if (LESS(r, m)) SWAP(r, m);
        /* pivot at r - 1 would need three elements; keep it at m */
        SWAP(m, r);                   /* pivot now at r */
        int s = l;
        for (int i = l; i < r; i++)
            if (LESS(i, r)) { SWAP(i, s); s++; }
        SWAP(s, r);
        if (s == mid) return;
        if (mid < s) r = s - 1; else l = s + 1;
    }
#undef KEY
#undef LESS
#undef SWAP
}

/* Build the node `node` over idx[lo..hi); returns the next free node. */
static int nb_build_node(nb_tree *t, int node, int lo, int hi)
{
    const int D = t->D;
    double *bmin = t->bmin + (size_t) D * node, *bmax = t->bmax + (size_t) D * node;
    for (int d = 0; d < D; d++) {
        bmin[d] = R_PosInf;
        bmax[d] = R_NegInf;
    }
    for (int i = lo; i < hi; i++) {
        const double *p = t->x + (size_t) D * t->idx[i];
        for (int d = 0; d < D; d++) {
            if (p[d] < bmin[d]) bmin[d] = p[d];
            if (p[d] > bmax[d]) bmax[d] = p[d];
        }
    }
    t->lo[node] = lo;
    t->hi[node] = hi;
    t->left[node] = t->right[node] = -1;
    int next = node + 1;
    if (hi - lo <= NB_LEAF) return next;
    int dim = 0;
    double spread = bmax[0] - bmin[0];
    for (int d = 1; d < D; d++)
        if (bmax[d] - bmin[d] > spread) { spread = bmax[d] - bmin[d]; dim = d; }
    if (!(spread > 0.0)) return next;     /* all points coincide: a leaf */
    const int mid = lo + (hi - lo) / 2;
    nb_select(t->x, D, t->idx, lo, hi, mid, dim);
    t->left[node] = next;
    next = nb_build_node(t, next, lo, mid);
    t->right[node] = next;
    next = nb_build_node(t, next, mid, hi);
    return next;
}

/* A tree over the points ids[0..n) of x (D x *). Workspace from R_alloc. */
static void nb_build(nb_tree *t, const double *x, int D, const int *ids, int n)
{
    t->D = D;
    t->x = x;
    t->idx = (int *) R_alloc((size_t) n + 1, sizeof(int));
    memcpy(t->idx, ids, (size_t) n * sizeof(int));
    /* leaves hold between NB_LEAF / 2 and NB_LEAF points (or all equal
     * points), so there are fewer than 4 n / NB_LEAF + 2 nodes */
    const size_t cap = 4 * ((size_t) n / NB_LEAF + 1) + 2 + (size_t) n;
    t->lo = (int *) R_alloc(cap, sizeof(int));
    t->hi = (int *) R_alloc(cap, sizeof(int));
    t->left = (int *) R_alloc(cap, sizeof(int));
    t->right = (int *) R_alloc(cap, sizeof(int));
    t->bmin = (double *) R_alloc(cap * D, sizeof(double));
    t->bmax = (double *) R_alloc(cap * D, sizeof(double));
    t->nnode = n > 0 ? nb_build_node(t, 0, 0, n) : 0;
    t->xl = (double *) R_alloc((size_t) D * n + 1, sizeof(double));
    for (int i = 0; i < n; i++)
        memcpy(t->xl + (size_t) D * i, x + (size_t) D * t->idx[i], (size_t) D * sizeof(double));
}

static inline double nb_box_d2(const nb_tree *t, int node, const double *q)
{
    const int D = t->D;
    const double *lo = t->bmin + (size_t) D * node, *hi = t->bmax + (size_t) D * node;
    double s = 0.0;
    for (int d = 0; d < D; d++) {
        double e = 0.0;
        if (q[d] < lo[d]) e = lo[d] - q[d];
        else if (q[d] > hi[d]) e = q[d] - hi[d];
        s += e * e;
    }
    return s;
}

/* The candidates among the points of node `node` with id < limit (limit <
 * 0: all) and id != skip. */
static void nb_search(const nb_tree *t, int node, const double *q, int limit,
                      int skip, nb_heap *h)
{
    if (t->left[node] < 0) {
        const int D = t->D;
        for (int i = t->lo[node]; i < t->hi[node]; i++) {
            const int id = t->idx[i];
            if ((limit >= 0 && id >= limit) || id == skip) continue;
            nb_heap_push(h, sqdist(t->xl + (size_t) D * i, q, D), id);
        }
        return;
    }
    const int a = t->left[node], b = t->right[node];
    const double da = nb_box_d2(t, a, q), db = nb_box_d2(t, b, q);
    const int first = da <= db ? a : b, second = da <= db ? b : a;
    const double d1 = da <= db ? da : db, d2 = da <= db ? db : da;
    if (h->n < h->K || !(d1 > h->d2[0])) nb_search(t, first, q, limit, skip, h);
    if (h->n < h->K || !(d2 > h->d2[0])) nb_search(t, second, q, limit, skip, h);
}

/* Points as D x n (one per column) from an n x D R matrix, checked. */
static double *nb_points(SEXP x, const char *name, int D)
{
    chk_real_matrix(x, name, D);
    chk_finite(x, name);
    const int n = nrows(x), Dx = ncols(x);
    const double *px = REAL(x);
    double *out = (double *) R_alloc((size_t) n * Dx + 1, sizeof(double));
    for (int d = 0; d < Dx; d++)
        for (int i = 0; i < n; i++)
            out[(size_t) Dx * i + d] = px[i + (size_t) n * d];
    return out;
}

static int nb_count(SEXP K, const char *name)
{
    if (!isInteger(K) || XLENGTH(K) != 1 || INTEGER(K)[0] == NA_INTEGER ||
        INTEGER(K)[0] < 1)
        error("'%s' must be one whole number >= 1", name);
    return INTEGER(K)[0];
}

/* ---- .Call entry points ------------------------------------------------ */

/* Ordered neighbours: x (N x D) holds the scaled points in the Vecchia
 * order; returns the Kc x N integer matrix whose column p holds the
 * positions (1-based) of the Kc nearest points among positions 1..p-1,
 * nearest first (ties: the earlier position), padded with 0. With `order`
 * (the rows of the points at positions 1..N, a permutation), column
 * order[p] holds the rows order[q] instead: the neighbours by row. */
SEXP ffi_nb_ordered(SEXP x, SEXP Kc, SEXP order)
{
    const double *xs = nb_points(x, "x", -1);
    const int N = nrows(x), D = ncols(x);
    if (D < 1) error("'x' must have at least one column");
    const int K = nb_count(Kc, "Kc");
    SEXP out = PROTECT(allocMatrix(INTSXP, K, N));
    int *o = INTEGER(out);
    nb_heap h = {.K = K, .n = 0};
    h.d2 = (double *) R_alloc((size_t) K, sizeof(double));
    h.id = (int *) R_alloc((size_t) K, sizeof(int));
    const int brute = N < NB_BRUTE ? N : NB_BRUTE;
    for (int p = 0; p < brute; p++) {
        h.n = 0;
        for (int j = 0; j < p; j++)
            nb_heap_push(&h, sqdist(xs + (size_t) D * j, xs + (size_t) D * p, D), j);
        nb_heap_sorted(&h, o + (size_t) K * p);
    }
    int *ids = (int *) R_alloc((size_t) N + 1, sizeof(int));
    for (int i = 0; i < N; i++) ids[i] = i;
    for (int s = brute; s < N; s *= 2) {
        const int e = (2 * s < N) ? 2 * s : N;
        const void *vmax = vmaxget();
        nb_tree t;
        nb_build(&t, xs, D, ids, e);
        /* the queries in the tree's leaf order, so that consecutive
         * searches walk the same nodes and leaves (in cache); each query's
         * result does not depend on the order */
        for (int i = 0; i < e; i++) {
            if ((i & 1023) == 1023) R_CheckUserInterrupt();
            const int p = t.idx[i];
            if (p < s) continue;
            h.n = 0;
            nb_search(&t, 0, t.xl + (size_t) D * i, p, -1, &h);
            nb_heap_sorted(&h, o + (size_t) K * p);
        }
        vmaxset(vmax);
    }
    if (!isNull(order)) {
        if (!isInteger(order) || XLENGTH(order) != N)
            error("'order' must be an integer vector of length %d", N);
        const int *po = INTEGER(order);
        int *seen = (int *) R_alloc((size_t) N + 1, sizeof(int));
        memset(seen, 0, ((size_t) N + 1) * sizeof(int));
        for (int p = 0; p < N; p++) {
            if (po[p] == NA_INTEGER || po[p] < 1 || po[p] > N || seen[po[p]])
                error("'order' must be a permutation of 1..%d", N);
            seen[po[p]] = 1;
        }
        SEXP byrow = PROTECT(allocMatrix(INTSXP, K, N));
        int *b = INTEGER(byrow);
        for (int p = 0; p < N; p++) {
            const int *op = o + (size_t) K * p;
            int *bp = b + (size_t) K * (po[p] - 1);
            for (int j = 0; j < K; j++) bp[j] = op[j] > 0 ? po[op[j] - 1] : 0;
        }
        UNPROTECT(2);
        return byrow;
    }
    UNPROTECT(1);
    return out;
}

/* Neighbours of new points: the Kc nearest rows of x (N x D, scaled) to
 * each row of xnew (n x D, scaled), as a Kc x n integer matrix of row
 * numbers (1-based), nearest first (ties: the smaller row). */
SEXP ffi_nb_query(SEXP x, SEXP xnew, SEXP Kc)
{
    const double *xs = nb_points(x, "x", -1);
    const int N = nrows(x), D = ncols(x);
    if (D < 1) error("'x' must have at least one column");
    const double *qs = nb_points(xnew, "xnew", D);
    const int n = nrows(xnew), K = nb_count(Kc, "Kc");
    if (K > N) error("'Kc' must be at most the number of rows of 'x'");
    int *ids = (int *) R_alloc((size_t) N + 1, sizeof(int));
    for (int i = 0; i < N; i++) ids[i] = i;
    nb_tree t;
    nb_build(&t, xs, D, ids, N);
    SEXP out = PROTECT(allocMatrix(INTSXP, K, n));
    int *o = INTEGER(out);
    nb_heap h = {.K = K, .n = 0};
    h.d2 = (double *) R_alloc((size_t) K, sizeof(double));
    h.id = (int *) R_alloc((size_t) K, sizeof(int));
    for (int i = 0; i < n; i++) {
        if ((i & 1023) == 1023) R_CheckUserInterrupt();
        h.n = 0;
        nb_search(&t, 0, qs + (size_t) D * i, -1, -1, &h);
        nb_heap_sorted(&h, o + (size_t) K * i);
    }
    UNPROTECT(1);
    return out;
}

/* A spatial order of the rows of x (N x D): the leaf order of a kd-tree,
 * as a permutation of 1..N. Consecutive rows in it are close, so a run of
 * them and their neighbours form a compact block. */
SEXP ffi_nb_spatial_order(SEXP x)
{
    const double *xs = nb_points(x, "x", -1);
    const int N = nrows(x), D = ncols(x);
    if (D < 1) error("'x' must have at least one column");
    int *ids = (int *) R_alloc((size_t) N + 1, sizeof(int));
    for (int i = 0; i < N; i++) ids[i] = i;
    nb_tree t;
    nb_build(&t, xs, D, ids, N);
    SEXP out = PROTECT(allocVector(INTSXP, N));
    for (int i = 0; i < N; i++) INTEGER(out)[i] = t.idx[i] + 1;
    UNPROTECT(1);
    return out;
}

/* The selection of K neighbours among Kc candidates by the absolute
 * correlation of the residual process (Gyger, Furrer and Sigrist 2025),
 *   rho_ij = (k(x_i, x_j) - a_i'a_j) / sqrt(r_i r_j),
 * with a_j = L^-1 k_u(x_j) the whitened features (A, M x nu) and
 * r_j = k(x_j, x_j) - |a_j|^2 the residual variances (length nu, floored
 * by the caller). Point c (0-based) of the block is column c of A; its
 * candidates are cand[, c] (local, 1-based, 0 = none, nearest first) with
 * kernel values kval[, c]. Returns the K x no local indices of the chosen
 * ones in their candidate order (so the nearest first), padded with 0;
 * equal correlations keep the nearer candidate. */
SEXP ffi_nb_select(SEXP A, SEXP r, SEXP kval, SEXP cand, SEXP K)
{
    chk_real_matrix(A, "A", -1);
    const int M = nrows(A), nu = ncols(A);
    chk_real_vector(r, "r", nu);
    if (!isInteger(cand) || !isMatrix(cand))
        error("'cand' must be an integer matrix");
    const int Kc = nrows(cand), no = ncols(cand);
    if (no > nu) error("'cand' has more columns than 'A'");
    chk_real_matrix(kval, "kval", no);
    if (nrows(kval) != Kc) error("'kval' must have %d rows", Kc);
    const int Ks = nb_count(K, "K");
    if (Ks > Kc) error("'K' must be at most the number of candidates");
    const double *pa = REAL(A), *pr = REAL(r), *pk = REAL(kval);
    const int *pc = INTEGER(cand);
    for (R_xlen_t i = 0; i < XLENGTH(cand); i++)
        if (pc[i] == NA_INTEGER || pc[i] < 0 || pc[i] > nu)
            error("'cand' must hold local indices in 0..%d", nu);
    SEXP out = PROTECT(allocMatrix(INTSXP, Ks, no));
    int *o = INTEGER(out);
    double *score = (double *) R_alloc((size_t) Kc + 1, sizeof(double));
    int *keep = (int *) R_alloc((size_t) Kc + 1, sizeof(int));
    for (int c = 0; c < no; c++) {
        if ((c & 1023) == 1023) R_CheckUserInterrupt();
        const int *cc = pc + (size_t) Kc * c;
        int n = 0;
        while (n < Kc && cc[n] > 0) n++;
        int *oc = o + (size_t) Ks * c;
        if (n <= Ks) {
            for (int j = 0; j < Ks; j++) oc[j] = j < n ? cc[j] : 0;
            continue;
        }
        const double *ac = pa + (size_t) M * c;
        for (int j = 0; j < n; j++) {
            const double *aj = pa + (size_t) M * (cc[j] - 1);
            double q = 0.0;
            for (int m = 0; m < M; m++) q += ac[m] * aj[m];
            const double num = pk[(size_t) Kc * c + j] - q;
            score[j] = fabs(num) / sqrt(pr[c] * pr[cc[j] - 1]);
            if (!R_FINITE(score[j])) score[j] = 0.0;
            keep[j] = 0;
        }
        /* the Ks largest scores, ties to the earlier candidate */
        for (int s = 0; s < Ks; s++) {
            int best = -1;
            for (int j = 0; j < n; j++)
                if (!keep[j] && (best < 0 || score[j] > score[best])) best = j;
            keep[best] = 1;
        }
        int m = 0;
        for (int j = 0; j < n; j++)
            if (keep[j]) oc[m++] = cc[j];
    }
    UNPROTECT(1);
    return out;
}
