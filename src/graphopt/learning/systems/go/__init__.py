"""GO (paper 002): GDP extended to placement, scheduling and fusion jointly."""
