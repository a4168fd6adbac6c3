"""PyTorch programs in: ``from_torch`` (``torch.export`` capture, core ATen translated to
StableHLO in the program IR). torch is imported only when called."""

from shardwise.importers.pytorch.capture import from_exported, from_torch, input_names, supported_ops, torch_arguments

__all__ = ["from_exported", "from_torch", "input_names", "supported_ops", "torch_arguments"]
