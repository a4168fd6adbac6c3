"""Whether DTensor runs a plan, and the nearest plan it runs.

A plan from ``shardwise.torch.placements`` fixes only the placements of a module's parameters,
buffers and inputs. DTensor runs the module eagerly and chooses every other tensor's placements
itself, op by op, from its own sharding strategies (``torch/distributed/tensor/_ops``); some
input placements it refuses instead of redistributing. Seen on the pinned torch 2.15: a strict
view that splits a dimension whose outer factor the mesh dimension does not divide
(``nn.MultiheadAttention``'s packed ``in_proj``: "Cannot unflatten unevenly sharded tensor",
``_view_ops.py``), a reshape that merges a sharded dimension (BERT's attention output: "This
operation would remove or reshape sharded dimension 0"), a convolution whose input is sharded
over channels (resnet18: DTensor's convolution takes a replicated weight, ``_conv_ops.py``),
attention whose heads are split unevenly ("Q/K/V should have the same head size"). A plan
valid for Shardy can therefore fail in DTensor.

:func:`dtensor_error` runs the distributed module on torch's fake process group
(``torch.testing._internal.distributed.fake_pg``: collectives move no data, while shapes,
DTensor's sharding propagation and local computation are real), in a child process, as rank 0
and as the last rank (the ranks of the largest and smallest uneven shards), forward and, for a
training step, backward and the optimizer's step. :func:`fit_plan` searches with
``auto_shard``, finds the (name, mesh axis) placement DTensor refuses by bisection over the
plan's sharded placements, forbids that axis on that tensor (an explicitly replicated axis,
Shardy's ``replicated={...}``, for the name and for every tensor of the same shape whose name
differs only in layer indices), and searches again until DTensor runs the plan. Each forbidden
placement is stated with the error DTensor gave.
"""

from __future__ import annotations

import contextlib
import copy
import math
import pickle
import re
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shardwise.convert.dtensor import Placement
from shardwise.errors import InfeasibleBudget, ProgramError, SearchError
from shardwise.ir.core import Module
from shardwise.mesh import Mesh
from shardwise.search.auto import auto_shard
from shardwise.sharding import AxisRef, DimSharding, TensorSharding
from shardwise.torch.plans import arg_name, distribute, input_names, placements, torch_placements

__all__ = [
    "FitBudgetError",
    "FitResult",
    "Forbidden",
    "TrainStep",
    "dtensor_error",
    "fit_plan",
    "forbid",
    "known_refusals",
]

#: The searches :func:`fit_plan` makes before it gives up.
MAX_ROUNDS = 12


@dataclass(frozen=True)
class TrainStep:
    """A training step for :func:`dtensor_error`: ``loss_fn(output, target)`` a scalar, then
    backward and one step of an optimizer of ``optimizer``'s class and defaults."""

    loss_fn: Callable[[Any, Any], Any]
    target: Any
    optimizer: Any


@dataclass(frozen=True)
class Forbidden:
    """A placement DTensor refused: mesh axis ``axis`` on tensor ``name`` (and ``also``: the
    tensors of its shape whose names differ only in layer indices), with DTensor's error."""

    name: str
    axis: str
    error: str
    also: tuple[str, ...] = ()


def forbidden_lines(forbidden: Sequence[Forbidden], axis_names: Sequence[str]) -> list[str]:
    """``forbidden`` for a reader: one line per DTensor error and set of mesh axes, naming
    the first four tensors and how many more (with those ``also`` like them)."""
    by_error: dict[str, dict[str, set[str]]] = {}
    also: dict[str, int] = {}
    for f in forbidden:
        by_error.setdefault(f.error, {}).setdefault(f.name, set()).add(f.axis)
        also[f.name] = max(also.get(f.name, 0), len(f.also))
    lines = []
    for error, names in by_error.items():
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, on in names.items():
            groups.setdefault(tuple(a for a in axis_names if a in on), []).append(name)
        for axes, group in groups.items():
            more = max(len(group) - 4, 0) + sum(also[n] for n in group)
            shown = ", ".join(group[:4]) + (f" and {more} more" if more > 0 else "")
            lines.append(f"forbidden: {', '.join(map(repr, axes))} on {shown}, as DTensor refuses it: {error}")
    return lines


