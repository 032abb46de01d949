/*
 * vecchia.c: the exact log likelihood of the Vecchia-inducing-points
 * full-scale approximation (VIF) of sgpr(neighbours = K), its adjoints with
 * respect to every kernel block it reads, and its predictive distribution.
 *
 * The model (Gyger, Furrer and Sigrist 2025): y = m + f_global + r + noise,
 * where f_global is the inducing-point (Nystrom) part of the GP and the
 * residual process with the noise, R = Kff - Qff + Lambda, gets a Vecchia
 * approximation (Vecchia 1988; Katzfuss and Guinness 2021, eqs. 1-3):
 * every point i conditions on its neighbours N(i), which come earlier in an
 * ordering. With the whitened features a_j = L^-1 k_u(x_j), L = chol(Kuu)
 * (so Qff = A'A), and S_i = (N(i), i):
 *
 *   G_i = R[N,N],  g_i = R[N,i],  rho_i = R[i,i],   R = Kff - A'A + Lambda
 *   b_i = G_i^-1 g_i,   d_i = rho_i - g_i'b_i,   t_i = (-b_i, 1)
 *   R~^-1 = B'D^-1 B    (B unit lower triangular, row i: -b_i' at N(i);
 *                        Katzfuss and Guinness 2021, eq. 3)
 *   Sigma~ = A'A + R~   (the VIF covariance of y; Gyger et al. 2025)
 *
 * Woodbury and the matrix determinant lemma with P = R~^-1 give
 *   Sigma~^-1 = P - P A' Bm^-1 A P,    |Sigma~| = |Bm| prod_i d_i,
 *   Bm = I + A P A' = I + sum_i c_i c_i' / d_i,   c_i = A_S t_i = a_i - A_N b_i,
 * and with the whitened targets e_i = t_i' ytil_S (= (B ytil)_i),
 *   w = sum_i c_i e_i / d_i,   LB = chol(Bm),   v = LB^-1 w,   vt = LB^-T v,
 *   log L = -N/2 log 2 pi - 1/2 sum_i log d_i - sum log diag(LB)
 *           - 1/2 sum_i e_i^2 / d_i + 1/2 v'v.
 * This is the SGPR form (bound_gaussian.c) with A Lambda^-1/2 replaced by the
 * Vecchia-whitened features c_i / sqrt(d_i) and without a trace term: the
 * value is a likelihood, not a bound. With no neighbours it is the
 * Nystrom-plus-diagonal (FITC) likelihood; with all earlier points as
 * neighbours it is the exact GP likelihood (any ordering).
 *
 * Adjoints (derived by hand for this package; checked by central finite
 * differences in the tests). With mu_i = c_i'vt, r_i = (e_i - mu_i) / d_i,
 * q_i = c_i'Bm^-1 c_i:
 *   dF/dc_i = -Bm^-1 c_i / d_i + r_i vt,   dF/de_i = -r_i,
 *   dF/dd_i = 1/2 (r_i^2 - 1/d_i + q_i / d_i^2).
 * Through the local regression (db = G^-1 (dg - dG b), dd = drho - 2 b'dg
 * + b'dG b), with bbar = -A_N' dF/dc_i + r_i ytil_N and beta = G^-1 bbar,
 * the adjoint of the symmetric block R[S,S] is of rank two:
 *   H_i = dbar t t' + (beta~ t' + t beta~') / 2,   beta~ = (beta, 0),
 *   dbar = dF/dd_i.
 * It is the adjoint of the kernel block K(S_i, S_i) (kernel_local.c), its
 * diagonal that of the noise lambda_S, and with R = Kff - A'A the adjoint
 * of the features is
 *   dF/dA_S += (dF/dc_i - 2 dbar c_i - A_N beta) t' - c_i beta~'
 * (two rank-one updates: -2 A_S H_i costs no O(M K^2) product), and that of
 * the targets dF/dytil_S += -r_i t. Finally, F depends on A only through
 * A'A-type forms, so with Abar = dF/dA:
 *   dF/dKuf = L^-T Abar,   dF/dKuu = -1/2 L^-T sym(Abar A') L^-1.
 *
 * The sums over points (Bm, w, sum e^2/d, sum log d; and in the backward
 * pass Abar A' and the contracted gradients) are over row blocks: a block
 * owns some points (the first `no` of its nu columns) and holds their
 * neighbours as further columns, so that chunks of rows in one process and
 * the shards of a cluster are the same computation (R/vif.R). Pass 1
 * returns a block's statistics; the M x M step (vf_value) gives the value
 * and Bm^-1, vt; pass 2 a block's adjoints.
 *
 * Prediction at a new point s (neighbours N among the training points, the
 * test point conditioning on training points only): with the same local
 * regression on R restricted to (N, s), noise on N only,
 *   mean = m + c_s'vt + b_s'ytil_N,   var(f_s) = c_s'Bm^-1 c_s + d_s.
 *
 * Cost per point: the local Gram A_S'A_S (M (K+1)^2 / 2), the factor of
 * G (K^3 / 6) and O(M K) for the rest; per block the solves with L
 * (M^2 per column) and the M x M products of the adjoint pass. Pass 2
 * forms the Gram and the factor again unless the caller kept pass 1's
 * records ((K+1)(K+2)/2 + 1 doubles per point; R/vif.R decides by
 * control$memory).
 *
 * Memory: with a single kernel or a sum of single kernels
 * (ffi_vf_stats_kern, ffi_vf_adjoints_fac)
 * the local kernel blocks are formed VF_BATCH points at a time
 * (kern_local_range(), kernel_local.c) as the regressions need them, and
 * pass 2 returns the adjoint of each block by its factors (t, beta~, dbar:
 * 2K + 3 doubles) rather than as a (K+1)^2 block, so that neither pass
 * holds (K+1)^2 doubles per row of a block. The kernel gradient
 * (kern_grad_local()) forms each kernel value again as kern_local() does:
 * every number is the one of the route with the blocks (a sum adds its
 * parts' blocks in the order R/neighbours.R does, and keeps each part's
 * blocks of the batch for its gradient). A product of kernels takes the
 * blocks (ffi_vf_stats, ffi_vf_adjoints), which R/neighbours.R combines
 * from the parts.
 */
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"

#define LOG_2PI 1.8378770664093454836

enum { VF_OK = 0, VF_LOCAL = 1, VF_NONFINITE = 2 };

/* A block: its features A (M x nu, whitened), the local kernel blocks and
 * neighbour indices of its first no points, the noise and targets of all
 * nu points. */
