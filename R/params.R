# Parameter blocks shared by all models.
#
# A fit keeps its parameters on the natural scale in `fit$params`, a named
# list of blocks (for example variance, lengthscale, noise, mean, Z), with
# `fit$transforms` saying which blocks are positive and optimised on the log
# scale. The optimiser sees one unconstrained vector of the free entries;
# `fit$fixed` marks the held ones, and `fit$fixed_spec` keeps what the user
# and the model asked to hold, so that the mask can be rebuilt when a block
# changes size (new inducing inputs).
#
# Each block also has a role and a scale, recorded when the fit is built
# (.new_fit()): shared code (the optimiser's boxes and scaling, the degrees
# of freedom of logLik(), coef(), summary(), the staged fits) reads them
# instead of parsing parameter names.
#   role   "variance" (kernel variance), "lengthscale", "noise", "mean",
#          "inducing" (inducing inputs), "variational" (q(u) and the
#          decoupled bases' coefficients), "likelihood" (a likelihood's own
#          parameters, such as a Student-t scale);
#   scale  what the optimiser standardises the block by (.optim_setup()):
#          "log_var_y" (shift by log var(y)), "log_var_y_intercept" (the
#          "(Intercept)" entry only), "log_sd_y" (shift by log sd(y)), "y"
#          (shift by mean(y), scale by sd(y)), "log_sd_x" (shift by the log
#          sd of its input column, or of all columns for a shared
#          lengthscale), "x" (the entries of an input matrix: shift and
#          scale by their column's mean and sd), "none".
# The y-scales apply to likelihoods whose response is on the latent scale
# (Gaussian, Student-t); for the others they are the identity.

# The names of the entries: on the unconstrained scale ("log_variance",
# "Z[3,1]"), or with natural = TRUE on the natural scale ("variance").
.par_names <- function(params, transforms, natural = FALSE) {
  unlist(lapply(names(params), function(b) {
    v <- params[[b]]
    nm <- if (!natural && transforms[[b]] == "log") paste0("log_", b) else b
    if (is.matrix(v)) {
      sprintf("%s[%d,%d]", nm, row(v), col(v))
    } else if (!is.null(names(v))) {
      sprintf("%s[%s]", nm, names(v))
    } else if (length(v) > 1L) {
      sprintf("%s[%d]", nm, seq_along(v))
    } else if (length(v) == 1L) {
      nm
    } else {
      character()
    }
  }), use.names = FALSE)
}

.pack <- function(params, transforms) {
  out <- unlist(lapply(names(params), function(b) {
    v <- as.vector(params[[b]])
    if (transforms[[b]] == "log") log(v) else v
  }), use.names = FALSE)
  names(out) <- .par_names(params, transforms)
  out
}

.unpack <- function(vec, template, transforms) {
  pos <- 0L
  out <- template
  for (b in names(template)) {
    n <- length(template[[b]])
    v <- unname(vec[pos + seq_len(n)])
    if (transforms[[b]] == "log") v <- exp(v)
    names(v) <- names(template[[b]])
    if (is.matrix(template[[b]])) {
      v <- matrix(v, nrow(template[[b]]), ncol(template[[b]]),
                  dimnames = dimnames(template[[b]]))
    }
    out[[b]] <- v
    pos <- pos + n
  }
  out
}

# The roles and scales of the blocks every model shares; a model or a
# likelihood with blocks of its own passes theirs to .new_fit().
.block_roles <- c(list(
  variance = c(role = "variance", scale = "log_var_y"),
  lengthscale = c(role = "lengthscale", scale = "log_sd_x"),
  noise = c(role = "noise", scale = "log_var_y"),
  noise_coef = c(role = "noise", scale = "log_var_y_intercept"),
  mean = c(role = "mean", scale = "y"),
  Z = c(role = "inducing", scale = "x"),
  O = c(role = "inducing", scale = "x")),
  # q(u) and the coefficients of the decoupled bases (R/variational.R)
  stats::setNames(rep(list(c(role = "variational", scale = "none")), 6L),
                  c("q_mu", "q_sqrt_diag", "q_sqrt_lower", "a_gamma", "a_beta", "L_B")))

# The roles of blocks that are hyperparameters of the model (counted by
# logLik()'s df and shown by coef() and summary()); inducing inputs and
# variational parameters only tighten the bound.
.hyper_roles <- c("variance", "lengthscale", "noise", "mean", "likelihood")

# list(role, scale), each a character vector named by block, for the
# blocks of `params`: the shared table, overridden and extended by `own`
# (a list of c(role, scale) by block).
.roles_of <- function(params, own = list()) {
  tab <- utils::modifyList(.block_roles, own)
  miss <- setdiff(names(params), names(tab))
  if (length(miss)) {
    stop(sprintf("internal error: parameter blocks without a role: %s",
                 paste(miss, collapse = ", ")))
  }
  r <- tab[names(params)]
  list(role = vapply(r, `[[`, "", "role"), scale = vapply(r, `[[`, "", "scale"))
}

# The roles and scales of a fit's blocks (fits built before roles were
# recorded get those of the shared table).
.fit_roles <- function(fit) {
  if (!is.null(fit$roles) && all(names(fit$params) %in% names(fit$roles))) {
    return(list(role = fit$roles[names(fit$params)], scale = fit$scales[names(fit$params)]))
  }
  .roles_of(fit$params)
}

