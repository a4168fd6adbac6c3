"""Plans for PyTorch: the shardings of a program from ``shardwise.from_torch`` (propagated, or
chosen by ``auto_shard``) as DTensor placements per parameter, and applied to the module.

``placements(program)`` reads ``@main``'s arguments by their names (``jax.arg_info``: the
fully qualified names ``from_torch`` gives them) and converts each argument's sharding with
``convert.dtensor.to_placements`` (one placement per mesh axis, ``("shard", d)``,
``("replicate",)`` or ``("partial", op)``). ``distribute(module, plan, device_mesh)`` replaces
each parameter and buffer by ``torch.distributed.tensor.distribute_tensor`` of it with its
placements (DTensor's API, PyTorch docs "torch.distributed.tensor"). torch is imported only when
``distribute`` is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shardwise.convert.dtensor import Placement, to_placements
from shardwise.errors import ConversionError
from shardwise.ir.core import Module
from shardwise.mesh import Mesh

__all__ = ["distribute", "placements", "torch_placements"]


def _name(attrs: Mapping[str, str], i: int) -> str:
    info = attrs.get("jax.arg_info")
    return info[1:-1].replace('\\"', '"').replace("\\\\", "\\") if info else f"arg{i}"


def placements(program: Module, *, func: str = "main") -> dict[str, tuple[Placement, ...]]:
    """Input name (``jax.arg_info``, else ``arg{i}``) -> DTensor placements of its sharding, one
    per axis of the program's mesh, for every argument of ``func``; an argument without a
    sharding is replicated. Shapes: one tuple of ``len(mesh.axes)`` placements per argument.

    Raises ``ConversionError`` naming the argument for a sharding DTensor cannot express (a
    sub-axis, a dimension split by mesh axes against mesh order), and when the program has
    no mesh or more than one."""
    meshes = program.meshes
    if len(meshes) != 1:
        raise ConversionError(f"placements: expected a program with one mesh, got {len(meshes)} ({', '.join(meshes)})")
    mesh: Mesh = next(iter(meshes.values()))
    f = program.func(func)
    out: dict[str, tuple[Placement, ...]] = {}
    for i, (arg, attrs) in enumerate(zip(f.body.args, f.arg_attrs)):
        name = _name(attrs, i)
        if arg.sharding is None:
            out[name] = tuple(("replicate",) for _ in mesh.axes)
            continue
        try:
            out[name] = to_placements(arg.sharding, mesh, strict=False)
        except ConversionError as e:
            raise ConversionError(f"argument {name!r}: {e}") from None
    return out


def torch_placements(plan: Mapping[str, Sequence[Placement]]) -> dict[str, tuple[Any, ...]]:
    """``plan`` with each placement as DTensor's object (``Shard(d)``, ``Replicate()``,
    ``Partial(op)``). Raises ``ImportError`` without torch."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    def one(p: Placement) -> Any:
        if p[0] == "shard":
            return Shard(int(p[1]))
        if p[0] == "partial":
            return Partial(p[1])
        return Replicate()

    return {name: tuple(one(p) for p in ps) for name, ps in plan.items()}


def distribute(module: Any, plan: Mapping[str, Sequence[Placement]], device_mesh: Any) -> Any:
    """``module`` with every parameter and buffer a DTensor on ``device_mesh`` with its
    placements from ``plan`` (``placements``; a name the plan lacks is replicated), in place;
    returns ``module``. Every rank of ``device_mesh``'s process group calls it with the same
    module and plan. Raises ``ConversionError`` when a placement count differs from the device
    mesh's dimensions, ``ImportError`` without torch."""
    import torch
    from torch.distributed.tensor import Replicate, distribute_tensor

    objects = torch_placements(plan)
    ndim = device_mesh.ndim
    for name, ps in objects.items():
        if len(ps) != ndim:
            raise ConversionError(
                f"plan[{name!r}]: expected {ndim} placements (one per device mesh dim), got {len(ps)}"
            )
    replicate = tuple(Replicate() for _ in range(ndim))
    for name, param in list(module.named_parameters()):
        owner, _, leaf = name.rpartition(".")
        sub = module.get_submodule(owner) if owner else module
        dt = distribute_tensor(param.detach(), device_mesh, objects.get(name, replicate))
        setattr(sub, leaf, torch.nn.Parameter(dt, requires_grad=param.requires_grad))
    for name, buf in list(module.named_buffers()):
        owner, _, leaf = name.rpartition(".")
        sub = module.get_submodule(owner) if owner else module
        sub.register_buffer(leaf, distribute_tensor(buf, device_mesh, objects.get(name, replicate)))
    return module
