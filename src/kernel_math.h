/*
 * kernel_math.h: the stationary kernel families as functions of the squared
 * scaled distance r^2, inline for the loops of kernels.c and
 * kernel_local.c (see kernels.c for the families and the chain rule).
 */
#ifndef SPARSEVGP_KERNEL_MATH_H
#define SPARSEVGP_KERNEL_MATH_H

#include <math.h>
#include <R.h>
#include "spv.h"

#define SQRT3 1.7320508075688772
#define SQRT5 2.2360679774997898

static inline double sqdist(const double *a, const double *b, int D)
{
    double r2 = 0.0;
    for (int d = 0; d < D; d++) {
        const double s = a[d] - b[d];
        r2 += s * s;
    }
    return r2;
}

/* p(r) exp(-r) for the polynomial factor p >= 1 of a Matern kernel, with
 * its limit 0 at large r: the direct product is Inf x 0 = NaN once p
 * overflows or r is infinite (a scaled distance beyond 1e154, or r^2
 * overflowing), and exp(-r) underflows before p(r) exp(-r) does, so past
 * r = 700 the product is taken on the log scale. */
static inline double poly_exp(double p, double r)
{
    if (r < 700.0) return p * exp(-r);
    if (r < 1e150) return exp(log(p) - r);
    return 0.0;
}

/* k(r) and h(r) = (dk/dr) / r from r^2, r^2 in [0, Inf]: at r = Inf both
 * are 0 (their limits), never NaN. */
static inline double k_and_h(spv_family fam, double var, double r2, double *h)
{
    double r, kv, ex;
    switch (fam) {
    case KERN_RBF:
        kv = var * exp(-0.5 * r2);
        *h = -kv;
        return kv;
    case KERN_MATERN12:
        r = sqrt(r2);
        kv = var * exp(-r);
        *h = r > 0.0 ? -kv / r : 0.0;
        return kv;
    case KERN_MATERN32:
        r = SQRT3 * sqrt(r2);
        ex = exp(-r);
        *h = -3.0 * (var * ex);
        /* poly_exp() with its exponential taken once */
        return var * (r < 700.0 ? (1.0 + r) * ex : poly_exp(1.0 + r, r));
    case KERN_MATERN52:
        r = SQRT5 * sqrt(r2);
        if (r < 700.0) {            /* poly_exp() with one exponential */
            ex = exp(-r);
            *h = -(5.0 / 3.0) * var * ((1.0 + r) * ex);
            return var * ((1.0 + r + r * r / 3.0) * ex);
        }
        *h = -(5.0 / 3.0) * var * poly_exp(1.0 + r, r);
        return var * poly_exp(1.0 + r + r * r / 3.0, r);
    }
    *h = NA_REAL;
    return NA_REAL;
}

/* h(r) from k(r) and r^2, without another exponential: for a kernel matrix
 * that the caller already holds. */
static inline double h_from_k(spv_family fam, double kv, double r2)
{
    double r;
    if (kv == 0.0) return 0.0;          /* the limit at r = Inf, not 0 / Inf */
    switch (fam) {
    case KERN_RBF:
        return -kv;
    case KERN_MATERN12:
        r = sqrt(r2);
        return r > 0.0 ? -kv / r : 0.0;
    case KERN_MATERN32:
        r = SQRT3 * sqrt(r2);
        return -3.0 * kv / (1.0 + r);
    case KERN_MATERN52:
        r = SQRT5 * sqrt(r2);
        return -(5.0 / 3.0) * (1.0 + r) * kv / (1.0 + r + r * r / 3.0);
    }
    return NA_REAL;
}

/* k(r) for a whole column of squared distances, in place: one loop per
 * family so that the family is not re-tested for every entry. */
static inline void k_of_r2(spv_family fam, double var, double *c, size_t n)
{
    switch (fam) {
    case KERN_RBF:
        for (size_t i = 0; i < n; i++) c[i] = var * exp(-0.5 * c[i]);
        break;
    case KERN_MATERN12:
        for (size_t i = 0; i < n; i++) c[i] = var * exp(-sqrt(c[i]));
        break;
    case KERN_MATERN32:
        for (size_t i = 0; i < n; i++) {
            const double r = SQRT3 * sqrt(c[i]);
            c[i] = var * poly_exp(1.0 + r, r);
        }
        break;
    case KERN_MATERN52:
        for (size_t i = 0; i < n; i++) {
            const double r = SQRT5 * sqrt(c[i]);
            c[i] = var * poly_exp(1.0 + r + r * r / 3.0, r);
        }
        break;
    }
}

/* k(r) from one r^2 by k_of_r2() itself, so that a kernel value formed
 * again equals the one of a kernel block to the last bit. */
static inline double k_of_r2_one(spv_family fam, double var, double r2)
{
    k_of_r2(fam, var, &r2, 1);
    return r2;
}

#endif
