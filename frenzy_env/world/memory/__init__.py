"""GPU memory: ``estimator`` (MARP's closed-form estimate and its extension), ``planning`` (MARP's search
over plans that fit), ``calibration`` (the published peak-memory cases and the fits on them), ``truth``
(the peak a job really reaches in the simulated world) and ``published_truth`` (that peak under
``memory_truth="published"``: no predictor's estimate)."""
