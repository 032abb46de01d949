# sgpr(neighbours = K): the inducing-point model plus a Vecchia
# approximation of the residual process, the Vecchia-inducing-points
# full-scale approximation (VIF) of Gyger, Furrer and Sigrist (2025).
#
#   y = m + f_global + r + noise,  f_global the inducing-point (Nystrom)
#   part of the GP, r + noise with covariance R = Kff - Qff + Lambda,
#   approximated by Vecchia's product of conditionals: each point given its
#   K neighbours (R/neighbours.R).
#
# The objective is the exact log likelihood of this approximate prior,
# log N(y; m, Qff + R~), by the Woodbury identity with the sparse Vecchia
# precision R~^-1 = B'D^-1 B; the maths, with the hand-derived adjoints, is
# in the header of src/vecchia.c. As for the collapsed bound, the
# likelihood reads the kernel blocks K(Z, Z), K(Z, X) and (here) the local
# blocks K(S_i, S_i) of each point and its neighbours, and returns their
# adjoints; .contract() and .kern_grad_local() turn them into gradients.
#
# It is a sum over points of M x M statistics, so it is computed over
# blocks of rows: a block owns a run of rows (in the spatial order of
# R/neighbours.R, so that a block and its neighbours are close) and holds
# their neighbours besides (its halo). The blocks of one process are the
# chunks of control$memory; the shards of a cluster are blocks too, and a
# worker cuts its shard into chunks in the same way. Pass 1 sums the
# blocks' statistics; the M x M step gives the value; pass 2 sums the
# blocks' contracted gradients, M x M adjoint pieces and per-point adjoints.
# Memory: the neighbour index (N K integers), M^2, and per chunk its rows
# and halo times M plus its local blocks.

# ---- setting up ----------------------------------------------------------------

# The fit with neighbour sets: `neighbours` holds the structure of
# R/neighbours.R (chosen here at the starting values, or those of `from`,
# a fit it warm-starts from), the objective is a likelihood, and the label
# says so.
.vif_setup <- function(fit, K, from = NULL) {
  # a warm start on the same inputs keeps the neighbour sets of the fit it
  # starts from, so that update(fit, optimize = FALSE) reproduces it
  if (!is.null(from$neighbours) && identical(from$neighbours$K, as.integer(K)) &&
      identical(unname(from$x), unname(fit$x))) {
    fit$neighbours <- from$neighbours
  } else {
    fit$neighbours <- .nb_new(nrow(fit$x), K, .nb_groups_option(nrow(fit$x)))
    fit$neighbours <- .nb_choose(fit, fit$params)
  }
  # logLik(), anova(), print() and summary() read it (R/anova.R)
  fit$loglik_kind <- "likelihood"
  fit$model <- sub("^Sparse GP regression \\(SGPR\\)",
                   sprintf("Sparse GP regression with a Vecchia residual (VIF, K = %d neighbours)", K),
                   fit$model)
  fit
}

.has_neighbours <- function(fit) !is.null(fit$neighbours)

# Rows per chunk for M inducing inputs and K neighbours within `memory`
# bytes (the fit's control$memory), by the budget formula of R/stream.R: a
# chunk holds its Kuf, features and their adjoint (about four rows x M
# doubles, and as much again for its halo) and, for a sum or product of
# kernels, its local kernel blocks with their adjoint (2 (K+1)^2 doubles
# per row). The passes of a single kernel, or of a sum of single kernels,
# form the blocks in batches of 64
# points and hold none, but the budget still counts them, so that the
# chunks, and the order of every sum, do not depend on the kernel's form.
.vif_rows <- function(memory, M, K) {
  if (is.null(memory)) memory <- .default_memory()
  min(.vif_chunk_cap, .budget_rows(memory, 8 * (8 * max(1, M) + 2 * (K + 1)^2)))
}

# Rows per chunk at most, whatever the memory allows: a chunk's blocks of
# local kernel matrices, adjoints and records run to gigabytes, and beyond
# this size larger chunks only cost cache misses and fresh pages (one
# evaluation at N = 3e5, M = 100, K = 20: 8.7 CPU s in chunks of 19 000
# rows, 11.7 s in chunks of 160 000; inst/bench/bench_vif_scale.R).
.vif_chunk_cap <- 32768

# The most inducing inputs an automatic choice takes with K neighbours: as
# .auto_max_inducing(), a budget of multiplications per evaluation, with
# the cost N (M^2 + 1.5 M (K+1)^2) of the likelihood with neighbours (the
# local Gram matrices and their use) and a budget of .vif_budget, a third of
# the collapsed bound's: the neighbours carry the local structure, so the
# global part needs fewer inducing inputs (on power and volcano, M = 30 and
# M = 100 give the same test accuracy), and the search and choice of
# neighbours cost besides. At least 30.
.vif_budget <- 1e8

.vif_max_inducing <- function(N, K, budget = .vif_budget) {
  b <- budget / N
  c1 <- 1.5 * (K + 1)^2
  as.integer(min(N, max(30, floor((-c1 + sqrt(c1^2 + 4 * b)) / 2))))
}

# ---- the likelihood over blocks ------------------------------------------------

# A space of rows over which the passes run: its inputs (nu x D), the
# neighbour index of its first no rows (K x no, rows of the space) and
# their spatial order. A worker's share (.share_vif()) gives one too.
.vif_space <- function(fit) {
  nb <- fit$neighbours
  list(x = fit$x, index = nb$index, spatial = nb$spatial)
}

# Pass 1: the summed statistics of the blocks of space `sp` (list(BB, w,
# sums, n)), `held`, the kernel matrices of a single block (reused by pass
# 2; a single kernel, or a sum of single kernels, keeps its features
# L^-1 Kuf but not its local blocks, which both passes form in batches),
# and `recs`, the blocks' records of
# the local regressions (the factor of each point's neighbour block G_i,
# t_i and d_i: (K+1)(K+2)/2 + 1 doubles per point) when they are kept for
# pass 2. `t`: the model's targets on the rows of the space (.targets(),
# R/stream.R). keep = NA keeps the records when they fit in the `memory`
# (bytes) that a chunk of `rows` leaves (.vif_keep()); TRUE or FALSE
# decides (the tests compare the two routes).
.vif_pass1 <- function(k, Z, L, sp, t, rows, memory = NULL, keep = NA) {
  blocks <- .nb_blocks(sp$index, sp$spatial, rows, nrow(sp$x))
  one <- length(blocks) == 1L
  if (is.na(keep)) keep <- .vif_keep(memory, rows, nrow(Z), nrow(sp$index), ncol(sp$index))
  recs <- if (keep && !one) vector("list", length(blocks))
  s <- NULL
  held <- NULL
  for (i in seq_along(blocks)) {
    b <- blocks[[i]]
    xb <- if (one && identical(b$U, seq_len(nrow(sp$x)))) sp$x else sp$x[b$U, , drop = FALSE]
    Kuf <- .ffi_kern_matrix(k, Z, xb)
    tb <- .targets_rows(t, b$U)
    if (!.local_in_c(k)) {
      # a product of kernels forms its local blocks here (and a single block
      # keeps them for pass 2)
      Kloc <- .kern_local(k, xb, b$nbl)
      sb <- .ffi_vf_stats(L, Kuf, Kloc, b$nbl, tb$lambda, tb$ytil, keep = one || keep)
    } else {
      # a single kernel or a sum of single kernels: the blocks are formed 64
      # points at a time in C, no (K+1)^2 doubles per row of the chunk (the
      # same numbers)
      Kloc <- NULL
      sb <- .ffi_vf_stats_kern(L, Kuf, k, xb, b$nbl, tb$lambda, tb$ytil, keep = one || keep)
    }
    if (one) held <- list(x = xb, Kuf = Kuf, Kloc = Kloc, recs = sb$recs, A = sb$A)
    else if (keep) recs[[i]] <- sb$recs
    sb$recs <- sb$A <- NULL
    rm(Kuf, Kloc)
    s <- if (is.null(s)) sb else .stream_add(s, sb)
  }
  list(stats = s, held = held, blocks = blocks, recs = recs)
}

# Whether the records of the local regressions of N points (K neighbours,
# (K+1)(K+2)/2 + 1 doubles each) fit in `memory` bytes beside a chunk of
# `rows` rows (the budget of .vif_rows()): then pass 2 reads them instead
# of forming each point's neighbour Gram matrix A_S'A_S and its factor
# again (at M = 100, K = 20 about a third of pass 2's work). The chunks
# stay those of .vif_rows(), so both routes add the same terms in the same
# order.
.vif_keep <- function(memory, rows, M, K, N) {
  if (is.null(memory)) memory <- .default_memory()
  chunk <- rows * 8 * (8 * max(1, M) + 2 * (K + 1)^2)
  N * 8 * ((K + 1) * (K + 2) / 2 + 1) <= memory - chunk
}

