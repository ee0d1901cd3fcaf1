"""Training objectives, one per file.

REINFORCE, the GFlowNet losses (log-partition variance, trajectory balance); PPO beside them.
"""
