"""The textbook plans of each real model (``real_models.plain_model``) on a data x model mesh:
data parallel, FSDP / ZeRO-3, Megatron tensor parallel, DP x Megatron (expert parallel for the
mixture of experts), built with ``shardwise.search.baselines`` from the models' own hand rules
(the Megatron specs ``real_models`` annotates its sharded corpus with)."""

from __future__ import annotations

from collections.abc import Callable

from shardwise.errors import SearchError
from shardwise.mesh import Mesh
from shardwise.search.baselines import Plan, data_parallel, fsdp, tensor_parallel
from shardwise.testing.real_models import PlainModel


def hand_plans(model: PlainModel, mesh: Mesh) -> dict[str, Plan]:
    """Every textbook plan that fits ``mesh`` (a plan whose splits do not divide the shapes is
    left out), by name."""
    shapes = [a.shape for a in model.args]
    batch = [i for i, a in enumerate(model.args) if a.kind == "input"]
    every = [a for a in mesh.axis_names if mesh.axis_size(a) > 1]
    specs = {i: a.megatron for i, a in enumerate(model.args) if a.kind != "input" and a.megatron}
    tp = "expert_parallel" if model.name.startswith("moe") else "megatron"
    plans: dict[str, Plan] = {}
    builders: dict[str, Callable[[], Plan]] = {
        "data_parallel": lambda: data_parallel(shapes, batch, mesh, every),
        "data_parallel(data)": lambda: data_parallel(shapes, batch, mesh, ["data"]),
        "fsdp": lambda: fsdp(shapes, batch, mesh, every),
        "fsdp(data)": lambda: fsdp(shapes, batch, mesh, ["data"]),
        "fsdp(state only)": lambda: fsdp(shapes, [], mesh, every),
        tp: lambda: tensor_parallel(shapes, specs, mesh),
        f"dp x {tp}": lambda: tensor_parallel(shapes, specs, mesh, batch=batch, batch_axes=["data"]),
    }
    for name, build in builders.items():
        try:
            plan = build()
        except SearchError:
            continue
        if plan not in plans.values():
            plans[name] = plan
    return plans