/* Points per batch: of pass 2 (vf_adjoints) and of the local kernel
 * blocks that pass 1 forms as it goes (vf_kcache). */
#define VF_BATCH 64

/* The local kernel blocks of a block formed VF_BATCH points at a time
 * (pass 1 without a chunk-sized Kloc): the kernel, the block's scaled
 * inputs, the batch's blocks (points c0 <= c < c1) and workspace. */
typedef struct {
    const spv_klocal *kl;
    double *buf, *parts, *r2;   /* parts: each part's blocks of a sum */
    int *S;
    int c0, c1;
} vf_kcache;

typedef struct {
    int M, K, nu, no;
    const double *A, *Kloc, *lambda, *ytil;
    const int *nbl;
    vf_kcache *kc;      /* NULL: the blocks are in Kloc */
} vf_block;

/* The local kernel block of point c: from Kloc, or from the batch that
 * holds c (formed when c leaves the current batch; the points are visited
 * in order). */
static const double *vf_kloc(const vf_block *b, int c)
{
    const size_t bs = (size_t) (b->K + 1) * (b->K + 1);
    vf_kcache *kc = b->kc;
    if (kc == NULL) return b->Kloc + bs * c;
    if (c < kc->c0 || c >= kc->c1) {
        kc->c0 = c;
        kc->c1 = b->no - c < VF_BATCH ? b->no : c + VF_BATCH;
        kern_klocal_range(kc->kl, b->nbl, b->K, kc->c0, kc->c1, kc->buf, kc->parts,
                          kc->S, kc->r2);
    }
    return kc->buf + bs * (c - kc->c0);
}

/* The batch cache of block b for the kernel `kern` (a single kernel or a
 * sum of single kernels, checked into *kl) on the block's rows x, empty,
 * attached to b. */
static void vf_kcache_init(vf_kcache *kc, spv_klocal *kl, SEXP kern, SEXP x, vf_block *b)
{
    const size_t K1 = (size_t) b->K + 1;
    kern_klocal_args(kern, x, kl);
    if (nrows(x) != b->nu) error("'x' must have %d rows", b->nu);
    kc->kl = kl;
    kc->buf = la_alloc(K1 * K1 * VF_BATCH);
    kc->parts = kl->np > 1 ? la_alloc(K1 * K1 * VF_BATCH * kl->np) : NULL;
    kc->r2 = la_alloc(K1 * K1 + 1);
    kc->S = (int *) R_alloc(K1, sizeof(int));
    kc->c0 = kc->c1 = 0;
    b->kc = kc;
}

/* A point's record between the passes: t = (-b, 1) (K+1), d, and the
 * Cholesky factor of G packed by columns (K(K+1)/2), so that pass 2 does
 * not factorise again. */
static inline size_t vf_rec_size(int K)
{
    return (size_t) K + 2 + (size_t) K * (K + 1) / 2;
}

/* The neighbours S = (N(c), c) of point c as 0-based columns; returns k. */
static inline int vf_set(const vf_block *b, int c, int *S)
{
    const int *pc = b->nbl + (size_t) b->K * c;
    int k = 0;
    while (k < b->K && pc[k] > 0) {
        S[k] = pc[k] - 1;
        k++;
    }
    S[k] = c;
    return k;
}

/* Lower Cholesky factor of the leading n x n of R (leading dimension ld)
 * in place, right-looking (contiguous inner loops; n is small). Returns 0,
 * or j + 1 when the pivot of column j is not positive. */
static int vf_chol(double *R, int n, int ld)
{
    for (int j = 0; j < n; j++) {
        double *cj = R + (size_t) ld * j;
        if (!(cj[j] > 0.0)) return j + 1;
        const double piv = sqrt(cj[j]);
        cj[j] = piv;
        const double ip = 1.0 / piv;
        for (int i = j + 1; i < n; i++) cj[i] *= ip;
        for (int q = j + 1; q < n; q++) {
            double *cq = R + (size_t) ld * q;
            const double f = cj[q];
            for (int i = q; i < n; i++) cq[i] -= cj[i] * f;
        }
    }
    return 0;
}

/* x <- L^-1 x and x <- L^-T x for the k x k lower factor packed by
 * columns (column j at offset j k - j (j - 1) / 2). */
static void vf_solve_packed(const double *P, int k, double *x)
{
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const double xj = x[j] / P[off];
        x[j] = xj;
        for (int i = j + 1; i < k; i++) x[i] -= P[off + (size_t) (i - j)] * xj;
        off += (size_t) (k - j);
    }
}

static void vf_solve_packed_t(const double *P, int k, double *x)
{
    for (int j = k - 1; j >= 0; j--) {
        const size_t off = (size_t) j * k - (size_t) j * (j - 1) / 2;
        double s = x[j];
        for (int i = j + 1; i < k; i++) s -= P[off + (size_t) (i - j)] * x[i];
        x[j] = s / P[off];
    }
}

/* Workspace of the local regression: the gathered features W = A_S
 * (M x (K+1)) and the block R[S,S] ((K+1)^2). */
typedef struct {
    int *S;
    double *W, *R;
} vf_work;

static void vf_work_alloc(vf_work *w, int M, int K)
{
    w->S = (int *) R_alloc((size_t) K + 1, sizeof(int));
    w->W = la_alloc((size_t) M * (K + 1));
    w->R = la_alloc((size_t) (K + 1) * (K + 1));
}

/* The block R[S,S] = K(S,S) - A_S'A_S of point c of block b, without the
 * noise, into the lower triangle of R ((K+1) x (K+1)), with the gathered
 * features A_S in w->W and S in w->S. Returns k, the number of neighbours. */
static int vf_local(const vf_block *b, int c, vf_work *w, double *R)
{
    const int M = b->M, K1 = b->K + 1;
    const int k = vf_set(b, c, w->S), n1 = k + 1;
    for (int q = 0; q < n1; q++)
        memcpy(w->W + (size_t) M * q, b->A + (size_t) M * w->S[q], (size_t) M * sizeof(double));
    const double *Kc = vf_kloc(b, c);
    for (int q = 0; q < n1; q++)
        for (int i = q; i < n1; i++)
            R[i + (size_t) K1 * q] = Kc[i + (size_t) K1 * q];
    const double mone = -1.0, one = 1.0;
    if (M > 0)
        F77_CALL(dsyrk)("L", "T", &n1, &M, &mone, w->W, &M, &one, R, &K1
                        FCONE FCONE);
    return k;
}

