"""Running one training run: the run config's schema and its loading (:mod:`.config`,
:mod:`.configio`), the training driver (:mod:`.runtime`), MLflow tracking and the run's plots."""