# Pass 2: the contracted gradient of the blocks' Kuf and local blocks
# (list(variance, lengthscale, W)), the adjoints of the targets summed as
# .targets_grad() takes them (list(glambda = sum_n lambda_n dF/dlambda_n,
# gytil, glambda_points = the per-row terms when t$per_point)), and
# sum Abar A' (M x M).
.vif_pass2 <- function(k, Z, L, v, sp, t, p1, want_W) {
  nu <- nrow(sp$x)
  glambda <- gytil <- numeric(nu)
  gk <- NULL
  AA <- 0
  for (i in seq_along(p1$blocks)) {
    b <- p1$blocks[[i]]
    recs <- A <- NULL
    if (!is.null(p1$held)) {
      xb <- p1$held$x
      Kuf <- p1$held$Kuf
      Kloc <- p1$held$Kloc
      recs <- p1$held$recs
      A <- p1$held$A
    } else {
      xb <- sp$x[b$U, , drop = FALSE]
      Kuf <- .ffi_kern_matrix(k, Z, xb)
      # with the records of pass 1 the local kernel blocks are not read
      # (the kernel gradient of a single kernel, or of each part of a sum of
      # single kernels, evaluates it as it goes); without them those
      # kernels' blocks are formed in batches in C
      if (!is.null(p1$recs)) recs <- p1$recs[[i]]
      Kloc <- if (is.null(recs) && !.local_in_c(k)) .kern_local(k, xb, b$nbl)
    }
    tb <- .targets_rows(t, b$U)
    # with the records the adjoint pass does not read the local blocks; a
    # single kernel or a sum of single kernels takes the factors of the
    # local adjoints (O(K) per point) rather than the blocks ((K+1)^2), a
    # product the blocks
    fac <- .local_in_c(k)
    a <- .ffi_vf_adjoints(L, v$Binv, v$vt, Kuf, if (is.null(recs)) Kloc, b$nbl, tb$lambda,
                          tb$ytil, recs, fac = fac, kernel = k, x = xb, A = A)
    a$glambda <- a$glambda * tb$lambda
    g <- .contract(k, xb, Z, Gww = NULL, Gwf = a$Guf, gdiag = numeric(length(b$U)), Kwf = Kuf,
                   want_W = want_W)
    # (forming the blocks in batches, pass 2 contracts them as it goes)
    th <- .kern_split_theta(k, if (!is.null(a$theta)) a$theta
                               else if (fac) .kern_grad_local_fac(k, xb, b$nbl, a$Gfac)
                               else .kern_grad_local(k, xb, b$nbl, a$Gloc))
    rm(Kuf, Kloc, recs, A)
    g$variance <- g$variance + th$variance
    g$lengthscale <- g$lengthscale + th$lengthscale
    gk <- if (is.null(gk)) g else .stream_add(gk, g)
    glambda[b$U] <- glambda[b$U] + a$glambda
    gytil[b$U] <- gytil[b$U] + a$gytil
    AA <- AA + a$AbarA
    rm(a, g)
  }
  list(gk = gk, AA = AA,
       adj = list(glambda = sum(glambda), gytil = sum(gytil),
                  glambda_points = if (isTRUE(t$per_point)) glambda))
}

# dF/dKuu = -1/2 L^-T sym(Abar A') L^-1 (src/vecchia.c).
.vif_guu <- function(L, AA) {
  Li <- forwardsolve(L, diag(nrow(L)))
  -0.25 * crossprod(Li, (AA + t(AA)) %*% Li)
}

# The VIF log likelihood at `params` with, for grad = TRUE, its gradient
# blocks: the result of .evaluate() (R/protocol.R). In this process over
# the chunks of control$memory, or on the workers of fit$cluster
# (.shard_vif()); the noise and mean enter through the model's .targets()
# and .targets_grad(), as in the collapsed bound (R/stream.R).
.vif_evaluate <- function(fit, params, grad = TRUE) {
  k <- .kernel_at(fit$kernel, params)
  Z <- params$Z
  Kuu <- .ffi_kern_matrix(k, Z)
  ch <- .stream_chol(Kuu, fit$control)
  want_W <- .any_free(fit, "Z")
  a <- list(k = k, Z = Z, L = ch$L, params = params, pass = 1L)
  N <- .nobs(fit)
  if (is.null(fit$cluster)) {
    t <- .targets(fit, params)
    sp <- .vif_space(fit)
    rows <- .vif_rows(fit$control$memory, nrow(Z), fit$neighbours$K)
    p1 <- .vif_pass1(k, Z, ch$L, sp, t, rows, fit$control$memory, keep = if (grad) NA else FALSE)
    s <- p1$stats
  } else {
    s <- Reduce(.stream_add, .cluster_call(fit$cluster, ".shard_vif", a))
    if (!isTRUE(all.equal(s$n, N))) {
      .cluster_fail(sprintf("the workers hold %g observations, not %d", s$n, N))
    }
  }
  v <- .ffi_vf_value(s, N, grad)
  out <- list(value = v$bound,
              terms = c(fit = v$fit, logdet = v$logdet, constant = -0.5 * N * log(2 * pi)),
              jitter = ch$jitter, jitter_scale = mean(diag(Kuu)),
              posterior = list(L = ch$L, LB = v$LB, v = v$v),
              unexplained = s$sums[3L] / s$sums[4L])
  if (!grad) return(out)
  if (is.null(fit$cluster)) {
    p2 <- .vif_pass2(k, Z, ch$L, v, sp, t, p1, want_W)
    AA <- p2$AA
    gk <- p2$gk
    blocks <- .targets_grad(fit, params, t, p2$adj)
  } else {
    a$v <- v[c("Binv", "vt")]
    a$want_W <- want_W
    a$pass <- 2L
    r <- .cluster_call(fit$cluster, ".shard_vif", a)
    AA <- Reduce(`+`, lapply(r, `[[`, "AA"))
    gk <- Reduce(.stream_add, lapply(r, `[[`, "gk"))
    blocks <- Reduce(.stream_add, lapply(r, `[[`, "blocks"))
  }
  gk <- .stream_add(.stream_contract_uu(k, fit$x, Z, .vif_guu(ch$L, AA), ch$jitter, want_W), gk)
  out$grad <- .collapsed_grad(params, gk, blocks, Z = gk$W)
  out
}

# ---- prediction ------------------------------------------------------------------

# The number of training points a new point's residual conditions on:
# .vif_predict_factor times the fit's K unless predict(neighbours =) set
# it (fit$neighbours$predict), at most the fit's N (a worker's own rows
# for its share of a fit on shards). A new point comes after all the
# training points in the ordering, so any set of them defines a valid
# predictive of the same fitted model, and a larger one is nearer the
# exact GP at the fitted parameters for a cost of O(K^3) per point; GpGp
# predicts with 60 neighbours by default where it fits with 30 (Guinness
# 2018). Twice the fit's K predicted better on 9 of 11 benchmark sets
# (split 0, default fits; test NLPD kin8nm -1.141 -> -1.176, volcano
# 0.770 -> 0.765, a 1-D series with gaps to fill -0.153 -> -0.239), worse
# on MBA's LIDAR (+0.0075) and a synthetic field (+0.0014); three times
# was no better overall.
.vif_predict_factor <- 2L
# (integers of candidate indices searched at once: 16 MB)
.vif_predict_query <- 4194304L
.vif_predict_K <- function(fit) {
  nb <- fit$neighbours
  Kp <- if (is.null(nb$predict)) .vif_predict_factor * nb$K else nb$predict
  as.integer(min(.nobs(fit), Kp))
}

