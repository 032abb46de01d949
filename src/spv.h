/*
 * spv.h: internal interfaces shared by the C files of sparsevgp.
 *
 * Conventions (see ../shared/design/STYLE.md):
 *   - matrices are column-major, as in R and LAPACK;
 *   - points handed to the kernel workers are stored D x n (one point per
 *     column), so that the loops over input dimensions are contiguous;
 *   - kernel parameters are differentiated on the log scale.
 */
#ifndef SPARSEVGP_SPV_H
#define SPARSEVGP_SPV_H

#include <stddef.h>
#include <Rinternals.h>

/* ---- kernels (kernels.c) ---------------------------------------------- */

typedef enum {
    KERN_RBF = 1,
    KERN_MATERN12 = 2,
    KERN_MATERN32 = 3,
    KERN_MATERN52 = 4
} spv_family;

typedef struct {
    spv_family family;
    int D;                    /* input dimension */
    int nls;                  /* number of lengthscales: 1 (shared) or D (ARD) */
    double variance;          /* sigma_f^2 */
    const double *lengthscale;/* length nls, all > 0 */
} spv_kernel;

/* Number of kernel parameters on the log scale: 1 (variance) + nls. */
int kern_npar(const spv_kernel *k);

/* Copy n points of an n x D column-major R matrix into a D x n array,
 * dividing coordinate d by the lengthscale of d. Returns 1 if a scaled
 * coordinate overflowed (then kern_overflow_error() is the error to
 * raise), else 0. */
int kern_scale_points(const spv_kernel *k, const double *x, size_t n,
                      double *xs);
/* The same for rows [r0, r0 + n) of an R matrix with ldx rows. */
int kern_scale_rows(const spv_kernel *k, const double *x, size_t ldx,
                    size_t r0, size_t n, double *xs);
void kern_overflow_error(const spv_kernel *k);

/* K(A, B): nA x nB, from points scaled by kern_scale_points. */
void kern_K(const spv_kernel *k, const double *As, size_t nA,
            const double *Bs, size_t nB, double *K);

/* Local blocks of the kernel matrix for the Vecchia approximation
 * (kernel_local.c): xs holds nu points scaled by kern_scale_points (D x nu),
 * nbl the K x no local neighbour indices (1-based, 0 = none, packed first)
 * of the first no points. Block c is K(S_c, S_c), S_c = (its neighbours,
 * c), stored (K+1) x (K+1) with leading dimension K+1 (entries beyond
 * |S_c| are 0). */
void kern_local(const spv_kernel *k, const double *xs, const int *nbl, int K,
                int no, double *Kloc);
/* The blocks of points c0 <= c < c1 only, block c at Kloc + (K+1)^2 (c -
 * c0), with workspace S (K+1 ints) and r2 ((K+1)^2 doubles); with lower,
 * only the diagonal and the strict lower triangle of |S_c| x |S_c| are
 * written (what src/vecchia.c reads), the other entries left as they are. */
void kern_local_range(const spv_kernel *k, const double *xs, const int *nbl,
                      int K, int c0, int c1, double *Kloc, int *S, double *r2,
                      int lower);
/* The kernel of a .Call (checked) and the rows of x scaled by it (R_alloc). */
double *kern_local_args(SEXP kern, SEXP x, spv_kernel *k);
/* dtheta += d/dtheta sum_c sum_pq G_c[p,q] K(S_c, S_c)[p,q]; Kloc, the
 * blocks of kern_local, saves the exponentials (may be NULL). G holds the
 * blocks G_c ((K+1)^2 each) or, with fac, their factors (2K + 3 each:
 * t, beta~, dbar with G_c[p,q] = SPV_VF_H(dbar, t, beta~, p, q),
 * src/vecchia.c). */
void kern_grad_local(const spv_kernel *k, const double *xs, const int *nbl,
                     int K, int no, const double *G, int fac,
                     const double *Kloc, double *dtheta);
/* The sums of kern_grad_local() over the points c0 <= c < c1 only, added
 * to *dvar and dls[] (d/d log variance and d/d log lengthscales) in the
 * order of kern_grad_local(), so that a caller running over consecutive
 * ranges gets the same numbers; Kloc holds the blocks of these points
 * (block c at (K+1)^2 (c - c0)) or is NULL; workspace S (K+1 ints) and s
 * (D doubles). */
