/*
 * select.c: inducing point selection by greedy conditional variance, a
 * pivoted partial Cholesky factorisation of K_ff computed column by column
 * (Burt et al. 2020; weighted as in Passerello 2022, sections 3.3.2 and
 * 4.3.2; Fine & Scheinberg 2001).
 *
 * After m pivots p_1..p_m the factor C (N x m) satisfies C C' = Q_ff =
 * K_fu K_uu^-1 K_uf with u = f(p_1..p_m), and the residual variances are
 *   d_n = [K_ff - Q_ff]_nn = k_nn - sum_i C_ni^2.
 * A new pivot p with factor row r (length m) and residual d_p adds the column
 *   e = (K(X, p) - C r) / sqrt(d_p),
 * and d <- d - e^2. e is the vector b of the rank-one update Q+ = Q + b b'
 * in the monotonicity proof of Passerello 2022, Appendix B.4.
 *
 * Greedy selection (weighted: HGV) takes as next pivot the training input
 * maximising w_n d_n: w = 1 is plain greedy variance (Burt et al. 2020),
 * w = 1/lambda heteroscedastic regression, w = theta PG classification.
 * The weighted trace t_m = sum_n w_n d_n after each addition is recorded;
 * with w = 1/lambda it brackets the expected KL divergence, t/2 <= E[KL]
 * <= t (Passerello 2022, eq. 3.7).
 *
 * Costs: each step evaluates one kernel column, O(N D), and one
 * matrix-vector product with the m columns so far, O(N m); M steps cost
 * O(N M^2) time and O(N M) memory. K_ff is never formed.
 *
 * Rules that make the selection safe and reproducible:
 *   - ties are broken by a rank supplied by R (a random permutation drawn
 *     with sample.int()), so set.seed() reproduces a selection;
 *   - a pivot's own factor entry is sqrt(d_p) and its residual is set to 0
 *     exactly; any input whose kernel value with the pivot equals k(p, p)
 *     (an exact copy of the pivot, for this kernel) is marked explained, so
 *     no point and no copy of a point is ever selected twice;
 *   - inputs with d_n <= tol * k_nn (tol = 0 by default: d_n = 0 after
 *     clipping) count as explained; when every input is explained the
 *     selection stops with fewer points ("exhausted"), instead of picking a
 *     duplicate as the code of Burt et al. 2020 (robustgp) and of
 *     Passerello 2022 (SHGP) can when every residual is 0;
 *   - the threshold stop keeps exactly the points up to and including the
 *     one whose addition brought t below the threshold: the selection is the
 *     shortest prefix with t_m < threshold (not robustgp's m - 1 nor SHGP's
 *     m + 1).
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"
#include "kernel_combo.h"

enum { SEL_STOP_M = 1, SEL_STOP_THRESHOLD = 2, SEL_STOP_EXHAUSTED = 3 };

/* Add the column of a pivot to the factor.
 * col (N): on entry K(X, p); on exit the new column e, also copied to
 * C[, m]. C is N x cap (leading dimension N) with m columns filled; r is the
 * pivot's factor row (length m, stride rs); dp > 0 its residual variance.
 * d (N) <- max(d - e^2, 0). Cost O(N m). */
static void sel_add_column(int N, int m, double *C, const double *r, int rs,
                           double dp, double *col, double *d)
{
    if (m > 0) {
        const double mone = -1.0, one = 1.0;
        const int ione = 1;
        /* col <- K(X, p) - C[, 1:m] r : N x m times m */
        F77_CALL(dgemv)("N", &N, &m, &mone, C, &N, r, &rs, &one, col, &ione
                        FCONE);
    }
    const double s = 1.0 / sqrt(dp);
    double *Cm = C + (size_t) N * m;
    for (int n = 0; n < N; n++) {
        const double e = col[n] * s;
        col[n] = e;
        Cm[n] = e;
        const double dn = d[n] - e * e;
        d[n] = dn > 0.0 ? dn : 0.0;
    }
}