/* The local regression from the block R[S,S] of a point with k neighbours
 * (the noise added; lower triangle, leading dimension K1 = K + 1, overwritten):
 * the factor of G, t = (-b, 1) and d, written to the record `rec`
 * (vf_rec_size). With latent = 1 (prediction) a d below 0 from rounding is
 * set to 0; otherwise d must be positive. Returns a VF_ status. */
static int vf_factor(double *R, int k, int K1, double *rec, int latent)
{
    /* G = L_G L_G'; l = L_G^-1 g; d = rho - l'l; b = L_G^-T l */
    double *t = rec, *P = rec + K1 + 1;
    for (int q = 0; q < k; q++) t[q] = R[k + (size_t) K1 * q];
    double d = R[k + (size_t) K1 * k];
    if (k > 0) {
        if (vf_chol(R, k, K1) != 0) return VF_LOCAL;
        size_t off = 0;
        for (int j = 0; j < k; j++)
            for (int i = j; i < k; i++) P[off++] = R[i + (size_t) K1 * j];
        vf_solve_packed(P, k, t);
        for (int q = 0; q < k; q++) d -= t[q] * t[q];
        vf_solve_packed_t(P, k, t);
        for (int q = 0; q < k; q++) t[q] = -t[q];
    }
    t[k] = 1.0;
    if (!R_FINITE(d)) return VF_NONFINITE;
    if (latent) {
        if (d < 0.0) d = 0.0;
    } else if (!(d > 0.0)) {
        return VF_LOCAL;
    }
    rec[K1] = d;
    return VF_OK;
}

/* The local regression of point c of block b (header): R[S,S] = K(S,S) -
 * A_S'A_S + Lambda_S, then vf_factor(). Returns k in *kout and a VF_
 * status. */
static int vf_regress(const vf_block *b, int c, vf_work *w, double *rec,
                      int latent, int *kout)
{
    const int K1 = b->K + 1;
    double *R = w->R;
    const int k = vf_local(b, c, w, R);
    *kout = k;
    for (int q = 0; q <= k; q++) R[q + (size_t) K1 * q] += b->lambda[w->S[q]];
    return vf_factor(R, k, K1, rec, latent);
}

/* A = L^-1 Kuf into fresh workspace. */
static double *vf_features(const double *L, int M, const double *Kuf, int nu, double *A)
{
    if (A == NULL) A = la_alloc((size_t) M * nu);
    la_copy(A, Kuf, (size_t) M * nu);
    la_trsm_left(L, M, A, nu, 'N');
    return A;
}

static void vf_status_error(int st)
{
    if (st == VF_LOCAL)
        error("a neighbour block of the residual covariance is not positive "
              "definite (noise variances too small for double precision, or "
              "inputs duplicated with no noise)");
    if (st == VF_NONFINITE)
        error("the residual covariance of a neighbour block is not finite");
}

/* Pass 1 of block b: BB = sum c c' / d (M x M, full), w = sum c e / d,
 * sums = (sum e^2 / d, sum log d, sum (d - lambda), sum k(x, x)): the last
 * two measure how much of the prior variance neither the inducing points
 * nor the neighbours explain (the conditional variances of the residual
 * signal against the kernel's variances); the points' records into recs
 * (no x vf_rec_size(K)) when keep is 1, else recs is one record's
 * workspace. */
static int vf_stats(const vf_block *b, double *BB, double *w, double *sums,
                    double *recs, int keep)
{
    const int M = b->M, no = b->no;
    const size_t rs = vf_rec_size(b->K);
    vf_work wk;
    vf_work_alloc(&wk, M, b->K);
    double *C = la_alloc((size_t) M * no);
    double yy = 0.0, sld = 0.0, sleft = 0.0, skk = 0.0;
    const int K1 = b->K + 1;
    memset(w, 0, (size_t) M * sizeof(double));
    for (int c = 0; c < no; c++) {
        if ((c & 1023) == 1023) R_CheckUserInterrupt();
        double *rec = keep ? recs + rs * c : recs;
        int k;
        const int st = vf_regress(b, c, &wk, rec, 0, &k);
        if (st != VF_OK) return st;
        const double d = rec[b->K + 1];
        double *Cc = C + (size_t) M * c, e;
        /* c = W t from the gathered features */
        la_gemv('N', wk.W, M, k + 1, rec, Cc);
        e = 0.0;
        for (int q = 0; q <= k; q++) e += b->ytil[wk.S[q]] * rec[q];
        const double isd = 1.0 / sqrt(d), es = e * isd;
        for (int m = 0; m < M; m++) {
            Cc[m] *= isd;
            w[m] += Cc[m] * es;
        }
        yy += es * es;
        sld += log(d);
        sleft += d - b->lambda[c];
        skk += vf_kloc(b, c)[(size_t) k * (K1 + 1)];
    }
    la_syrk(C, M, no, 1.0, 0.0, BB);
    la_symmetrize_lower(BB, M);
    sums[0] = yy;
    sums[1] = sld;
    sums[2] = sleft;
    sums[3] = skk;
    return VF_OK;
}

/* Pass 1 of block b at J points of the kernel's scale and the noise: the
 * kernel times scale[j] (b's features and local kernel blocks are those of
 * the kernel at scale 1) with the noise variance noise[j] at every point.
 * The scaled kernel's features are sqrt(scale) A, so each point's block
 * K(S,S) - A_S'A_S is formed once and only its factor is formed for each
 * j: the starting grid scores several noise shares of one lengthscale so
 * (R/start.R). BB (M x M x J), w (M x J) and sums (4 x J) as vf_stats()
 * gives them at each point. */
