"""GPU memory: ``estimator`` (MARP's closed-form estimate and its extension), ``planning`` (MARP's search
over plans that fit), ``calibration`` (the published peak-memory cases and the fits on them) and ``truth``
(the peak a job really reaches in the simulated world)."""
