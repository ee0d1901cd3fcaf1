"""GDP (paper 003): GraphSAGE + segmented recurrent attention placer, trained with PPO."""
