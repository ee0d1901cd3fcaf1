"""Environments: the problem a learned policy acts on, one module per system."""
