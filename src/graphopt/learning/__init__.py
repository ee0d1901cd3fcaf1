"""Learned optimizers: features, policy networks, rollouts, objectives and training loops."""