/* Mark as explained every input whose kernel value with the pivot equals
 * k(p, p) (col is K(X, p) before the update): for such an input the residual
 * given the pivot alone is k_nn - k_np^2 / k_pp = 0, so it must never become
 * a pivot (it would make K_uu singular). */
static void sel_mark_copies(int N, const double *col, double kpp,
                            char *excl, double *d)
{
    for (int n = 0; n < N; n++)
        if (col[n] == kpp) {
            excl[n] = 1;
            d[n] = 0.0;
        }
}

/* Selection order: a precedes b if its criterion is larger, or equal with a
 * lower rank (earlier in R's random permutation). */
static inline int sel_before(double ca, int ra, double cb, int rb)
{
    return ca > cb || (ca == cb && ra < rb);
}

/* Workspace of the greedy selection, from R_alloc. */
typedef struct {
    int B, P;           /* pivots planned per block; pool size */
    double *KQ, *G;     /* N x B: raw kernel columns, partially updated */
    double *Xq;         /* D x B: scaled points of the planned pivots */
    double *Cq;         /* B x Mmax: their rows of C */
    int *q;             /* B: planned pivots */
    int *pool;          /* P: pool of candidates (indices in 0..N-1) */
    double *pc;         /* P: their criteria (heap keys) */
    double *Xp;         /* D x P */
    double *Cp;         /* P x Mmax */
    double *Sp, *Kp;    /* P x P: conditional covariance, raw kernel */
    double *dp;         /* P: pool residuals */
    char *pex;          /* P: pool exclusions */
} sel_work;

/* Plan a block: predict the next pivots after the current state (m columns
 * in C), the first being j, the true next pivot. The greedy algorithm is run
 * exactly on a pool of the P best candidates, using their conditional
 * covariance given the current pivots, S_p = K(P, P) - C_P C_P' (P^2 m
 * flops). Its picks are the true next pivots as long as each true argmax
 * over all N inputs lies in the pool; the caller checks every step.
 * Returns b (1..B) with the pivots in w->q. */
