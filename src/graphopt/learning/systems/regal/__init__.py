"""REGAL (papers 000, 001): a GNN predicts per-op Beta distributions that steer BRKGA; REINFORCE."""