class FitBudgetError(InfeasibleBudget):
    """``memory_budget`` cannot be met without the placements DTensor refuses: ``forbidden``
    lists them (pass them back to :func:`fit_plan` with a larger budget to skip their checks);
    ``module`` and ``report`` hold the smallest-peak plan found, as ``InfeasibleBudget``'s."""

    def __init__(
        self, message: str, module: Module, report: Any, forbidden: Sequence[Forbidden], checks: int = 0
    ) -> None:
        super().__init__(message, module, report)
        self.forbidden = list(forbidden)
        #: The fake runs made before giving up.
        self.checks = checks


@dataclass
class FitResult:
    """:func:`fit_plan`'s answer: the plan, ``auto_shard``'s report of its last search (``None``
    when propagated), the placements forbidden on the way (in the order found), and the number
    of fake runs."""

    plan: dict[str, tuple[Placement, ...]]
    report: Any
    forbidden: list[Forbidden] = field(default_factory=list)
    checks: int = 0
    #: DTensor's error on ``plan`` when it was not searched (propagated from the user's
    #: placements, nothing to forbid) and DTensor refuses it; else ``None``.
    error: str | None = None


def _no_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        raise ProgramError(
            "dtensor check: expected no process group (it runs on torch's fake one), got one initialized;"
            " check the plan before init_process_group"
        )


@contextlib.contextmanager
def _fake_mesh(shape: Sequence[int], rank: int) -> Iterator[Any]:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    _no_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=math.prod(shape))
    try:
        yield init_device_mesh("cpu", tuple(shape))
    finally:
        dist.destroy_process_group()


