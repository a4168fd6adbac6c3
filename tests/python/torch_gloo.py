"""A test helper: runs a PyTorch module with DTensor on a gloo process group of CPU processes,
one per device of a 2-D device mesh, each rank distributing the module by a shardwise plan
(``shardwise.torch.distribute``), and returns rank 0's gathered output. Module factories
live here so that the spawned processes can import them."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np


def mlp() -> Any:
    """A 64 -> 256 -> 64 MLP with seeded weights (the same on every rank)."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).eval()


FACTORIES = {"mlp": mlp}


def _worker(
    rank: int,
    world: int,
    port: int,
    factory: str,
    plan: dict[str, Any],
    inputs: dict[str, Any],
    shape: tuple[int, ...],
    out: str,
) -> None:
    import torch
    import torch.distributed as dist
    from shardwise.torch import distribute, torch_placements
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", shape)
        module = distribute(FACTORIES[factory](), plan, mesh)
        objects = torch_placements({k: plan[k] for k in inputs})
        args = [distribute_tensor(torch.tensor(x), mesh, objects[k]) for k, x in inputs.items()]
        y = module(*args)  # with grad on: nn.TransformerEncoderLayer's fused path has no DTensor rule
        y = y[0] if isinstance(y, (tuple, list)) else y  # a model's first output (logits, hidden states)
        y = y.full_tensor() if isinstance(y, DTensor) else y
        if rank == 0:
            np.save(out, y.detach().numpy())
    finally:
        dist.destroy_process_group()


def run_planned(factory: str, plan: dict[str, Any], inputs: dict[str, Any], shape: Sequence[int]) -> Any:
    """Rank 0's output of ``FACTORIES[factory]()`` distributed by ``plan`` on a device mesh of
    ``shape`` (one gloo process per device), called with ``inputs`` (forward's parameter name
    -> numpy array, in order) distributed by their placements in ``plan``."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = int(np.prod(shape))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.npy")
        mp.spawn(_worker, args=(world, port, factory, plan, inputs, tuple(shape), out), nprocs=world, join=True)
        return np.load(out)