# One row per unconstrained entry of a fit's parameters, in the order of
# .pack(), named like it: the block, its role, transform and scale, and the
# input column (Z and O entries, ARD lengthscales; NA otherwise).
.par_info <- function(fit) {
  p <- fit$params
  nm <- .par_names(p, fit$transforms)
  block <- rep(names(p), lengths(p))
  r <- .fit_roles(fit)
  column <- rep(NA_integer_, length(nm))
  for (b in names(p)) {
    at <- which(block == b)
    if (r$scale[[b]] == "x" && is.matrix(p[[b]])) column[at] <- as.vector(col(p[[b]]))
    if (r$scale[[b]] == "log_sd_x") column[at] <- .lengthscale_columns(p[[b]])
  }
  scale <- unname(r$scale[block])
  # the intercept of a log-linear noise model carries log var(y); its
  # slopes do not
  icpt <- scale == "log_var_y_intercept"
  scale[icpt] <- ifelse(unlist(lapply(p, function(v) {
    if (is.null(names(v))) rep("", length(v)) else names(v)
  }), use.names = FALSE)[icpt] == "(Intercept)", "log_var_y", "none")
  data.frame(block = block, role = unname(r$role[block]),
             transform = unname(fit$transforms[block]), scale = scale, column = column,
             row.names = nm, stringsAsFactors = FALSE)
}

# Whether each entry of fit$fixed (that is, of .pack()) belongs to one of
# the blocks `blocks`.
.block_mask <- function(fit, blocks) {
  rep(names(fit$params), lengths(fit$params)) %in% blocks
}

# Whether each entry belongs to a block with one of the roles `roles`.
.role_mask <- function(fit, roles) {
  r <- .fit_roles(fit)$role
  rep(unname(r[names(fit$params)]) %in% roles, lengths(fit$params))
}

# Which unconstrained entries are held fixed. `fixed` names whole blocks
# ("lengthscale", "Z") or single entries, on either scale
# ("lengthscale[2]" or "log_lengthscale[2]", "Z[3,1]").
.fixed_mask <- function(fixed, params, transforms, always = character()) {
  nm <- .par_names(params, transforms)
  block <- rep(names(params), vapply(params, length, 1L))
  fixed <- c(always, fixed)
  if (is.null(fixed) || length(fixed) == 0L) return(setNames(rep(FALSE, length(nm)), nm))
  if (!is.character(fixed)) {
    stop("'fixed' must be a character vector of parameter names", call. = FALSE)
  }
  # (whole blocks, the usual case, need no names of single entries on the
  # natural scale: with q(u) of several classes they are thousands, and
  # the mask is formed at every stage of a fit)
  if (all(fixed %in% names(params))) return(setNames(block %in% fixed, nm))
  natural <- .par_names(params, transforms, natural = TRUE)
  known <- c(names(params), nm, natural)
  bad <- setdiff(fixed, known)
  if (length(bad)) {
    stop(sprintf("'fixed' names unknown parameters: %s (known: %s)",
                 paste(bad, collapse = ", "),
                 paste(names(params), collapse = ", ")), call. = FALSE)
  }
  setNames(block %in% fixed | nm %in% fixed | natural %in% fixed, nm)
}

# The fixed mask of a fit from its fixed_spec, for its current parameters;
# `also` adds blocks or entries held for this purpose only.
.fixed_from_spec <- function(fit, also = character()) {
  spec <- fit$fixed_spec
  .fixed_mask(spec$user, fit$params, fit$transforms, unique(c(spec$always, also)))
}

# The fit with new inducing inputs Z, held fixed (entries of "Z" that the
# user fixed one by one are subsumed).
.set_inducing <- function(fit, Z) {
  dimnames(Z) <- list(NULL, colnames(fit$x))
  fit$params$Z <- Z
  user <- fit$fixed_spec$user
  fit$fixed_spec$user <- user[!grepl("^(log_)?Z\\[", user)]
  fit$fixed <- .fixed_from_spec(fit, "Z")
  fit$fixed_spec$user <- user
  fit
}

# Whether any entry of the blocks `blocks` (inducing inputs "Z", "O") is free.
.any_free <- function(fit, blocks) !all(fit$fixed[.block_mask(fit, blocks)])

# Copy the parameters of a previous fit whose shapes match.
.warm_params <- function(params, old, skip = character()) {
  for (b in setdiff(names(params), skip)) {
    # names too: the parts of a kernel combination (k1, k2,1, ...)
    if (!is.null(old[[b]]) && identical(dim(old[[b]]), dim(params[[b]])) &&
        length(old[[b]]) == length(params[[b]]) &&
        identical(names(old[[b]]), names(params[[b]]))) {
      params[[b]] <- old[[b]]
    }
  }
  params
}

# The part ("k2") of each entry of a kernel combination's lengthscale block,
# whose entries .kern_params() names "k2" (one lengthscale) or "k2,3"
# (input column 3).
.lengthscale_parts <- function(nm) sub(",.*$", "", nm)

# The input column of each entry of a lengthscale block, NA for a
# lengthscale shared by all columns: 1..D for one ARD kernel (unnamed), the
# number after the comma of a combination's "k2,3".
.lengthscale_columns <- function(ls) {
  nm <- names(ls)
  if (is.null(nm)) return(if (length(ls) > 1L) seq_along(ls) else rep(NA_integer_, length(ls)))
  out <- rep(NA_integer_, length(ls))
  ard <- grepl(",", nm, fixed = TRUE)
  out[ard] <- as.integer(sub("^.*,", "", nm[ard]))
  out
}

# Flatten a gradient given as blocks shaped like `params` into one vector in
# the order of .pack().
.flatten_grad <- function(grad, params) {
  g <- unlist(lapply(names(params), function(b) as.vector(grad[[b]])), use.names = FALSE)
  if (length(g) != sum(lengths(params))) {
    stop("internal error: gradient length does not match the parameters")
  }
  g
}
