"""The report of an ``auto_shard`` run: the chosen strategy of every node and what the cost
model predicts for it (``cost_model.py``): compute seconds, communication bytes and seconds
(the op's own all-reduce plus the reshards into its operands), memory per device.

The reshards are counted as the partitioner emits them: a value moved to one sharding for
several consumers is moved once (``spmd.partition.global_step.merge_equal_reshards``), so the
report's bytes can be below the strategy graph's objective, which prices every edge on its
own (a pairwise model cannot share a cost between edges)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from shardwise.errors import SearchError
from shardwise.ir.core import Op, Value
from shardwise.ir.types import TensorType
from shardwise.search.graph import peak_lower_bound, usage_profile
from shardwise.search.op_strategy import mindspore_splits

if TYPE_CHECKING:
    from shardwise.search.local import Solution
    from shardwise.search.problem import AutoProblem
    from shardwise.search.strategies import Strategy
    from shardwise.sharding import TensorSharding
    from shardwise.tables import PrintableTable

__all__ = ["NodeReport", "Report", "make_report"]


@dataclass(frozen=True)
class NodeReport:
    """One node: ``label`` (``%argN`` or the op and its location), ``strategy`` (sharded factors
    as ``i:data,k:model`` or the argument's dimension shardings), ``configured`` (the user's),
    ``flops`` per device, ``compute_seconds``, ``comm_bytes`` / ``comm_seconds`` (bytes each
    device sends: own all-reduce + reshards of its operands + reshards of its results to the
    function's result shardings), ``collectives`` (their kinds),
    ``memory`` bytes per device of its results. FLOPs, seconds and bytes are per call of the
    function: an op in a loop body counts its trip count times (``Node.times``)."""

    label: str
    strategy: str
    configured: bool
    flops: float
    compute_seconds: float
    comm_bytes: float
    comm_seconds: float
    collectives: tuple[str, ...]
    memory: int
    #: The strategy in MindSpore's notation (per operand per dimension the number of ways it
    #: is split, ``((2, 4), (4, 1))``; a function argument: its own layout, ``((2, 1),)``).
    mindspore: str = ""
    #: Seconds of ``comm_seconds`` hidden behind the op's compute (``DeviceModel.overlap``).
    hidden_seconds: float = 0.0


@dataclass(frozen=True)
class Report:
    """Totals of the plan: ``method`` and solver ``seconds``, ``optimal`` (proven by the ILP),
    ``objective_ps`` (the strategy graph's cost, integer picoseconds), predicted
    ``compute_seconds``, ``comm_bytes`` (per device, Σ over collectives), ``comm_seconds``,
    ``peak_memory`` (bytes per device at the fullest liveness step), ``memory_budget`` (bytes
    or ``None``), ``feasible`` and one :class:`NodeReport` per node, in program order."""

    mesh: str
    method: str
    solver_seconds: float
    optimal: bool
    objective_ps: int
    compute_seconds: float
    comm_bytes: float
    comm_seconds: float
    peak_memory: int
    memory_budget: int | None
    feasible: bool
    nodes: tuple[NodeReport, ...]
    #: Why the plan is over the budget, in one line (``""`` when it fits): the smallest peak
    #: found, a lower bound on any plan's peak and the nodes that dominate the peak.
    infeasibility: str = ""
    #: The objective (picoseconds) of each baseline plan's best completion, ``None`` where it
    #: does not fit the budget or the mesh (``auto_shard(baselines=...)``).
    baselines: dict[str, int | None] = field(default_factory=dict)
    #: Seconds of ``comm_seconds`` hidden behind compute (``DeviceModel.overlap``; 0 without).
    hidden_seconds: float = 0.0
    #: No plan within the budget has a smaller objective (integer picoseconds;
    #: ``auto_shard(bound_time=...)``, ``shardwise.search.bound``); ``None`` when not computed.
    lower_bound_ps: int | None = None

    @property
    def gap(self) -> float | None:
        """How far the objective may be above the optimum, as a share of the objective
        (``(objective_ps - lower_bound_ps) / objective_ps``; 0.0: proven optimal); ``None``
        without a bound or for an objective of 0."""
        if self.lower_bound_ps is None or self.objective_ps <= 0:
            return None
        return max(self.objective_ps - self.lower_bound_ps, 0) / self.objective_ps

    @property
    def seconds(self) -> float:
        """Predicted step time: compute plus communication seconds, less what overlaps."""
        return self.compute_seconds + self.comm_seconds - self.hidden_seconds

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (every field, nodes as a list of dicts, ``seconds`` and
        ``gap`` added)."""
        d = asdict(self)
        d["nodes"] = [asdict(n) for n in self.nodes]
        d["seconds"] = self.seconds
        d["gap"] = self.gap
        return d

    def table(self, *, only_sharded: bool = False) -> PrintableTable:
        """A rich table, one row per node (``only_sharded``: rows with a sharded strategy or
        communication only), totals in the caption; ``print(report.table())`` draws it."""
        from rich.text import Text

        from shardwise.tables import PrintableTable

        t = PrintableTable(title=f"auto_shard ({self.method}) on {self.mesh}", header_style="bold")
        for col in (
            "node",
            "strategy",
            "MindSpore",
            "compute (us)",
            "comm (bytes)",
            "comm (us)",
            "collectives",
            "memory (bytes)",
        ):
            t.add_column(col, overflow="fold")
        for n in self.nodes:
            if only_sharded and n.strategy == "replicated" and not n.comm_bytes:
                continue
            strat = n.strategy + (" (user)" if n.configured else "")
            t.add_row(
                Text(n.label),
                Text(strat),
                Text(n.mindspore),
                f"{n.compute_seconds * 1e6:.3f}",
                f"{n.comm_bytes:.0f}",
                f"{n.comm_seconds * 1e6:.3f}",
                Text(" ".join(n.collectives)),
                str(n.memory),
            )
        budget = "none" if self.memory_budget is None else f"{self.memory_budget}"
        t.caption = (
            f"predicted: compute {self.compute_seconds * 1e6:.3f} us, communication {self.comm_bytes:.0f} bytes "
            f"{self.comm_seconds * 1e6:.3f} us per device{f' ({self.hidden_seconds * 1e6:.3f} us of it overlapped)' if self.hidden_seconds else ''}; peak memory {self.peak_memory} bytes per device (budget {budget}"
            f"{'' if self.feasible else ', EXCEEDED'}); solver {self.solver_seconds:.2f} s{' (optimal)' if self.optimal else ''}"
        )
        if self.baselines:
            plans = ", ".join(
                f"{k} {'does not fit' if v is None else f'{v / 1e6:.3f} us'}" for k, v in self.baselines.items()
            )
            t.caption += f"; objective {self.objective_ps / 1e6:.3f} us against the textbook plans: {plans}"
        if self.lower_bound_ps is not None:
            t.caption += (
                f"; no plan within the budget is below {self.lower_bound_ps / 1e6:.3f} us of objective "
                f"(lower bound; gap {100 * (self.gap or 0.0):.2f} %)"
            )
        return t


def make_report(problem: AutoProblem, solution: Solution) -> Report:
    """The report of ``solution`` on ``problem`` (bytes and seconds recomputed from the chosen
    strategies with the same cost functions the graph was built with). Raises
    :class:`SearchError` for an assignment of the wrong length."""
    x = solution.assignment
    if len(x) != len(problem.nodes):
        raise SearchError(f"assignment: expected {len(problem.nodes)} strategy indices, got {len(x)}")
    incoming: dict[int, list[tuple[float, float, tuple[str, ...], float]]] = {}
    seen: set[tuple[object, tuple[tuple[str, ...], ...]]] = set()

    def moved(value: Value, src: TensorSharding, tgt: TensorSharding) -> bool:
        """False for a second reshard of ``value`` to ``tgt``: the partitioner moves a value
        once per target sharding (``merge_equal_reshards``, as XLA's CSE after its partitioner).
        Equal constant expressions produced with one sharding are one value by then (Shardy's
        export runs ``sdy-constant-or-scalar-merger`` first: the zero broadcasts that start
        each optimizer moment and loop carry)."""
        const = constant_key(value)
        which: object = id(value) if const is None else (const, _names(src))
        key = (which, _names(tgt))
        if key in seen:
            return False
        seen.add(key)
        return True

    for e in problem.edges:
        t = e.value.type
        assert isinstance(t, TensorType)
        src = problem.nodes[e.src].strategies[x[e.src]].results[e.result]
        tgt = problem.nodes[e.dst].strategies[x[e.dst]].operands[e.operand]
        if not moved(e.value, src, tgt):
            continue
        plan = problem.reshards.plan(t.shape, t.element_type, src, tgt)
        hidden = plan.seconds - problem.nodes[e.dst].costs[x[e.dst]].exposed(plan.seconds)
        incoming.setdefault(e.dst, []).append(
            (e.times * plan.bytes, e.times * plan.seconds, tuple(s.kind for s in plan.steps), e.times * hidden)
        )
    for cr in problem.carried:  # loop-carried results moved to their argument's sharding
        t = cr.value.type
        assert isinstance(t, TensorType)
        src = problem.nodes[cr.src].strategies[x[cr.src]].results[cr.result]
        tgt = problem.nodes[cr.arg].strategies[x[cr.arg]].results[0]
        if not moved(cr.value, src, tgt):
            continue
        plan = problem.reshards.plan(t.shape, t.element_type, src, tgt)
        incoming.setdefault(cr.src, []).append((plan.bytes, plan.seconds, tuple(s.kind for s in plan.steps), 0.0))
    rows = []
    for i, (nd, xi) in enumerate(zip(problem.nodes, x)):
        c = nd.costs[xi]
        ins = incoming.get(i, [])
        kinds = tuple(k for _, _, ks, _ in ins for k in ks) + (
            ("reduce_scatter" if nd.strategies[xi].scatter_dims else "all_reduce",)
            if c.comm_bytes or nd.strategies[xi].reduction_axes
            else ()
        )
        n = nd.times
        rows.append(NodeReport(
            nd.label, nd.strategies[xi].describe(), nd.configured, n * c.flops, n * c.compute_seconds,
            n * c.comm_bytes + sum(b for b, _, _, _ in ins) + nd.extra_bytes[xi], n * c.comm_seconds + sum(s for _, s, _, _ in ins) + nd.extra_seconds[xi], kinds, c.memory,
            _mindspore(problem, nd.strategies[xi], nd.op is None or nd.carry_index is not None),
            n * c.hidden_seconds + sum(h for _, _, _, h in ins),
        ))  # fmt: skip
    return Report(
        mesh=f"@{problem.mesh_name} = {problem.mesh}",
        method=solution.method,
        solver_seconds=solution.seconds,
        optimal=solution.optimal,
        objective_ps=solution.cost,
        compute_seconds=sum(r.compute_seconds for r in rows),
        comm_bytes=sum(r.comm_bytes for r in rows),
        comm_seconds=sum(r.comm_seconds for r in rows),
        hidden_seconds=sum(r.hidden_seconds for r in rows),
        peak_memory=solution.peak_usage,
        memory_budget=problem.graph.usage_limit,
        feasible=solution.feasible,
        nodes=tuple(rows),
        infeasibility="" if solution.feasible else diagnose(problem, solution),
    )


def _names(s: TensorSharding) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(str(a) for a in d.axes) for d in s.dims)


def constant_key(v: Value) -> tuple[object, ...] | None:
    """What ``sdy-constant-or-scalar-merger`` merges ``v`` by, when its producer is one of the
    ops it merges (a constant, or a broadcast of a scalar it merges): the region, the op, its
    attributes, its type and its operand's key; ``None`` for any other value. Two values with
    equal keys and equal shardings are one value in the partitioned program."""
    op = v.owner
    if not isinstance(op, Op) or op.parent is None:
        return None
    region = id(op.parent.parent)
    if op.name in ("stablehlo.constant", "sdy.constant"):
        return (region, "constant", op.attributes.get("value", ""), str(v.type))
    if op.name == "stablehlo.broadcast_in_dim" and len(op.operands) == 1:
        inner = constant_key(op.operands[0])
        if inner is not None:
            return (region, op.name, inner, tuple(sorted(op.attributes.items())), str(v.type))
    return None


def diagnose(problem: AutoProblem, solution: Solution, top: int = 3) -> str:
    """One line on why ``solution`` exceeds the budget: the budget, the solution's peak and
    method, the lower bound ``max_t Σ_{v live at t} min_s usage_v(s)`` on every plan's peak
    (each value at its smallest strategy; exact per time point, ``graph.time_points``) and
    the ``top`` nodes using most at the solution's peak, with their bytes per device."""
    g = problem.graph
    _npoints, first, last = g.time_points()
    live = np.nonzero(first < last)[0]
    profile = usage_profile(g, solution.assignment)
    bound = peak_lower_bound(g)
    t = int(np.argmax(profile)) if profile else 0
    at_peak = [int(v) for v in live if first[v] <= t < last[v]]
    at_peak.sort(key=lambda v: -int(g.node_usages(v)[solution.assignment[v]]))
    heavy = ", ".join(
        f"{problem.nodes[v].label} {int(g.node_usages(v)[solution.assignment[v]]):,} B" for v in at_peak[:top]
    )
    budget = g.usage_limit
    below = (
        f"below {bound:,} B, the least any plan can peak at (every value at its smallest sharding)"
        if budget is not None and budget < bound
        else f"no plan found under it; a plan could peak as low as {bound:,} B"
    )
    return f"memory budget {budget:,} B per device is {below}; the smallest peak found is {solution.peak_usage:,} B ({solution.method}); at that peak: {heavy}"


def _mindspore(problem: AutoProblem, s: Strategy, is_arg: bool) -> str:
    """``s`` in MindSpore's notation: its operand shardings' split counts (an argument: its
    result's, the parameter's layout), as a Python tuple (``configure`` reads it back)."""
    return str(mindspore_splits(s.results[:1] if is_arg else s.operands, problem.mesh))
