"""Evaluation: ``episodes`` (running policies over seeds, confidence intervals, the summary table),
``results`` (suite tables and the results page), ``plots`` (pictures of results), ``bounds`` (lower bounds on
average JCT) and ``distributed`` (the same sweeps on Ray)."""
