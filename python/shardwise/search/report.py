"""The report of an ``auto_shard`` run: the chosen strategy of every node and what the cost
model predicts for it (``cost_model.py``): compute seconds, communication bytes and seconds
(the op's own all-reduce plus the reshards into its operands), memory per device."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from shardwise.errors import SearchError
from shardwise.ir.types import TensorType

if TYPE_CHECKING:
    from shardwise.search.auto import AutoProblem
    from shardwise.tables import PrintableTable
    from shardwise.search.local import Solution

__all__ = ["NodeReport", "Report", "make_report"]


@dataclass(frozen=True)
class NodeReport:
    """One node: ``label`` (``%argN`` or the op and its location), ``strategy`` (sharded factors
    as ``i:data,k:model`` or the argument's dimension shardings), ``configured`` (the user's),
    ``flops`` per device, ``compute_seconds``, ``comm_bytes`` / ``comm_seconds`` (bytes each
    device sends: own all-reduce + reshards of its operands + reshards of its results to the
    function's result shardings), ``collectives`` (their kinds),
    ``memory`` bytes per device of its results."""

    label: str
    strategy: str
    configured: bool
    flops: float
    compute_seconds: float
    comm_bytes: float
    comm_seconds: float
    collectives: tuple[str, ...]
    memory: int


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

    @property
    def seconds(self) -> float:
        """Predicted step time: compute plus communication seconds (no overlap assumed)."""
        return self.compute_seconds + self.comm_seconds

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (every field, nodes as a list of dicts, ``seconds`` added)."""
        d = asdict(self)
        d["nodes"] = [asdict(n) for n in self.nodes]
        d["seconds"] = self.seconds
        return d

    def table(self, *, only_sharded: bool = False) -> PrintableTable:
        """A rich table, one row per node (``only_sharded``: rows with a sharded strategy or
        communication only), totals in the caption; ``print(report.table())`` draws it."""
        from rich.text import Text

        from shardwise.tables import PrintableTable

        t = PrintableTable(title=f"auto_shard ({self.method}) on {self.mesh}", header_style="bold")
        for col in ("node", "strategy", "compute (us)", "comm (bytes)", "comm (us)", "collectives", "memory (bytes)"):
            t.add_column(col, overflow="fold")
        for n in self.nodes:
            if only_sharded and n.strategy == "replicated" and not n.comm_bytes:
                continue
            strat = n.strategy + (" (user)" if n.configured else "")
            t.add_row(Text(n.label), Text(strat), f"{n.compute_seconds * 1e6:.3f}", f"{n.comm_bytes:.0f}", f"{n.comm_seconds * 1e6:.3f}",
                      Text(" ".join(n.collectives)), str(n.memory))
        budget = "none" if self.memory_budget is None else f"{self.memory_budget}"
        t.caption = (
            f"predicted: compute {self.compute_seconds * 1e6:.3f} us, communication {self.comm_bytes:.0f} bytes "
            f"{self.comm_seconds * 1e6:.3f} us per device; peak memory {self.peak_memory} bytes per device (budget {budget}"
            f"{'' if self.feasible else ', EXCEEDED'}); solver {self.solver_seconds:.2f} s{' (optimal)' if self.optimal else ''}"
        )
        return t


def make_report(problem: AutoProblem, solution: Solution) -> Report:
    """The report of ``solution`` on ``problem`` (bytes and seconds recomputed from the chosen
    strategies with the same cost functions the graph was built with). Raises
    :class:`SearchError` for an assignment of the wrong length."""
    x = solution.assignment
    if len(x) != len(problem.nodes):
        raise SearchError(f"assignment: expected {len(problem.nodes)} strategy indices, got {len(x)}")
    incoming: dict[int, list[tuple[float, float, tuple[str, ...]]]] = {}
    for e in problem.edges:
        t = e.value.type
        assert isinstance(t, TensorType)
        src = problem.nodes[e.src].strategies[x[e.src]].results[e.result]
        tgt = problem.nodes[e.dst].strategies[x[e.dst]].operands[e.operand]
        plan = problem.reshards.plan(t.shape, t.element_type, src, tgt)
        incoming.setdefault(e.dst, []).append((plan.bytes, plan.seconds, tuple(s.kind for s in plan.steps)))
    rows = []
    for i, (nd, xi) in enumerate(zip(problem.nodes, x)):
        c = nd.costs[xi]
        ins = incoming.get(i, [])
        kinds = tuple(k for _, _, ks in ins for k in ks) + (("all_reduce",) if c.comm_bytes or nd.strategies[xi].reduction_axes else ())
        rows.append(NodeReport(
            nd.label, nd.strategies[xi].describe(), nd.configured, c.flops, c.compute_seconds,
            c.comm_bytes + sum(b for b, _, _ in ins) + nd.extra_bytes[xi], c.comm_seconds + sum(s for _, s, _ in ins) + nd.extra_seconds[xi], kinds, c.memory,
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
        peak_memory=solution.peak_usage,
        memory_budget=problem.graph.usage_limit,
        feasible=solution.feasible,
        nodes=tuple(rows),
    )
