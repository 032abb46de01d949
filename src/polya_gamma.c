/*
 * polya_gamma.c: the Polya-Gamma quantities of the collapsed PG classifier
 * (Passerello 2022, chapter 4 and Appendix C; Polson et al. 2013; Wenzel
 * et al. 2019), computed without cancellation or overflow.
 *
 *   theta(c) = E[omega], omega ~ PG(1, c) = tanh(c/2) / (2c)
 *                                          (Passerello 2022, eq. 2.19)
 *   log cosh(x)                            (without overflow)
 *   KL[PG(1, c) || PG(1, 0)] = log cosh(c/2) - (c/4) tanh(c/2)
 *                                          (from the exponential tilting
 *                                          of Polson et al. 2013, as in
 *                                          the code of Passerello 2022)
 *
 * All three are even in c; c = sqrt(mu^2 + sigma^2) >= 0 in practice.
 * Cost O(n) for n values.
 */
#include <math.h>
#include <R.h>
#include <Rinternals.h>
#include "spv.h"

#define LOG2 0.69314718055994530942

/* theta(c) = tanh(c/2) / (2c). It tends to 1/4 at c = 0 (0/0 in the direct
 * formula); below |c| = 1e-4 the series 1/4 - c^2/48 + c^4/480 is exact to
 * rounding (the next term is c^6 17/80640). */
static double pg_theta(double c)
{
    const double a = fabs(c);
    if (a < 1e-4) {
        const double c2 = a * a;
        return 0.25 - c2 / 48.0 + c2 * c2 / 480.0;
    }
    return tanh(0.5 * a) / (2.0 * a);
}

/* log cosh(x) without overflow (cosh overflows beyond |x| = 710) or
 * cancellation: for |x| >= 1, |x| + log1p(exp(-2|x|)) - log 2 (the form
 * of the code of Passerello 2022), whose terms are of the size of the
 * result; below 1,
 * log1p(cosh(x) - 1) with cosh(x) - 1 = 2 sinh(x/2)^2 computed without
 * subtracting, so log cosh(x) ~ x^2/2 keeps full relative accuracy. */
static double pg_log_cosh(double x)
{
    const double a = fabs(x);
    if (a < 1.0) {
        const double s = sinh(0.5 * a);
        return log1p(2.0 * s * s);
    }
    return a + log1p(exp(-2.0 * a)) - LOG2;
}

/* KL[PG(1, c) || PG(1, 0)] = log cosh(c/2) - (c/4) tanh(c/2) >= 0, with
 * equality only at c = 0. The two terms agree to O(c^2) and cancel; with
 * x = c/2 the Taylor series (from those of log cosh and x tanh x)
 *   x^4/12 - 2 x^6/45 + 17 x^8/840 - 124 x^10/14175
 * is used below x = 0.05, where its truncation error (relative ~ 1e-13)
 * is below the cancellation error of the direct form. */
static double pg_kl(double c)
{
    const double x = 0.5 * fabs(c);
    if (!R_FINITE(x)) return x;          /* the limit x/2 - log 2 -> Inf */
    if (x < 0.05) {
        const double x2 = x * x, x4 = x2 * x2;
        return x4 * (1.0 / 12.0 + x2 * (-2.0 / 45.0 + x2 * (17.0 / 840.0 -
                                                           x2 * 124.0 / 14175.0)));
    }
    return pg_log_cosh(x) - 0.5 * x * tanh(x);
}

/* ---- .Call entry points ----------------------------------------------- */

typedef double (*pg_fun)(double);

static SEXP pg_map(SEXP x, const char *name, pg_fun f)
{
    chk_real_vector(x, name, -1);
    const R_xlen_t n = XLENGTH(x);
    const double *px = REAL(x);
    SEXP out = PROTECT(allocVector(REALSXP, n));
    double *po = REAL(out);
    for (R_xlen_t i = 0; i < n; i++) {
        if ((i & 1023) == 1023) R_CheckUserInterrupt();
        /* NA in, NA out: R's convention for elementwise maps */
        po[i] = ISNAN(px[i]) ? px[i] : f(px[i]);
    }
    UNPROTECT(1);
    return out;
}

/* theta(c) elementwise; c a double vector. */
SEXP ffi_pg_theta(SEXP c)
{
    return pg_map(c, "c", pg_theta);
}

/* log cosh(x) elementwise. */
SEXP ffi_pg_log_cosh(SEXP x)
{
    return pg_map(x, "x", pg_log_cosh);
}

/* KL[PG(1, c) || PG(1, 0)] elementwise. */
SEXP ffi_pg_kl(SEXP c)
{
    return pg_map(c, "c", pg_kl);
}
