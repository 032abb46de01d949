# The orthogonal collapsed bounds of osgpr() over row chunks of the data,
# so that no N x M matrix is held (memory O(M^2 + chunk M), M = M1 + M2).
# With the block factor L of K(W, W), W = rbind(Z, O) (Fernlund 2022,
# Algorithm 3), the bounds are sums over points of the same statistics as
# the SGPR bound, so the two passes of R/stream.R serve unchanged:
#   pass 1  each chunk: A = L^-1 K(W, x) Lambda^-1/2 and its sums;
#   value   the block factorisation of B = I + A A', the union, SOLVE-GP
#           and ODVGP bounds, and the M x M adjoint pieces of the optimised
#           one (src/bound_stream_orthogonal.c);
#   pass 2  each chunk again: its columns of dF/dK(W, x) and per-point
#           adjoints, contracted with the kernel derivatives.

# The orthogonal bound `variant` ("union", "solve", "odvgp") on W whose
# first M1 rows are the regular inputs, over row chunks: the result of
# .collapsed_bound() without Kwf and kdiag (NULL).
.stream_orthogonal_bound <- function(fit, params, W, M1, lambda, ytil, grad, variant) {
  k <- .kernel_at(fit$kernel, params)
  x <- fit$x
  ctl <- fit$control
  rows <- .stream_rows(ctl$memory, nrow(W))
  threads <- .stream_threads()
  Kww <- .ffi_kern_matrix(k, W)
  ch <- .ffi_stream_orthogonal_chol(Kww, M1, ctl$jitter, ctl$jitter_cap)
  s <- .stream_pass1(x, k, W, ch$L, lambda, ytil, rows, threads)
  v <- .ffi_stream_orthogonal_value(ch$L, M1, s, nrow(x), variant, grad)
  b <- c(v[c("bound", "bounds", "logdet", "fit", "trace", "LB", "LBu", "LBv", "c", "w")],
         list(jitter = ch$jitter, L = ch$L, Kww = Kww))
  if (grad) {
    want_W <- .any_free(fit, c("Z", "O"))
    p <- .stream_pass2(x, k, W, ch$L, v, lambda, ytil, rows, threads, want_W)
    b$Gww <- v$Gww
    jitter <- rep(ch$jitter, c(M1, nrow(W) - M1))
    b$gk <- .stream_add(.stream_contract_uu(k, x, W, v$Gww, jitter, want_W), p$gk)
    b$glambda <- p$glambda
    b$gytil <- p$gytil
  }
  b
}
