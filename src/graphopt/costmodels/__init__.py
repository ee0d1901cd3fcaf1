"""Cost models: the machine, the exact scorers (reference and numba) and validity rules."""
