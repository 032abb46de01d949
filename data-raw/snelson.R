# Builds data/snelson.rda and data/snelson_test.rda from the copies of the
# Snelson & Ghahramani toy data in ../shared/data/snelson (GPflow's docs).
# Run from the package root: Rscript data-raw/snelson.R
src <- file.path("..", "shared", "data", "snelson")
x <- scan(file.path(src, "snelson_train_inputs.dat"), quiet = TRUE)
y <- scan(file.path(src, "snelson_train_outputs.dat"), quiet = TRUE)
xt <- scan(file.path(src, "snelson_test_inputs.dat"), quiet = TRUE)
snelson <- data.frame(x = x, y = y)
snelson_test <- data.frame(x = xt)
save(snelson, file = "data/snelson.rda", compress = "xz")
save(snelson_test, file = "data/snelson_test.rda", compress = "xz")
