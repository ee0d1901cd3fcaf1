"""Optimizers: decoders, metaheuristics, classical baselines and exact models."""
