"""Training objectives, one per file: REINFORCE now; PPO and GFlowNet losses beside it."""