static int vf_stats_shares(const vf_block *b, int J, const double *scale,
                           const double *noise, double *BB, double *w,
                           double *sums)
{
    const int M = b->M, no = b->no, K1 = b->K + 1;
    vf_work wk;
    vf_work_alloc(&wk, M, b->K);
    double *R0 = la_alloc((size_t) K1 * K1), *rec = la_alloc(vf_rec_size(b->K));
    memset(rec, 0, vf_rec_size(b->K) * sizeof(double));
    double *C = la_alloc((size_t) M * no * J);
    memset(w, 0, (size_t) M * J * sizeof(double));
    memset(sums, 0, (size_t) 4 * J * sizeof(double));
    for (int c = 0; c < no; c++) {
        if ((c & 1023) == 1023) R_CheckUserInterrupt();
        const int k = vf_local(b, c, &wk, R0), n1 = k + 1;
        const double kcc = vf_kloc(b, c)[(size_t) k * (K1 + 1)];
        for (int j = 0; j < J; j++) {
            double *R = wk.R;
            for (int q = 0; q < n1; q++)
                for (int i = q; i < n1; i++)
                    R[i + (size_t) K1 * q] = scale[j] * R0[i + (size_t) K1 * q];
            for (int q = 0; q < n1; q++) R[q + (size_t) K1 * q] += noise[j];
            const int st = vf_factor(R, k, K1, rec, 0);
            if (st != VF_OK) return st;
            const double d = rec[K1];
            double *Cc = C + (size_t) M * (c + (size_t) no * j), *wj = w + (size_t) M * j;
            la_gemv('N', wk.W, M, n1, rec, Cc);
            double e = 0.0;
            for (int q = 0; q < n1; q++) e += b->ytil[wk.S[q]] * rec[q];
            const double isd = 1.0 / sqrt(d), f = sqrt(scale[j]) * isd, es = e * isd;
            for (int m = 0; m < M; m++) {
                Cc[m] *= f;
                wj[m] += Cc[m] * es;
            }
            double *sj = sums + 4 * j;
            sj[0] += es * es;
            sj[1] += log(d);
            sj[2] += d - noise[j];
            sj[3] += scale[j] * kcc;
        }
    }
    for (int j = 0; j < J; j++) {
        double *Bj = BB + (size_t) M * M * j;
        la_syrk(C + (size_t) M * no * j, M, no, 1.0, 0.0, Bj);
        la_symmetrize_lower(Bj, M);
    }
    return VF_OK;
}

/* Pass 2 runs in batches of VF_BATCH points: the batch's gathered features
 * (M (K+1) each) stay in cache between the two loops over it, and its
 * Bm^-1 C is one matrix product. */

/* The kernel gradient of the local blocks accumulated by pass 2 batch by
 * batch while the batch's blocks are at hand (kern_grad_local_acc()). */
typedef struct {
    double *th, *s;
    int *S;
} vf_kgrad;

/* Pass 2 of block b given Binv = Bm^-1 (M x M, full), vt and the points'
 * records (from pass 1, or NULL: computed here): Abar (M x nu, zeroed by
 * the caller), the local adjoints Gloc ((K+1)^2 x no) or their factors
 * Gfac, glambda and gytil (nu, zeroed by the caller); with kg (and Gfac
 * and the blocks formed in batches, b->kc), the kernel gradient of the
 * local blocks, contracted batch by batch with the batch's blocks. In batches of VF_BATCH points: the c of the
 * batch's points first (gathering each point's features A_S once), so
 * that Bm^-1 C is one matrix product; then per point the products with
 * the gathered features go through BLAS (M x (K+1) matrix-vector and
 * rank-two products). Workspace O(VF_BATCH M K), whatever the block's
 * size. */
static int vf_adjoints(const vf_block *b, const double *Binv, const double *vt,
                       const double *recs_in, double *Abar, double *Gloc,
                       double *Gfac, double *glambda, double *gytil, vf_kgrad *kg)
{
    const int M = b->M, K = b->K, K1 = K + 1, no = b->no, ione = 1;
    const double one = 1.0, mone = -1.0, zero = 0.0;
    const size_t rs = vf_rec_size(K), wsz = (size_t) M * K1;
    const int nbt = no < VF_BATCH ? (no > 0 ? no : 1) : VF_BATCH;
    int *Sb = (int *) R_alloc((size_t) K1 * nbt, sizeof(int));
    int *kb = (int *) R_alloc((size_t) nbt, sizeof(int));
    double *Wb = la_alloc(wsz * nbt);
    double *own = recs_in == NULL ? la_alloc(rs * nbt) : NULL;
    vf_work wk;
    wk.R = la_alloc((size_t) K1 * K1);
    double *C = la_alloc((size_t) M * nbt), *BC = la_alloc((size_t) M * nbt);
    double *e = la_alloc((size_t) nbt);
    /* X = (z, c) and Y = (t, -beta~)': the update of A_S is X Y' (M x n1) */
    double *X = la_alloc((size_t) 2 * M), *Y = la_alloc((size_t) 2 * K1);
    double *Wbar = la_alloc(wsz);
    double *cbar = la_alloc((size_t) M), *z = X;
    double *beta = la_alloc((size_t) K1);
    for (int c0 = 0; c0 < no; c0 += nbt) {
        R_CheckUserInterrupt();
        const int nc = no - c0 < nbt ? no - c0 : nbt;
        if (own != NULL) memset(own, 0, rs * nc * sizeof(double));
        for (int j = 0; j < nc; j++) {
            const int c = c0 + j;
            int *S = Sb + (size_t) K1 * j;
            double *W = Wb + wsz * j;
            const double *rec;
            int k;
            if (own != NULL) {
                /* the regression gathers A_S into W */
                wk.S = S;
                wk.W = W;
                const int st = vf_regress(b, c, &wk, own + rs * j, 0, &k);
                if (st != VF_OK) return st;
                rec = own + rs * j;
            } else {
                k = vf_set(b, c, S);
                for (int q = 0; q <= k; q++)
                    memcpy(W + (size_t) M * q, b->A + (size_t) M * S[q], (size_t) M * sizeof(double));
                rec = recs_in + rs * c;
            }
            kb[j] = k;
            la_gemv('N', W, M, k + 1, rec, C + (size_t) M * j);
            double ee = 0.0;
            for (int q = 0; q <= k; q++) ee += b->ytil[S[q]] * rec[q];
            e[j] = ee;
        }
        /* BC = Bm^-1 C: M x nc */
        la_gemm_nn(Binv, M, M, C, nc, BC);
        for (int j = 0; j < nc; j++) {
            const int c = c0 + j, k = kb[j], n1 = k + 1;
            const int *S = Sb + (size_t) K1 * j;
            const double *W = Wb + wsz * j;
            const double *rec = own != NULL ? own + rs * j : recs_in + rs * c;
            const double *t = rec, *P = rec + K1 + 1;
            const double d = rec[K1];
            const double *cc = C + (size_t) M * j, *bc = BC + (size_t) M * j;
            const double q = F77_CALL(ddot)(&M, cc, &ione, bc, &ione);
            const double mu = F77_CALL(ddot)(&M, cc, &ione, vt, &ione);
            const double r = (e[j] - mu) / d;
            const double dbar = 0.5 * (r * r - 1.0 / d + q / (d * d));
            const double id = -1.0 / d, tdb = -2.0 * dbar;
            for (int m = 0; m < M; m++) {
                cbar[m] = id * bc[m] + r * vt[m];
                z[m] = cbar[m] + tdb * cc[m];
            }
            /* beta = G^-1 bbar, bbar = -A_N' cbar + r ytil_N; z = cbar - 2 dbar c
             * - A_N beta (A_N: the first k gathered columns) */
            for (int i = 0; i < k; i++) beta[i] = r * b->ytil[S[i]];
            beta[k] = 0.0;
            if (k > 0) {
                F77_CALL(dgemv)("T", &M, &k, &mone, W, &M, cbar, &ione, &one, beta, &ione FCONE);
                vf_solve_packed(P, k, beta);
                vf_solve_packed_t(P, k, beta);
                F77_CALL(dgemv)("N", &M, &k, &mone, W, &M, beta, &ione, &one, z, &ione FCONE);
            }
            /* Abar_S += z t' - c beta~'; H = dbar t t' + (beta~ t' + t beta~')/2 */
            memcpy(X + M, cc, (size_t) M * sizeof(double));
            for (int i = 0; i < n1; i++) {
                Y[i] = t[i];
                Y[K1 + i] = -beta[i];
            }
            const int two = 2;
            F77_CALL(dgemm)("N", "T", &M, &n1, &two, &one, X, &M, Y, &K1, &zero, Wbar, &M
                            FCONE FCONE);
            double *H = Gloc != NULL ? Gloc + (size_t) K1 * K1 * c : NULL;
            for (int i2 = 0; i2 < n1; i2++) {
                const double tj = t[i2], bj = beta[i2];
                F77_CALL(daxpy)(&M, &one, Wbar + (size_t) M * i2, &ione,
                                Abar + (size_t) M * S[i2], &ione);
                if (H != NULL) {
                    double *Hj = H + (size_t) K1 * i2;
                    for (int i = 0; i < n1; i++) Hj[i] = SPV_VF_H(dbar, t, beta, i, i2);
                }
                glambda[S[i2]] += dbar * tj * tj + bj * tj;
                gytil[S[i2]] -= r * tj;
            }
            if (Gfac != NULL) {
                /* H's factors (t, beta~, dbar), zero beyond n1 */
                double *f = Gfac + (size_t) (2 * K1 + 1) * c;
                memcpy(f, t, (size_t) n1 * sizeof(double));
                memcpy(f + K1, beta, (size_t) n1 * sizeof(double));
                f[2 * K1] = dbar;
            }
        }
        if (kg != NULL) {
            /* the batch's blocks when the cache holds exactly this batch
             * (it does: both run in batches of VF_BATCH from 0), else the
             * values formed again (the same numbers) */
            const vf_kcache *kc = b->kc;
            const int same = kc->c0 == c0 && kc->c1 == c0 + nc;
            kern_klocal_grad_acc(kc->kl, b->nbl, K, c0, c0 + nc, Gfac,
                                 same ? kc->buf : NULL, same ? kc->parts : NULL,
                                 kg->th, kg->S, kg->s);
        }
    }
    return VF_OK;
}