# The latent predictive distribution at the rows of xnew: the global part
# and the residual conditioned on the Kp = .vif_predict_K() training points
# most correlated with each new point under the residual process (chosen
# among its 2 Kp nearest, as in training), src/vecchia.c. Cost
# O(M^2 + M Kp^2 + Kp^3) per point, in spatially ordered blocks of 1000
# rows (a block's candidates overlap). With full_cov, the covariance
# C' Bm^-1 C + diag(d): the local residuals of distinct new points are
# independent given the data.
.vif_predict <- function(fit, xnew, full_cov) {
  # rows on the workers of shards() (R/shards_vif.R)
  if (!is.null(fit$shards)) .shards_vif_refuse_predict()
  params <- fit$params
  k <- .kernel_at(fit$kernel, params)
  Z <- params$Z
  post <- fit$posterior
  L <- post$L
  M <- nrow(Z)
  vt <- drop(backsolve(t(post$LB), post$v))
  Binv <- chol2inv(t(post$LB))
  x <- fit$x
  N <- nrow(x)
  K <- .vif_predict_K(fit)
  lambda <- .noise_lambda(fit, params)
  ytil <- fit$y - params$mean
  n <- nrow(xnew)
  mean <- var <- numeric(n)
  C <- if (full_cov) matrix(0, M, n)
  dd <- if (full_cov) numeric(n)
  ls <- .nb_lengthscales(k, ncol(x))
  xs <- .nb_scaled(x, ls)
  xsn <- .nb_scaled(xnew, ls)
  Kc <- min(N, max(K, .nb_candidate_factor * K))
  ord <- if (n > 1L) .ffi_nb_spatial_order(xsn) else 1L
  # the candidates are searched for runs of whole blocks holding at most
  # .vif_predict_query integers (a search builds the tree over the
  # training inputs again; Kc integers per new point for all of them at
  # once would grow with the number of new points)
  run <- 1000L * max(1L, .vif_predict_query %/% (1000L * max(1L, Kc)))
  cand_run <- NULL
  for (r in .row_blocks(n)) {
    rr <- ord[r]
    nbn <- length(rr)
    xb <- xnew[rr, , drop = FALSE]
    if (K > 0L) {
      if ((r[1L] - 1L) %% run == 0L) {
        q <- ord[r[1L]:min(n, r[1L] + run - 1L)]
        cand_run <- .ffi_nb_query(xs, xsn[q, , drop = FALSE], Kc)
      }
      off <- (r[1L] - 1L) %/% run * run
      cand <- cand_run[, r - off, drop = FALSE]
      tr <- unique(as.vector(cand))
      xU <- rbind(xb, x[tr, , drop = FALSE])
      candl <- matrix(nbn + match(cand, tr), nrow(cand))
      Kuf <- .ffi_kern_matrix(k, Z, xU)
      if (Kc > K) {
        A <- forwardsolve(L, Kuf)
        kd <- .ffi_kern_diag(k, xU)
        rres <- pmax(kd - colSums(A^2), 1e-12 * kd)
        nbl <- .ffi_nb_select(A, rres, .kern_local_cross(k, xU, candl), candl, K)
      } else {
        nbl <- candl
      }
      lam <- c(numeric(nbn), lambda[tr])
      yt <- c(numeric(nbn), ytil[tr])
    } else {
      xU <- xb
      Kuf <- .ffi_kern_matrix(k, Z, xU)
      nbl <- matrix(0L, 0L, nbn)
      lam <- yt <- numeric(nbn)
    }
    storage.mode(nbl) <- "integer"
    Kloc <- .kern_local(k, xU, nbl)
    p <- .ffi_vf_predict(L, Binv, vt, Kuf, Kloc, nbl, lam, yt, full_cov)
    mean[rr] <- p$mean + params$mean
    var[rr] <- p$var
    if (full_cov) {
      C[, rr] <- p$C
      dd[rr] <- p$d
    }
  }
  if (full_cov) {
    cov <- crossprod(C, Binv %*% C)
    diag(cov) <- diag(cov) + dd
    return(list(mean = mean, cov = cov))
  }
  list(mean = mean, var = var)
}

# ---- training ----------------------------------------------------------------------

# The fit of sgpr(neighbours = K): L-BFGS-B runs over all free parameters
# with the neighbour sets held, chosen anew between runs by the rule of
# R/neighbours.R; with more than .vif_train_subsample observations, first
# on a random subsample (with its own neighbour sets), then the kernel,
# noise and mean on all the data with the inducing inputs held. The report
# adds the runs as stages.
.vif_train_subsample <- 10000L

.train_vif <- function(fit) {
  # rows on the workers of shards(): R/shards_vif.R
  if (!is.null(fit$shards)) return(.shards_train_vif(fit))
  start <- proc.time()[["elapsed"]]
  N <- nrow(fit$x)
  reports <- list()
  if (N > .vif_train_subsample) {
    rows <- sort(sample.int(N, .vif_train_subsample))
    sub <- .subsample_fit(fit, rows)
    sub$neighbours <- .nb_subset(fit$neighbours, rows)
    sub$neighbours <- .nb_choose(sub, sub$params)
    sub <- .train_vif(sub)
    reports$subsample <- sub$optim
    fit$params <- sub$params
    if (isTRUE(sub$optim$interrupted)) {
      fit$neighbours <- .nb_choose(fit, fit$params)
      fit$optim <- .stage_report(sub$optim, reports, schedule = "neighbours")
      fit$time <- proc.time()[["elapsed"]] - start
      return(fit)
    }
    fit <- .vif_refresh(fit, force = TRUE)
    fit$fixed[.block_mask(fit, "Z")] <- TRUE
  }
  rounds <- .nb_rounds(fit)
  for (round in 0:rounds) {
    fit <- .fit_lbfgsb(fit, if (round == 0L) "all parameters" else
      sprintf("neighbours chosen anew (%d)", round), from_start = !.warm(fit),
      window = .regression_window(.warm(fit) || N > .vif_train_subsample))
    reports[[sprintf("run_%d", round)]] <- fit$optim
    if (isTRUE(fit$optim$interrupted) || round == rounds) break
    if (!.nb_stale(fit$neighbours, fit$kernel, fit$params, ncol(fit$x))) break
    # (before the choice: on a cluster the workers then take the new sets)
    before <- .nb_fitted_value(fit)
    cand <- .vif_refresh(fit, force = TRUE)
    if (!.nb_worth_a_run(cand, before)) break
    fit <- cand
  }
  fit$fixed <- .fixed_from_spec(fit)
  # on a cluster the shares must hold this fit's neighbour sets (a rejected
  # re-selection may have sent others)
  if (!is.null(fit$cluster)) fit <- .vif_cluster_reshard(fit)
  fit$optim <- .stage_report(fit$optim, reports, schedule = "neighbours")
  fit$optim$neighbour_rounds <- round
  if (N > .vif_train_subsample) fit$optim$subsample <- .vif_train_subsample
  fit$time <- proc.time()[["elapsed"]] - start
  fit
}

# Whether the neighbour sets chosen anew (the fit `new`, at the parameters
# where the last run ended, with the likelihood `before` there with the
# sets of that run) are worth another run: they must raise the likelihood
# there by more than control$min_gain per observation, the gain
# that keeps a run going (R/objective.R). Sets chosen at the fitted
# lengthscales need not fit better there: the choice keeps the most
# correlated of the nearest points one point at a time, not the sets of
# the highest likelihood. On power (split 0) the third choice lowered it from
# 2104 to 2079 at the same parameters, and the run that followed ended at
# 2086, below the fit it replaced, after 11 evaluations (3 of 18 CPU s).
# The first two choices raised it by 404 and 52 (8.6 needed).
.nb_worth_a_run <- function(new, before) {
  tol <- (if (is.null(new$control$min_gain)) 0 else new$control$min_gain) * .nobs(new)
  after <- .evaluate(new, new$params, grad = FALSE)$value
  isTRUE(after - before > tol)
}

# The likelihood where the fit's last run ended: the run's own value (the
# objective at fit$params), or evaluated when the run did not record one.
.nb_fitted_value <- function(fit) {
  v <- fit$optim$value
  if (is.numeric(v) && length(v) == 1L && is.finite(v)) v else
    .evaluate(fit, fit$params, grad = FALSE)$value
}

# Choose the neighbour sets anew at the fit's parameters (when stale, or
# with force); on a cluster the shards follow them.
.vif_refresh <- function(fit, force = FALSE) {
  if (!force && !.nb_stale(fit$neighbours, fit$kernel, fit$params, ncol(fit$x))) return(fit)
  fit$neighbours <- .nb_choose(fit, fit$params)
  if (!is.null(fit$cluster)) fit <- .vif_cluster_reshard(fit)
  fit
}

# ---- what summary() reports ---------------------------------------------------------

.vif_report <- function(fit) {
  nb <- fit$neighbours
  fit$summary_extra <- list(
    "Objective" = "the exact log likelihood of the VIF approximation (Gyger, Furrer and Sigrist 2025), not a bound",
    "Neighbours" = sprintf("K = %d per point, chosen by residual correlation among the %d nearest earlier points%s (random order); predict() conditions each new input on %d%s",
                           nb$K, nb$candidates, if (isTRUE(nb$shards)) " of its shard" else "",
                           .vif_predict_K(fit), if (isTRUE(nb$shards)) " of a shard's rows" else ""))
  if (!is.null(fit$auto_neighbours)) {
    fit$summary_extra[["Neighbours"]] <- paste(fit$summary_extra[["Neighbours"]], "-",
                                               .vif_auto_line(fit$auto_neighbours))
  }
  if (isTRUE(fit$selection$auto)) {
    fit$summary_extra[["Number of inducing inputs"]] <- sprintf(
      "M = %d, chosen by greedy selection for an expected KL divergence below %g nats per observation (at most %d; give 'inducing' or 'M' to choose)",
      nrow(fit$params$Z), .auto_kl, fit$selection$M)
  }
  fit
}

# ---- on a cluster -----------------------------------------------------------------

