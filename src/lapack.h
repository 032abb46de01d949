/*
 * lapack.h: R's BLAS and LAPACK for the C files of sparsevgp, with the
 * Fortran character-length convention and LAPACK's info in one place.
 *
 * src/Makevars defines USE_FC_LEN_T for every file, so that R's headers
 * (Rconfig.h, included first by R.h) declare the hidden length argument
 * that Fortran gives each character argument; FCONE passes it after each
 * one ("Writing R Extensions", section 6.6.1). R older than 3.6.2 has no
 * FCONE, and it is then empty.
 */
#ifndef SPARSEVGP_LAPACK_H
#define SPARSEVGP_LAPACK_H

#include <R_ext/BLAS.h>
#include <R_ext/Lapack.h>
#ifndef FCONE
#define FCONE
#endif

/* LAPACK's info from `routine`: info < 0 (argument -info had an illegal
 * value) is a bug in the caller and raises an R error naming the routine
 * and the argument; otherwise info is returned, 0 for success and > 0 for
 * a numerical failure the caller turns into a status (for dpotrf, the
 * order of the leading minor that is not positive definite). */
int la_check_info(int info, const char *routine);

#endif
