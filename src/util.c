/*
 * util.c: checks that .Call entry points run on their arguments before any
 * worker sees them. C never coerces: the R wrappers pass doubles.
 * Messages name the argument as the R wrapper calls it.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "spv.h"

void chk_real_matrix(SEXP x, const char *name, int ncol)
{
    if (!isReal(x) || !isMatrix(x))
        error("'%s' must be a double matrix", name);
    if (ncol >= 0 && ncols(x) != ncol)
        error("'%s' must have %d columns, not %d", name, ncol, ncols(x));
}

void chk_real_vector(SEXP x, const char *name, R_xlen_t len)
{
    if (!isReal(x))
        error("'%s' must be a double vector", name);
    if (len >= 0 && XLENGTH(x) != len)
        error("'%s' must have length %lld, not %lld", name, (long long) len,
              (long long) XLENGTH(x));
}

/* C99's isfinite() rather than R_FINITE, which is a function call outside
 * R itself: scanning a chunk's adjoint that way cost more than contracting
 * it. */
void chk_finite(SEXP x, const char *name)
{
    const double *p = REAL_RO(x);   /* read only: no copy of a wrapped object */
    const R_xlen_t n = XLENGTH(x);
    int bad = 0;
    for (R_xlen_t i = 0; i < n; i++)
        bad |= !isfinite(p[i]);
    if (bad)
        error("NA/NaN/Inf in '%s'", name);
}

double chk_scalar(SEXP x, const char *name)
{
    if (!isReal(x) || XLENGTH(x) != 1 || !R_FINITE(REAL(x)[0]))
        error("'%s' must be one finite number", name);
    return REAL(x)[0];
}

int chk_flag(SEXP x, const char *name)
{
    if (!isLogical(x) || XLENGTH(x) != 1 || LOGICAL(x)[0] == NA_LOGICAL)
        error("'%s' must be TRUE or FALSE", name);
    return LOGICAL(x)[0];
}

/* Relative jitter settings: 0 <= base <= cap, both finite. */
void chk_jitter(SEXP base, SEXP cap, double *b, double *c)
{
    *b = chk_scalar(base, "jitter");
    *c = chk_scalar(cap, "jitter_cap");
    if (*b < 0.0)
        error("'jitter' must be non-negative");
    if (*c < *b)
        error("'jitter_cap' must be at least 'jitter'");
}

/* A lower Cholesky factor handed back by R (a cached L or LB): n x n
 * (n < 0: any square size), finite, with a positive diagonal, so that the
 * triangular solves that use it cannot produce NaN. */
void chk_chol_factor(SEXP L, const char *name, int n)
{
    chk_real_matrix(L, name, n);
    const int m = nrows(L);
    if (ncols(L) != m)
        error("'%s' must be square", name);
    chk_finite(L, name);
    const double *p = REAL(L);
    for (int i = 0; i < m; i++)
        if (!(p[i + (size_t) m * i] >= DBL_MIN))
            error("'%s' must be a Cholesky factor (positive diagonal, "
                  "not subnormal)", name);
}

/* A kernel arrives as list(family = integer code, variance = double,
 * lengthscale = double vector of length 1 or D), built by the R function
 * .kern_c(). */
void chk_kernel(SEXP kern, int D, spv_kernel *out)
{
    if (TYPEOF(kern) != VECSXP || XLENGTH(kern) != 3)
        error("'kernel' must be a list(family, variance, lengthscale)");
    if (D < 1)
        error("the inputs must have at least one column");
    SEXP fam = VECTOR_ELT(kern, 0), var = VECTOR_ELT(kern, 1),
         ls = VECTOR_ELT(kern, 2);
    if (!isInteger(fam) || XLENGTH(fam) != 1 || INTEGER(fam)[0] < KERN_RBF ||
        INTEGER(fam)[0] > KERN_MATERN52)
        error("unknown kernel family");
    /* positive normal numbers: a subnormal variance or lengthscale has
     * lost its precision, and the kernel's derivatives would underflow */
    if (!isReal(var) || XLENGTH(var) != 1 || !R_FINITE(REAL(var)[0]) ||
        REAL(var)[0] <= 0.0)
        error("kernel 'variance' must be one positive finite number");
    if (REAL(var)[0] < DBL_MIN)
        error("kernel 'variance' must not be subnormal (below %g)", DBL_MIN);
    if (!isReal(ls) || (XLENGTH(ls) != 1 && XLENGTH(ls) != D))
        error("kernel 'lengthscale' must have length 1 or %d", D);
    for (R_xlen_t i = 0; i < XLENGTH(ls); i++) {
        if (!R_FINITE(REAL(ls)[i]) || REAL(ls)[i] <= 0.0)
            error("kernel 'lengthscale' must be positive and finite");
        if (REAL(ls)[i] < DBL_MIN)
            error("kernel 'lengthscale' must not be subnormal (below %g)",
                  DBL_MIN);
    }
    out->family = (spv_family) INTEGER(fam)[0];
    out->D = D;
    out->nls = (int) XLENGTH(ls);
    out->variance = REAL(var)[0];
    out->lengthscale = REAL(ls);
}