/* ---- .Call entry points ------------------------------------------------ */

/* The checks of a block: L (M x M factor), Kuf (M x nu), Kloc ((K+1)^2 x
 * no; NULL only where the caller allows it: pass 2 with the records of
 * pass 1 does not read it), nbl (K x no), ytil (nu) and, with per_row,
 * lambda (nu); without it lambda is not read and b->lambda is NULL
 * (ffi_vf_stats_shares(), whose noise variances are one per point of the
 * grid, not one per row). */
static void vf_block_args(SEXP L, SEXP Kuf, SEXP Kloc, SEXP nbl, SEXP lambda,
                          int per_row, SEXP ytil, vf_block *b)
{
    chk_chol_factor(L, "L", -1);
    const int M = nrows(L);
    chk_real_matrix(Kuf, "Kuf", -1);
    if (nrows(Kuf) != M) error("'Kuf' must have %d rows", M);
    const int nu = ncols(Kuf);
    chk_finite(Kuf, "Kuf");
    chk_local_index(nbl, "nbl", nu);
    const int K = nrows(nbl), no = ncols(nbl);
    if (!isNull(Kloc)) {
        chk_real_matrix(Kloc, "Kloc", no);
        if (nrows(Kloc) != (K + 1) * (K + 1))
            error("'Kloc' must have %d rows", (K + 1) * (K + 1));
        chk_finite(Kloc, "Kloc");
    }
    if (per_row) {
        chk_real_vector(lambda, "lambda", nu);
        chk_finite(lambda, "lambda");
        for (int i = 0; i < nu; i++)
            if (REAL(lambda)[i] < 0.0)
                error("noise variances 'lambda' must not be negative");
    }
    chk_real_vector(ytil, "ytil", nu);
    chk_finite(ytil, "ytil");
    b->M = M; b->K = K; b->nu = nu; b->no = no;
    b->Kloc = isNull(Kloc) ? NULL : REAL(Kloc); b->nbl = INTEGER(nbl);
    b->kc = NULL;
    b->lambda = per_row ? REAL(lambda) : NULL; b->ytil = REAL(ytil);
}

/* The owned points' noise variances must be positive (the bound's
 * points; a new point of a prediction has none). */
static void vf_positive_noise(const vf_block *b)
{
    for (int i = 0; i < b->no; i++)
        if (!(b->lambda[i] > 0.0))
            error("noise variances 'lambda' must be positive");
}

/* Bm^-1 (M x M) and vt (M) from ffi_vf_value, checked. */
static void vf_posterior_args(SEXP Binv, SEXP vt, int M)
{
    chk_real_matrix(Binv, "Binv", M);
    if (nrows(Binv) != M) error("'Binv' must have %d rows", M);
    chk_finite(Binv, "Binv");
    chk_real_vector(vt, "vt", M);
    chk_finite(vt, "vt");
}

/* Pass 1 over one block: list(BB, w, sums = c(sum e^2/d, sum log d,
 * sum (d - lambda), sum k(x, x)), n, recs), recs (the points' records for
 * pass 2) when keep is TRUE. The local kernel blocks come from Kloc or,
 * with kern and x (the block's rows), are formed VF_BATCH points at a
 * time (the same numbers without a chunk-sized Kloc). */
