"""Pretrained policies shipped with graphopt (weights and model cards; see MODEL_CARD.md)."""
