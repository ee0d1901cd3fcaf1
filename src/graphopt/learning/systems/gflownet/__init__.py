"""GFlowNet scheduling (paper 004): a temperature-conditioned sampler of diverse good schedules."""