# What a worker holds (.share.sgpr(), R/cluster.R): one block, a run of the
# spatial order and its halo (the neighbours outside the run), as the fit
# restricted to those rows (.share_fit(), as for the collapsed bound),
# with the neighbour index of the run in positions of the block.
.share_vif <- function(fit) {
  nb <- fit$neighbours
  function(r) {
    b <- .nb_block(nb$index, nb$spatial[r])
    list(fit = .share_fit(fit, b$U), K = nb$K, index = b$nbl, spatial = seq_len(b$no))
  }
}

# On a worker: one pass of the VIF likelihood over its block at the
# parameters in `a`, in chunks of the fit's budget. Pass 1 returns the
# statistics; pass 2 the contracted gradient pieces, sum Abar A' and the
# model's gradient blocks of its rows (.targets_grad()). Pass 2 recomputes
# pass 1 (nothing is kept between calls), keeping its records for the
# adjoints when they fit (.vif_keep()).
.shard_vif <- function(s, a, each = NULL) {
  fit <- s$fit
  # (a worker of shards() without rows adds nothing)
  if (nrow(fit$x) == 0L) return(if (a$pass == 1L) NULL else list(gk = NULL, AA = 0, blocks = NULL))
  t <- .targets(fit, a$params)
  sp <- list(x = fit$x, index = s$index, spatial = s$spatial)
  rows <- .vif_rows(fit$control$memory, nrow(a$Z), s$K)
  p1 <- .vif_pass1(a$k, a$Z, a$L, sp, t, rows, fit$control$memory,
                   keep = if (a$pass == 1L) FALSE else NA)
  if (a$pass == 1L) return(p1$stats)
  p2 <- .vif_pass2(a$k, a$Z, a$L, a$v, sp, t, p1, a$want_W)
  list(gk = p2$gk, AA = p2$AA, blocks = .targets_grad(fit, a$params, t, p2$adj))
}

# Send the shares of the current neighbour sets to the workers of
# fit$cluster under its key (the old ones are dropped first), so that the
# release at the end of the fit drops the latest.
.vif_cluster_reshard <- function(fit) {
  h <- fit$cluster
  .cluster_release(h)
  fit$cluster <- .cluster_setup(h$cl, fit, .share_vif(fit), key = h$key)
  fit
}

# ---- neighbours = "auto" ------------------------------------------------------------

# The kernel of a model with neighbours when none is given: Matern 5/2 with
# one lengthscale per input column, the family of the Vecchia packages
# (GpGp's matern25_scaledim, GPBoost's matern_ard with shape 2.5). The
# neighbours follow local structure that is rougher than an RBF kernel
# allows: with neighbours, Matern 5/2 predicted better than RBF on every
# benchmark set (0.07 nats on volcano, 0.32 on argo2016, equal on power;
# bench_peers.R), while without them the inducing points smooth anyway.
.vif_default_kernel <- function() kernel_matern52()

# `neighbours` of sgpr() for N rows: list(K, auto), a warm start keeping the
# number of neighbours of the fit it starts from (one process and shards).
.sgpr_neighbours <- function(neighbours, N, start) {
  nbr <- .check_neighbours(neighbours, N)
  if (nbr$auto && !is.null(start)) {
    nbr <- list(K = if (is.null(start$neighbours)) 0L else start$neighbours$K, auto = FALSE)
  }
  nbr
}

# sgpr()'s kernel when none is given: a warm start's, Matern 5/2 with
# neighbours, else RBF.
.sgpr_default_kernel <- function(K, start) {
  .check_kernel(if (!is.null(start)) start$kernel else
    if (isTRUE(K > 0L)) .vif_default_kernel() else kernel_rbf())
}

# neighbours = "auto": K = 0 (the collapsed bound of today's sgpr) or
# .vif_auto_K (.vif_auto_K_1d with one input), decided by how well each
# model predicts held-out rows, each with the inducing inputs it can afford
# on all the data (a cost-aware comparison of like with like):
#   1. V = min(.vif_auto_held, N / 5) random rows are held out; of the
#      others a random subsample of .vif_auto_rows rows is drawn;
#   2. on the subsample, the model without neighbours is fitted from its
#      starting values and inducing inputs (held); when its residuals show
#      no correlation between nearby inputs (.vif_local_evidence()), the
#      neighbours are not tried (that fit goes on as in step 4 and starts
#      the full fit); otherwise the model with K
#      neighbours (the M of .vif_max_inducing(), inducing inputs held) from
#      the better of where that fit ended and its own grid (.vif_k_start());
#   3. each model is built at its fitted parameters on all rows but the
#      held-out ones (one evaluation; the neighbours are then as dense as
#      in the full fit, which the subsample's are not) and predicts the
#      held-out rows: the gain is the difference of their mean log
#      predictive densities (nats per held-out observation).
#   4. unless the gain clears the rule below by .vif_auto_decisive, the
#      model without neighbours goes on with its inducing inputs free when
#      the full fit frees them (as that fit would be), and is scored again.
# The neighbours are kept when the gain exceeds .vif_auto_gain, a margin
# for the extra cost of a model with neighbours, and .vif_auto_z standard
# errors of the mean of the held-out rows' differences (a one-sided test
# at about 2.5%: the more complex and dearer model must be clearly better,
# not better by chance on a few hundred rows). On small data the held-out
# rows are few (a fifth of N), and a gain of 0.02-0.05 nats there was often
# luck or one outlier: on concrete (927 rows, 185 held out, 20 standard
# splits) the margin alone kept the neighbours on 11 splits, for a test
# NLPD of 3.023 (the exact GP: 2.989); with the test on 5, for 2.988.
# Energy: 0.6997 -> 0.7000. Where the neighbours carry real structure the
# gain is 2.3-42 standard errors (kin8nm, power, volcano, rainfall, jason3
# and ato, splits 0-2: inst/bench/results/bench_trial_test.txt). The fit then starts from
# the winner's parameters. No dimension enters the rule: where the
# inducing points the budget allows explain the function (smooth
# functions, or many inputs, where nearest neighbours are far apart), the
# model without neighbours predicts as well. The training objectives are
# not compared: the likelihood of the model with neighbours against the
# bound of the one without favours the neighbours by the bound's gap, and
# it separated rough from smooth functions less clearly (volcano 0.47,
# power 0.008, a smooth function -0.004 nats per observation, against
# 0.67, 0.076 and -0.001 held out). When the rule does not keep them (and
# no kernel is given), the model with neighbours is fitted once more from a
# start with a short-range part on the neighbours' own scale
# (.vif_reach_start()), scored in the same way against the same model
# without, and kept by the same rule.
#   5. With the neighbours kept, the model is built once more at the
#      trial's parameters on all rows but the held-out ones (pass 1 only)
#      for the share of the prior variance that neither part explains,
#      sum_i (d_i - lambda_i) / sum_i k(x_i, x_i) (src/vecchia.c): the
#      conditional variance of the residual signal given the neighbours.
#      Above .vif_auto_left the greedy inducing inputs leave structure
#      that the neighbours cannot pick up (neighbours far apart for the
#      lengthscales, as with many inputs), and the global part takes more
#      inducing inputs, at k-means centres of the inputs (as GPBoost's
#      full-scale Vecchia approximation places them; Gyger, Furrer &
#      Sigrist 2025): as many as .vif_max_inducing() allows with a budget
#      of .vif_centres_budget (at most N / 4), or the M given; the full fit
#      holds them there. Measured on kin8nm (8 inputs; share 0.046-0.074
#      on splits 0-2; bench_peers.R, OpenBLAS, CPU s of fit and predict,
#      means over splits 0-2): greedy inducing inputs held, 0.023 nats
#      worse than without neighbours (split 0); M = 30 placed by the
#      likelihood on the subsample (the former rule, at most 100
#      iterations), NLPD -1.135 in 14.5 s, and with 30 or 200 iterations
#      -1.119 and -1.128 (the placement overfits the subsample); M = 106
#      k-means centres, -1.141 in 14.2 s (GpGp: -1.116 in 14.1 s, equal
#      within the run-to-run noise of about 1 s on a shared machine). By hand
#      on split 0: k-means M = 60, 100, 150 (K = 20, no trial) gave
#      -1.127, -1.148, -1.159 in 8, 11, 15 s; M = 200 with K = 30, -1.192
#      in 29 s (GPBoost's VIF, M = 200, K = 30: -1.202 in 180 s). Power
#      0.0022, volcano 0.0055, argo 0.0085 stay below .vif_auto_left and
#      keep the greedy inducing inputs (inst/bench/results/
#      bench_peers_vif2.txt, bench_peers_vif3.txt).
#      The centres are then built at the trial's parameters on all rows
#      but the held-out ones and scored there as the models are in step 3,
#      against the inducing inputs they would replace, and kept when they
#      gain .vif_auto_gain: more unexplained variance does not mean that
#      centres can explain it. On kin8nm (splits 0-2) they gain 0.036-0.051
#      nats (standard error 0.013) and are kept; on MBA's LIDAR 0.013
#      (0.015), kept; on jason3 -0.0001, and on six draws of fields with
#      structure shorter than their spacing (unexplained 0.07-0.21)
#      between -0.013 and 0.001: not kept. On bench_peers.R's field2,
#      towns2 and rough3 (splits 0-2) they are dropped on every split, for
#      fits in 7.8 instead of 17.0 CPU s at the same test NLPD (+0.0007
#      nats, se 0.0014; inst/bench/results/bench_peers_centres.txt). The
#      margin alone decides, without the test in standard errors: the
#      centres come in only where the variance left asks for them, and
#      are dropped where they clearly do not help, not where a few hundred
#      held-out rows cannot tell (LIDAR keeps them, as before).
# Small data, where the budget covers an inducing input for
# every observation, skip the trial (K = 0). With optimize = FALSE no trial
# is run (K = 0). `kernel`: the user's kernel, or NULL for the default.
# Returns list(K, params and kernel (of the winner, the starting values of
# the full fit), report).
.vif_auto_K <- 20L
# With one input, .vif_auto_K_1d neighbours: a Matern process on a line is
# nearly screened from the rest by the few observations on either side of
# a point (Stein 2002, "The screening effect in kriging"), and ten did as
# well as twenty on the benchmark's series (sunspots, treering, the DAX
# and hourly series, splits 0-2, test NLPD within 0.002 nats, predictions
# on 2K neighbours) in 30-55% less CPU (inst/bench/results/
# bench_peers_predict.txt). The inducing inputs stay at the number the
# budget allows with .vif_auto_K neighbours: the neighbours' savings went
# into two or three times as many inducing inputs for no better fit.
.vif_auto_K_1d <- 10L
.vif_auto_neighbours <- function(D) if (D == 1L) .vif_auto_K_1d else .vif_auto_K
# The automatic M of neighbours = "auto" (the trial's, and the full fit's
# when it keeps the neighbours): the budget of one evaluation with
# .vif_auto_K neighbours, whatever number it keeps (see above).
.vif_auto_max_inducing <- function(N, budget = .vif_budget) .vif_max_inducing(N, .vif_auto_K, budget)
.vif_auto_rows <- 1500L
.vif_auto_held <- 1000L
.vif_auto_gain <- 0.01
.vif_auto_z <- 2
.vif_auto_left <- 0.02
# The iterations of the trial's fits: at most 200 each, and at most 100 for
# the model without neighbours, whose free inducing inputs (up to n / 2 of
# them, D numbers each) make its iterations many and slow to converge.
# Its iterations beyond 100 changed the gain by 0.02 nats on kin8nm (8
# inputs, 201 inducing inputs; 1.1-1.4 of the trial's 3.9-4.2 CPU s), by
# 0.004 on ato and by less than 0.001 on volcano, far from the margin, and
# not at all on rainfall, concrete, energy (splits 0-2), power and jason3
# (split 0): no decision changed (inst/bench/results/
# bench_peers_viftrial.txt).
.vif_auto_ref_maxit <- 100L
# The model without neighbours is fitted first with its inducing inputs
# held (greedy selection), and freed only when the neighbours do not win
# by this much more than the rule asks: freeing them lowered the
# neighbours' gain by at most 0.18 nats per observation on the benchmark
# sets (splits 0 and 1: volcano 0.15-0.18, kin8nm 0.10-0.16, rainfall
# 0-0.025, power 0.002-0.01; on concrete, where the gains are small, it
# moved them by up to 0.10 either way), and where the neighbours win by far
# more (volcano, 0.83-0.88 nats with the inducing inputs held) the free
# fit cost a third of the whole fit. On small data, where the trial's
# subsample is all the rows not held out (N <= .vif_auto_rows + V, at most
# 2500), that fit frees them from the start as before: there the gains are
# small and noisy, and the two stages moved them by up to 0.1 nats either
# way and cost 1-2 s more per fit (concrete and energy, 20 splits: test
# NLPD +0.008 on concrete, se 0.004; inst/bench/results/
# bench_trial_early.txt).
.vif_auto_decisive <- 0.25
# The evidence of local structure below which the model with neighbours is
# not fitted at all (.vif_local_evidence()), and the number of nearest rows
# whose mean residual it also tries.
.vif_auto_local_z <- 2
.vif_local_k <- 5L
# The trial's fit with neighbours keeps the sets chosen at its starting
# values (no rounds of choosing them anew; the full fit runs those, and the
# held-out rows are scored with sets chosen at the fitted lengthscales).
.vif_auto_rounds <- 0L
# The budget (multiplications per evaluation, as .vif_budget) of the k-means
# inducing inputs of step 4: twice the budget of the collapsed bound at its
# automatic M (N M^2 <= 3e8, .auto_max_inducing()), since the
# neighbours then carry less of the structure.
.vif_centres_budget <- 6e8

