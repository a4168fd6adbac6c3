"""``auto_shard``: cost-based sharding of a whole program (issue 8; Alpa's intra-operator ILP as
the hidet RFC describes it, ``shared/references/hidet-auto-parallel-rfc.md``, and MindSpore's
sharding propagation, ``bfs.py``).

0. Calls are inlined first (``spmd.partition.inline``, as XLA's ``CallInliner`` before its
   partitioner): each call site of ``jax.nn.relu``, a flax layer or an optax update gets its
   own strategies, and the module returned is the inlined one.
1-3. ``build.py`` (``build_problem``) makes the strategy graph: a node per function argument
   and per op (inside loops, branches and manual computations too) with its strategies and
   costs, an edge per producer -> consumer value with its resharding seconds, and each node's
   live range and bytes per device for the memory budget.
4. ``solve`` (``ilp``, ``local``, ``auto``) or ``solve_bfs`` picks one strategy per node.
5. The chosen sharding of every decided value is written as a closed sharding (function
   argument shardings, op result shardings) on a copy of the module; ``shardwise.propagate``
   completes the rest (nested regions, ops without a rule), as Shardy's auto-partitioner hook
   runs after user-priority propagation.

Followers are not merged into their operands here: the solvers' own reductions
(``search/reduce.py``) fold single-strategy nodes and the ILP handles the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from shardwise.api import propagate
from shardwise.errors import InfeasibleBudget, ProgramError, SearchError
from shardwise.ir.core import Module, Op
from shardwise.ir.rewrite import insert_before
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.search.baselines import Plan, complete_plan, inferred_plans
from shardwise.search.bfs import solve_bfs
from shardwise.search.bound import bound_for
from shardwise.search.build import Progress, build_problem, sharding_dims
from shardwise.search.cost_model import DeviceModel
from shardwise.search.local import Solution, check_time_limit
from shardwise.search.problem import AutoProblem, Edge, Node
from shardwise.search.report import Report, make_report
from shardwise.search.solve import solve
from shardwise.search.strategies import DEFAULT_MAX_STRATEGIES
from shardwise.sharding import TensorSharding
from shardwise.spmd.partition.chlo_rules import chlo_rules
from shardwise.spmd.partition.inline import inline_calls

__all__ = [
    "AUTO_METHODS",
    "AutoProblem",
    "Edge",
    "Node",
    "apply_solution",
    "auto_shard",
    "parse_bytes",
    "resolve_mesh",
]


def resolve_mesh(module: Module, mesh: Mesh | Mapping[str, int] | str | None) -> tuple[str, Mesh]:
    """Puts ``mesh`` on ``module`` (in place) and returns ``(name, mesh)``: it redefines the
    module's only mesh (same name) or adds ``@mesh``; ``None`` keeps the module's only mesh.
    ``mesh`` is a ``Mesh``, a mapping axis -> size or text ``data=2,model=4``. Raises
    :class:`ProgramError` when the module has several meshes, or none and ``mesh`` is None."""
    meshes = module.meshes
    if len(meshes) > 1:
        raise ProgramError(f"auto_shard: expected a module with at most one sdy.mesh, got {sorted(meshes)}")
    if mesh is None:
        if not meshes:
            raise ProgramError("auto_shard: the module has no sdy.mesh; pass mesh= (e.g. {'data': 2, 'model': 4})")
        return next(iter(meshes.items()))
    m = Mesh.from_spec(mesh)
    name = next(iter(meshes)) if meshes else "mesh"
    if meshes:
        used = _axes_used(module)
        missing = sorted(used - set(m.axis_names))
        if missing:
            raise ProgramError(
                f"auto_shard: mesh {m} has no axis {', '.join(repr(a) for a in missing)}, which the module's shardings on "
                f"@{name} = {meshes[name]} use; give the new mesh those axis names, or a module without shardings"
            )
    module.add_mesh(name, m)
    return name, m


def _axes_used(module: Module) -> set[str]:
    """The mesh axis names any sharding of ``module`` refers to."""
    names: set[str] = set()

    def add(s: TensorSharding | None) -> None:
        if s is not None:
            names.update(a.name for d in s.dims for a in d.axes)
            names.update(a.name for a in (*s.replicated, *s.unreduced))

    for v in module.values():
        add(v.sharding)
    for op in module.walk():
        for s in op.operand_shardings or ():
            add(s)
    for f in module.funcs:
        for r in f.result_shardings:
            add(r)
    return names


def apply_solution(problem: AutoProblem, assignment: tuple[int, ...]) -> None:
    """Writes the chosen shardings on ``problem.module`` (in place): every argument and every op
    result with a rule gets its strategy's closed sharding; configured values and ops without a
    rule are left as they are. Where a consumer's strategy wants an operand sharded otherwise
    than its producer gives it, an ``sdy.reshard`` to the wanted sharding is inserted before the
    consumer, so the partitioner moves exactly the planned bytes (``plan_reshard`` lowers it). Raises :class:`SearchError` for an assignment of the wrong length."""
    if len(assignment) != len(problem.nodes):
        raise SearchError(f"assignment: expected {len(problem.nodes)} strategy indices, got {len(assignment)}")
    for nd, x in zip(problem.nodes, assignment):
        if nd.configured or (nd.op is not None and nd.rule is None and nd.carry_index is None):
            continue
        s = nd.strategies[x]
        if nd.manual_side == "in":  # the manual computation's in-sharding (its body argument has none)
            assert nd.op is not None and nd.op.operand_shardings is not None and nd.carry_index is not None
            ins = list(nd.op.operand_shardings)
            ins[nd.carry_index] = s.operands[0]
            nd.op.operand_shardings = tuple(ins)
            continue
        for v, sh in zip(nd.values, s.results):
            if isinstance(v.type, TensorType):
                v.sharding = sh
    arg_node = {id(nd.values[0]): v for v, nd in enumerate(problem.nodes) if nd.op is None}
    func = problem.func
    for i, k in problem.carry:
        node = arg_node.get(id(func.args[i]))
        if node is not None and func.result_shardings[k] is None:
            func.result_shardings[k] = problem.nodes[node].strategies[assignment[node]].results[0]
    for e in problem.edges:
        src = problem.nodes[e.src].strategies[assignment[e.src]].results[e.result]
        dst = problem.nodes[e.dst]
        tgt = dst.strategies[assignment[e.dst]].operands[e.operand]
        if dst.rule is None or sharding_dims(src) == sharding_dims(tgt) or dst.op is None:
            continue
        reshard = Op("sdy.reshard", [e.value], [e.value.type], location=dst.op.location)
        reshard.results[0].sharding = tgt
        insert_before(dst.op, reshard)
        dst.op.operands[e.operand] = reshard.results[0]


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value: int | str) -> int:
    """Bytes from an int or text such as ``16GiB``, ``512MB``, ``1e9`` (units B, kB, MB, GB,
    TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024; case-insensitive). Raises
    :class:`SearchError` naming the value for anything else or a negative size."""
    if isinstance(value, bool):
        raise SearchError(f"memory budget: expected bytes (an int or text like 16GiB), got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        num = text.rstrip("kmgtib")
        unit = text[len(num) :]
        try:
            n = round(float(num) * _UNITS[unit])
        except (KeyError, ValueError, OverflowError):
            raise SearchError(f"memory budget: expected bytes like 16GiB, 512MB or 1000000, got {value!r}") from None
    else:
        raise SearchError(
            f"memory budget: expected bytes (an int or text like 16GiB), got {type(value).__name__} {value!r}"
        )
    if n < 0:
        raise SearchError(f"memory budget: expected bytes >= 0, got {value!r}")
    return n


#: The search methods of ``auto_shard``: ``solve``'s (``ilp``, ``local``, ``penalty``,
#: ``limited``, ``auto``) and ``bfs``.
AUTO_METHODS = ("ilp", "bfs", "local", "penalty", "limited", "auto")
#: Appended to ``Report.method`` when a Ctrl-C stopped the search (the plan is the best found
#: so far).
INTERRUPTED_SUFFIX = " (interrupted)"


#: The share of ``auto_shard``'s time limit its baselines' completions get (split evenly).
BASELINE_SHARE = 0.25


def _baselines(
    problem: AutoProblem, plans: Mapping[str, Plan], seconds: float
) -> tuple[Solution | None, dict[str, int | None]]:
    """The best completion of ``plans`` (each ``seconds / len(plans)`` long; fitting first, then
    cost), the search's warm start and the answer it must beat, and the cost (picoseconds) of
    each, ``None`` for one that does not fit or cannot be built on this mesh."""
    scores: dict[str, int | None] = {}
    best: Solution | None = None
    for name, plan in plans.items():
        try:
            done = complete_plan(problem, plan, time_limit=max(seconds / len(plans), 0.05))
        except SearchError:  # not divisible on this mesh, or beyond the strategy cap
            scores[name] = None
            continue
        if done.interrupted:
            break
        scores[name] = done.cost if done.feasible else None
        if best is None or (done.feasible, -done.cost) > (best.feasible, -best.cost):
            best = replace(done, method=f"{name} plan ({done.method.removeprefix('plan+')})")
    return best, scores


def prepare(
    module: Module,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    memory_budget: int | str | None = None,
    device: DeviceModel | None = None,
    *,
    carry: Sequence[tuple[int, int]] | None = None,
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    progress: Progress | None = None,
) -> AutoProblem:
    """The search problem of ``module`` (left unchanged): a copy with its calls inlined (step 0
    of the module docstring), ``mesh`` put on it (:func:`resolve_mesh`) and its strategy graph
    (:func:`build_problem`). Solve ``problem.graph`` and pass the answer to :func:`finish`.
    Arguments and errors as :func:`auto_shard`'s."""
    dev = device if device is not None else DeviceModel()
    budget = parse_bytes(memory_budget) if memory_budget is not None else dev.memory
    work = module.copy()
    # Each call site gets its own choices (jax.nn.relu, flax layers and optax updates are
    # private functions): the search sees the program as XLA's partitioner does, inlined.
    inline_calls(work, decided=False)
    name, m = resolve_mesh(work, mesh)
    with chlo_rules():  # elementwise CHLO ops are pointwise, as XLA's partitioner sees them
        return build_problem(work, name, m, dev, budget, max_strategies=max_strategies, carry=carry, progress=progress)


