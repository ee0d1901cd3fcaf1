"""Running solutions on the real program: apply an order to a captured PyTorch program, measure
its memory and time, replay multi-device solutions, and a torch.compile backend."""