static int sel_plan(spv_kfun *k, const double *xs, int N,
                    const double *w, const int *rank, const double *C, int m,
                    const double *d, const char *excl, double tol, int j,
                    sel_work *ws)
{
    const int D = k->D, B = ws->B;
    const double kpp = k->kdiag;
    if (B == 1) {
        ws->q[0] = j;
        return 1;
    }
    /* the pool: a binary heap whose root is the worst of the best P; the
     * best candidate left out, (c_out, r_out), bounds every criterion
     * outside the pool from now on, since residuals only decrease */
    int np = 0;
    int *pool = ws->pool;
    double *pc = ws->pc;
    double c_out = -1.0;
    int r_out = -1;
    for (int n = 0; n < N; n++) {
        if (excl[n] || !(d[n] > tol * kpp)) continue;
        const double c = w[n] * d[n];
        if (np < ws->P) {
            int i = np++;       /* sift up */
            while (i > 0) {
                const int par = (i - 1) / 2;
                if (!sel_before(pc[par], rank[pool[par]], c, rank[n])) break;
                pool[i] = pool[par];
                pc[i] = pc[par];
                i = par;
            }
            pool[i] = n;
            pc[i] = c;
        } else if (sel_before(c, rank[n], pc[0], rank[pool[0]])) {
            if (r_out < 0 || sel_before(pc[0], rank[pool[0]], c_out, r_out)) {
                c_out = pc[0];
                r_out = rank[pool[0]];
            }
            int i = 0;          /* replace the root, sift down */
            for (;;) {
                int ch = 2 * i + 1;
                if (ch >= np) break;
                if (ch + 1 < np &&
                    sel_before(pc[ch], rank[pool[ch]], pc[ch + 1],
                               rank[pool[ch + 1]]))
                    ch++;
                if (!sel_before(c, rank[n], pc[ch], rank[pool[ch]])) break;
                pool[i] = pool[ch];
                pc[i] = pc[ch];
                i = ch;
            }
            pool[i] = n;
            pc[i] = c;
        } else if (r_out < 0 || sel_before(c, rank[n], c_out, r_out)) {
            c_out = c;
            r_out = rank[n];
        }
    }
    /* S_p = K(P, P) - C_P C_P' */
    for (int a = 0; a < np; a++) {
        memcpy(ws->Xp + (size_t) D * a, xs + (size_t) D * pool[a],
               (size_t) D * sizeof(double));
        for (int i = 0; i < m; i++)
            ws->Cp[a + (size_t) np * i] = C[pool[a] + (size_t) N * i];
    }
    kc_K(k, ws->Xp, (size_t) np, ws->Xp, (size_t) np, ws->Kp);
    memcpy(ws->Sp, ws->Kp, (size_t) np * np * sizeof(double));
    if (m > 0) {
        const double mone = -1.0, one = 1.0;
        /* S_p -= C_P C_P' : P x m times m x P */
        F77_CALL(dgemm)("N", "T", &np, &np, &m, &mone, ws->Cp, &np, ws->Cp,
                        &np, &one, ws->Sp, &np FCONE FCONE);
    }
    int cur = -1;
    for (int a = 0; a < np; a++) {
        ws->dp[a] = d[pool[a]];
        ws->pex[a] = 0;
        if (pool[a] == j) cur = a;
    }
    if (cur < 0) {          /* cannot happen: j is the best candidate */
        ws->q[0] = j;
        return 1;
    }
    /* pivoted Cholesky on the pool (right-looking, in place) */
    int b = 0;
    while (b < B) {
        ws->q[b++] = pool[cur];
        const double piv = ws->dp[cur];
        if (!(piv > 0.0) || b == B) break;
        const double s = 1.0 / sqrt(piv);
        double *Sc = ws->Sp + (size_t) np * cur;
        for (int a = 0; a < np; a++)
            if (ws->Kp[a + (size_t) np * cur] == kpp) ws->pex[a] = 1;
        ws->pex[cur] = 1;
        /* e = S_p[, cur] / sqrt(piv); S_p -= e e'; residuals -= e^2 */
        for (int a = 0; a < np; a++) ws->pc[a] = Sc[a] * s;
        for (int c2 = 0; c2 < np; c2++) {
            const double ec = ws->pc[c2];
            if (ec == 0.0) continue;
            double *Sc2 = ws->Sp + (size_t) np * c2;
            for (int a = 0; a < np; a++) Sc2[a] -= ws->pc[a] * ec;
        }
        int next = -1;
        double best = -1.0;
        for (int a = 0; a < np; a++) {
            const double r = ws->dp[a] - ws->pc[a] * ws->pc[a];
            ws->dp[a] = r > 0.0 ? r : 0.0;
            if (ws->pex[a] || !(ws->dp[a] > tol * kpp)) continue;
            const double c = w[pool[a]] * ws->dp[a];
            if (next < 0 || sel_before(c, rank[pool[a]], best, rank[pool[next]])) {
                best = c;
                next = a;
            }
        }
        /* plan only what is certain: the pick must beat every input
         * outside the pool */
        if (next < 0 ||
            (r_out >= 0 && !sel_before(best, rank[pool[next]], c_out, r_out)))
            break;
        cur = next;
    }
    return b;
}

/* Greedy weighted selection (the heteroscedastic greedy variance of
 * Passerello 2022, sections 3.3.2 and 4.3.2, with the rules
 * in the header), organised in blocks so that the work on the factor is one
 * matrix-matrix product per block instead of one matrix-vector product per
 * pivot (the delayed updates of LAPACK's dpstrf, with the pivots of a block
 * predicted by sel_plan and verified one by one):
 *   G = K(X, q) - C[, 1:m0] C[q, 1:m0]'      (dgemm, N x m0 x b)
 * then for each pivot j = q_i that is the true argmax,
 *   e = (G[, i] - C[, m0:m] C[j, m0:m]') / sqrt(d_j)   (dgemv, N x (m - m0)).
 * The pivots are those of the one-column-at-a-time algorithm; a wrong
 * prediction only ends the block early. With B = 1 this is that algorithm.
 * In: k, xs (D x N points from kc_points), w (N, > 0), rank (N, a
 * permutation of 0..N-1: the tie-break order), Mmax (1..N), thr (>= 0;
 * 0 = no threshold), tol (in [0, 1)).
 * Work/out: C (N x Mmax), d (N), excl (N), ws; index (Mmax, 0-based), trace
 * (Mmax). Returns the number of points selected and sets *stop. */
