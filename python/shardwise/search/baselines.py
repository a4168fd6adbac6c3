"""Textbook plans: the shardings a practitioner writes by hand, scored on the search's own
strategy graph so ``auto_shard`` can be held to them (issue 26).

A hand plan fixes the sharding of the function's arguments (parameters, optimizer state,
batch inputs), as ``jax.jit(in_shardings=...)`` does; everything else is left to the
compiler. :func:`complete_plan` scores it by fixing those argument nodes of the strategy graph
(``graph.restrict``) and letting a solver choose every op's strategy: the best completion of
the hand plan under the same cost model and memory budget (the cheapest program XLA could make
of those argument shardings, within this model), so comparing ``auto_shard``'s cost with it is
a stricter test than comparing with one propagated completion.

The plans (Megatron-LM, Shoeybi et al. 2019; ZeRO, Rajbhandari et al. 2020; GShard's expert
parallelism, Lepikhin et al. 2020):

* :func:`data_parallel`: batch inputs split on dimension 0 over the data axes, every other
  argument replicated;
* :func:`fsdp` (ZeRO-3): batch inputs as in data parallel; every other argument of at least
  ``min_bytes`` split over the same axes on its largest dimension they divide (parameters and
  their optimizer state alike), gathered per use by the partitioner;
* :func:`tensor_parallel` (Megatron, and expert parallel for stacked expert weights): each
  argument the caller names split as given (column-parallel first matmul, row-parallel second,
  the expert dimension on the expert axis), the batch split over the data axes when given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from shardwise.errors import SearchError
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.search.graph import evaluate, restrict
from shardwise.search.local import Solution
from shardwise.search.problem import AutoProblem
from shardwise.search.solve import solve
from shardwise.sharding import TensorSharding

__all__ = [
    "Plan",
    "argument_nodes",
    "complete_plan",
    "data_parallel",
    "fsdp",
    "inferred_plans",
    "tensor_parallel",
]

#: A plan: function-argument index -> the dimension shardings of that argument (one tuple of
#: mesh axis names per dimension; arguments not named are replicated).
Plan = dict[int, tuple[tuple[str, ...], ...]]


def argument_nodes(problem: AutoProblem) -> dict[int, int]:
    """Function-argument index -> node index of ``problem`` (tensor arguments only)."""
    index = {id(a): i for i, a in enumerate(problem.func.args)}
    return {index[id(nd.values[0])]: v for v, nd in enumerate(problem.nodes) if nd.op is None}


def _names(s: TensorSharding) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(a.name for a in d.axes) for d in s.dims)


def _split(mesh: Mesh, axes: Sequence[str]) -> tuple[str, ...]:
    """``axes`` without the mesh's size-1 axes (a size-1 axis splits nothing; strategies omit it)."""
    return tuple(a for a in axes if mesh.axis_size(a) > 1)


def _size(mesh: Mesh, axes: Sequence[str]) -> int:
    n = 1
    for a in axes:
        n *= mesh.axis_size(a)
    return n


def data_parallel(
    shapes: Sequence[Sequence[int]],
    batch: Sequence[int],
    mesh: Mesh,
    axes: Sequence[str],
) -> Plan:
    """Data parallel: argument ``i`` in ``batch`` split on dimension 0 over ``axes`` (shapes:
    every argument's shape, in order); the rest replicated. Raises :class:`SearchError` when a
    batch dimension is not divisible by the axes' product."""
    ax = _split(mesh, axes)
    plan: Plan = {}
    for i in batch:
        shape = shapes[i]
        if not shape or shape[0] % _size(mesh, ax):
            raise SearchError(
                f"data parallel: argument {i} of shape {tuple(shape)} cannot be split {_size(mesh, ax)} ways on dimension 0"
            )
        plan[i] = (ax,) + tuple(() for _ in shape[1:])
    return plan


def fsdp(
    shapes: Sequence[Sequence[int]],
    batch: Sequence[int],
    mesh: Mesh,
    axes: Sequence[str],
    *,
    dtype_bytes: int = 4,
    min_bytes: int = 0,
) -> Plan:
    """ZeRO-3 / FSDP: :func:`data_parallel` plus every other argument of at least ``min_bytes``
    (``dtype_bytes`` per element) split over ``axes`` on its largest dimension divisible by
    their product (the first such, on ties); arguments with no such dimension stay replicated."""
    plan = data_parallel(shapes, batch, mesh, axes)
    ax = _split(mesh, axes)
    n = _size(mesh, ax)
    for i, shape in enumerate(shapes):
        if i in plan or not shape:
            continue
        size = dtype_bytes
        for d in shape:
            size *= d
        if size < min_bytes:
            continue
        dims = [d for d in range(len(shape)) if shape[d] % n == 0]
        if not dims or n == 1:
            continue
        best = max(dims, key=lambda d: (shape[d], -d))
        plan[i] = tuple(ax if d == best else () for d in range(len(shape)))
    return plan


