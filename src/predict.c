/*
 * predict.c: the predictive distribution of the collapsed Gaussian models
 * from the cached factors (L, LB, v) of bound_gaussian.c.
 *
 * Fernlund 2022, eqs 4.39-4.44; with per-point noise Passerello 2022,
 * eq. B.2 (Titsias/GPflow convention, no diagonal correction):
 *   P1 = L^-1 Kus, P2 = LB^-1 P1                 M x S
 *   mean = P2' v
 *   var  = kss - colSums(P1^2) + colSums(P2^2)
 *   cov  = Kss - P1'P1 + P2'P2
 * Cost O(M^2 S); the diagonal path never forms an S x S matrix.
 */
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "lapack.h"
#include "spv.h"

static void pred_gaussian(const double *L, const double *LB, const double *v,
                          int M, int S, double *P1, double *mean, double *var,
                          double *cov)
{
    const double one = 1.0, mone = -1.0, zero = 0.0;
    const int ione = 1;
    la_trsm_left(L, M, P1, S, 'N');
    double *P2 = la_alloc((size_t) M * S);
    if (var) {
        for (int s = 0; s < S; s++) {
            const double *t = P1 + (size_t) M * s;
            double a = 0.0;
            for (int m = 0; m < M; m++) a += t[m] * t[m];
            var[s] -= a;
        }
    } else if (S > 0 && M > 0) {
        /* cov <- cov - P1'P1 (lower), later + P2'P2 */
        F77_CALL(dsyrk)("L", "T", &S, &M, &mone, P1, &M, &one, cov, &S
                        FCONE FCONE);
    }
    la_copy(P2, P1, (size_t) M * S);
    la_trsm_left(LB, M, P2, S, 'N');
    if (S > 0 && M == 0)
        memset(mean, 0, (size_t) S * sizeof(double));
    else if (S > 0)
        F77_CALL(dgemv)("T", &M, &S, &one, P2, &M, v, &ione, &zero, mean,
                        &ione FCONE);
    if (var) {
        for (int s = 0; s < S; s++) {
            const double *t = P2 + (size_t) M * s;
            double a = 0.0;
            for (int m = 0; m < M; m++) a += t[m] * t[m];
            var[s] += a;
        }
    } else if (S > 0 && M > 0) {
        F77_CALL(dsyrk)("L", "T", &S, &M, &one, P2, &M, &one, cov, &S
                        FCONE FCONE);
    }
    if (!var) la_symmetrize_lower(cov, S);
}

/* list(mean, var) or list(mean, cov) at S new points.
 * L, LB: M x M lower factors; v: length M; Kus: M x S;
 * kss: prior variances (length S) or, for full = TRUE, the prior
 * covariance (S x S). */
SEXP ffi_pred_gaussian(SEXP L, SEXP LB, SEXP v, SEXP Kus, SEXP kss,
                       SEXP full)
{
    chk_chol_factor(L, "L", -1);
    const int M = nrows(L);
    chk_chol_factor(LB, "LB", M);
    chk_real_vector(v, "v", M);
    chk_finite(v, "v");
    chk_real_matrix(Kus, "Kus", -1);
    if (nrows(Kus) != M) error("'Kus' must have %d rows", M);
    const int S = ncols(Kus);
    const int f = chk_flag(full, "full");
    if (f) {
        chk_real_matrix(kss, "kss", S);
        if (nrows(kss) != S) error("'kss' must be %d x %d", S, S);
    } else {
        chk_real_vector(kss, "kss", S);
    }
    chk_finite(Kus, "Kus");
    chk_finite(kss, "kss");

    int nprot = 0;
    double *P1 = la_alloc((size_t) M * S);
    la_copy(P1, REAL(Kus), (size_t) M * S);
    SEXP mean = PROTECT(allocVector(REALSXP, S)); nprot++;
    SEXP second = PROTECT(duplicate(kss)); nprot++;
    pred_gaussian(REAL(L), REAL(LB), REAL(v), M, S, P1, REAL(mean),
                  f ? NULL : REAL(second), f ? REAL(second) : NULL);
    chk_result(REAL(mean), (size_t) S, "predictive mean");
    chk_result(REAL(second), (size_t) XLENGTH(second),
               f ? "predictive covariance" : "predictive variance");
    const char *names[] = {"mean", f ? "cov" : "var", ""};
    SEXP out = PROTECT(mkNamed(VECSXP, names)); nprot++;
    SET_VECTOR_ELT(out, 0, mean);
    SET_VECTOR_ELT(out, 1, second);
    UNPROTECT(nprot);
    return out;
}
