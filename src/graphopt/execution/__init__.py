"""Running solutions on the real program.

Apply an order to a captured PyTorch program, measure its memory and time, replay multi-device
solutions event by event, and a torch.compile backend.
"""