.vif_auto <- function(x, y, kernel, noise, spec, Z, control, mean, optimize, start0) {
  N <- nrow(x)
  if (!optimize) return(list(K = 0L, report = list(reason = "not optimised")))
  # a fit stopped by Ctrl-C takes its cheapest way to the end (R/interrupt.R)
  if (.interrupt_pending()) return(list(K = 0L, report = list(reason = "interrupted")))
  # small data: the budget of the model without neighbours covers an
  # inducing input for every observation (the exact GP is within reach)
  if (.auto_max_inducing(N) >= N) return(list(K = 0L, report = list(reason = "small")))
  K <- min(.vif_auto_neighbours(ncol(x)), N - 1L)
  # the held-out rows, and the subsample among the others
  V <- min(.vif_auto_held, N %/% 5L)
  n <- min(N - V, .vif_auto_rows)
  # the trial draws its own random numbers (the rows, the order of its
  # neighbours, ties in its selection) and then restores the stream, so
  # that a fit without neighbours draws what it drew before
  if (!exists(".Random.seed", envir = globalenv(), inherits = FALSE)) stats::runif(1L)
  seed <- get(".Random.seed", envir = globalenv())
  on.exit(assign(".Random.seed", seed, envir = globalenv()), add = TRUE)
  perm <- sample.int(N)
  held <- sort(perm[seq_len(V)])
  rest <- sort(perm[-seq_len(V)])
  rows <- sort(perm[V + seq_len(n)])
  # on data dense for the start grid (R/start.R), the model with neighbours
  # is fitted on compact windows of the rows not held out, where its
  # neighbours are as close as in the full fit; a subsample spread over all
  # of them has its neighbours far apart and sees structure on the scale of
  # a few observations as noise
  xr <- x[rest, , drop = FALSE]
  sx <- .sd_or_one(.col_sd(xr))
  windowed <- !is.null(.start_dense(xr, sx))
  krows <- if (windowed) rest[.start_windows(xr, sx, n)] else rows
  rm(xr)
  known <- is.numeric(noise) && length(noise) == N
  nzt <- if (known) noise[rows] else if (is.numeric(noise) && length(noise) == 1L) noise
  nzk <- if (known) noise[krows] else nzt
  Mt <- max(1L, min(n %/% 4L, .vif_auto_max_inducing(N), nrow(Z)))
  ctl <- list(maxit = 200L, jitter = control$jitter, jitter_cap = control$jitter_cap, trace = 0L,
              memory = control$memory, neighbour_rounds = .vif_auto_rounds)
  # the model without neighbours from its own starting values (start0:
  # kernel and noise) and inducing inputs
  nz0 <- if (is.null(nzt) && !is.null(start0$noise)) start0$noise else nzt
  # (at most n / 2 of them, the first chosen: greedy selection takes them in
  # order of importance)
  Z0 <- Z[seq_len(min(nrow(Z), max(1L, n %/% 2L))), , drop = FALSE]
  # (first with its inducing inputs held when the subsample is a part of
  # the rows not held out, see above)
  free_Z <- isTRUE(start0$optimize_inducing) && n < N - V
  ref_ctl <- utils::modifyList(ctl, list(maxit = .vif_auto_ref_maxit))
  ref <- .vif_trial(x[rows, , drop = FALSE], y[rows], kernel = start0$kernel, inducing = Z0,
                    noise = nz0, mean = mean, neighbours = 0L,
                    optimize_inducing = if (free_Z) FALSE else start0$optimize_inducing,
                    control = ref_ctl)
  if (is.null(ref)) return(list(K = 0L, report = list(reason = "interrupted")))
  # the model without neighbours with its inducing inputs free (when they
  # were held above), from where the fit with them held ended
  free_ref <- function(ref) {
    pr <- ref$params
    .vif_trial(x[rows, , drop = FALSE], y[rows], kernel = .kernel_at(ref$kernel, pr),
               inducing = pr$Z, noise = if (is.null(nzt)) pr[["noise"]] else nzt,
               mean = mean, neighbours = 0L, optimize_inducing = TRUE, control = ref_ctl)
  }
  # no local correlation in what that model leaves: the model with
  # neighbours is not fitted (see .vif_local_evidence())
  local <- .vif_local_evidence(ref, x, y, rest, held, sx)
  if (isTRUE(local$z < .vif_auto_local_z)) {
    if (free_Z) ref <- free_ref(ref)
    if (is.null(ref)) return(list(K = 0L, report = list(reason = "interrupted")))
    return(list(K = 0L, params = ref$params, kernel = .kernel_at(ref$kernel, ref$params),
                report = list(reason = "residuals", kept = FALSE, rows = n, held = V, K = K,
                              M = nrow(Z0), local = local)))
  }
  # the model with neighbours starts from the better, by its likelihood on
  # the subsample, of where the fit without neighbours ended and the best
  # point of its own grid (R/start.R, scored by its likelihood); with the
  # user's kernel, from the grid (.vif_k_start())
  ks <- .vif_k_start(x[krows, , drop = FALSE], y[krows], kernel, ref, nzk, Mt, K, mean, ctl)
  if (is.null(ks)) return(list(K = 0L, report = list(reason = "interrupted")))
  trial <- .vif_trial(x[krows, , drop = FALSE], y[krows], kernel = ks$kernel, M = Mt,
                      noise = ks$noise, mean = mean, neighbours = K, optimize_inducing = FALSE,
                      control = ctl)
  if (is.null(trial)) return(list(K = 0L, report = list(reason = "interrupted")))
  # each model at its fitted parameters on all rows but the held-out ones,
  # and its log predictive density there
  scored <- NULL
  score <- function(f, nb) {
    p <- f$params
    g <- .vif_trial(x[rest, , drop = FALSE], y[rest], kernel = .kernel_at(f$kernel, p),
                    inducing = p$Z, noise = if (known) noise[rest] else p[["noise"]],
                    mean = p$mean, neighbours = nb, optimize = FALSE, control = ctl)
    if (is.null(g)) return(NULL)
    if (nb > 0L) scored <<- g
    # (the held-out rows condition on the fit's K neighbours, as when its
    # rules were measured)
    if (nb > 0L) g$neighbours$predict <- nb
    q <- .predict_latent(g, x[held, , drop = FALSE], FALSE)
    lam <- if (known) noise[held] else p[["noise"]]
    stats::dnorm(y[held], q$mean, sqrt(pmax(q$var, 0) + lam), log = TRUE)
  }
  l0 <- score(ref, 0L)
  lK <- if (!is.null(l0)) score(trial, K)
  if (is.null(lK)) return(list(K = 0L, report = list(reason = "interrupted")))
  # the gain in nats per held-out observation and its standard error, and
  # whether it clears the rule (by `margin` more)
  compare <- function(l0, lk = lK) list(gain = mean(lk - l0), se = stats::sd(lk - l0) / sqrt(V))
  clear <- function(g, margin = 0) {
    isTRUE(g$gain - margin > .vif_auto_gain && g$gain - margin > .vif_auto_z * g$se)
  }
  g <- compare(l0)
  # the model without neighbours with its inducing inputs held: when the
  # neighbours win by more than freeing them has been seen to give, they are
  # kept; otherwise that fit goes on with its inducing inputs free and is
  # scored again
  early <- free_Z && clear(g, .vif_auto_decisive)
  if (free_Z && !early) {
    ref <- free_ref(ref)
    l0 <- if (!is.null(ref)) score(ref, 0L)
    if (is.null(l0)) return(list(K = 0L, report = list(reason = "interrupted")))
    g <- compare(l0)
  }
  keep <- clear(g)
  # not kept, with the default kernel: a second try from a start with a
  # short-range part on the neighbours' scale (.vif_reach_start())
  reach <- NULL
  if (!keep && is.null(kernel)) {
    rs <- .vif_reach_start(x[krows, , drop = FALSE], y[krows], ks$ends, nzk, Mt, K, mean, ctl)
    trial2 <- if (!is.null(rs)) {
      .vif_trial(x[krows, , drop = FALSE], y[krows], kernel = rs$kernel, M = Mt,
                 noise = rs$noise, mean = mean, neighbours = K, optimize_inducing = FALSE,
                 control = ctl)
    }
    lK2 <- if (!is.null(trial2)) score(trial2, K)
    if (is.null(lK2)) return(list(K = 0L, report = list(reason = "interrupted")))
    g2 <- compare(l0, lK2)
    reach <- c(rs$report, list(gain = g2$gain, gain_se = g2$se, kept = clear(g2),
                               first_gain = g$gain, first_gain_se = g$se))
    if (reach$kept) {
      keep <- TRUE
      trial <- trial2
      lK <- lK2
      g <- g2
    }
  }
  won <- if (keep) trial else ref
  # with neighbours kept: the share of the prior variance that neither part
  # explains at the trial's parameters on all rows but the held-out ones,
  # and, above .vif_auto_left, the inducing inputs at k-means centres where
  # they predict the held-out rows better (see above)
  left <- placed <- centres <- NULL
  if (keep) {
    left <- .vif_evaluate(scored, scored$params, grad = FALSE)$unexplained
    # (on dense data the neighbours are the closest observations there are,
    # and what they leave is structure on the data's own spacing, which
    # inducing inputs, sparser still, do not reach)
    if (isTRUE(left > .vif_auto_left) && isTRUE(start0$place) && !windowed) {
      Mc <- if (is.null(start0$M)) .vif_auto_max_inducing(N, .vif_centres_budget) else start0$M
      placed <- select_inducing(x, M = min(Mc, N %/% 4L), method = "kmeans", trace = FALSE)$Z
      # the centres at the trial's parameters, scored on the held-out rows
      # against the inducing inputs they would replace: kept when they gain
      # the neighbours' margin (see above)
      pt <- trial$params
      lP <- .keep_stream(score(list(params = utils::modifyList(pt, list(Z = placed)),
                                    kernel = trial$kernel), K))
      if (is.null(lP)) return(list(K = 0L, report = list(reason = "interrupted")))
      gP <- compare(lK, lP)
      centres <- list(M = nrow(placed), gain = gP$gain, gain_se = gP$se,
                      kept = isTRUE(gP$gain > .vif_auto_gain))
      if (!centres$kept) placed <- NULL
    }
  }
  # with neighbours kept and the default kernel: a short-range part added
  # to the kernel where the likelihood on the trial's rows prefers it
  # (.vif_short_part())
  wk <- .kernel_at(won$kernel, won$params)
  short <- NULL
  if (keep && is.null(kernel) && !.is_combo(wk)) {
    short <- .vif_short_part(x[krows, , drop = FALSE], y[krows], wk, won$params,
                             if (known) nzk, Mt, K, mean, ctl)
    if (is.null(short)) return(list(K = 0L, report = list(reason = "interrupted")))
    if (!is.null(short$kernel)) {
      wk <- short$kernel
      if (!known) won$params[["noise"]] <- short$noise
    }
  }
  list(K = if (keep) K else 0L, params = won$params, kernel = wk,
       Z = placed,
       report = list(reason = "trial", kept = keep, gain = g$gain, gain_se = g$se, rows = n,
                     early = early, windows = if (windowed) length(krows),
                     held = V, K = K,
                     M = c(Mt, nrow(Z0)), local = local, unexplained = left,
                     placed = !is.null(placed), centres = centres, reach = reach,
                     short = short$report))
}

