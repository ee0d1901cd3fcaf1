"""Graph encoders: node representations h_v that the policy heads read."""
