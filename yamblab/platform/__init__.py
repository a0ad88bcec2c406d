"""The platform: the config schema, the training driver, the CLI, MLflow tracking, Optuna sweeps,
plots, and the HTTP service with its browser client."""
