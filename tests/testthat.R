library(testthat)
library(sparsevgp)

test_check("sparsevgp")