static int sel_greedy(spv_kfun *k, const double *xs, int N,
                      const double *w, const int *rank, int Mmax, double thr,
                      double tol, double *C, double *d, char *excl,
                      sel_work *ws, int *index, double *trace, double *trace0,
                      int *stop)
{
    const int D = k->D;
    const double kpp = k->kdiag;        /* stationary: k(p, p) */
    kc_diag(k, (size_t) N, d);
    memset(excl, 0, (size_t) N);
    /* first pivot: argmax w_n k_nn, ties to the lowest rank */
    int j = -1;
    double best = -1.0, t = 0.0;
    for (int n = 0; n < N; n++) {
        const double c = w[n] * d[n];
        t += c;
        if (j < 0 || sel_before(c, rank[n], best, rank[j])) {
            best = c;
            j = n;
        }
    }
    *trace0 = t;
    int m = 0;
    for (;;) {                                  /* blocks */
        const int b = sel_plan(k, xs, N, w, rank, C, m, d, excl, tol, j, ws);
        for (int i = 0; i < b; i++) {
            memcpy(ws->Xq + (size_t) D * i, xs + (size_t) D * ws->q[i],
                   (size_t) D * sizeof(double));
            for (int c = 0; c < m; c++)
                ws->Cq[i + (size_t) b * c] = C[ws->q[i] + (size_t) N * c];
        }
        /* KQ = K(X, q): N x b */
        kc_K(k, xs, (size_t) N, ws->Xq, (size_t) b, ws->KQ);
        memcpy(ws->G, ws->KQ, (size_t) N * b * sizeof(double));
        if (m > 0) {
            const double mone = -1.0, one = 1.0;
            /* G -= C[, 1:m] C[q, 1:m]' : N x m times m x b */
            F77_CALL(dgemm)("N", "T", &N, &b, &m, &mone, C, &N, ws->Cq, &b,
                            &one, ws->G, &N FCONE FCONE);
        }
        const int m0 = m;
        for (int i = 0; i < b; i++) {
            if (ws->q[i] != j) break;           /* mispredicted: replan */
            R_CheckUserInterrupt();
            const double dp = d[j];
            double *col = ws->G + (size_t) N * i;
            sel_mark_copies(N, ws->KQ + (size_t) N * i, kpp, excl, d);
            /* the block's columns so far, C[, m0:m]; j's row in them has
             * stride N */
            sel_add_column(N, m - m0, C + (size_t) N * m0,
                           C + j + (size_t) N * m0, N, dp, col, d);
            C[j + (size_t) N * m] = sqrt(dp);   /* exact diagonal entry */
            d[j] = 0.0;
            excl[j] = 1;
            index[m] = j;
            m++;
            /* weighted trace and next pivot in one pass */
            t = 0.0;
            j = -1;
            for (int n = 0; n < N; n++) {
                const double c = w[n] * d[n];
                t += c;
                if (excl[n] || !(d[n] > tol * kpp)) continue;
                if (j < 0 || sel_before(c, rank[n], best, rank[j])) {
                    best = c;
                    j = n;
                }
            }
            trace[m - 1] = t;
            if (t < thr) { *stop = SEL_STOP_THRESHOLD; return m; }
            if (m == Mmax) { *stop = SEL_STOP_M; return m; }
            if (j < 0) { *stop = SEL_STOP_EXHAUSTED; return m; }
        }
    }
}