void kern_grad_local_acc(const spv_kernel *k, const double *xs, const int *nbl,
                         int K, int c0, int c1, const double *G, int fac,
                         const double *Kloc, double *dvar, double *dls, int *S,
                         double *s);
/* A single kernel or a sum of single kernels, as the passes that form the
 * local blocks in batches read it (kernel_local.c): its np parts, each
 * with the rows of x scaled by its own lengthscales; npar parameters in
 * all (each part's log variance and log lengthscales, in order). */
typedef struct {
    int np, npar;
    spv_kernel *k;
    double **xs;
} spv_klocal;
/* The kernel `kern` of a .Call (a single kernel, or a sum of single
 * kernels), checked, on the rows of x. */
void kern_klocal_args(SEXP kern, SEXP x, spv_klocal *kl);
/* kern_local_range() of the sum of the parts (lower = 1) into Kloc; with
 * more than one part, each part's blocks also stay in Kparts (np (K+1)^2
 * (c1 - c0) doubles, part j at offset j (K+1)^2 (c1 - c0)). */
void kern_klocal_range(const spv_klocal *kl, const int *nbl, int K, int c0,
                       int c1, double *Kloc, double *Kparts, int *S, double *r2);
/* kern_grad_local_acc() of each part over the points c0 <= c < c1, from
 * the factors G (fac = 1), added to dtheta (npar: each part's d/d log
 * variance and d/d log lengthscales); the blocks of these points, of a
 * single kernel in Kloc or of the parts in Kparts (as kern_klocal_range()
 * left them), save the exponentials; either may be NULL. */
void kern_klocal_grad_acc(const spv_klocal *kl, const int *nbl, int K, int c0,
                          int c1, const double *G, const double *Kloc,
                          const double *Kparts, double *dtheta, int *S, double *s);
/* Entry (i, j) of the adjoint of a local block from its factors:
 * H = dbar t t' + (beta~ t' + t beta~') / 2 (src/vecchia.c). One macro for
 * the pass that writes the blocks and the contraction that reads the
 * factors, so that both give the same numbers to the last bit. */
#define SPV_VF_H(dbar, t, beta, i, j) \
    ((dbar) * (t)[i] * (t)[j] + 0.5 * ((beta)[i] * (t)[j] + (t)[i] * (beta)[j]))
/* A K x no local index matrix (1-based, 0 = none) of the first no of nu
 * points: in range, packed (no index after a 0), never the point itself
 * (column c holding c + 1) and without repeats within a column (util.c). */
void chk_local_index(SEXP nbl, const char *name, int nu);

/* diag K(A, A): stationary kernels give variance everywhere. */
void kern_diag(const spv_kernel *k, size_t n, double *kdiag);

/* Contractions of an adjoint G = dF/dK (see kernels.c):
 * dtheta (length kern_npar) += d/d(log variance, log lengthscales) sum G o K;
 * dA (nA x D, R layout, may be NULL) += d/dA sum G o K.
 * Bs == NULL means K(A, A), whose entries depend on A through both
 * arguments. A cross-covariance is contracted in nt OpenMP threads (over
 * the columns of B; the caller limits nt), K(A, A) in one. */
void kern_grad(const spv_kernel *k, const double *As, size_t nA,
               const double *Bs, size_t nB, const double *G,
               double *dtheta, double *dA, int nt);

/* kern_grad for a cross-covariance K(A, B) that the caller holds (K, nA x
 * nB): no exponential is recomputed. */
void kern_grad_given(const spv_kernel *k, const double *As, size_t nA,
                     const double *Bs, size_t nB, const double *G,
                     const double *K, double *dtheta, double *dA, int nt);

/* kern_grad_given with the caller's workspace of kern_grad_work(D, nls,
 * nA, nB, nt) doubles (a double: exact below 2^53) (no R_alloc: the passes of bound_stream.c reuse one
 * workspace for every chunk of every evaluation). */
double kern_grad_work(int D, int nls, double nA, double nB, int nt);
void kern_grad_given_work(const spv_kernel *k, const double *As, size_t nA,
                          const double *Bs, size_t nB, const double *G,
                          const double *K, double *dtheta, double *dA, int nt,
                          double *work);