def finish(problem: AutoProblem, solution: Solution) -> tuple[Module, Report]:
    """Writes ``solution`` on ``problem.module`` (:func:`apply_solution`, in place: a problem is
    finished once), propagates the rest and returns the module with its :class:`Report`."""
    apply_solution(problem, solution.assignment)
    with chlo_rules():
        return propagate(problem.module), make_report(problem, solution)


def auto_shard(
    module: Module,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    memory_budget: int | str | None = None,
    method: str = "ilp",
    time_limit: float = 10.0,
    device: DeviceModel | None = None,
    *,
    carry: Sequence[tuple[int, int]] | None = None,
    baselines: Mapping[str, Plan] | None = None,
    allow_infeasible: bool = False,
    max_strategies: int = DEFAULT_MAX_STRATEGIES,
    progress: Progress | None = None,
    bound_time: float = 0.0,
) -> tuple[Module, Report]:
    """The cheapest sharding of ``module``'s main function found on ``mesh`` within
    ``memory_budget`` bytes per device (steps in the module docstring); ``module`` is left
    unchanged.

    ``mesh``: redefines the module's only mesh or adds ``@mesh`` (``None``: the module's own).
    ``memory_budget``: bytes (int or ``"16GiB"``), default ``device.memory`` (no limit).
    ``method``: ``ilp`` (HiGHS, optimal within ``time_limit`` seconds), ``local`` (Rust local
    search), ``penalty`` (memory as node penalties, relaxed problems by toulbar2), ``limited``
    (the whole problem, memory limit included, by toulbar2), ``auto``
    (``solve``'s choice) or ``bfs`` (MindSpore propagation from the configured ops and the
    values the user sharded; ``shardwise.configure``).
    ``device``: FLOP rate, link costs (default ``DeviceModel()``).
    ``carry``: (argument, result) pairs whose result is the argument's next value (a training
    step's parameters and optimizer state); the result is given the argument's sharding and
    the move to it is priced. Default: the pairs ``tf.aliasing_output`` names (JAX's
    ``donate_argnums``); ``()`` for none.
    ``baselines``: hand plans (name -> argument index -> dimension axes,
    :mod:`shardwise.search.baselines`) the answer must not be worse than: each is completed on
    the same graph (:func:`~shardwise.search.baselines.complete_plan`, a quarter of
    ``time_limit`` shared among them, the search the rest) and the cheapest plan that fits
    wins; ``Report.baselines`` lists their costs. Default: data parallel and FSDP as the
    program's donated arguments imply (:func:`~shardwise.search.baselines.inferred_plans`);
    ``{}`` for none. Not with ``bfs``, which answers from the configured ops alone.
    ``allow_infeasible``: return a plan over the budget (``Report.feasible`` false,
    ``Report.infeasibility`` says why) instead of raising :class:`InfeasibleBudget`.
    ``progress(stage, done, total)``: called while building (``strategies``, ``edges``) and
    before ``solving``.
    ``bound_time`` > 0: after the search, that many more seconds (outside ``time_limit``) go to
    a lower bound of the objective over every plan within the budget
    (:func:`shardwise.search.bound.bound_for`: HiGHS's dual bound where the ILP's model fits,
    else the Lagrangian dual), given as ``Report.lower_bound_ps``, so a user sees how far from
    optimal the plan can be.

    The ILP runs only when its model fits the memory guard and the time
    (:func:`shardwise.search.solve.solve`: else local search, with an
    ``FallbackWarning``). From the main thread a Ctrl-C stops the search with its best
    answer so far, which is applied; ``Report.method`` then ends in :data:`INTERRUPTED_SUFFIX`.

    Returns the propagated module (every value sharded) and a :class:`Report`. Raises
    :class:`InfeasibleBudget` when no plan found fits the budget (its message: the smallest
    peak found, a lower bound on any plan's peak, the nodes that dominate the peak; the plan
    is on the exception); :class:`SearchError` for an unknown method, a bad budget, time
    limit or carry pair; :class:`ProgramError` for a module without a usable function or mesh;
    what ``shardwise.propagate`` raises."""
    if method not in AUTO_METHODS:
        raise SearchError(f"method: expected one of {', '.join(AUTO_METHODS)}, got {method!r}")
    problem = prepare(
        module, mesh, memory_budget, device, carry=carry, max_strategies=max_strategies, progress=progress
    )
    if progress:
        progress("solving", 0, 1)
    if method == "bfs":
        conf = {i: int(problem.graph.node_costs(i).argmin()) for i, nd in enumerate(problem.nodes) if nd.configured}
        sol = solve_bfs(problem.graph, conf)
        scores: dict[str, int | None] = {}
    else:
        plans = inferred_plans(problem) if baselines is None else dict(baselines)
        share = BASELINE_SHARE * check_time_limit(time_limit) if plans else 0.0
        start, scores = _baselines(problem, plans, share)
        sol = solve(problem.graph, time_limit - share, method, initial=None if start is None else start.assignment)
        if sol.interrupted:  # the report's method says so (the CLI exits 130 on it)
            sol = replace(sol, method=sol.method + INTERRUPTED_SUFFIX)
        elif start is not None and (start.feasible, -start.cost) > (sol.feasible, -sol.cost):
            sol = start
    if progress:
        progress("solving", 1, 1)
    out, report = finish(problem, sol)
    report = replace(report, baselines=scores)
    if check_time_limit(bound_time) > 0 and not sol.interrupted:
        report = replace(report, lower_bound_ps=bound_for(problem.graph, sol, bound_time).bound)
    if not report.feasible and not allow_infeasible:
        raise InfeasibleBudget(report.infeasibility, out, report)
    return out, report
