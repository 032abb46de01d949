# What every model constructor shares: the formula front end, the recorded
# call, the starting mean, the warm start and the fit object itself.

# The formula method of a model: the model frame as lm() builds it (with
# `subset`, `weights`, `na.action` and `offset` from `call`, evaluated in
# `env`), then the model's default method on the model matrix and
# response. The default method receives the prior weights and the offset
# when it takes them, and (as .data) the design of a learned noise formula.
# The fit keeps the terms, the factor levels, the model frame and the
# na.action record, so that model.frame(), formula(), nobs() and the
# padding of na.exclude work as for lm().
.fit_formula <- function(model, call, env, formula, data, ...) {
  # rows held by the workers of a cluster (R/shards.R)
  if (inherits(data, "sparsevgp_shards")) return(.shards_formula(model, call, formula, data, ...))
  noise <- list(...)[["noise", exact = TRUE]]
  md <- .formula_data(formula, data, call, env, noise = noise)
  fun <- get(paste0(model, ".default"), mode = "function")
  takes <- names(formals(fun))
  for (a in c("weights", "offset")) {
    if (!is.null(md[[a]]) && !(a %in% takes)) {
      stop(sprintf("%s() does not take '%s': %s", model, a,
                   if (a == "weights") "prior weights (noise variances sigma^2 / w) are for the Gaussian models gpr(), sgpr() and osgpr()" else
                     "an offset is for the Gaussian models gpr(), sgpr(), osgpr() and svgp(likelihood = \"gaussian\")"),
           call. = FALSE)
    }
  }
  fit <- if ("weights" %in% takes) {
    fun(md$x, md$y, ..., weights = md$weights, offset = md$offset, .data = md$noise)
  } else if ("offset" %in% takes) {
    fun(md$x, md$y, ..., offset = md$offset, .data = md$noise)
  } else {
    fun(md$x, md$y, ..., .data = md$noise)
  }
  fit$terms <- md$terms
  fit$xlevels <- md$xlevels
  fit$frame <- md$frame
  fit$na.action <- md$na.action
  fit$call <- .formula_call(call, model)
  fit
}

# The call of a default method as recorded in the fit: the call as run,
# under the model's name, with `start` as the user wrote it (a fit given
# as a value rather than by name, as do.call() gives it, is recorded as a
# placeholder, so that a fit never carries another one in its call).
.model_call <- function(call, model) {
  # a new fit: no interrupt of an earlier one is pending (R/interrupt.R)
  .interrupt_clear()
  call[[1L]] <- as.name(model)
  call$start <- .start_record(call$start)
  call$.data <- NULL
  call
}

.start_record <- function(start) {
  if (is.null(start) || is.language(start)) return(start)
  as.name(sprintf("<%s fit>", class(start)[1L]))
}

# The `...` of a default method: only `.data` (from the formula method) is
# allowed; anything else is a misspelt or unknown argument.
.dots_data <- function(...) {
  dots <- list(...)
  data <- dots$.data
  dots$.data <- NULL
  if ("cluster" %in% names(dots)) {
    stop("'cluster' is only for sgpr(), pgpr(), osgpr() and svgp() (and predict()): this model fits in one process (see ?scaling)",
         call. = FALSE)
  }
  if (length(dots)) do.call(.no_dots, dots)
  data
}

.no_dots <- function(...) {
  if (...length()) {
    nm <- names(list(...))
    stop(sprintf("unused arguments: %s",
                 paste(if (is.null(nm)) "(unnamed)" else nm, collapse = ", ")),
         call. = FALSE)
  }
}

.check_start <- function(start, model, x = NULL) {
  if (!is.null(start) && !inherits(start, model)) {
    stop(sprintf("'start' must be %s %s fit",
                 if (model %in% c("osgpr", "svgp", "sgpr", "odvgp")) "an" else "a", model),
         call. = FALSE)
  }
  # a fit on inputs of another width has no parameters to start this one
  if (!is.null(start) && !is.null(x) && !is.null(start$x) && ncol(start$x) != ncol(x)) {
    stop(sprintf("'start' is a fit on %d input column%s, but these inputs have %d: its parameters (lengthscales, inducing inputs) cannot start this fit; leave 'start' out",
                 ncol(start$x), if (ncol(start$x) == 1L) "" else "s", ncol(x)), call. = FALSE)
  }
  start
}

# The prior mean: "constant" (learned, starting at `start`, or at the
# attribute "start" of `mean`, which sgpr() sets for the model it builds at
# an exact GP's fitted parameters, R/kernel_choice.R) or a fixed number.
# list(value, fixed).
.mean_start <- function(mean, start) {
  if (is.character(mean) && identical(as.vector(mean), "constant")) {
    at <- attr(mean, "start")
    return(list(value = if (is.null(at)) start else at, fixed = FALSE))
  }
  if (is.numeric(mean) && length(mean) == 1L && is.finite(mean)) {
    return(list(value = as.double(mean), fixed = TRUE))
  }
  stop("'mean' must be \"constant\" or one finite number", call. = FALSE)
}

# A fit object: plain data with class c(<model>, "sparsevgp"). `always`
# names blocks the model holds fixed (a fixed mean, inducing inputs that are
# not optimised) on top of the user's `fixed` and the kernel's own (the
# variances of the later factors of a product); `extra` holds the model's own
# fields (a list, so that their names never match an argument partially).
# Each block's role and scale (R/params.R) are recorded: those of the shared
# table, with `roles` (c(role, scale) by block) for blocks of the model's or
# likelihood's own.
.new_fit <- function(model, call, x, y, kernel, params, transforms, fixed, always,
                     control, label, extra = list(), roles = list()) {
  r <- .roles_of(params, roles)
  structure(c(list(call = call, x = x, y = y, kernel = kernel, params = params,
                   transforms = transforms, roles = r$role, scales = r$scale,
                   fixed = .fixed_mask(fixed, params, transforms,
                                       c(always, .kern_held(kernel))),
                   fixed_spec = list(user = fixed, always = c(always, .kern_held(kernel))),
                   control = control, model = label),
              extra),
            class = c(model, "sparsevgp"))
}