def _one_error(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if "/torch/" not in frame.filename and "shardwise" not in frame.filename:
            where = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
            break
    return f"{type(e).__name__}: {first}{where}"


def dtensor_error(
    module: Any,
    plan: Mapping[str, Sequence[Placement]],
    example_args: Sequence[Any],
    mesh_shape: Sequence[int],
    *,
    step: TrainStep | None = None,
) -> str | None:
    """DTensor's error, on one line, when ``module`` distributed by ``plan`` (``distribute`` of
    a deep copy; ``module`` is untouched) on a device mesh of ``mesh_shape`` fails to run on
    ``example_args`` (each distributed by its placements in ``plan``, named as ``plan``'s names
    after the parameters and buffers), forward with grad enabled, then with ``step`` the loss,
    backward and the optimizer's step; ``None`` when it runs, as rank 0 and as the last rank.
    Costs two runs of the model, each in a child process (:func:`_isolated`); moves no data
    between ranks.

    Raises ``ProgramError`` when a process group is already initialized (the check needs its
    own, fake one) or the check's process gives no answer, ``ImportError`` without torch."""
    _no_process_group()
    for rank in _ranks(mesh_shape):
        error = _isolated((module, plan, example_args, list(mesh_shape), rank, step))
        if error is not None:
            return error
    return None


def _ranks(mesh_shape: Sequence[int]) -> list[int]:
    # Rank 0 holds the largest shard of an uneven split, the last rank the smallest.
    return sorted({0, math.prod(mesh_shape) - 1})


def _check(
    module: Any,
    plan: Mapping[str, Sequence[Placement]],
    example_args: Sequence[Any],
    mesh_shape: Sequence[int],
    rank: int,
    step: TrainStep | None,
) -> str | None:
    with _fake_mesh(mesh_shape, rank) as mesh:
        return _run(module, plan, example_args, mesh, step)


def _child(conn: Any, payload: bytes) -> None:
    try:
        answer: tuple[str, str | None] = ("ok", _check(*pickle.loads(payload)))
    except BaseException as e:  # noqa: BLE001 - carried to the parent, raised there
        answer = ("raise", f"{type(e).__name__}: {e}")
    conn.send(answer)
    conn.close()


def _isolated(job: tuple[Any, ...]) -> str | None:
    """:func:`_check` of ``job`` in a child process forked from multiprocessing's fork server
    (which has run no autograd, so a training step may run backward in the child; Python docs
    "multiprocessing: Contexts and start methods"), so that every check starts from the same
    state: torch 2.15, running many checks on one fake process group in one process, comes to
    fail every later one with "Could not resolve the process group registered under the name
    5", even on a new group (measured on the encoder: after 26 checks and 5 searches; replaying
    the same 26 plans in one process does not reproduce it, so the cause is not pinned). A job
    that does not pickle (a loss that is a lambda), or a platform without a fork server, runs
    in this process. The job goes to the child as plain pickled bytes, tensors by value:
    multiprocessing's own pickler shares each tensor's storage as a file descriptor, and the
    fork server takes fewer than 256 (mobilenet_v2 has 314 tensors)."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return _check(*job)
    try:
        payload = pickle.dumps(job)
    except (pickle.PicklingError, AttributeError, TypeError):
        return _check(*job)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch._dynamo", "torch.distributed.tensor", "shardwise.torch.check"])
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, payload), daemon=True)
    proc.start()
    child.close()
    try:
        kind, text = parent.recv()
    except EOFError:
        proc.join()
        raise ProgramError(f"dtensor check: expected an answer from its process, got none (exit code {proc.exitcode})")
    finally:
        parent.close()
    proc.join()
    if kind == "raise":
        raise ProgramError(f"dtensor check: {text}")
    return None if text is None else str(text)


def _optimizer_like(optimizer: Any, parameters: Any) -> Any:
    # An optimizer of optimizer's class and settings on other parameters: its defaults that
    # its constructor takes (AdamW's defaults hold a decoupled_weight_decay it does not take).
    import inspect

    accepted = inspect.signature(type(optimizer)).parameters
    return type(optimizer)(parameters, **{k: v for k, v in optimizer.defaults.items() if k in accepted})


def _run(
    module: Any, plan: Mapping[str, Sequence[Placement]], example_args: Sequence[Any], mesh: Any, step: TrainStep | None
) -> str | None:
    import torch
    from torch.distributed.tensor import distribute_tensor
    from torch.distributed.tensor.experimental import implicit_replication
    from torch.nn.attention import SDPBackend, sdpa_kernel

    names = input_names(module, plan)[: len(example_args) + (step is not None)]
    try:
        m = distribute(copy.deepcopy(module), plan, mesh)
        objects = torch_placements({k: plan[k] for k in names})
        values = [*example_args, step.target] if step is not None else list(example_args)
        args = [distribute_tensor(a, mesh, objects[k]) for k, a in zip(names, values)]
        # Grad on: nn.TransformerEncoderLayer's fused inference path has no DTensor rule.
        # Implicit replication: a plain tensor made in forward (GPT-2's position ids) is taken
        # as replicated (DTensor's own context for this). The math kernel of
        # scaled_dot_product_attention: the CPU flash kernel's backward has no DTensor
        # strategy. All three as in the gloo run (shardwise.torch.gloo).
        with torch.enable_grad(), implicit_replication(), sdpa_kernel(SDPBackend.MATH):
            out = m(*args[: len(example_args)])
            if step is not None:
                opt = _optimizer_like(step.optimizer, m.parameters())
                step.loss_fn(out, args[-1]).backward()
                opt.step()
    except ProgramError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever DTensor or the model raised, on one line
        return _one_error(e)
    return None


def _without(plan: Mapping[str, Sequence[Placement]], keep: set[tuple[str, int]]) -> dict[str, tuple[Placement, ...]]:
    return {n: tuple(p if (n, k) in keep else ("replicate",) for k, p in enumerate(ps)) for n, ps in plan.items()}


def _sharded(
    plan: Mapping[str, Sequence[Placement]], fixed: frozenset[tuple[str, int]] = frozenset()
) -> list[tuple[str, int]]:
    return [(n, k) for n, ps in plan.items() for k, p in enumerate(ps) if p[0] != "replicate" and (n, k) not in fixed]


def _culprit(
    plan: Mapping[str, Sequence[Placement]],
    fails: Callable[[Mapping[str, Any]], str | None],
    fixed: frozenset[tuple[str, int]] = frozenset(),
) -> tuple[int | None, str | None]:
    """The index in ``_sharded(plan, fixed)`` of the placement whose addition first makes
    ``fails`` answer (bisection over prefixes; the whole plan fails; the ``fixed`` (name, mesh
    dim) placements, the user's, are in every prefix), or ``None`` and the error when the plan with only
    the fixed placements sharded fails too."""
    entries = _sharded(plan, fixed)
    base = set(_sharded(plan)) - set(entries)
    replicated = fails(_without(plan, base))
    if replicated is not None:
        return None, replicated
    lo, hi = 0, len(entries)  # prefix lo runs, prefix hi fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(_without(plan, base | set(entries[:mid]))) is None:
            lo = mid
        else:
            hi = mid
    return hi - 1, None


_INDEX = re.compile(r"(?<=\.)\d+(?=\.)|^\d+(?=\.)")


def _siblings(name: str, shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Names that differ from ``name`` only in layer indices (``layers.0.x`` ~ ``layers.3.x``)
    with the same shape, and the optimizer states of each (``<p>.exp_avg``...)."""
    pattern = _INDEX.sub("#", name)
    same = [n for n in shapes if n == name or (_INDEX.sub("#", n) == pattern and shapes[n] == shapes.get(name))]
    return [n for s in same for n in shapes if n == s or (n.startswith(s + ".") and n[len(s) + 1 :].isidentifier())]


def forbid(program: Module, forbidden: Mapping[str, set[str]]) -> Module:
    """A copy of ``program`` whose arguments named in ``forbidden`` (argument name -> mesh axis
    names) may not be sharded over those axes: they become explicitly replicated axes
    (Shardonnay RFC ``replicated={...}``, which ``auto_shard`` and propagation keep), the
    argument's other dims stay as the user set them (open when unset). Raises
    ``ProgramError`` naming the argument when a user sharding already uses such an axis."""
    out = program.copy()
    (mesh_name, mesh), *_ = out.meshes.items()
    f = out.func()
    for i, (arg, attrs) in enumerate(zip(f.body.args, f.arg_attrs)):
        axes = forbidden.get(arg_name(attrs, i))
        if not axes:
            continue
        old = arg.sharding
        rank = len(arg.type.shape)
        dims = list(old.dims) if old is not None else [DimSharding([], closed=False) for _ in range(rank)]
        used = {a.name for d in dims for a in d.axes}
        clash = sorted(used & axes)
        if clash:
            raise ProgramError(
                f"in_placements[{arg_name(attrs, i)!r}]: DTensor refuses axis {clash[0]!r} on it, expected a placement"
                f" without it, got {old}"
            )
        rep = {a.name for a in (old.replicated if old is not None else ())} | axes
        ordered = [AxisRef(a) for a in mesh.axis_names if a in rep]
        arg.sharding = TensorSharding(
            mesh, dims, replicated=ordered, unreduced=old.unreduced if old is not None else (), mesh_name=mesh_name
        )
    return out


#: What a convolution's weight may pass through on its way from ``@main``'s argument.
_WEIGHT_PATH = ("stablehlo.convert", "stablehlo.transpose", "stablehlo.reverse")


def known_refusals(program: Module) -> list[Forbidden]:
    """Placements DTensor's strategies never take, read from ``program`` (no run needed): a
    convolution's weight, an argument of ``@main`` (directly or through a convert, transpose or
    reverse), on any mesh axis: every convolution strategy of torch 2.15 takes the weight
    ``Replicate()`` (``torch/distributed/tensor/_ops/_conv_ops.py``)."""
    f = program.func()
    axes = next(iter(program.meshes.values())).axis_names
    names = {id(a): arg_name(attrs, i) for i, (a, attrs) in enumerate(zip(f.body.args, f.arg_attrs))}
    seen: dict[str, None] = {}
    for op in program.walk():
        if op.name != "stablehlo.convolution" or len(op.operands) < 2:
            continue
        v = op.operands[1]
        while v.defining_op is not None and v.defining_op.name in _WEIGHT_PATH:
            v = v.defining_op.operands[0]
        if id(v) in names:
            seen[names[id(v)]] = None
    why = "DTensor's convolution strategies take the weight replicated (torch/distributed/tensor/_ops/_conv_ops.py)"
    return [Forbidden(n, a, why) for n in seen for a in axes]


def fit_plan(
    program: Module,
    module: Any,
    example_args: Sequence[Any],
    *,
    memory_budget: int | str | None = None,
    time_limit: float = 10.0,
    step: TrainStep | None = None,
    forbidden: Sequence[Forbidden] = (),
    log: Callable[[str], None] | None = None,
) -> FitResult:
    """A plan of ``program`` (``from_torch`` or ``from_torch_step`` of ``module`` on one mesh)
    that DTensor runs: ``auto_shard`` within ``memory_budget`` bytes per device (``time_limit``
    seconds a search), checked as :func:`dtensor_error` checks; a refused placement is found by
    bisection (about log2 of the plan's sharded placements in checks, as the rank that failed),
    forbidden with its siblings (module docstring), and the search runs again, at most
    :data:`MAX_ROUNDS` searches in all. Forbidden from the start: :func:`known_refusals` and
    ``forbidden`` (placements already known refused, a :class:`FitBudgetError`'s). ``log`` gets one line per finding.
    The checks run in child processes of multiprocessing's fork server: a script calling this
    needs the ``if __name__ == "__main__":`` guard that multiprocessing asks for.

    Raises ``SearchError`` when the plan with every placement replicated but the user's (the
    mesh axes of the shardings ``program`` gives its arguments; never forbidden) fails in
    DTensor too, or no plan DTensor runs is found in
    :data:`MAX_ROUNDS` searches; :class:`FitBudgetError` when the budget cannot be met without
    the forbidden placements; what ``auto_shard`` raises otherwise."""
    meshes = program.meshes
    if len(meshes) != 1:
        raise ProgramError(f"fit_plan: expected a program with one mesh, got {len(meshes)}")
    mesh: Mesh = next(iter(meshes.values()))
    shape = [mesh.shape[a] for a in mesh.axis_names]
    f = program.func()
    shapes = {arg_name(attrs, i): tuple(a.type.shape) for i, (a, attrs) in enumerate(zip(f.body.args, f.arg_attrs))}
    found = list({(f.name, f.axis): f for f in [*known_refusals(program), *forbidden]}.values())
    refused: dict[str, set[str]] = {}
    for known in found:
        for n in (known.name, *known.also):
            refused.setdefault(n, set()).add(known.axis)
    checks = 0
    # The user's placements (the mesh axes an argument's sharding in program uses; auto_shard
    # may add others on its open dims): kept in every check, never blamed.
    fixed = frozenset(
        (arg_name(attrs, i), mesh.axis_names.index(ax.name))
        for i, (a, attrs) in enumerate(zip(f.body.args, f.arg_attrs))
        if a.sharding is not None
        for d in a.sharding.dims
        for ax in d.axes
    )

    def on(rank: int) -> Callable[[Mapping[str, Any]], str | None]:
        def fails(plan: Mapping[str, Any]) -> str | None:
            nonlocal checks
            checks += 1
            return _isolated((module, plan, example_args, shape, rank, step))

        return fails

    def verdict(plan: Mapping[str, Any]) -> tuple[str | None, Callable[[Mapping[str, Any]], str | None]]:
        # The first rank's error, and that rank's check (the bisection runs on it alone).
        for rank in _ranks(shape):
            error = on(rank)(plan)
            if error is not None:
                return error, on(rank)
        return None, on(0)

    for _ in range(MAX_ROUNDS):
        try:
            planned, report = auto_shard(forbid(program, refused), memory_budget=memory_budget, time_limit=time_limit)
        except InfeasibleBudget as e:
            raise FitBudgetError(
                f"fit_plan: with the {len(found)} placement(s) DTensor refuses forbidden, {e}",
                e.module,
                e.report,
                found,
                checks,
            ) from None
        plan = placements(planned)
        error, fails = verdict(plan)
        if error is None:
            return FitResult(plan, report, found, checks)
        while error is not None:  # forbid in this plan until DTensor runs it, then search again
            k, replicated = _culprit(plan, fails, fixed)
            if k is None:
                what = "with only the user's placements sharded" if fixed else "even fully replicated"
                raise SearchError(f"fit_plan: the module fails under DTensor {what}: {replicated}")
            name, dim = _sharded(plan, fixed)[k]
            axis = mesh.axis_names[dim]
            also = tuple(n for n in _siblings(name, shapes) if n != name and axis not in refused.get(n, set()))
            for n in (name, *also):
                refused.setdefault(n, set()).add(axis)
            found.append(Forbidden(name, axis, error, also))
            if log is not None:
                log(f"DTensor refuses {axis!r} on {name} (and {len(also)} like it): {error}")
            plan = _without(plan, {e for e in _sharded(plan) if mesh.axis_names[e[1]] not in refused.get(e[0], set())})
            error, fails = verdict(plan)
    raise SearchError(f"fit_plan: no plan DTensor runs found in {MAX_ROUNDS} searches; forbidden so far: {found}")