static SEXP vf_stats_call(SEXP L, SEXP Kuf, SEXP Kloc, SEXP nbl, SEXP lambda,
                          SEXP ytil, SEXP keep, SEXP kern, SEXP x)
{
    vf_block b;
    vf_block_args(L, Kuf, Kloc, nbl, lambda, 1, ytil, &b);
    vf_positive_noise(&b);
    const int kp = chk_flag(keep, "keep");
    vf_kcache kc;
    spv_klocal kk;
    if (isNull(Kloc)) {
        vf_kcache_init(&kc, &kk, kern, x, &b);
    }
    int nprot = 0;
    /* the features; ffi_vf_stats_kern with keep returns them for pass 2 */
    const int retA = kp && b.kc != NULL;
    SEXP sA = R_NilValue;
    if (retA) { sA = PROTECT(allocMatrix(REALSXP, b.M, b.nu)); nprot++; }
    b.A = vf_features(REAL(L), b.M, REAL(Kuf), b.nu, retA ? REAL(sA) : NULL);
    SEXP BB = PROTECT(allocMatrix(REALSXP, b.M, b.M)); nprot++;
    SEXP w = PROTECT(allocVector(REALSXP, b.M)); nprot++;
    SEXP sums = PROTECT(allocVector(REALSXP, 4)); nprot++;
    const size_t rs = vf_rec_size(b.K);
    SEXP recs = R_NilValue;
    double *prec;
    if (kp) {
        recs = PROTECT(allocMatrix(REALSXP, (int) rs, b.no)); nprot++;
        prec = REAL(recs);
    } else {
        prec = la_alloc(rs);     /* one record at a time */
    }
    /* the slots a point with fewer than K neighbours leaves unused */
    memset(prec, 0, rs * (kp ? b.no : 1) * sizeof(double));
    const int st = vf_stats(&b, REAL(BB), REAL(w), REAL(sums), prec, kp);
    vf_status_error(st);
    chk_result(REAL(BB), (size_t) b.M * b.M, "Vecchia statistic Bm");
    chk_result(REAL(w), (size_t) b.M, "Vecchia statistic w");
    chk_result(REAL(sums), 4, "Vecchia sums");
    if (kp) chk_result(prec, rs * b.no, "local regression of a neighbour block");
    const char *names[] = {"BB", "w", "sums", "n", "recs", "A", ""};
    if (b.kc == NULL) names[5] = "";       /* ffi_vf_stats: no A */
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, BB);
    SET_VECTOR_ELT(out, 1, w);
    SET_VECTOR_ELT(out, 2, sums);
    SET_VECTOR_ELT(out, 3, ScalarReal((double) b.no));
    SET_VECTOR_ELT(out, 4, recs);
    if (b.kc != NULL) SET_VECTOR_ELT(out, 5, sA);
    UNPROTECT(nprot);
    return out;
}

SEXP ffi_vf_stats(SEXP L, SEXP Kuf, SEXP Kloc, SEXP nbl, SEXP lambda,
                  SEXP ytil, SEXP keep)
{
    if (isNull(Kloc)) error("'Kloc' must be a numeric matrix");
    return vf_stats_call(L, Kuf, Kloc, nbl, lambda, ytil, keep, R_NilValue, R_NilValue);
}

/* The same with the local kernel blocks of the kernel `kern` (single, or a
 * sum of single kernels) formed
 * from the block's rows x (nu x D) in batches; with keep, also A, the
 * whitened features L^-1 Kuf, which pass 2 may take instead of forming
 * them again. */
SEXP ffi_vf_stats_kern(SEXP L, SEXP Kuf, SEXP kern, SEXP x, SEXP nbl,
                       SEXP lambda, SEXP ytil, SEXP keep)
{
    return vf_stats_call(L, Kuf, R_NilValue, nbl, lambda, ytil, keep, kern, x);
}

/* Pass 1 over one block at J points of the kernel's scale and the noise
 * (vf_stats_shares()): list(BB (M x M x J), w (M x J), sums (4 x J), n).
 * L and Kuf are those of the kernel at scale 1, whose local blocks come
 * from Kloc or, with Kloc NULL, from the kernel `kern` (single, or a sum
 * of single kernels) on the
 * block's rows x; scale and noise (length J) positive. */
SEXP ffi_vf_stats_shares(SEXP L, SEXP Kuf, SEXP Kloc, SEXP kern, SEXP x,
                         SEXP nbl, SEXP ytil, SEXP scale, SEXP noise)
{
    chk_real_vector(scale, "scale", -1);
    const int J = length(scale);
    if (J < 1) error("'scale' must have at least one value");
    chk_real_vector(noise, "noise", J);
    for (int j = 0; j < J; j++)
        if (!(REAL(scale)[j] > 0.0 && R_FINITE(REAL(scale)[j]) &&
              REAL(noise)[j] > 0.0 && R_FINITE(REAL(noise)[j])))
            error("'scale' and 'noise' must be positive and finite");
    int nprot = 0;
    vf_block b;
    vf_block_args(L, Kuf, Kloc, nbl, R_NilValue, 0, ytil, &b);
    vf_kcache kc;
    spv_klocal kk;
    if (isNull(Kloc)) vf_kcache_init(&kc, &kk, kern, x, &b);
    b.A = vf_features(REAL(L), b.M, REAL(Kuf), b.nu, NULL);
    SEXP BB = PROTECT(alloc3DArray(REALSXP, b.M, b.M, J)); nprot++;
    SEXP w = PROTECT(allocMatrix(REALSXP, b.M, J)); nprot++;
    SEXP sums = PROTECT(allocMatrix(REALSXP, 4, J)); nprot++;
    const int st = vf_stats_shares(&b, J, REAL(scale), REAL(noise), REAL(BB), REAL(w),
                                   REAL(sums));
    vf_status_error(st);
    chk_result(REAL(BB), (size_t) b.M * b.M * J, "Vecchia statistic Bm");
    chk_result(REAL(w), (size_t) b.M * J, "Vecchia statistic w");
    chk_result(REAL(sums), (size_t) 4 * J, "Vecchia sums");
    const char *names[] = {"BB", "w", "sums", "n", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, BB);
    SET_VECTOR_ELT(out, 1, w);
    SET_VECTOR_ELT(out, 2, sums);
    SET_VECTOR_ELT(out, 3, ScalarReal((double) b.no));
    UNPROTECT(nprot);
    return out;
}

/* The log likelihood from the summed statistics: list(bound, logdet, fit,
 * LB, v, vt) and, with grad, Binv = Bm^-1. */
