"""The scenarios of ``frenzy reproduce``, one module per paper or study: ``frenzy_sia`` (the Frenzy paper against
Sia and FIFO, and MARP's plan rankings), ``asrpt``, ``doubling``, ``predictors`` and ``marp``. Each registers its
scenarios with :func:`frenzy_env.reproduce.runner.register_scenario`; :mod:`frenzy_env.reproduce` imports them."""