/* The same factorisation along a given sequence of points Z (M x D, scaled
 * to zs, D x M): the weighted trace after each prefix of Z, as for k-means
 * centres or a random subset. The factor row of z_m comes from the Cholesky
 * factor Lz of K(Z, Z), built alongside (M x M, lower, column-major). A
 * point whose residual given the earlier ones is <= tol * k(z, z) (a copy
 * or a numerical combination of them) adds no column: the trace repeats.
 * Returns the number of columns added. */
static int sel_sequence(spv_kfun *k, const double *xs, int N,
                        const double *w, const double *zs, int M, double tol,
                        double *C, double *d, double *col, char *excl,
                        double *Lz, int *acc, double *kz, double *trace,
                        double *trace0)
{
    const int D = k->D;
    kc_diag(k, (size_t) N, d);
    memset(excl, 0, (size_t) N);
    double t = 0.0;
    for (int n = 0; n < N; n++) t += w[n] * d[n];
    *trace0 = t;
    int a = 0;                  /* columns added = accepted points */
    const double kzz = k->kdiag;
    for (int m = 0; m < M; m++) {
        R_CheckUserInterrupt();
        const double *z = zs + (size_t) D * m;
        /* kz = K(accepted, z); r = Lz^-1 kz; dz = k(z, z) - |r|^2 */
        for (int i = 0; i < a; i++)
            kc_K(k, zs + (size_t) D * acc[i], 1, z, 1, kz + i);
        if (a > 0) {
            const int ione = 1;
            F77_CALL(dtrsv)("L", "N", "N", &a, Lz, &M, kz, &ione
                            FCONE FCONE FCONE);
        }
        double dz = kzz;
        for (int i = 0; i < a; i++) dz -= kz[i] * kz[i];
        if (dz > tol * kzz && dz > 0.0) {
            for (int i = 0; i < a; i++) Lz[a + (size_t) M * i] = kz[i];
            Lz[a + (size_t) M * a] = sqrt(dz);
            kc_K(k, xs, (size_t) N, z, 1, col);
            sel_mark_copies(N, col, kzz, excl, d);
            /* the row of z in the factor is row a of Lz: stride M */
            sel_add_column(N, a, C, Lz + a, M, dz, col, d);
            acc[a] = m;
            a++;
        }
        t = 0.0;
        for (int n = 0; n < N; n++) t += w[n] * d[n];
        trace[m] = t;
    }
    return a;
}

/* ---- .Call entry points ----------------------------------------------- */

static void sel_check_inputs(SEXP kern, SEXP x, SEXP weights, spv_kfun *k,
                             int *N, int *D)
{
    chk_real_matrix(x, "x", -1);
    chk_finite(x, "x");
    *N = nrows(x);
    *D = ncols(x);
    if (*N < 1 || *D < 1) error("'x' must have at least one row and column");
    kc_parse(kern, *D, k);
    chk_real_vector(weights, "weights", *N);
    const double *w = REAL(weights);
    double t0 = 0.0;
    for (int n = 0; n < *N; n++) {
        if (!R_FINITE(w[n]) || !(w[n] > 0.0))
            error("'weights' must be positive and finite");
        t0 += w[n] * k->kdiag;
    }
    /* every weighted trace of the selection is at most this one */
    if (!R_FINITE(t0))
        error("the weighted trace sum(weights) * variance overflows: the "
              "weights or the kernel variance are too large");
}

static double sel_check_tol(SEXP tol)
{
    const double t = chk_scalar(tol, "tol");
    if (t < 0.0 || t >= 1.0) error("'tol' must be in [0, 1)");
    return t;
}

/* Greedy (weighted) conditional variance selection.
 * kern: list from .kern_c(); x: N x D; weights: N positive; M: the maximum
 * number of points (1..N); threshold: >= 0 (0 = none); perm: a permutation
 * of 1..N (integer) whose order breaks ties (the first in perm wins); tol:
 * relative residual below which an input counts as explained; block: the
 * number of pivots planned ahead (1 = one column at a time; the selection
 * is the same, only the speed differs); factor: TRUE to return C.
 * Returns list(index (1-based), trace, trace0, d, stop, factor). */
