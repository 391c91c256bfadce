"""Real hardware: calibrate a GPU config from microbenchmarks, validate predictions against a GPU."""
