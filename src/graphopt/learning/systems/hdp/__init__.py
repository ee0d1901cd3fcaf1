"""HDP (paper 003's baseline): a grouper and a placer trained with REINFORCE."""
