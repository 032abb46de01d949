# Parameter blocks shared by all models.
#
# A fit keeps its parameters on the natural scale in `fit$params`, a named
# list of blocks (for example variance, lengthscale, noise, mean, Z), with
# `fit$transforms` saying which blocks are positive and optimised on the log
# scale. The optimiser sees one unconstrained vector of the free entries;
# `fit$fixed` marks the held ones, and `fit$fixed_spec` keeps what the user
# and the model asked to hold, so that the mask can be rebuilt when a block
# changes size (new inducing inputs).

.par_names <- function(params, transforms) {
  unlist(lapply(names(params), function(b) {
    v <- params[[b]]
    nm <- if (transforms[[b]] == "log") paste0("log_", b) else b
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

# Which unconstrained entries are held fixed. `fixed` names whole blocks
# ("lengthscale", "Z") or single entries, on either scale
# ("lengthscale[2]" or "log_lengthscale[2]", "Z[3,1]").
.fixed_mask <- function(fixed, params, transforms, always = character()) {
  nm <- .par_names(params, transforms)
  block <- rep(names(params), vapply(params, length, 1L))
  natural <- sub("^log_", "", nm)
  fixed <- c(always, fixed)
  if (is.null(fixed) || length(fixed) == 0L) return(setNames(rep(FALSE, length(nm)), nm))
  if (!is.character(fixed)) {
    stop("'fixed' must be a character vector of parameter names", call. = FALSE)
  }
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
.any_free <- function(fit, blocks) {
  pat <- sprintf("^(%s)\\[", paste(blocks, collapse = "|"))
  !all(fit$fixed[grepl(pat, names(fit$fixed))])
}

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

# Flatten a gradient given as blocks shaped like `params` into one vector in
# the order of .pack().
.flatten_grad <- function(grad, params) {
  g <- unlist(lapply(names(params), function(b) as.vector(grad[[b]])), use.names = FALSE)
  if (length(g) != sum(lengths(params))) {
    stop("internal error: gradient length does not match the parameters")
  }
  g
}
