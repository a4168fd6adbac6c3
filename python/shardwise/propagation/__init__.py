"""Sharding propagation: Shardy's four propagation passes, exactly.

``run_propagation_pass(module, pass_name)`` runs one of

* ``"basic"``: ``sdy-basic-propagate`` (Shardy ``basic_propagation.cc``): along every factor
  of every op, the axes all tensors agree on;
* ``"aggressive"``: ``sdy-aggressive-propagate`` (``aggressive_propagation.cc``): conflicts
  between factors and tensors resolved in favour of the larger source tensor;
* ``"op-priority"``: ``sdy-op-priority-propagate`` (``op_priority_propagation.cc``): the
  aggressive pass five times, letting more op kinds and directions through each time;
* ``"user-priority"``: ``sdy-user-priority-propagate`` (``user_priority_propagation.cc``): the
  op-priority pass once per user priority ``p0, p1, ...`` of the dimension shardings;

over a program IR module and writes the shardings Shardy would write back into it:
``Value.sharding`` of op results and function arguments, ``Func.result_shardings``, the
``operand_shardings`` (in shardings) of manual and named computations, and, with
``keep_sharding_rules``, the ``sdy.sharding_rule`` of every op propagated through. Like
Shardy, the passes erase ops whose results are unused and that have no side effects, and put
an open ``sdy.sharding_constraint`` on each member of a sharding group whose members'
shardings conflict (warning ``ShardingGroupWarning``).

With Shardy's debugging options (``debug_sharding_origins``,
``debug_propagation_edge_sharding``), the passes also write where each propagated axis came
from, as Shardy writes it: ``sdy.sharding_origins`` (which user sharding, function argument or
result, sharding constraint or manual computation in/out sharding, each axis of each sharding
came from; with ``sdy.sharding_origin_name`` naming each constraint and manual computation)
and ``sdy.propagation_edges`` (which operand or result each axis moved from and to, through
which op, at which step). The same records, as data, fill a ``PropagationTrace`` passed as
``trace``.

``shardwise.passes`` (which sits above this package and imports it) registers the four passes
under Shardy's pass names (importing it is enough), so that ``run_pipeline`` runs them.
``debug`` holds the records of the debugging
options and writes them as Shardy does; ``records`` the solver's records behind
``shardwise.explain``.

The work is done by the fixed-point solver in Rust (``rust/src/propagation/solver.rs``, the
layers in ``layers.rs``), without the GIL. The module is frozen (``shardwise.propagation.freeze``) with
Shardy's sharding rule of each op, and the facts that live in op attributes (callees, manual
axes, sharding group ids, barrier directions, side effects) are handed over with it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shardwise import _native
from shardwise.errors import PassWarning, ProgramError
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import Uses
from shardwise.ir.types import DYNAMIC, OpaqueType, TensorType
from shardwise.mesh import Mesh
from shardwise.propagation.debug import DebugInfo, Edge, Origin, max_step
from shardwise.propagation.freeze import Frozen, freeze
from shardwise.propagation.records import Conflict, Hop, Layer, load_conflicts, load_hops, load_steps
from shardwise.rules.rule import OpShardingRule
from shardwise.sharding import AxisRef, DimSharding, TensorSharding

__all__ = [
    "PASS_NAMES",
    "STRATEGIES",
    "Edge",
    "Origin",
    "PropagationStats",
    "PropagationTrace",
    "ShardingGroupWarning",
    "ShardingOriginWarning",
    "SolverInputs",
    "run_propagation_pass",
    "solver_inputs",
]

#: The pass names ``run_propagation_pass`` takes, with the Shardy pass each one runs (the
#: pipelines run the native passes of these names: ``shardwise.passes``).
PASS_NAMES = {
    "basic": "sdy-basic-propagate",
    "aggressive": "sdy-aggressive-propagate",
    "op-priority": "sdy-op-priority-propagate",
    "user-priority": "sdy-user-priority-propagate",
}

#: Values of ``propagation_strategy`` (Shardy's ``propagation-strategy`` option).
STRATEGIES = ("basic", "aggressive", "basic-then-aggressive")

_DIRECTIONS = {0: "NONE", 1: "FORWARD", 2: "BACKWARD", 3: "BOTH"}
_SYMBOL = re.compile(r'@(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_][\w$.]*))')
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_REGION_ARG_OPS = ("sdy.manual_computation", "sdy.named_computation")


class ShardingGroupWarning(PassWarning):
    """The members of a sharding group had different shardings before propagation; each got an
    open ``sdy.sharding_constraint`` (as Shardy does, with the same warning). A
    ``shardwise.passes.PassWarning``."""


class ShardingOriginWarning(PassWarning):
    """``debug_sharding_origins``: an axis was propagated from a sharding that is none of the
    user shardings Shardy tracks (a sharding set on an op result, or given to a sharding group
    member), so it has no origin and none is written. Shardy looks the origin up anyway, which
    is undefined behaviour there (it writes garbage such as ``": 0"``, or crashes). A
    ``shardwise.passes.PassWarning``."""


class PropagationStats:
    """Counters of the last ``run_propagation_pass`` call: ``rounds`` (fixed-point rounds), ``visits`` (ops
    propagated through), ``updates`` (shardings changed), ``erased`` (dead ops removed),
    ``inserted`` (sharding constraints added for conflicting sharding groups)."""

    __slots__ = ("rounds", "visits", "updates", "erased", "inserted")

    def __init__(self, rounds: int = 0, visits: int = 0, updates: int = 0, erased: int = 0, inserted: int = 0) -> None:
        self.rounds = rounds
        self.visits = visits
        self.updates = updates
        self.erased = erased
        self.inserted = inserted

    def __repr__(self) -> str:
        return (
            f"PropagationStats(rounds={self.rounds}, visits={self.visits}, updates={self.updates}, "
            f"erased={self.erased}, inserted={self.inserted})"
        )


class PropagationTrace:
    """Where the shardings of one ``run_propagation_pass`` call came from: the records behind Shardy's
    ``debug-sharding-origins`` and ``debug-propagation-edge-sharding``, as data (the solver's
    ``rust/src/propagation/debug.rs``).

    * ``origins[value][axis]``: the user sharding (``Origin``: ``kind`` ``"input"``,
      ``"output"``, ``"constraint"``, ``"mc_input"`` or ``"mc_output"``, ``index``,
      ``source``) that axis ``axis`` of ``value``'s sharding came from. ``value`` is the value
      holding the sharding (Shardy's shardable value: for the results and body arguments of
      ops with data flow edges, the ``sdy.data_flow_edge`` result). Values whose sharding
      has no axis from a user sharding are absent;
    * ``edges[op][axis]``: each move of ``axis`` through ``op`` (``Edge``: ``source`` and
      ``target`` as ``("operand" | "result", index)``, ``step``);
    * ``func_result_edges[func]``: per result of ``func``, the same for moves between the
      returned value (operand 0) and the result (result 0); Shardy records every result's
      moves under result 0, and so does this;
    * ``origin_names[op]``: the name of each sharding constraint (``constraint_0``) and
      manual computation (``mc_0``), as ``Origin`` prints them;
    * ``missing_origins``: ``(value, axis)`` for each axis propagated from a tensor that has
      no origin for it (see ``ShardingOriginWarning``);
    * ``first_step``, ``next_step``: steps are numbered ``first_step`` up to ``next_step - 1``,
      one per propagation through an op that changed a sharding;
    * ``steps[step]``: ``(op, layer)``, the op of each step and the layer that took it
      (``shardwise.propagation.records.Layer``: user priority, op priority step, strategy);
    * ``hops``: each axis moved at each step, with the factor it travelled along
      (``shardwise.propagation.records.Hop``);
    * ``conflicts``: each axis an operand or result could not take along a factor, with the
      reason and what it conflicted with (``shardwise.propagation.records.Conflict``), kept at its
      last visit. ``shardwise.explain`` reads these.
    """

    __slots__ = (
        "origins",
        "edges",
        "func_result_edges",
        "origin_names",
        "missing_origins",
        "first_step",
        "next_step",
        "steps",
        "hops",
        "conflicts",
    )

    def __init__(self) -> None:
        self.origins: dict[Value, dict[AxisRef, Origin]] = {}
        self.edges: dict[Op, dict[AxisRef, list[Edge]]] = {}
        self.func_result_edges: dict[Func, list[dict[AxisRef, list[Edge]]]] = {}
        self.origin_names: dict[Op, str] = {}
        self.missing_origins: list[tuple[Value, AxisRef]] = []
        self.first_step = 0
        self.next_step = 0
        self.steps: dict[int, tuple[Op, Layer]] = {}
        self.hops: list[Hop] = []
        self.conflicts: list[Conflict] = []

    def __repr__(self) -> str:
        return (
            f"PropagationTrace({len(self.origins)} values with origins, {len(self.edges)} ops with edges, "
            f"steps {self.first_step}..{self.next_step - 1})"
        )


def run_propagation_pass(
    module: Module,
    pass_name: str = "basic",
    *,
    conservative: bool = False,
    keep_sharding_rules: bool = False,
    propagation_strategy: str = "aggressive",
    run_op_priority: bool = True,
    in_place: bool = True,
    stats: PropagationStats | None = None,
    debug_sharding_origins: bool = False,
    debug_propagation_edge_sharding: bool = False,
    trace: PropagationTrace | None = None,
) -> Module:
    """Runs Shardy's propagation pass ``pass_name`` (a key of ``PASS_NAMES``) on ``module`` and
    returns the module with the propagated shardings: ``module`` itself, changed in place, or
    (``in_place=False``) a changed deep copy, ``module`` left as it was.

    Options, as Shardy's:

    * ``conservative`` (``conservative-propagation``): no sub-axes and no axes that do not
      divide a dimension (the conservative sharding rules are used too);
    * ``keep_sharding_rules`` (``keep-sharding-rules``): every op propagated through keeps its
      sharding rule as a ``sdy.sharding_rule`` attribute; without it, every rule that is not a
      user's custom rule is removed, as Shardy removes them;
    * ``propagation_strategy`` (``propagation-strategy``, one of ``STRATEGIES``) for the
      aggressive pass and above (the basic pass always uses the basic strategy);
    * ``run_op_priority`` (``run-op-priority-propagation``) for the op- and user-priority
      passes.

    * ``debug_sharding_origins`` (``debug-sharding-origins``): writes
      ``sdy.sharding_origins`` (on function arguments and results, and on the ops holding the
      shardings: a dictionary, or an array of one dictionary per result) and
      ``sdy.sharding_origin_name`` (on constraints and manual computations), as Shardy does;
    * ``debug_propagation_edge_sharding`` (``debug-propagation-edge-sharding``): writes
      ``sdy.propagation_edges`` on every op propagated through and function result, as Shardy
      does, numbering steps on from those already in the module.

    ``stats``, when given, receives the counters of the run; ``trace``, when given, the
    records of where each axis came from, which layer took each step and which axes were
    dropped by conflicts (``PropagationTrace``; recorded whether or not the debug options
    write them).

    Raises ``ValueError`` for an unknown pass or strategy; ``ProgramError`` for what Shardy
    rejects (an op result with a dynamic shape or a tuple type; several functions and none
    named ``main``); ``ShardingError`` subclasses for shardings that do not fit their mesh or
    name an unknown one, and ``InvalidShardingError`` (rule ``manual-axis-after-free-axis``)
    where propagation puts a manual axis after a free one in a manual computation's sharding,
    which Shardy's verifier rejects after the pass, and likewise ``ProgramError`` where
    ``debug_propagation_edge_sharding`` names an operand an op lacks (the edge of a data flow
    edge with several sources, a while loop's: Shardy's verifier rejects it); what freezing raises (``OpInfoError`` for
    an op whose rule cannot be built). Nothing is written back when it raises (the open
    constraints of conflicting sharding groups excepted). Warns ``UnknownOpWarning`` for ops
    without a rule and ``ShardingGroupWarning`` for conflicting sharding groups.
    """
    if pass_name not in PASS_NAMES:
        raise ValueError(f"unknown propagation pass {pass_name!r}; expected one of {sorted(PASS_NAMES)}")
    if propagation_strategy not in STRATEGIES:
        raise ValueError(f"unknown propagation strategy {propagation_strategy!r}; expected one of {list(STRATEGIES)}")
    if not in_place:
        module = module.copy()
    _check_types(module)
    counters = PropagationStats()
    forward: list[Value] = []
    record = debug_sharding_origins or debug_propagation_edge_sharding or trace is not None
    debug = {
        "debug_sharding_origins": record and (debug_sharding_origins or trace is not None),
        "debug_propagation_edges": record and (debug_propagation_edge_sharding or trace is not None),
        "debug_first_step": max_step(module) + 1 if record else 0,
        "debug_explain": trace is not None,
    }
    for _attempt in range(2):
        frozen = freeze(module, conservative=conservative)
        # Shardy numbers user shardings before it inserts the constraints of conflicting
        # sharding groups: those are no user shardings.
        skip = [frozen.op_index(v.defining_op) for v in forward if v.defining_op is not None]
        result = _solve(
            module,
            frozen,
            pass_name,
            propagation_strategy,
            conservative,
            run_op_priority,
            forward,
            dict(debug, debug_skip_ops=skip),
        )
        conflicts = result.group_conflicts
        if not conflicts:
            break
        if _attempt:
            raise ProgramError(
                "sharding groups still conflict after adding open sharding constraints"
            )  # pragma: no cover
        counters.inserted += _insert_group_constraints(module, frozen, conflicts, forward)
    _write_back(module, frozen, result, keep_sharding_rules)
    if result.has_debug:
        _save_debug(
            module,
            frozen,
            result,
            debug_sharding_origins,
            debug_propagation_edge_sharding,
            trace,
            int(debug["debug_first_step"]),
        )
    if stats is not None:
        stats.rounds, stats.visits, stats.updates = result.rounds, result.visits, result.updates
        stats.erased, stats.inserted = len(result.erased_ops), counters.inserted
    return module


# ---------------------------------------------------------------------------- checks and facts


def _check_types(module: Module) -> None:
    """Shardy's ``allValidShapes``: every op result is a statically shaped tensor or not a
    shaped type at all, and no tuple."""
    for op in module.walk():
        for r in op.results:
            t = r.type
            if isinstance(t, TensorType):
                bad = DYNAMIC in t.shape  # the only negative size a TensorType allows
            else:
                bad = isinstance(t, OpaqueType) and (t.text.startswith("tuple<") or t.text.startswith("tensor<"))
            if bad:
                what = (
                    "doesn't support tuples"
                    if str(t).startswith("tuple<")
                    else "only supports ranked tensors with a static shape"
                )
                raise ProgramError(f"{op.where()}: result {r.index} has type {t}; Shardy propagation {what}")


def _main_func(module: Module) -> Func | None:
    funcs = module.funcs
    if not funcs:
        return None
    if len(funcs) == 1:
        return funcs[0]
    for f in funcs:
        if f.sym_name == "main":
            return f
    raise ProgramError(
        f"the module has {len(funcs)} functions and none is @main; Shardy propagates the results of @main"
    )


def _unquote(text: str) -> str:
    return _native.mlir_unquote(f'"{text}"')


def _symbols(text: str) -> list[str]:
    """The symbol names ``@name`` / ``@"name"`` referred to in attribute text."""
    return [_unquote(m.group(1)) if m.group(1) is not None else m.group(2) for m in _SYMBOL.finditer(text)]


def _int_attr(op: Op, name: str) -> int:
    text = op.attributes.get(name)
    m = re.match(r"\s*(-?\d+)", text or "")
    if m is None:
        raise ProgramError(f"{op.where()}: expected an integer attribute {name}, got {text!r}")
    return int(m.group(1))


def _direction(op: Op) -> str:
    text = op.attributes.get("allowed_direction", "")
    for name in ("NONE", "FORWARD", "BACKWARD", "BOTH"):
        if re.search(rf"\b{name}\b", text):
            return name
    return _DIRECTIONS.get(_int_attr(op, "allowed_direction"), "NONE")


#: The ops ``_facts`` reads one by one.
_FACT_OPS = (
    "func.call",
    "sdy.manual_computation",
    "sdy.sharding_group",
    "sdy.propagation_barrier",
    "stablehlo.custom_call",
)


def _facts(module: Module, frozen: Frozen, forward: Sequence[Value]) -> dict[str, Any]:
    funcs = {f.sym_name: frozen.op_index(f) for f in module.funcs}
    main = _main_func(module)
    callees: list[tuple[int, int]] = []
    symbol_users: set[int] = set()
    manual_axes: list[tuple[int, list[str]]] = []
    groups: list[tuple[int, int]] = []
    barriers: list[tuple[int, str]] = []
    side_effects: list[int] = []
    offload: list[int] = []
    ops = frozen.ops
    for i in frozen.graph.ops_named(list(_FACT_OPS)):
        op = ops[i]
        name = op.name
        if name == "func.call":
            callee = _symbols(op.attributes.get("callee", ""))
            if callee and callee[0] in funcs:
                callees.append((i, funcs[callee[0]]))
        elif name == "sdy.manual_computation":
            manual_axes.append((i, [_unquote(s) for s in _STRING.findall(op.attributes.get("manual_axes", ""))]))
        elif name == "sdy.sharding_group":
            groups.append((i, _int_attr(op, "group_id")))
        elif name == "sdy.propagation_barrier":
            barriers.append((i, _direction(op)))
        elif name == "stablehlo.custom_call":
            if op.attributes.get("has_side_effect", "false").strip() == "true":
                side_effects.append(i)
            if op.attributes.get("call_target_name", "").strip() in ('"MoveToDevice"', '"MoveToHost"'):
                offload.append(i)
    # Ops that may refer to a function (not functions or calls): those the freezing walk saw
    # with a ``@`` in an attribute.
    for i in frozen.walk.symbol_ops:
        for text in ops[i].attributes.values():
            if "@" in text:
                symbol_users.update(funcs[s] for s in _symbols(text) if s in funcs)
    non_tensor = frozen.walk.non_tensor_values
    return {
        "main_func": None if main is None else frozen.op_index(main),
        "callees": callees,
        "symbol_users": sorted(symbol_users),
        "manual_axes": manual_axes,
        "sharding_groups": groups,
        "barrier_directions": barriers,
        "side_effecting_ops": side_effects,
        "offload_ops": offload,
        "non_tensor_values": non_tensor,
        "forward_use_order_values": [frozen.value_index(v) for v in forward],
    }


def _stored(frozen: Frozen) -> list[Any]:
    """The core (``_native.Sharding``) of the sharding each value stores: ``Value.sharding``, or for the body
    arguments of manual and named computations their in sharding. Reads only the op results
    the freezing walk found with a sharding, and the block arguments."""
    values = frozen.values
    out: list[Any] = [None] * len(values)
    for i in frozen.walk.sharded_results:
        s = values[i].sharding
        out[i] = None if s is None else s._native_sharding()
    for i in frozen.walk.block_args:
        v = values[i]
        s = v.sharding
        owner = _block_owner(v)
        if owner is not None and owner.name in _REGION_ARG_OPS:
            shardings = owner.operand_shardings
            s = shardings[v.index] if shardings is not None and v.index < len(shardings) else None
        out[i] = None if s is None else s._native_sharding()
    return out


def _block_owner(v: Value) -> Op | None:
    block = v.owner
    region = getattr(block, "parent", None)
    return None if region is None else region.parent


@dataclass(frozen=True)
class SolverInputs:
    """What the Rust solver reads of a frozen program besides its graph (``Frozen.graph``), built
    in one place for ``propagate_shardings`` and ``CandidateBatch``: the mesh table (name to
    ``_native.Mesh``), the sharding each value stores (``_native.Sharding``, ``None`` where
    none; by value index), each func's result shardings (func op index, one ``_native.Sharding``
    or ``None`` per result), and the facts of the program (``_native.ProgramFacts``)."""

    meshes: dict[str, _native.Mesh]
    stored: list[_native.Sharding | None]
    func_results: list[tuple[int, list[_native.Sharding | None]]]
    facts: _native.ProgramFacts


def solver_inputs(module: Module, frozen: Frozen, forward: Sequence[Value]) -> SolverInputs:
    """The solver's inputs for ``module`` frozen as ``frozen``; ``forward`` lists the values
    whose uses the solver visits in forward order (Shardy's ``forwardUseOrder``)."""
    func_results = [
        (frozen.op_index(f), [None if s is None else s._native_sharding() for s in f.result_shardings])
        for f in module.funcs
    ]
    return SolverInputs(
        meshes={name: m._core for name, m in module.meshes.items()},
        stored=_stored(frozen),
        func_results=func_results,
        facts=_native.ProgramFacts(**_facts(module, frozen, forward)),
    )


def _solve(
    module: Module,
    frozen: Frozen,
    pass_name: str,
    strategy: str,
    conservative: bool,
    run_op_priority: bool,
    forward: Sequence[Value],
    debug: dict[str, Any],
) -> _native.PropagationResult:
    inputs = solver_inputs(module, frozen, forward)
    options = _native.PropagationOptions(
        pass_name=pass_name, strategy=strategy, conservative=conservative, run_op_priority=run_op_priority, **debug
    )
    return _native.propagate_shardings(
        frozen.graph, inputs.meshes, inputs.stored, inputs.func_results, inputs.facts, options
    )


# ---------------------------------------------------------------------------- sharding groups


def _open_like(s: TensorSharding, mesh: Mesh | None) -> TensorSharding:
    dims = [DimSharding((), closed=False)._native_dim() for _ in s.dims]
    core = s._native_sharding()
    return TensorSharding._from_core(_native.Sharding(core.mesh_name, core.inline_mesh, dims, [], []), mesh)


def _insert_group_constraints(
    module: Module, frozen: Frozen, conflicts: list[_native.GroupConflict], forward: list[Value]
) -> int:
    """Shardy's answer to conflicting sharding groups (``syncGroupMemberShardings``): an open
    sharding constraint right after each member (at the start of the block for a block
    argument), which replaces the member in every other use."""
    meshes = module.meshes
    users: dict[int, list[Op]] = {}
    for op in module.walk():
        for x in op.operands:
            ops = users.setdefault(id(x), [])
            if not ops or ops[-1] is not op:
                ops.append(op)
    inserted = 0
    for conflict in conflicts:
        warnings.warn(
            ShardingGroupWarning(
                f"The initial operand shardings on the sharding groups of groupID: {conflict.group_id} do not match. "
                "Inserting an open sharding constraint to all constrained values. This can be caused when "
                "shardings from different values are grouped (e.g. from jax.shard_alike) but have separate "
                "inconsistent sharding constraints on them."
            ),
            stacklevel=3,
        )
        core = conflict.sharding
        sharding = TensorSharding._from_core(core, meshes.get(core.mesh_name) if core.mesh_name is not None else None)
        open_sharding = _open_like(sharding, sharding.mesh)
        for index in conflict.members:
            member = frozen.values[index]
            constraint = Op("sdy.sharding_constraint", [member], [member.type])
            new = constraint.results[0]
            new.sharding = open_sharding
            if member.is_block_arg:
                block = member.owner
                assert not isinstance(block, Op)
                block.ops.insert(0, constraint)
            else:
                d = member.owner
                assert isinstance(d, Op) and d.parent is not None
                block = d.parent
                block.ops.insert(block.ops.index(d) + 1, constraint)
            constraint.parent = block
            moved = users.get(id(member), [])
            for op in moved:
                op.operands = [new if x is member else x for x in op.operands]
            users[id(new)] = moved
            users[id(member)] = [constraint]
            forward.append(new)
            inserted += 1
    return inserted


# ---------------------------------------------------------------------------- debugging records


def _save_debug(
    module: Module,
    frozen: Frozen,
    result: _native.PropagationResult,
    origins: bool,
    edges: bool,
    trace: PropagationTrace | None,
    first_step: int,
) -> None:
    """Writes the solver's records as Shardy's ``saveOnModule`` does (for the options that are
    set) and fills ``trace``. Runs after the write back, on the module as propagation left it."""
    info = DebugInfo(origins, edges, Uses(module))
    info.load_solver_records(result, frozen.values, frozen.ops)
    if trace is not None:
        trace.origins = {v: dict(axes) for v, axes in info.value_origins.values()}
        trace.edges = {op: {a: list(e) for a, e in axes.items()} for op, axes in info.op_edges.values()}
        trace.func_result_edges = {
            f: [{a: list(e) for a, e in axes.items()} for axes in per] for f, per in info.func_result_edges.values()
        }
        trace.origin_names = {frozen.ops[i]: name for i, name in result.debug_origin_names}
        trace.missing_origins = [(frozen.values[v], AxisRef._from_core(a)) for v, a in result.debug_missing_origins]
        trace.first_step, trace.next_step = first_step, info.step
        trace.steps = load_steps(result, frozen.ops)
        trace.hops = load_hops(result, frozen.values, frozen.ops, trace.steps)
        trace.conflicts = load_conflicts(result, frozen.values, frozen.ops)
    missing = result.debug_missing_origins
    if origins and missing:
        names = ", ".join(sorted({str(a) for _, a in missing}))
        warnings.warn(
            ShardingOriginWarning(
                f"debug-sharding-origins: {len(missing)} propagated axes ({names}) came from shardings that are no user "
                "sharding (set on an op result, or given to a sharding group member) and have no origin; none is "
                "written for them (Shardy's behaviour is undefined there)"
            ),
            stacklevel=4,
        )
    info.save(module)  # writes only what ``origins`` / ``edges`` ask for
    if edges:
        info.check_edges()


# ---------------------------------------------------------------------------- write back


def _write_back(module: Module, frozen: Frozen, result: _native.PropagationResult, keep_rules: bool) -> None:
    meshes = module.meshes

    def build(core: _native.Sharding) -> TensorSharding:
        return TensorSharding._from_core(core, meshes.get(core.mesh_name) if core.mesh_name is not None else None)

    # Programs repeat few shardings (a dozen over a 22k-op transformer step): the solver gives
    # each distinct one once, with each value's index among them (-1: none), so each is
    # built once; it sets op results' shardings itself (keeping an old object that equals
    # the new one) and leaves block arguments to the loop below.
    table, index = result.sharding_table
    built: list[TensorSharding | None] = [build(w) for w in table]
    block_args = result.write_result_shardings(frozen.graph, frozen.values, built)
    built.append(None)  # index -1
    region_args: dict[int, tuple[Op, list[TensorSharding | None]]] = {}
    for vi in block_args:
        v, i = frozen.values[vi], index[vi]
        owner = _block_owner(v)
        if owner is None:
            continue
        if owner.name in _REGION_ARG_OPS:
            region_args.setdefault(id(owner), (owner, [None] * len(owner.regions[0].entry.args)))[1][v.index] = built[i]
            continue
        if owner.name != "func.func":
            continue
        new, old = built[i], v.sharding
        if old is not new and (old is None or new is None or old != new):
            v.sharding = new
    for op, shardings in region_args.values():
        op.operand_shardings = (
            None if any(s is None for s in shardings) else tuple(s for s in shardings if s is not None)
        )
    # Function results (a training step returns hundreds) repeat few shardings too: each
    # is built once, keyed by the core's sharding (hashed and compared in Rust).
    by_core: dict[_native.Sharding, TensorSharding] = {}
    for f_index, cores in result.func_results:
        f = frozen.ops[f_index]
        assert isinstance(f, Func)
        results: list[TensorSharding | None] = []
        for core in cores:
            if core is None:
                results.append(None)
                continue
            s = by_core.get(core)
            if s is None:
                s = by_core[core] = build(core)
            results.append(s)
        f.result_shardings = results
    erased = {id(frozen.ops[i]) for i in result.erased_ops}
    blocks = {
        id(frozen.ops[i].parent): frozen.ops[i].parent for i in result.erased_ops if frozen.ops[i].parent is not None
    }
    for block in blocks.values():
        if block is not None:
            block.ops = [op for op in block.ops if id(op) not in erased]
    if keep_rules:
        # Each op propagated through keeps its rule; each distinct rule printed once.
        op_rule, ops = frozen.op_rule, frozen.ops
        texts: dict[int, str | None] = {}
        for i in result.rule_ops:
            attributes = ops[i].attributes
            if "sdy.sharding_rule" in attributes:
                continue
            key = op_rule[i] if i < len(op_rule) else -1 - i
            if key not in texts:
                texts[key] = frozen.graph.rule(i)
            text = texts[key]
            if text is not None:
                attributes["sdy.sharding_rule"] = text
        return
    for op in frozen.ops:
        existing = op.attributes.get("sdy.sharding_rule")
        if existing is not None and not _is_custom_rule(existing):
            del op.attributes["sdy.sharding_rule"]


def _is_custom_rule(text: str) -> bool:
    try:
        return bool(OpShardingRule.parse(text).is_custom)
    except ValueError:
        return False