/* Contraction of an adjoint g of diag K(A, A): dtheta += d/dtheta g'kdiag. */
void kern_grad_diag(const spv_kernel *k, size_t n, const double *g,
                    double *dtheta);

/* ---- collapsed Gaussian bound (bound_gaussian.c) ----------------------- */

/* The value, the factors and the adjoints of one evaluation. */
typedef struct {
    /* value */
    double bound, logdet, fit, trace, jitter;
    double *L, *LB, *v;                  /* M x M, M x M, M */
    /* adjoints (NULL when not wanted) */
    double *Guu, *Guf, *gdiag, *glambda, *gytil, *mu;
} bg_out;

/* Status of the collapsed Gaussian bound. */
enum { BG_OK = 0, BG_KUU = 1, BG_B = 2, BG_A = 3, BG_KUU_OVERFLOW = 4,
       BG_PRECISION = 5 };

/* The value from the sums over the data: B = I + A A' (M x M, full), on
 * entry out->v = A Lambda^-1/2 ytil and out->trace the summed residual
 * variances; yy = |Lambda^-1/2 ytil|^2, kl = sum k_nn / lambda_n,
 * sumloglam = sum log lambda_n. Sets out->LB, v, logdet, fit, bound;
 * returns BG_OK, BG_B or BG_PRECISION. */
int bg_value_stats(int M, double N, const double *B, double yy, double kl,
                   double sumloglam, bg_out *out);

/* The M x M part of the adjoints: vt = LB^-T v, alpha = L^-T vt, Guu (M x
 * M) and E = L^-T (I - B^-1) (M x M), from which each point's column of
 * dF/dKuf follows (bg_point_adjoint). */
void bg_backward_mm(int M, const double *L, const double *LB,
                    const double *B, const double *v, double *vt,
                    double *alpha, double *Guu, double *E);

/* The per-point adjoints shared by the collapsed bounds (derived for this
 * package, whitened): on entry column n of G (M x N) holds (E A)_n with
 * E = L^-T R, R = I - B^-1 for SGPR (bound_orthogonal.c passes its own R);
 * q_n = a_n' R a_n is recovered as Kuf_n' (E A)_n / sqrt(lambda_n). On exit
 * G = dF/dKuf = E A Lambda^-1/2 + alpha r', and gdiag, glambda, gytil hold
 * dF/dkdiag, dF/dlambda, dF/dytil. isl = lambda^-1/2,
 * r = (ytil - mu) / lambda. */
void bg_point_adjoints(int M, int N, const double *Kuf, const double *isl,
                       const double *alpha, const double *r,
                       const double *lambda, const double *kdiag, double *G,
                       double *gdiag, double *glambda, double *gytil);
/* The same for one point n: kn = Kuf_n, g = column n of G (updated). Uses
 * no R API, so that threads may call it. */
void bg_point_adjoint(int M, const double *kn, double *g, double isl,
                      const double *alpha, double r, double lambda,
                      double kdiag, double *gdiag, double *glambda,
                      double *gytil);


/* ---- linear algebra (linalg.c) ---------------------------------------- */

/* Status of the factorisations with jitter. */
enum { LA_OK = 0, LA_NOT_PD = 1, LA_NONFINITE = 2 };

/* The scale of the jitter added to the n x n symmetric matrix S (leading
 * dimension lds): its mean diagonal, computed without overflow; the
 * largest |S_ii| when that mean is not positive, and a floor (1e-290) when
 * both are zero or subnormal, so that the scale is always a positive normal
 * number. Returns LA_NONFINITE when a diagonal entry is not finite. */
int la_jitter_scale(const double *S, int n, int lds, double *scale);

/* Lower Cholesky factor of S + jitter I (S n x n symmetric, lower triangle
 * read, leading dimension lds), written contiguously to L (n x n, upper
 * triangle zeroed). Tries jitter = base * scale first (the matrix as it is
 * when base = 0, the default of the models), then escalates tenfold from
 * max(base, 1e-10) * scale up to cap * scale, for at most 64
 * factorisations, checking for interrupts between them. A factorisation
 * counts as failed when dpotrf fails or a pivot L_jj^2 is below
 * max(1e-12, n eps) (S_jj + jitter): solves with the factor would lose
 * accuracy beyond 1e-10 (la_chol_shifted in linalg.c).
 * Returns LA_OK with the jitter used in *jitter (never 0 by underflow when
 * base > 0, never Inf or NaN), LA_NOT_PD past the cap, or LA_NONFINITE
 * when S, the scale or the factor is not finite (overflow). */