SEXP ffi_sel_greedy(SEXP kern, SEXP x, SEXP weights, SEXP M, SEXP threshold,
                    SEXP perm, SEXP tol, SEXP block, SEXP factor)
{
    spv_kfun k;
    int N, D;
    sel_check_inputs(kern, x, weights, &k, &N, &D);
    const double Md = chk_scalar(M, "M");
    if (Md < 1.0 || Md > N || Md != floor(Md))
        error("'M' must be a whole number between 1 and %d", N);
    const int Mmax = (int) Md;
    const double thr = chk_scalar(threshold, "threshold");
    if (thr < 0.0) error("'threshold' must be non-negative");
    const double tl = sel_check_tol(tol);
    const double Bd = chk_scalar(block, "block");
    if (Bd < 1.0 || Bd > 1024.0 || Bd != floor(Bd))
        error("'block' must be a whole number between 1 and 1024");
    const int want_factor = chk_flag(factor, "factor");
    if (!isInteger(perm) || XLENGTH(perm) != N)
        error("'perm' must be an integer vector of length %d", N);
    int *rank = (int *) R_alloc((size_t) N, sizeof(int));
    for (int n = 0; n < N; n++) rank[n] = -1;
    for (int i = 0; i < N; i++) {
        const int p = INTEGER(perm)[i];
        if (p == NA_INTEGER || p < 1 || p > N || rank[p - 1] >= 0)
            error("'perm' must be a permutation of 1..%d", N);
        rank[p - 1] = i;
    }

    double *xs = (double *) R_alloc((size_t) D * N, sizeof(double));
    if (kc_points(&k, REAL_RO(x), (size_t) N, xs)) kc_overflow_error(&k);
    double *C = (double *) R_alloc((size_t) N * Mmax, sizeof(double));
    char *excl = R_alloc((size_t) N, sizeof(char));
    int *index = (int *) R_alloc((size_t) Mmax, sizeof(int));
    double *trace = (double *) R_alloc((size_t) Mmax, sizeof(double));
    sel_work ws;
    ws.B = (int) Bd < N ? (int) Bd : N;
    /* the pool: large enough to see ahead (16 B), small enough that
     * planning, O(P^2 m) per block, stays below the block's O(N m B) */
    {
        double P0 = 0.5 * sqrt((double) N * ws.B);
        if (P0 > 16.0 * ws.B) P0 = 16.0 * ws.B;
        if (P0 < ws.B) P0 = ws.B;
        ws.P = P0 < N ? (int) P0 : N;
    }
    const size_t B = (size_t) ws.B, P = (size_t) ws.P;
    ws.KQ = (double *) R_alloc((size_t) N * B, sizeof(double));
    ws.G = (double *) R_alloc((size_t) N * B, sizeof(double));
    ws.Xq = (double *) R_alloc((size_t) D * B, sizeof(double));
    ws.Cq = (double *) R_alloc(B * Mmax, sizeof(double));
    ws.q = (int *) R_alloc(B, sizeof(int));
    ws.pool = (int *) R_alloc(P, sizeof(int));
    ws.pc = (double *) R_alloc(P, sizeof(double));
    ws.Xp = (double *) R_alloc((size_t) D * P, sizeof(double));
    ws.Cp = (double *) R_alloc(P * Mmax, sizeof(double));
    ws.Sp = (double *) R_alloc(P * P, sizeof(double));
    ws.Kp = (double *) R_alloc(P * P, sizeof(double));
    ws.dp = (double *) R_alloc(P, sizeof(double));
    ws.pex = R_alloc(P, sizeof(char));

    int nprot = 0;
    SEXP d = PROTECT(allocVector(REALSXP, N)); nprot++;
    double trace0 = 0.0;
    int stop = 0;
    const int m = sel_greedy(&k, xs, N, REAL(weights), rank, Mmax, thr, tl,
                             C, REAL(d), excl, &ws, index, trace, &trace0,
                             &stop);

    SEXP idx = PROTECT(allocVector(INTSXP, m)); nprot++;
    SEXP tr = PROTECT(allocVector(REALSXP, m)); nprot++;
    for (int i = 0; i < m; i++) {
        INTEGER(idx)[i] = index[i] + 1;
        REAL(tr)[i] = trace[i];
    }
    SEXP fac = R_NilValue;
    if (want_factor) {
        fac = PROTECT(allocMatrix(REALSXP, N, m)); nprot++;
        memcpy(REAL(fac), C, (size_t) N * m * sizeof(double));
    }
    const char *stops[] = {"", "M", "threshold", "exhausted"};
    const char *names[] = {"index", "trace", "trace0", "d", "stop", "factor",
                           ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, idx);
    SET_VECTOR_ELT(out, 1, tr);
    SET_VECTOR_ELT(out, 2, ScalarReal(trace0));
    SET_VECTOR_ELT(out, 3, d);
    SET_VECTOR_ELT(out, 4, mkString(stops[stop]));
    SET_VECTOR_ELT(out, 5, fac);
    UNPROTECT(nprot);
    return out;
}

