"""Factories for the gloo runs of ``test_torch_import.py`` (``shardwise.torch.gloo.run_gloo``
builds the module in every spawned process by name, ``torch_gloo:mlp``): seeded, so every rank
builds the same module."""

from __future__ import annotations

from typing import Any


def mlp() -> Any:
    """A 64 -> 256 -> 64 MLP with seeded weights (the same on every rank)."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))


def mse(output: Any, target: Any) -> Any:
    return ((output - target) ** 2).mean()


def convnet() -> Any:
    """conv 3->8 (3x3) -> batch norm -> ReLU -> conv 8->8 (3x3, bias) -> mean over the image ->
    linear 8->4, seeded (the same on every rank)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )
