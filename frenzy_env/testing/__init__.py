"""Tools for testing environments and policies: ``checker`` (the simulator's invariants, checked after
every step) and ``fuzzing`` (random clusters, workloads and policies played under the checker)."""
