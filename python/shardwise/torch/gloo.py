"""A plan run for real: one CPU process per device of the mesh on a gloo process group, each
rank building the module from its factory, distributing it by the plan
(:func:`shardwise.torch.plans.distribute`) and running the forward and, with a
:class:`GlooStep`, the loss, backward and one optimizer step in DTensor; rank 0 gathers the
first output, the loss and the updated parameters (``DTensor.full_tensor``) for comparison
with the single-process run (:func:`single_process`).

Processes are started with ``torch.multiprocessing.spawn`` (PyTorch docs "Multiprocessing
package"), the rendezvous is ``MASTER_ADDR``/``MASTER_PORT`` on a free local port, as
``torchrun`` sets them. The module, the loss and the optimizer are named (``module:factory``,
as ``shardwise torch-plan`` takes them) because each process builds its own: a factory must give
the same module in every process (seed it).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shardwise.convert.dtensor import Placement
from shardwise.torch.model import load_attribute, load_factory
from shardwise.torch.plans import distribute, input_names, torch_placements

__all__ = ["GlooResult", "GlooStep", "run_gloo", "single_process"]


@dataclass(frozen=True)
class GlooStep:
    """A training step: ``loss`` names ``loss_fn(output, target)`` (``module:function``), then
    backward and one step of ``torch.optim.<optimizer>(parameters, **options)``."""

    loss: str
    target: np.ndarray
    optimizer: str = "AdamW"
    options: Mapping[str, float] = field(default_factory=dict)


@dataclass
class GlooResult:
    """Rank 0's gathered results: the module's first output (the forward, before any step),
    the step's loss (``None`` without one), and by parameter name its gradient and its value
    after the step."""

    output: np.ndarray
    loss: float | None = None
    gradients: dict[str, np.ndarray] = field(default_factory=dict)
    parameters: dict[str, np.ndarray] = field(default_factory=dict)


def _step(module: Any, inputs: Sequence[Any], step: GlooStep | None, target: Any) -> tuple[Any, Any]:
    import torch

    out = module(*inputs)  # with grad on: nn.TransformerEncoderLayer's fused path has no DTensor rule
    loss = None
    if step is not None:
        opt = getattr(torch.optim, step.optimizer)(module.parameters(), **dict(step.options))
        loss = load_attribute(step.loss)(out, target)
        loss.backward()
        opt.step()
    first = out[0] if isinstance(out, (tuple, list)) else out  # logits, hidden states
    first = first.to_tuple()[0] if hasattr(first, "to_tuple") else first  # a transformers ModelOutput
    return first, loss


def _worker(
    rank: int,
    world: int,
    port: int,
    factory: str,
    plan: dict[str, tuple[Placement, ...]],
    inputs: dict[str, np.ndarray],
    step: GlooStep | None,
    shape: tuple[int, ...],
    out: str,
) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.tensor.experimental import implicit_replication
    from torch.nn.attention import SDPBackend, sdpa_kernel

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", shape)
        module = distribute(load_factory(factory), plan, mesh)
        names = input_names(module, plan)[: len(inputs) + (step is not None)]
        objects = torch_placements({k: plan[k] for k in names})
        values = [*inputs.values(), step.target] if step is not None else list(inputs.values())
        tensors = [distribute_tensor(torch.from_numpy(x), mesh, objects[k]) for k, x in zip(names, values)]
        # A plain tensor made in forward is replicated (GPT-2's position ids); the math kernel
        # of scaled_dot_product_attention, as the CPU flash kernel's backward has no DTensor
        # strategy (the single-process run keeps torch's default kernel).
        with implicit_replication(), sdpa_kernel(SDPBackend.MATH):
            y, loss = _step(module, tensors[: len(inputs)], step, tensors[-1] if step is not None else None)

        def full(t: Any) -> Any:  # every rank takes part in the gather
            return (t.full_tensor() if isinstance(t, DTensor) else t).detach().numpy()

        arrays = {"output": full(y)}
        if loss is not None:
            arrays["loss"] = full(loss)
            for n, p in module.named_parameters():
                arrays[f"param:{n}"] = full(p)
                if p.grad is not None:
                    arrays[f"grad:{n}"] = full(p.grad)
        if rank == 0:
            np.savez(out, **arrays)
    finally:
        dist.destroy_process_group()


def run_gloo(
    factory: str,
    plan: Mapping[str, Sequence[Placement]],
    inputs: Mapping[str, np.ndarray],
    mesh_shape: Sequence[int],
    *,
    step: GlooStep | None = None,
) -> GlooResult:
    """Run ``factory``'s module (``module:factory``, called in every process) distributed by
    ``plan`` on a device mesh of ``mesh_shape`` (one gloo process per device), called with
    ``inputs`` (forward's arguments in order, as arrays, each distributed by the placements of
    the plan's input at its position, :func:`~shardwise.torch.plans.input_names`); with
    ``step``, also the loss on ``step.target`` (distributed by the next input's placements:
    ``from_torch_step``'s target), backward and one optimizer step. Blocks until every process ends.

    Raises what a process raised (``torch.multiprocessing.ProcessRaisedException``, with its
    traceback), ``ImportError`` without torch."""
    import math

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = math.prod(mesh_shape)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.npz")
        job = (world, port, factory, dict(plan), dict(inputs), step, tuple(mesh_shape), out)
        mp.spawn(_worker, args=job, nprocs=world, join=True)  # type: ignore[attr-defined,no-untyped-call]
        with np.load(out) as z:
            loss = float(z["loss"]) if "loss" in z.files else None
            grads = {k.removeprefix("grad:"): z[k] for k in z.files if k.startswith("grad:")}
            params = {k.removeprefix("param:"): z[k] for k in z.files if k.startswith("param:")}
            return GlooResult(z["output"], loss, grads, params)


def single_process(factory: str, inputs: Mapping[str, np.ndarray], *, step: GlooStep | None = None) -> GlooResult:
    """What :func:`run_gloo` gathers, computed by the module alone in this process."""
    import torch

    module = load_factory(factory)
    tensors = [torch.from_numpy(x) for x in inputs.values()]
    target = torch.from_numpy(step.target) if step is not None else None
    y, loss = _step(module, tensors, step, target)
    if loss is None:
        return GlooResult(y.detach().numpy())
    named = list(module.named_parameters())
    grads = {n: p.grad.numpy() for n, p in named if p.grad is not None}
    return GlooResult(y.detach().numpy(), float(loss.detach()), grads, {n: p.detach().numpy() for n, p in named})
