"""PyTorch programs in: ``from_torch`` (``torch.export`` capture, core ATen translated to
StableHLO in the program IR) and ``from_torch_step`` (a training step with its Adam/AdamW
update). torch is imported only when called."""

from shardwise.importers.pytorch.capture import from_exported, from_torch, input_names, supported_ops, torch_arguments
from shardwise.importers.pytorch.train import from_torch_step

__all__ = ["from_exported", "from_torch", "from_torch_step", "input_names", "supported_ops", "torch_arguments"]
