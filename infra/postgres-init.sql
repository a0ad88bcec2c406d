-- A second database for Optuna's RDB storage (the study journal of a cluster sweep).
CREATE DATABASE optuna;
