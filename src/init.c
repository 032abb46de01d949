/*
 * init.c: registration of the .Call entry points (and nothing else).
 */
#include <stdlib.h>
#include <R_ext/Rdynload.h>
#include "ffi.h"

#define CALLDEF(name, n) {#name, (DL_FUNC) &name, n}

static const R_CallMethodDef CallEntries[] = {
    CALLDEF(ffi_bg_bound, 8),
    CALLDEF(ffi_bo_bound, 10),
    CALLDEF(ffi_kc_diag, 2),
    CALLDEF(ffi_kc_matrix, 3),
    CALLDEF(ffi_bs_adjoints, 9),
    CALLDEF(ffi_bs_kern_cross, 4),
    CALLDEF(ffi_bs_pass_grad, 15),
    CALLDEF(ffi_bs_pass_stats, 10),
    CALLDEF(ffi_bs_predict, 10),
    CALLDEF(ffi_bs_stats, 6),
    CALLDEF(ffi_bs_threads, 1),
    CALLDEF(ffi_bs_value, 6),
    CALLDEF(ffi_bs_work, 4),
    CALLDEF(ffi_bso_chol, 4),
    CALLDEF(ffi_bso_value, 8),
    CALLDEF(ffi_kern_diag, 2),
    CALLDEF(ffi_kern_grad, 5),
    CALLDEF(ffi_kern_grad_diag, 3),
    CALLDEF(ffi_kern_grad_given, 6),
    CALLDEF(ffi_kern_grad_threads, 7),
    CALLDEF(ffi_kern_local, 3),
    CALLDEF(ffi_kern_local_cross, 3),
    CALLDEF(ffi_kern_local_grad, 5),
    CALLDEF(ffi_kern_local_grad_fac, 5),
    CALLDEF(ffi_kern_matrix, 3),
    CALLDEF(ffi_la_chol, 3),
    CALLDEF(ffi_la_colstats, 1),
    CALLDEF(ffi_la_release, 0),
    CALLDEF(ffi_nb_ordered, 3),
    CALLDEF(ffi_nb_query, 3),
    CALLDEF(ffi_nb_select, 5),
    CALLDEF(ffi_nb_spatial_order, 1),
    CALLDEF(ffi_pg_kl, 1),
    CALLDEF(ffi_pg_log_cosh, 1),
    CALLDEF(ffi_pg_theta, 1),
    CALLDEF(ffi_pred_gaussian, 6),
    CALLDEF(ffi_sel_greedy, 9),
    CALLDEF(ffi_sel_trace, 6),
    CALLDEF(ffi_softmax_ell, 4),
    CALLDEF(ffi_softmax_prob, 3),
    CALLDEF(ffi_svgp_ell, 3),
    CALLDEF(ffi_vf_adjoints, 9),
    CALLDEF(ffi_vf_adjoints_fac, 12),
    CALLDEF(ffi_vf_predict, 9),
    CALLDEF(ffi_vf_stats, 7),
    CALLDEF(ffi_vf_stats_kern, 8),
    CALLDEF(ffi_vf_stats_shares, 9),
    CALLDEF(ffi_vf_value, 5),
    {NULL, NULL, 0}
};

void R_init_sparsevgp(DllInfo *dll)
{
    R_registerRoutines(dll, NULL, CallEntries, NULL, NULL);
    R_useDynamicSymbols(dll, FALSE);
    R_forceSymbols(dll, TRUE);
}