/* The weighted trace along a given sequence of inducing inputs Z (M x D):
 * list(trace (M), trace0, d (N, the residuals for all of Z), rank (number
 * of columns added), factor (N x rank, or NULL)). */
SEXP ffi_sel_trace(SEXP kern, SEXP x, SEXP weights, SEXP Z, SEXP tol,
                   SEXP factor)
{
    spv_kfun k;
    int N, D;
    sel_check_inputs(kern, x, weights, &k, &N, &D);
    chk_real_matrix(Z, "Z", D);
    chk_finite(Z, "Z");
    const int M = nrows(Z);
    if (M < 1) error("'Z' must have at least one row");
    const double tl = sel_check_tol(tol);
    const int want_factor = chk_flag(factor, "factor");

    double *xs = (double *) R_alloc((size_t) D * N, sizeof(double));
    double *zs = (double *) R_alloc((size_t) D * M, sizeof(double));
    if (kc_points(&k, REAL_RO(x), (size_t) N, xs) ||
        kc_points(&k, REAL(Z), (size_t) M, zs))
        kc_overflow_error(&k);
    double *C = (double *) R_alloc((size_t) N * M, sizeof(double));
    double *col = (double *) R_alloc((size_t) N, sizeof(double));
    char *excl = R_alloc((size_t) N, sizeof(char));
    double *Lz = (double *) R_alloc((size_t) M * M, sizeof(double));
    int *acc = (int *) R_alloc((size_t) M, sizeof(int));
    double *kz = (double *) R_alloc((size_t) M, sizeof(double));

    int nprot = 0;
    SEXP d = PROTECT(allocVector(REALSXP, N)); nprot++;
    SEXP tr = PROTECT(allocVector(REALSXP, M)); nprot++;
    double trace0 = 0.0;
    const int a = sel_sequence(&k, xs, N, REAL(weights), zs, M, tl, C,
                               REAL(d), col, excl, Lz, acc, kz, REAL(tr),
                               &trace0);
    SEXP fac = R_NilValue;
    if (want_factor) {
        fac = PROTECT(allocMatrix(REALSXP, N, a)); nprot++;
        memcpy(REAL(fac), C, (size_t) N * a * sizeof(double));
    }
    const char *names[] = {"trace", "trace0", "d", "rank", "factor", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, tr);
    SET_VECTOR_ELT(out, 1, ScalarReal(trace0));
    SET_VECTOR_ELT(out, 2, d);
    SET_VECTOR_ELT(out, 3, ScalarInteger(a));
    SET_VECTOR_ELT(out, 4, fac);
    UNPROTECT(nprot);
    return out;
}
