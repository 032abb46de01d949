/*
 * kernel_combo.h: kernels as the consumers of kernel matrices see them, a
 * single stationary kernel (kernels.c) or a sum or product of kernels
 * (kernel_combo.c), with K(A, B), diag K and k(x, x).
 */
#ifndef SPARSEVGP_KERNEL_COMBO_H
#define SPARSEVGP_KERNEL_COMBO_H

#include <stddef.h>
#include <Rinternals.h>
#include "spv.h"

enum { KC_LEAF = 0, KC_SUM = 1, KC_PRODUCT = 2 };

/* The deepest nesting of sums and products (levels of operators from the
 * root to a leaf) that a kernel may have: .kern_max_depth in R/kernels.R. */
#define KC_MAX_DEPTH 32

/* A node of a kernel expression: a single kernel, or the sum or product
 * of its n children. */
typedef struct kc_node {
    int op;                     /* KC_LEAF, KC_SUM or KC_PRODUCT */
    spv_kernel leaf;            /* op == KC_LEAF */
    int n;                      /* number of children */
    struct kc_node *child;      /* n nodes */
} kc_node;

/* A kernel for the routines that only evaluate it (selection, kernel
 * matrices of combinations). For a single kernel the points handed to
 * kc_K are scaled by its lengthscales (kern_scale_points) and kc_K is
 * kern_K itself; for a combination they are the raw coordinates, and each
 * part scales them into the workspace. */
typedef struct {
    kc_node root;
    int D;
    int combo;                  /* 0: root is a single kernel */
    int height;                 /* levels of operators below the root */
    double kdiag;               /* k(x, x), the same at every x */
    double *work;               /* workspace (R_alloc), grown on demand */
    size_t cap;
} spv_kfun;

/* Validates a kernel from R (list(family, variance, lengthscale), or
 * list(op, list(parts...)) for a combination) for D input columns. */
void kc_parse(SEXP kern, int D, spv_kfun *k);

/* Points for kc_K: x (n x D, R layout) to xs (D x n), scaled for a single
 * kernel. Returns 1 if a scaled coordinate overflowed. */
int kc_points(const spv_kfun *k, const double *x, size_t n, double *xs);
void kc_overflow_error(const spv_kfun *k);

/* K(A, B): nA x nB, from points prepared by kc_points. */
void kc_K(spv_kfun *k, const double *As, size_t nA, const double *Bs,
          size_t nB, double *K);

/* diag K(A, A): k(x, x) everywhere (stationary parts). */
void kc_diag(const spv_kfun *k, size_t n, double *kdiag);

#endif