# The evidence, before the trial's model with neighbours is fitted, that
# they have anything to model: whether what the fitted model without them
# (`fit`, on a subsample of the rows `rest`) leaves is correlated between
# nearby inputs. Each held-out row's residual y - mean is set against the
# residual of its nearest row among `rest` and against the mean residual
# of its .vif_local_k nearest, by rank correlation (Spearman's, so that a
# few outlying residuals neither hide structure nor make it). Without local
# structure the residuals of distinct rows are independent and each
# correlation r over the V held-out rows is about N(0, 1/V); the evidence
# is z = sqrt(V) max(r), and below .vif_auto_local_z the neighbours are not
# tried. (The nearest row alone sees structure on the data's own spacing,
# near-repeated inputs say; the mean of five sees it with less noise on a
# slightly larger scale.)
# "Nearest" in two metrics, as neither alone sees all local structure: the
# inputs scaled by the fit's lengthscales (as the neighbour sets are
# searched), and by their standard deviations. The fit without neighbours
# may call structure along one input noise and give that input a long
# lengthscale; nearest rows in its metric then ignore that input: on a
# trend plus bumps shorter than its inducing inputs can follow (3 inputs,
# 2000 rows; the test in test-vif.R), Pearson's z = 0.47 in its metric and
# 12 in the other.
# Measured on 100 splits of 16 sets (bench_peers.R): z at most 1.91 on
# quakes and 1.42 on nlschools, where the neighbours were never kept and
# every split is skipped; at least 2.8 everywhere else, and at least 4.28
# (concrete) where the trial kept them, so that no decision changed
# (inst/bench/results/bench_trial_local.txt). On the splits it skips, the
# fit is the one the trial gave before, in a third of the CPU. Returns
# list(z, r (one per metric and number of nearest rows), held). `sx`: the
# standard deviations of the inputs' columns over the rows `rest`.
.vif_local_evidence <- function(fit, x, y, rest, held,
                                sx = .sd_or_one(.col_sd(x[rest, , drop = FALSE]))) {
  V <- length(held)
  kn <- min(.vif_local_k, length(rest))
  xr <- x[rest, , drop = FALSE]
  xh <- x[held, , drop = FALSE]
  scales <- list(lengthscales = .nb_lengthscales(.kernel_at(fit$kernel, fit$params), ncol(x)),
                 sd = sx)
  nn <- lapply(scales, function(s) .ffi_nb_query(.nb_scaled(xr, s), .nb_scaled(xh, s), kn))
  # the residuals at the held-out rows and at their neighbours only
  used <- sort(unique(unlist(nn, use.names = FALSE)))
  at <- c(held, rest[used])
  e <- y[at] - .predict_latent(fit, x[at, , drop = FALSE], FALSE)$mean
  eh <- e[seq_len(V)]
  er <- numeric(length(rest))
  er[used] <- e[-seq_len(V)]
  # (a constant residual, to rounding: nothing local to model)
  varies <- function(v) isTRUE(stats::sd(v) > 1e-8 * max(abs(v)))
  cr <- function(b) if (varies(eh) && varies(b)) stats::cor(eh, b, method = "spearman") else 0
  r <- unlist(lapply(nn, function(m) {
    c(nearest = cr(er[m[1L, ]]), mean = cr(colMeans(matrix(er[m], kn))))
  }))
  list(z = sqrt(V) * max(r), r = r, held = V)
}

