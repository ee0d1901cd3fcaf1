"""Policy networks, one per learned system (REGAL's today), built from `learning.encoders`.

Each `<system>.py` holds the torch network; `<system>_config.py` its torch-free config, which
checkpoints record and numpy inference reads without importing torch.
"""