def tensor_parallel(
    shapes: Sequence[Sequence[int]],
    specs: Mapping[int, Sequence[str | None]],
    mesh: Mesh,
    *,
    batch: Sequence[int] = (),
    batch_axes: Sequence[str] = (),
) -> Plan:
    """Megatron tensor parallel (or expert parallel): argument ``i`` split as ``specs[i]`` (a
    partition spec: one mesh axis name or ``None`` per dimension); with ``batch``, those
    arguments split on dimension 0 over ``batch_axes`` too (DP x Megatron). Size-1 axes are
    dropped. Raises :class:`SearchError` for a spec of the wrong rank or a dimension its axis
    does not divide."""
    plan = data_parallel(shapes, batch, mesh, batch_axes) if batch else {}
    for i, spec in specs.items():
        shape = shapes[i]
        if len(spec) != len(shape):
            raise SearchError(
                f"tensor parallel: argument {i} of shape {tuple(shape)} got a spec of rank {len(spec)}: {tuple(spec)}"
            )
        dims = tuple(_split(mesh, [] if a is None else [a]) for a in spec)
        for d, ax in zip(shape, dims):
            if d % _size(mesh, ax):
                raise SearchError(
                    f"tensor parallel: argument {i} of shape {tuple(shape)}: {tuple(spec)} does not divide it"
                )
        if any(dims):
            plan[i] = dims
    return plan


def inferred_plans(problem: AutoProblem) -> dict[str, Plan]:
    """The textbook plans ``auto_shard`` compares itself with by default, from what the
    program says of its arguments: the loop-carried ones (``problem.carry``: JAX's donated
    parameters and optimizer state) are the model's state, the other tensor arguments of rank
    >= 1 are batch inputs. ``replicated_state`` fixes every argument replicated (the rest is
    the compiler's); ``data_parallel(axes)`` splits the batch inputs whose dimension 0 the
    axes divide, for all the mesh's axes together and for each one alone;
    ``fsdp(axes)`` adds to the first of them the state split over all axes (:func:`fsdp`), and
    to each one-axis one the state split over that axis.
    Empty when the program carries nothing (no roles to read)."""
    carried = {i for i, _ in problem.carry}
    if not carried:
        return {}
    shapes: list[tuple[int, ...]] = []
    for a in problem.func.args:
        shapes.append(tuple(a.type.shape) if isinstance(a.type, TensorType) else ())
    every = [a for a in problem.mesh.axis_names if problem.mesh.axis_size(a) > 1]
    if not every:
        return {}
    state = [sh if i in carried else () for i, sh in enumerate(shapes)]
    zero = fsdp(state, [], problem.mesh, every)
    plans: dict[str, Plan] = {"replicated_state": {}}
    for axes in [every] + ([[a] for a in every] if len(every) > 1 else []):
        n = _size(problem.mesh, axes)
        batch = [i for i, sh in enumerate(shapes) if i not in carried and sh and sh[0] % n == 0]
        if not batch:
            continue
        dp = data_parallel(shapes, batch, problem.mesh, axes)
        plans[f"data_parallel({'*'.join(axes)})"] = dp
        plans.setdefault(f"fsdp({'*'.join(every)})", {**zero, **dp})
        if axes != every:  # ZeRO-3 over one axis (the data axis of a data x model mesh)
            plans[f"fsdp({'*'.join(axes)})"] = {**fsdp(state, [], problem.mesh, axes), **dp}
    return plans


def complete_plan(problem: AutoProblem, plan: Plan, *, time_limit: float = 5.0, method: str = "auto") -> Solution:
    """The best completion of ``plan`` on ``problem`` (module docstring): the argument nodes
    fixed to the plan's shardings (the rest replicated), every op's strategy chosen by
    :func:`shardwise.search.solve.solve` (``method``, ``time_limit`` seconds). The solution
    indexes ``problem``'s own strategies and is scored on its full graph (``method`` reads
    ``plan+<method>``). Raises :class:`SearchError` when a planned sharding is not one of the
    argument's strategies (not divisible, or beyond the strategy cap) or names an argument the
    problem has no node for."""
    nodes = argument_nodes(problem)
    keep: dict[int, list[int]] = {}
    for i, v in nodes.items():
        nd = problem.nodes[v]
        t = nd.values[0].type
        assert isinstance(t, TensorType)
        want = plan.get(i, tuple(() for _ in t.shape))
        if nd.configured:
            continue
        hits = [s for s, st in enumerate(nd.strategies) if _names(st.results[0]) == tuple(tuple(d) for d in want)]
        if not hits:
            raise SearchError(
                f"plan: argument {i} of shape {tuple(t.shape)}: sharding {list(want)} is not one of its {len(nd.strategies)} strategies"
            )
        keep[v] = hits[:1]
    missing = sorted(set(plan) - set(nodes))
    if missing:
        raise SearchError(f"plan: arguments {missing} have no node (not tensors, or out of range)")
    sub, kept = restrict(problem.graph, keep)
    sol = solve(sub, time_limit, method)
    x = tuple(int(kept[v][s]) for v, s in enumerate(sol.assignment))
    score = evaluate(problem.graph, x)
    return replace(
        sol,
        assignment=x,
        cost=score.cost,
        peak_usage=score.peak_usage,
        feasible=score.feasible,
        method=f"plan+{sol.method}",
    )