# The start of the trial's model with neighbours on the rows x, y: list(kernel,
# noise) for sgpr(), or NULL when Ctrl-C stopped it. With the default kernel
# two points are scored by the model's log likelihood there (each with its
# own greedy inducing inputs and neighbour sets): where the trial's fit
# without neighbours ended (`ref`; Matern 5/2 at its lengthscales and
# variance, and its noise), and the best point of the model's own grid
# (R/start.R, scored by the same likelihood). Either alone fails somewhere:
#  - from the end of the fit without neighbours, on a smooth trend with
#    short-range bumps (3 inputs, 5000 rows), the model with neighbours
#    stayed where that fit had called the bumps noise (noise 0.048 where it
#    is 0.0025): the neighbours were dropped, test RMSE 0.215 against GpGp's
#    0.058;
#  - from its own grid, on concrete (8 inputs, 927 rows), the fits with
#    neighbours were worse, and the neighbours that were kept on 5 of 20
#    splits (test NLPD 2.987) were kept on none (2.996).
# (inst/bench/results/bench_vif_start.txt.) `noise`: the user's (NULL:
# learned); the user's kernel starts from the grid alone.
.vif_k_start <- function(x, y, kernel, ref, noise, M, K, mean, control) {
  if (!is.null(kernel)) return(list(kernel = kernel, noise = noise))
  k0 <- .kernel_at(ref$kernel, ref$params)
  ends <- list(kernel = if (.is_combo(k0)) .vif_default_kernel() else
    kernel_matern52(lengthscale = k0$lengthscale, variance = k0$variance),
    noise = if (is.null(noise)) ref$params[["noise"]] else noise)
  g <- .vif_trial_do(function() {
    .start_collapsed(.vif_default_kernel(), x, y, noise, list(M = M), TRUE, neighbours = K)
  })
  if (is.null(g)) return(NULL)
  grid <- list(kernel = g$kernel, noise = if (is.null(noise)) g$noise else noise)
  score <- function(s) .vif_start_score(x, y, s, M, K, mean, control)
  a <- score(ends)
  b <- if (!is.null(a)) score(grid)
  if (is.null(b)) return(NULL)
  c(if (isTRUE(b > a)) grid else ends, list(ends = ends))
}

# The log likelihood of the model with K neighbours on the rows x, y at the
# start `s` (list(kernel, noise)), with M inducing inputs by greedy
# selection: how the trial ranks starts. NULL when Ctrl-C stopped it.
.vif_start_score <- function(x, y, s, M, K, mean, control) {
  f <- .vif_trial(x, y, kernel = s$kernel, M = M, noise = s$noise, mean = mean,
                  neighbours = K, optimize = FALSE, control = control)
  if (is.null(f)) NULL else f$bound
}

# The start `k` plus a Matern 5/2 part of lengthscales `l` that takes a
# share h of the noise variance lam (the rest stays noise; the user's
# `noise`, when given, stays as it is): list(kernel, noise).
.vif_with_short <- function(k, l, h, lam, noise) {
  list(kernel = k + kernel_matern52(lengthscale = l, variance = h * lam),
       noise = if (is.null(noise)) (1 - h) * lam else noise)
}

# The start of the trial's second try at the model with neighbours, when
# the first (one kernel, from .vif_k_start()) did not predict the held-out
# rows well enough to be kept: the fit without neighbours may have called
# short-range structure noise (its lengthscales far longer than that
# structure, one of them 1e5 times the input's spread on the two-scale
# surface below), and a
# single kernel with neighbours, started there or from the grid, stays
# there. On f = sin(3a) + 0.3 sin(40a) cos(35b), noise variance 0.0675,
# 3000 rows (a, b uniform on the unit square), the trial's model with
# K = 20 neighbours on 1500 of them ended with the noise of the fit without
# (log likelihood -1636 against -1634), and the neighbours were dropped
# (test NLPD 0.202; GpGp 0.115). The neighbours can carry structure on the
# scale of the distance to the K-th nearest row; the start is the end of
# the fit without neighbours (`ends`: list(kernel, noise), Matern 5/2) plus
# a Matern 5/2 with lengthscales f rho (in each input's units) for f in
# .vif_reach, rho the median of that distance over the rows x in the
# inputs scaled by their standard deviations, and a share h in
# .vif_reach_share of the noise variance (the rest stays noise; known
# noise stays as given), the best by the model's log likelihood on the
# rows x, y (M inducing inputs by greedy selection, K neighbours). Each
# candidate is scored with the same random numbers (the greedy selection's
# tie-breaking order and the neighbours' order), from the stream as it is
# on entry. On the surface above, from the best of these the neighbours
# were kept (test NLPD 0.119). Returns list(kernel, noise, report =
# list(scores, rho, reach = f, share = h)), or NULL when Ctrl-C stopped it.
# `noise`: the user's on these rows, or NULL (learned).
.vif_reach <- c(0.125, 0.25, 0.5)
.vif_reach_share <- c(0.25, 0.5)
.vif_reach_start <- function(x, y, ends, noise, M, K, mean, control) {
  reach <- .vif_reach_lengthscales(x, K)
  lam <- if (is.null(noise)) ends$noise else mean(noise)
  grid <- expand.grid(f = seq_along(.vif_reach), h = seq_along(.vif_reach_share))
  seed <- get(".Random.seed", envir = globalenv())
  scores <- numeric(nrow(grid))
  cands <- vector("list", nrow(grid))
  for (j in seq_len(nrow(grid))) {
    cands[[j]] <- .vif_with_short(ends$kernel, reach$lengthscales[[grid$f[j]]],
                                  .vif_reach_share[grid$h[j]], lam, noise)
    assign(".Random.seed", seed, envir = globalenv())
    sc <- .vif_start_score(x, y, cands[[j]], M, K, mean, control)
    if (is.null(sc)) return(NULL)
    scores[j] <- sc
  }
  b <- which.max(scores)
  c(cands[[b]], list(report = list(scores = scores, rho = reach$rho,
                                   reach = .vif_reach[grid$f[b]],
                                   share = .vif_reach_share[grid$h[b]])))
}

# rho of .vif_reach_start() on the rows x, and the short part's
# lengthscales for each fraction: list(lengthscales, rho).
.vif_reach_lengthscales <- function(x, K) {
  s <- .sd_or_one(.col_sd(x))
  xs <- .nb_scaled(x, s)
  k <- min(K + 1L, nrow(x))
  # (each row is its own nearest: the K-th other row is the (K+1)-th)
  far <- .ffi_nb_query(xs, xs, k)[k, ]
  rho <- max(stats::median(sqrt(rowSums((xs - xs[far, , drop = FALSE])^2))),
             sqrt(.Machine$double.eps))
  list(lengthscales = lapply(.vif_reach, function(f) f * rho * s), rho = rho)
}