int la_chol_jitter(const double *S, int n, int lds, double scale,
                   double base, double cap, double *L, double *jitter);

/* la_chol_jitter, where a pivot L_jj^2 below `floor` (absolute) also
 * counts as failed: for a matrix formed as a difference whose rounding
 * errors are absolute, of the size of the matrices subtracted, rather
 * than relative to its own diagonal (C_vv of the orthogonal models,
 * bound_orthogonal.c). */
int la_chol_jitter_floor(const double *S, int n, int lds, double scale,
                         double base, double cap, double floor, double *L,
                         double *jitter);

/* Plain Cholesky in place (lower); returns LAPACK's info (> 0: not
 * positive definite). */
int la_chol(double *A, int n);

/* Workspace of n doubles from R_alloc, never NULL (n = 0 gives one). */
double *la_alloc(size_t n);

/* memcpy of n doubles that is a no-op for n = 0 (whatever the pointers). */
void la_copy(double *dst, const double *src, size_t n);

/* B <- op(L)^-1 B for lower-triangular L (n x n), B n x m.
 * trans = 'N' solves L X = B, 'T' solves L' X = B. */
void la_trsm_left(const double *L, int n, double *B, int m, char trans);

/* B <- B L^-1 for lower-triangular L (n x n), B m x n. */
void la_trsm_right(const double *L, int n, double *B, int m);

/* C = A B: A m x k, B k x n, C m x n (all contiguous). */
void la_gemm_nn(const double *A, int m, int k, const double *B, int n,
                double *C);

/* y = A x (trans 'N', y of length m) or A' x (trans 'T', y of length n)
 * for A m x n; y is zeroed when the inner dimension is 0 (BLAS would leave
 * it untouched). */
void la_gemv(char trans, const double *A, int m, int n, const double *x,
             double *y);

/* C <- alpha A A' + beta C (lower triangle), A n x k. */
void la_syrk(const double *A, int n, int k, double alpha, double beta,
             double *C);

/* Fill the upper triangle of the n x n matrix A from its lower triangle. */
void la_symmetrize_lower(double *A, int n);
/* B = I + A A' (n x n, both triangles), A n x k. */
void la_identity_plus_gram(const double *A, int n, int k, double *B);

/* Inverse of a symmetric positive definite matrix from its lower Cholesky
 * factor L: Ainv (n x n, full). */
void la_chol_inverse(const double *L, int n, double *Ainv);

/* sum_i log L_ii */
double la_half_logdet(const double *L, int n);

/* ---- input checks (util.c) -------------------------------------------- */

void chk_real_matrix(SEXP x, const char *name, int ncol);
void chk_real_vector(SEXP x, const char *name, R_xlen_t len);
void chk_finite(SEXP x, const char *name);
void chk_stream_stats(SEXP AA, SEXP w, SEXP sums, int M);

/* Threads over the columns of a matrix (util.c): the number `want` within
 * OpenMP's thread limit and at most one per SPV_MIN_COLS columns (1 without
 * OpenMP); thread t of nt takes columns [spv_first(n, t, nt),
 * spv_first(n, t + 1, nt)). */
#define SPV_MIN_COLS 64
int spv_threads(int want, size_t ncols);
static inline size_t spv_first(size_t n, int t, int nt)
{
    return (n * (size_t) t) / (size_t) nt;
}
void chk_kernel(SEXP kern, int D, spv_kernel *out);
double chk_scalar(SEXP x, const char *name);
int chk_flag(SEXP x, const char *name);
void chk_jitter(SEXP base, SEXP cap, double *b, double *c);
void chk_chol_factor(SEXP L, const char *name, int n);
void chk_result(const double *x, size_t n, const char *what);
SEXP chk_field(SEXP list, const char *name, const char *field);

#endif