/* A result computed from finite inputs that is not finite (overflow, or
 * a factorisation too ill-conditioned for double precision) is an error
 * naming the quantity, never a silent NaN handed back to R. */
void chk_result(const double *x, size_t n, const char *what)
{
    int bad = 0;                    /* branch-free: the loop vectorises */
    for (size_t i = 0; i < n; i++)
        bad |= !isfinite(x[i]);
    if (bad)
            error("the %s is not finite: the inputs are too large or too "
                  "ill-conditioned for double precision", what);
}

/* The field `field` of the list argument `list` (named `name`), looked up
 * by name: structured arguments are lists whose fields are checked one by
 * one, with messages such as "'q$mu' must be ...". */
SEXP chk_field(SEXP list, const char *name, const char *field)
{
    if (TYPEOF(list) != VECSXP)
        error("'%s' must be a list", name);
    SEXP nms = getAttrib(list, R_NamesSymbol);
    if (TYPEOF(nms) == STRSXP) {
        const R_xlen_t n = XLENGTH(list);
        for (R_xlen_t i = 0; i < n && i < XLENGTH(nms); i++)
            if (strcmp(CHAR(STRING_ELT(nms, i)), field) == 0)
                return VECTOR_ELT(list, i);
    }
    error("'%s' must be a list with a field '%s'", name, field);
    return R_NilValue;   /* not reached */
}

/* The summed statistics of the chunked collapsed bounds (pass 1): AA an
 * M x M matrix, w an M-vector and the four sums, all finite. */
void chk_stream_stats(SEXP AA, SEXP w, SEXP sums, int M)
{
    chk_real_matrix(AA, "AA", M);
    if (nrows(AA) != M)
        error("'AA' must have %d rows", M);
    chk_finite(AA, "AA");
    chk_real_vector(w, "w", M);
    chk_finite(w, "w");
    chk_real_vector(sums, "sums", 4);
    chk_finite(sums, "sums");
}

void chk_local_index(SEXP nbl, const char *name, int nu)
{
    if (!isInteger(nbl) || !isMatrix(nbl))
        error("'%s' must be an integer matrix", name);
    const int K = nrows(nbl), no = ncols(nbl);
    /* (K+1)^2 is a block's size: kept within an int */
    if (K > 40000)
        error("'%s' has %d rows: at most 40000 neighbours per point", name, K);
    if (no > nu)
        error("'%s' has %d columns, more than the %d points", name, no, nu);
    const int *p = INTEGER(nbl);
    for (int c = 0; c < no; c++) {
        const int *pc = p + (size_t) K * c;
        int ended = 0;
        for (int j = 0; j < K; j++) {
            const int v = pc[j];
            if (v == NA_INTEGER || v < 0 || v > nu)
                error("'%s' must hold indices in 0..%d", name, nu);
            if (v == 0) { ended = 1; continue; }
            if (ended)
                error("'%s': the neighbours of point %d are not packed first",
                      name, c + 1);
            if (v == c + 1)
                error("'%s': point %d is its own neighbour", name, c + 1);
            for (int i = 0; i < j; i++)
                if (pc[i] == v)
                    error("'%s': point %d lists neighbour %d twice", name,
                          c + 1, v);
        }
    }
}

int spv_threads(int want, size_t ncols)
{
    int nt = want;
#ifdef _OPENMP
    const int lim = omp_get_thread_limit();
    if (lim > 0 && nt > lim) nt = lim;
#else
    nt = 1;
#endif
    const size_t most = ncols / SPV_MIN_COLS;
    if ((size_t) nt > most) nt = (int) most;
    return nt < 1 ? 1 : nt;
}
