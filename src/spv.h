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
 * dividing coordinate d by the lengthscale of d. */
void kern_scale_points(const spv_kernel *k, const double *x, size_t n,
                       double *xs);

/* K(A, B): nA x nB, from points scaled by kern_scale_points. */
void kern_K(const spv_kernel *k, const double *As, size_t nA,
            const double *Bs, size_t nB, double *K);

/* diag K(A, A): stationary kernels give variance everywhere. */
void kern_diag(const spv_kernel *k, size_t n, double *kdiag);

/* Contractions of an adjoint G = dF/dK (see kernels.c):
 * dtheta (length kern_npar) += d/d(log variance, log lengthscales) sum G o K;
 * dA (nA x D, R layout, may be NULL) += d/dA sum G o K.
 * Bs == NULL means K(A, A), whose entries depend on A through both
 * arguments. */
void kern_grad(const spv_kernel *k, const double *As, size_t nA,
               const double *Bs, size_t nB, const double *G,
               double *dtheta, double *dA);

/* kern_grad for a cross-covariance K(A, B) that the caller holds (K, nA x
 * nB): no exponential is recomputed. */
void kern_grad_given(const spv_kernel *k, const double *As, size_t nA,
                     const double *Bs, size_t nB, const double *G,
                     const double *K, double *dtheta, double *dA);

/* Contraction of an adjoint g of diag K(A, A): dtheta += d/dtheta g'kdiag. */
void kern_grad_diag(const spv_kernel *k, size_t n, const double *g,
                    double *dtheta);

/* ---- collapsed Gaussian bound (bound_gaussian.c) ----------------------- */

/* The per-point adjoints shared by the collapsed bounds (seed004 section
 * 3.8, whitened): on entry column n of G (M x N) holds (E A)_n with
 * E = L^-T R, R = I - B^-1 for SGPR (bound_orthogonal.c passes its own R);
 * q_n = a_n' R a_n is recovered as Kuf_n' (E A)_n / sqrt(lambda_n). On exit
 * G = dF/dKuf = E A Lambda^-1/2 + alpha r', and gdiag, glambda, gytil hold
 * dF/dkdiag, dF/dlambda, dF/dytil. isl = lambda^-1/2,
 * r = (ytil - mu) / lambda. */
void bg_point_adjoints(int M, int N, const double *Kuf, const double *isl,
                       const double *alpha, const double *r,
                       const double *lambda, const double *kdiag, double *G,
                       double *gdiag, double *glambda, double *gytil);

/* ---- linear algebra (linalg.c) ---------------------------------------- */

/* Lower Cholesky factor of the n x n symmetric matrix S (lower triangle
 * read), written to L (upper triangle zeroed). Tries S + base * I first,
 * then escalates the added jitter tenfold from max(base, 1e-10 * mean diag)
 * until it reaches cap * mean diag. Returns the jitter finally added, or -1
 * if every attempt failed. S is not modified. */
double la_chol_jitter(const double *S, int n, double base, double cap,
                      double *L);

/* Plain Cholesky in place (lower); returns LAPACK's info. */
int la_chol(double *A, int n);

/* B <- op(L)^-1 B for lower-triangular L (n x n), B n x m.
 * trans = 'N' solves L X = B, 'T' solves L' X = B. */
void la_trsm_left(const double *L, int n, double *B, int m, char trans);

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
void chk_kernel(SEXP kern, int D, spv_kernel *out);
double chk_scalar(SEXP x, const char *name);
int chk_flag(SEXP x, const char *name);
void chk_jitter(SEXP base, SEXP cap, double *b, double *c);
void chk_chol_factor(SEXP L, const char *name, int n);

#endif