SEXP ffi_vf_value(SEXP BB, SEXP w, SEXP sums, SEXP N, SEXP grad)
{
    chk_real_matrix(BB, "BB", -1);
    const int M = nrows(BB), ione = 1;
    if (ncols(BB) != M || M < 1) error("'BB' must be a square matrix");
    chk_finite(BB, "BB");
    chk_real_vector(w, "w", M);
    chk_finite(w, "w");
    chk_real_vector(sums, "sums", 4);
    chk_finite(sums, "sums");
    const double n = chk_scalar(N, "N");
    const int g = chk_flag(grad, "grad");
    int nprot = 0;
    SEXP sLB = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    SEXP sv = PROTECT(allocVector(REALSXP, M)); nprot++;
    SEXP svt = PROTECT(allocVector(REALSXP, M)); nprot++;
    double *B = la_alloc((size_t) M * M);
    la_copy(B, REAL(BB), (size_t) M * M);
    for (int m = 0; m < M; m++) B[m + (size_t) M * m] += 1.0;
    bg_out o;
    memset(&o, 0, sizeof(o));
    o.LB = REAL(sLB);
    o.v = REAL(sv);
    la_copy(o.v, REAL(w), (size_t) M);
    o.trace = 0.0;
    /* bg_value_stats: the SGPR value with sum e^2/d for |Lambda^-1/2 y|^2,
     * sum log d for sum log lambda and no trace term */
    const double yy = REAL(sums)[0];
    const int st = bg_value_stats(M, n, B, yy, yy > 0.0 ? yy : 1.0,
                                  REAL(sums)[1], &o);
    if (st == BG_B) error("the Cholesky factorisation of Bm = I + A P A' failed");
    if (st == BG_PRECISION)
        error("the likelihood has lost its precision: Bm is too "
              "ill-conditioned for double precision");
    for (int i = 0; i < M; i++)        /* LB: zero upper triangle */
        for (int j = i + 1; j < M; j++) o.LB[i + (size_t) M * j] = 0.0;
    la_copy(REAL(svt), o.v, (size_t) M);
    F77_CALL(dtrsv)("L", "T", "N", &M, o.LB, &M, REAL(svt), &ione
                    FCONE FCONE FCONE);
    SEXP sBinv = R_NilValue;
    if (g) {
        sBinv = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
        la_chol_inverse(o.LB, M, REAL(sBinv));
    }
    if (!R_FINITE(o.bound)) error("the log likelihood is not finite");
    const char *names[] = {"bound", "logdet", "fit", "LB", "v", "vt", "Binv", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, ScalarReal(o.bound));
    SET_VECTOR_ELT(out, 1, ScalarReal(o.logdet));
    SET_VECTOR_ELT(out, 2, ScalarReal(o.fit));
    SET_VECTOR_ELT(out, 3, sLB);
    SET_VECTOR_ELT(out, 4, sv);
    SET_VECTOR_ELT(out, 5, svt);
    SET_VECTOR_ELT(out, 6, sBinv);
    UNPROTECT(nprot);
    return out;
}

/* Pass 2 over one block: list(Guf = L^-T Abar (M x nu), Gloc, glambda,
 * gytil (nu), AbarA = Abar A' (M x M)), with Gloc the adjoints of the local
 * kernel blocks ((K+1)^2 x no) or, with fac, their factors (Gfac, (2K+3) x
 * no: t, beta~ and dbar of each point, H = dbar t t' + (beta~ t' +
 * t beta~')/2; kernel_local.c contracts either). recs: the records of
 * pass 1 at the same parameters, or NULL; with them Kloc is not read and
 * may be NULL. */
static SEXP vf_adjoints_call(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                             SEXP nbl, SEXP lambda, SEXP ytil, SEXP recs, int fac,
                             SEXP kern, SEXP x, SEXP sA)
{
    vf_block b;
    if (isNull(Kloc) && isNull(recs) && isNull(kern))
        error("'Kloc' must be a numeric matrix (it may be NULL only with 'recs'%s)",
              fac ? " or 'kern'" : "");
    vf_block_args(L, Kuf, Kloc, nbl, lambda, 1, ytil, &b);
    const int M = b.M, nu = b.nu, K1 = b.K + 1;
    vf_positive_noise(&b);
    vf_posterior_args(Binv, vt, M);
    if (!isNull(recs)) {
        chk_real_matrix(recs, "recs", b.no);
        if ((size_t) nrows(recs) != vf_rec_size(b.K))
            error("'recs' must have %d rows", (int) vf_rec_size(b.K));
    }
    /* without the blocks and the records: the blocks of a single kernel (or
     * a sum of single kernels)
     * formed VF_BATCH points at a time as the regressions need them */
    vf_kcache kc;
    spv_klocal kk;
    if (isNull(Kloc) && isNull(recs)) {
        vf_kcache_init(&kc, &kk, kern, x, &b);
    }
    const double *A;
    if (!isNull(sA)) {
        /* the features of pass 1 (ffi_vf_stats_kern) at the same L, Kuf */
        chk_real_matrix(sA, "A", nu);
        if (nrows(sA) != M) error("'A' must have %d rows", M);
        chk_finite(sA, "A");
        A = REAL(sA);
    } else {
        A = vf_features(REAL(L), M, REAL(Kuf), nu, NULL);
    }
    b.A = A;
    int nprot = 0;
    const int gr = fac ? 2 * K1 + 1 : K1 * K1;
    SEXP sG = PROTECT(allocMatrix(REALSXP, M, nu)); nprot++;
    SEXP sGl = PROTECT(allocMatrix(REALSXP, gr, b.no)); nprot++;
    SEXP sgl = PROTECT(allocVector(REALSXP, nu)); nprot++;
    SEXP sgy = PROTECT(allocVector(REALSXP, nu)); nprot++;
    SEXP sAA = PROTECT(allocMatrix(REALSXP, M, M)); nprot++;
    double *Abar = REAL(sG);
    memset(Abar, 0, (size_t) M * nu * sizeof(double));
    memset(REAL(sGl), 0, (size_t) gr * b.no * sizeof(double));
    memset(REAL(sgl), 0, (size_t) nu * sizeof(double));
    memset(REAL(sgy), 0, (size_t) nu * sizeof(double));
    /* the kernel gradient of the local blocks along the way, when they are
     * formed in batches here */
    vf_kgrad kg;
    SEXP sth = R_NilValue;
    if (b.kc != NULL && fac) {
        sth = PROTECT(allocVector(REALSXP, kk.npar)); nprot++;
        kg.th = REAL(sth);
        memset(kg.th, 0, (size_t) kk.npar * sizeof(double));
        kg.s = la_alloc((size_t) kk.k[0].D + 1);
        kg.S = (int *) R_alloc((size_t) K1, sizeof(int));
    }
    const int st = vf_adjoints(&b, REAL(Binv), REAL(vt),
                               isNull(recs) ? NULL : REAL(recs), Abar,
                               fac ? NULL : REAL(sGl), fac ? REAL(sGl) : NULL,
                               REAL(sgl), REAL(sgy), isNull(sth) ? NULL : &kg);
    vf_status_error(st);
    if (!isNull(sth)) {
        chk_result(REAL(sth), (size_t) kk.npar, "gradient in the kernel parameters");
    }
    /* Abar A' (M x M), then Guf = L^-T Abar in place */
    const double one = 1.0, zero = 0.0;
    if (nu > 0) {
        F77_CALL(dgemm)("N", "T", &M, &M, &nu, &one, Abar, &M, A, &M, &zero,
                        REAL(sAA), &M FCONE FCONE);
    } else {
        memset(REAL(sAA), 0, (size_t) M * M * sizeof(double));
    }
    la_trsm_left(REAL(L), M, Abar, nu, 'T');
    chk_result(Abar, (size_t) M * nu, "adjoint of Kuf");
    chk_result(REAL(sGl), (size_t) gr * b.no, "adjoint of the local kernel blocks");
    chk_result(REAL(sgl), (size_t) nu, "adjoint of lambda");
    chk_result(REAL(sgy), (size_t) nu, "adjoint of ytil");
    chk_result(REAL(sAA), (size_t) M * M, "adjoint of Kuu");
    const char *names[] = {"Guf", fac ? "Gfac" : "Gloc", "glambda", "gytil", "AbarA",
                           "theta", ""};
    if (isNull(sth)) names[5] = "";
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, sG);
    SET_VECTOR_ELT(out, 1, sGl);
    SET_VECTOR_ELT(out, 2, sgl);
    SET_VECTOR_ELT(out, 3, sgy);
    SET_VECTOR_ELT(out, 4, sAA);
    if (!isNull(sth)) SET_VECTOR_ELT(out, 5, sth);
    UNPROTECT(nprot);
    return out;
}

