/*
 * ffi.h: the .Call entry points of sparsevgp (registered in init.c).
 * Each validates its arguments and delegates to a static worker.
 */
#ifndef SPARSEVGP_FFI_H
#define SPARSEVGP_FFI_H

#include <Rinternals.h>

SEXP ffi_bg_bound(SEXP Kuu, SEXP Kuf, SEXP kdiag, SEXP lambda, SEXP ytil,
                  SEXP jitter, SEXP jitter_cap, SEXP grad);
SEXP ffi_bo_bound(SEXP Kww, SEXP Kwf, SEXP M1, SEXP kdiag, SEXP lambda,
                  SEXP ytil, SEXP variant, SEXP jitter, SEXP jitter_cap,
                  SEXP grad);
SEXP ffi_kc_diag(SEXP kern, SEXP x);
SEXP ffi_kc_matrix(SEXP kern, SEXP x, SEXP y);
SEXP ffi_bs_adjoints(SEXP L, SEXP E, SEXP alpha, SEXP vt, SEXP Kuf,
                     SEXP kdiag, SEXP lambda, SEXP ytil, SEXP threads);
SEXP ffi_bs_threads(SEXP want);
SEXP ffi_bs_kern_cross(SEXP kern, SEXP W, SEXP x, SEXP threads);
SEXP ffi_bs_pass_grad(SEXP kern, SEXP W, SEXP x, SEXP L, SEXP E, SEXP alpha,
                      SEXP vt, SEXP lambda, SEXP y, SEXP shift, SEXP work,
                      SEXP rows, SEXP threads, SEXP want_W, SEXP per_point);
SEXP ffi_bs_pass_stats(SEXP kern, SEXP W, SEXP x, SEXP L, SEXP lambda,
                       SEXP y, SEXP shift, SEXP work, SEXP rows,
                       SEXP threads);
SEXP ffi_bs_predict(SEXP kern, SEXP W, SEXP x, SEXP L, SEXP LB, SEXP v,
                    SEXP shift, SEXP work, SEXP rows, SEXP threads);
SEXP ffi_bs_stats(SEXP L, SEXP Kuf, SEXP kdiag, SEXP lambda, SEXP ytil,
                  SEXP threads);
SEXP ffi_bs_value(SEXP L, SEXP AA, SEXP w, SEXP sums, SEXP N, SEXP grad);
SEXP ffi_bs_work(SEXP M, SEXP D, SEXP rows, SEXP threads);
SEXP ffi_bso_chol(SEXP Kww, SEXP M1, SEXP jitter, SEXP jitter_cap);
SEXP ffi_bso_value(SEXP L, SEXP M1, SEXP AA, SEXP w, SEXP sums, SEXP N,
                   SEXP variant, SEXP grad);
SEXP ffi_kern_diag(SEXP kern, SEXP x);
SEXP ffi_kern_grad(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP want_x);
SEXP ffi_kern_grad_diag(SEXP kern, SEXP x, SEXP g);
SEXP ffi_kern_grad_given(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP K,
                         SEXP want_x);
SEXP ffi_kern_grad_threads(SEXP kern, SEXP x, SEXP y, SEXP G, SEXP K,
                           SEXP want_x, SEXP threads);
SEXP ffi_kern_local(SEXP kern, SEXP x, SEXP nbl);
SEXP ffi_kern_local_cross(SEXP kern, SEXP x, SEXP cand);
SEXP ffi_kern_local_grad(SEXP kern, SEXP x, SEXP nbl, SEXP G, SEXP Kloc);
SEXP ffi_kern_local_grad_fac(SEXP kern, SEXP x, SEXP nbl, SEXP G, SEXP Kloc);
SEXP ffi_kern_matrix(SEXP kern, SEXP x, SEXP y);
SEXP ffi_la_chol(SEXP S, SEXP base, SEXP cap);
SEXP ffi_la_colstats(SEXP x);
SEXP ffi_la_release(void);
SEXP ffi_nb_ordered(SEXP x, SEXP Kc, SEXP order);
SEXP ffi_nb_query(SEXP x, SEXP xnew, SEXP Kc);
SEXP ffi_nb_select(SEXP A, SEXP r, SEXP kval, SEXP cand, SEXP K);
SEXP ffi_nb_spatial_order(SEXP x);
SEXP ffi_pg_kl(SEXP c);
SEXP ffi_pg_log_cosh(SEXP x);
SEXP ffi_pg_theta(SEXP c);
SEXP ffi_pred_gaussian(SEXP L, SEXP LB, SEXP v, SEXP Kus, SEXP kss,
                       SEXP full);
SEXP ffi_sel_greedy(SEXP kern, SEXP x, SEXP weights, SEXP M, SEXP threshold,
                    SEXP perm, SEXP tol, SEXP block, SEXP factor);
SEXP ffi_sel_trace(SEXP kern, SEXP x, SEXP weights, SEXP Z, SEXP tol,
                   SEXP factor);
SEXP ffi_softmax_ell(SEXP MU, SEXP SD, SEXP y, SEXP draws);
SEXP ffi_softmax_prob(SEXP MU, SEXP SD, SEXP draws);
SEXP ffi_svgp_ell(SEXP mu, SEXP var, SEXP lik);
SEXP ffi_vf_adjoints(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                     SEXP nbl, SEXP lambda, SEXP ytil, SEXP recs);
SEXP ffi_vf_adjoints_fac(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                         SEXP nbl, SEXP lambda, SEXP ytil, SEXP recs, SEXP kern,
                         SEXP x, SEXP A);
SEXP ffi_vf_predict(SEXP L, SEXP Binv, SEXP vt, SEXP Kuf, SEXP Kloc,
                    SEXP nbl, SEXP lambda, SEXP ytil, SEXP full);
SEXP ffi_vf_stats(SEXP L, SEXP Kuf, SEXP Kloc, SEXP nbl, SEXP lambda,
                  SEXP ytil, SEXP keep);
SEXP ffi_vf_stats_kern(SEXP L, SEXP Kuf, SEXP kern, SEXP x, SEXP nbl,
                       SEXP lambda, SEXP ytil, SEXP keep);
SEXP ffi_vf_stats_shares(SEXP L, SEXP Kuf, SEXP Kloc, SEXP kern, SEXP x,
                         SEXP nbl, SEXP ytil, SEXP scale, SEXP noise);
SEXP ffi_vf_value(SEXP BB, SEXP w, SEXP sums, SEXP N, SEXP grad);

#endif