# The short-range part of the kernel of a model with neighbours (the
# default kernel, neighbours kept by the trial): with one kernel the same
# lengthscales serve the global part, which the inducing points carry, and
# the residual, which the neighbours carry. Where the data hold structure
# on two scales, short-range variation weaker than the noise say, the
# likelihood of one kernel prefers to call the short part noise: on
# f = sin(3a) + 0.3 sin(40a) cos(35b) with noise variance 0.0675 (1500
# rows, K = 20), -323 at the fit that does so against -362 at GpGp's
# parameters, and test RMSE of f 0.156 against GpGp's 0.126. The kernel
# k_long + k_short, two Matern 5/2 kernels, lets the neighbours model the
# short part: likelihood 55-63 nats higher, RMSE 0.117-0.124 (3 seeds).
# The long part is the trial's fitted kernel; the short part has its
# lengthscales times r, for r in .vif_short_ratios, and a share
# .vif_short_share of the trial's noise variance as its variance (the
# rest stays noise; known noise stays as given). The start is the best by
# the model's log likelihood on the trial's rows `x`, `y` (M inducing
# inputs by greedy selection, K neighbours) of the trial's kernel alone
# and the sums; the full fit then moves both parts. The candidates are
# scored at their starting values and the single kernel at its optimum, so
# a sum is taken only where it is better before any fitting. (On the
# example above the trial keeps no neighbours at all: its one-kernel model
# with them predicts the held-out rows no better than the model without,
# and the short part is tried only once the neighbours are kept.) On nine
# benchmark sets (splits 0-2) the test NLPD fell by 0.13 nats per
# observation on the DAX series, 0.12 on rainfall, 0.07 on jason3, 0.04 on
# sunspots and 0.02 on volcano, and rose by 0.004 on kin8nm, for 1.0-1.9
# times the CPU (inst/bench/results/bench_peers_short.txt).
# Returns list(kernel, noise: the start; kernel NULL when the single
# kernel is kept), report = list(scores (single kernel, then each r),
# ratio)), or NULL when Ctrl-C stopped it. `k1`: the trial's kernel at its
# fitted parameters `params`; `noise`: the user's noise on these rows, or
# NULL (learned, started at the trial's).
.vif_short_ratios <- c(0.3, 0.1, 0.03)
.vif_short_share <- 0.5
.vif_short_part <- function(x, y, k1, params, noise, M, K, mean, control) {
  lam <- if (is.null(noise)) params[["noise"]] else mean(noise)
  sums <- lapply(.vif_short_ratios, function(r) {
    .vif_with_short(k1, k1$lengthscale * r, .vif_short_share, lam, noise)
  })
  cands <- c(list(list(kernel = k1, noise = if (is.null(noise)) lam else noise)), sums)
  scores <- numeric(length(cands))
  for (i in seq_along(cands)) {
    sc <- .vif_start_score(x, y, cands[[i]], M, K, mean, control)
    if (is.null(sc)) return(NULL)
    scores[i] <- sc
  }
  b <- which.max(scores)
  report <- list(scores = scores, ratio = if (b > 1L) .vif_short_ratios[b - 1L])
  if (b == 1L) return(list(report = report))
  list(kernel = cands[[b]]$kernel, noise = cands[[b]]$noise, report = report)
}

# A trial fit of sgpr() with the arguments `...` (warnings muffled), or NULL
# when Ctrl-C stopped it: then the fit that runs the trial is stopped there
# too (its phase noted, R/interrupt.R), and goes on without neighbours by
# its cheapest way. The trial is a fit of its own, so the test hooks of
# R/interrupt.R, which name phases of the fit itself (its start search,
# selection, optimiser runs), do not reach into it; the hook
# sparsevgp.interrupt_at = "neighbour_trial" stops the trial.
.vif_trial <- function(...) .vif_trial_do(function() sgpr.default(...))

# The trial's step `step()` (a fit, or another part of the trial) as
# .vif_trial() runs a fit.
.vif_trial_do <- function(step) {
  phase <- "the trial for neighbours = \"auto\""
  run <- function() {
    .interrupt_point("neighbour_trial")
    hooks <- options(sparsevgp.interrupt_at = NULL, sparsevgp.interrupt_after = NULL)
    on.exit(options(hooks), add = TRUE)
    suppressWarnings(step())
  }
  trial <- .interruptible(run(), phase)
  if (!is.null(trial) && isTRUE(trial$optim$interrupted)) {
    .interrupt_note(phase)
    trial <- NULL
  }
  trial
}

# The number of k-means centres of the trial's report and the words on
# their held-out gain (a fit saved before the gain was recorded has the
# number alone).
.vif_centres_m <- function(cn) if (is.list(cn)) cn$M else cn
.vif_centres_gain <- function(cn, verb) {
  if (!is.list(cn)) return("")
  sprintf(" %s %s (standard error %s) on the held-out rows", verb, format(cn$gain, digits = 3L),
          format(cn$gain_se, digits = 2L))
}

# The line of summary() on an automatic choice.
.vif_auto_line <- function(r) {
  if (is.null(r$kept) && identical(r$reason, "trial")) r$kept <- isTRUE(r$gain > .vif_auto_gain)
  switch(r$reason,
         small = "none: the inducing points the budget allows can be as many as the observations (neighbours = \"auto\")",
         "not optimised" = "none (neighbours = \"auto\" without optimisation)",
         interrupted = "none: the fit was interrupted before or during the trial (neighbours = \"auto\")",
         residuals = sprintf("none: fitted on a subsample of %d rows, the model without neighbours (M = %d) left residuals on %d held-out rows that are not correlated with those of their nearest rows (rank correlation at most %s standard errors, below %g; nearest by its lengthscales and by the inputs' standard deviations, the nearest row and the mean of the %d nearest), so the model with neighbours was not tried (neighbours = \"auto\")",
                             r$rows, r$M[1L], r$held, format(r$local$z, digits = 2L),
                             .vif_auto_local_z, .vif_local_k),
         trial = paste0(
           sprintf("%s: fitted on a subsample of %d rows%s, the model with K = %d neighbours (M = %d) predicted %d held-out rows %s nats per observation better (standard error %s) than the model without (M = %s; neighbours are kept above %g nats and %g standard errors; neighbours = \"auto\")",
                   if (isTRUE(r$kept)) sprintf("K = %d", r$K) else "none",
                   r$rows,
                   if (!is.null(r$windows)) sprintf(" (for the model with neighbours, %d rows in compact windows: the data are dense)", r$windows) else "",
                   r$K, r$M[1L], r$held, format(r$gain, digits = 3L),
                   # (a fit saved before the standard error was recorded has none)
                   if (is.null(r$gain_se)) "not recorded" else format(r$gain_se, digits = 2L),
                   paste0(r$M[2L], if (isTRUE(r$early)) ", its inducing inputs held"),
                   .vif_auto_gain, .vif_auto_z),
           if (!is.null(r$unexplained))
             sprintf("; it left %s of the prior variance unexplained (%s %g: inducing inputs %s)",
                     format(r$unexplained, digits = 3L),
                     if (isTRUE(r$unexplained > .vif_auto_left)) "above" else "at most",
                     .vif_auto_left,
                     if (isTRUE(r$placed)) paste0(sprintf("at %d k-means centres of the inputs", .vif_centres_m(r$centres)),
                                                  .vif_centres_gain(r$centres, "which gained")) else
                       paste0("held where greedy selection put them",
                              if (!is.null(r$windows) && isTRUE(r$unexplained > .vif_auto_left))
                                ", as the data are dense: what the neighbours leave is on the data's own spacing",
                              if (is.list(r$centres))
                                paste0(sprintf(", as %d k-means centres of the inputs", r$centres$M),
                                       .vif_centres_gain(r$centres, "gained only")))),
           if (!is.null(r$reach))
             if (isTRUE(r$reach$kept))
               sprintf("; with one kernel the model with neighbours gained %s (standard error %s), too little, and it was fitted again from one with a short-range Matern 5/2 part (lengthscales %s times the median distance to the %dth nearest row, %s in the inputs scaled by their standard deviations), which gained the figure above",
                       format(r$reach$first_gain, digits = 3L),
                       format(r$reach$first_gain_se, digits = 2L),
                       format(r$reach$reach), r$K, format(r$reach$rho, digits = 3L))
             else
               sprintf("; fitted again from a kernel with a short-range Matern 5/2 part (lengthscales %s times the median distance to the %dth nearest row), it gained %s (standard error %s)",
                       format(r$reach$reach), r$K, format(r$reach$gain, digits = 3L),
                       format(r$reach$gain_se, digits = 2L)),
           if (!is.null(r$short))
             if (is.null(r$short$ratio))
               "; the kernel: one Matern 5/2 (a short-range part added to it did not raise the likelihood on the trial's rows)"
             else
               sprintf("; the kernel: Matern 5/2 plus a short-range Matern 5/2 with lengthscales %s times as long, which raised the log likelihood on the trial's rows by %s nats at the start",
                       format(r$short$ratio), format(max(r$short$scores) - r$short$scores[1L], digits = 3L))))
}