SEXP ffi_vf_adjoints(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                     SEXP nbl, SEXP lambda, SEXP ytil, SEXP recs)
{
    return vf_adjoints_call(L, Binv, vt, Kuf, Kloc, nbl, lambda, ytil, recs, 0,
                            R_NilValue, R_NilValue, R_NilValue);
}

/* The same with the factors of the local adjoints (Gfac) in place of
 * Gloc: 2K + 3 doubles per point instead of (K+1)^2. With neither Kloc
 * nor recs, the local kernel blocks of the kernel `kern` (single, or a sum
 * of single kernels) are formed
 * from the block's rows x (nu x D) in batches; kern and x are read only
 * then. A: the features L^-1 Kuf of pass 1, or NULL (formed here). */
SEXP ffi_vf_adjoints_fac(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                         SEXP nbl, SEXP lambda, SEXP ytil, SEXP recs, SEXP kern,
                         SEXP x, SEXP A)
{
    return vf_adjoints_call(L, Binv, vt, Kuf, Kloc, nbl, lambda, ytil, recs, 1,
                            kern, x, A);
}

/* The predictive distribution at the first no points of a block whose
 * other columns are their training neighbours (lambda: the training noise
 * there, 0 at the new points; ytil: the training targets there, 0 at the
 * new points): list(mean = c'vt + b'ytil_N without the constant mean,
 * var = c'Bm^-1 c + d (latent), C = the c of each point (M x no) when full
 * is TRUE, d). */
SEXP ffi_vf_predict(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                    SEXP nbl, SEXP lambda, SEXP ytil, SEXP full)
{
    vf_block b;
    if (isNull(Kloc)) error("'Kloc' must be a numeric matrix");
    vf_block_args(L, Kuf, Kloc, nbl, lambda, 1, ytil, &b);
    const int M = b.M, no = b.no;
    vf_posterior_args(Binv, vt, M);
    const int fc = chk_flag(full, "full");
    b.A = vf_features(REAL(L), M, REAL(Kuf), b.nu, NULL);
    int nprot = 0;
    SEXP smean = PROTECT(allocVector(REALSXP, no)); nprot++;
    SEXP svar = PROTECT(allocVector(REALSXP, no)); nprot++;
    SEXP sd = PROTECT(allocVector(REALSXP, no)); nprot++;
    SEXP sC = R_NilValue;
    if (fc) { sC = PROTECT(allocMatrix(REALSXP, M, no)); nprot++; }
    vf_work wk;
    vf_work_alloc(&wk, M, b.K);
    double *rec = la_alloc(vf_rec_size(b.K)), *cc = la_alloc((size_t) M);
    double *BC = la_alloc((size_t) M);
    for (int c = 0; c < no; c++) {
        if ((c & 1023) == 1023) R_CheckUserInterrupt();
        int k;
        const int st = vf_regress(&b, c, &wk, rec, 1, &k);
        vf_status_error(st);
        const double d = rec[b.K + 1];
        la_gemv('N', wk.W, M, k + 1, rec, cc);
        /* with the point's own target 0, t'ytil_S = -b'ytil_N */
        double e = 0.0;
        for (int q = 0; q <= k; q++) e += b.ytil[wk.S[q]] * rec[q];
        la_gemv('N', REAL(Binv), M, M, cc, BC);
        double q = 0.0, mu = 0.0;
        for (int m = 0; m < M; m++) {
            q += cc[m] * BC[m];
            mu += cc[m] * REAL(vt)[m];
        }
        REAL(smean)[c] = mu - e;
        REAL(svar)[c] = q + d;
        REAL(sd)[c] = d;
        if (fc) memcpy(REAL(sC) + (size_t) M * c, cc, (size_t) M * sizeof(double));
    }
    chk_result(REAL(smean), (size_t) no, "predictive mean");
    chk_result(REAL(svar), (size_t) no, "predictive variance");
    const char *names[] = {"mean", "var", "C", "d", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, smean);
    SET_VECTOR_ELT(out, 1, svar);
    SET_VECTOR_ELT(out, 2, sC);
    SET_VECTOR_ELT(out, 3, sd);
    UNPROTECT(nprot);
    return out;
}
