/*
 * bound_orthogonal.h: the pieces of the orthogonal collapsed bounds
 * (bound_orthogonal.c) that the chunked computation
 * (bound_stream_orthogonal.c) shares: the block factorisation of Kww, the
 * value from the M x M sums over points, and the M x M part of the
 * backward pass. bound_orthogonal.c documents the notation.
 */
#ifndef SPARSEVGP_BOUND_ORTHOGONAL_H
#define SPARSEVGP_BOUND_ORTHOGONAL_H

enum { BO_UNION = 0, BO_SOLVE = 1, BO_ODVGP = 2 };

typedef struct {
    /* values: [union, solve, odvgp] */
    double bound[3], logdet[3], fit, trace, jit_u, jit_v;
    double *L;      /* M x M block lower factor of Kww + jitter */
    double *LB;     /* M x M block lower factor of B */
    double *LBu;    /* M1 x M1 */
    double *LBv;    /* M2 x M2: chol(Bv) */
    double *c;      /* M: LB^-1 A ys */
    double *w;      /* M: B^-1 A ys, the whitened posterior mean */
    /* adjoints of the chosen variant (NULL when not wanted) */
    double *Gww, *Gwf, *gdiag, *glambda, *gytil, *mu;
} bo_out;

/* The inputs and the factors shared by the steps of one evaluation:
 * factorisation of Kww, whitening of Kwf, factorisation of B, the values
 * and the backward pass. */
typedef struct {
    int M1, M2, M, N;
    const double *Kww, *Kwf, *kdiag, *lambda, *ytil;
    double *Lu, *dv, *Lv;   /* M1 x M1, M1 x M2 (Lu^-1 Kuv), M2 x M2 */
    double *A;              /* M x N: L^-1 Kwf Lambda^-1/2 */
    double *isl;            /* N: lambda^-1/2 */
    double *B;              /* M x M: I + A A' */
    double *LQ;             /* M2 x M2: chol(Bv - gamma'gamma) */
    double sumloglam;       /* sum log lambda_n */
    double yy;              /* |ys|^2, ys = Lambda^-1/2 ytil */
    double trBv;            /* tr(Av Av') */
    double kl;              /* sum k_nn / lambda_n */
} bo_factors;

/* Status of bo_collapsed(). */
enum { BO_OK = 0, BO_KUU = 1, BO_CVV = 2, BO_B = 3, BO_A = 4,
       BO_OVERFLOW = 5, BO_PRECISION = 6 };

/* L = [[Lu, 0], [dv', Lv]] into out->L, with the jitters out->jit_u and
 * out->jit_v (Fernlund 2022, Algorithm 3 lines 2-5); reads f->Kww, f->M1,
 * f->M2, f->M and sets f->Lu, f->dv, f->Lv. */
int bo_factor_kww(bo_factors *f, double jit_base, double jit_cap,
                  bo_out *out);

/* LB, LBu, LBv from f->B = I + A A' (lines 11-15); sets f->LQ. */
int bo_factor_b(bo_factors *f, bo_out *out);

/* The three bounds and c, w from out->c = A ys and the sums f->yy,
 * f->sumloglam, f->trBv, f->kl and out->trace, for N points. */
int bo_value(const bo_factors *f, double N, bo_out *out);

/* alpha = L^-T w, out->Gww and E = L^-T (I - S) (M x M) of the variant;
 * f->B becomes A A'. */
void bo_backward_mm(bo_factors *f, int variant, bo_out *out, double *alpha,
                    double *E);

/* error() with the message of a BO_ status other than BO_OK. */
void bo_stop(int status, double jc);

#endif
