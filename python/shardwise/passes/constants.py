"""Constant passes: ``sdy-constant-or-scalar-splitter`` (Shardy's
``transforms/import/constant_or_scalar_splitter.cc``) and ``sdy-constant-or-scalar-merger``
(``transforms/export/constant_or_scalar_merger.cc``), with the op properties they use
(``transforms/common/op_properties.cc``: element-wise ops, pure ops)."""

from __future__ import annotations

from shardwise.ir.attrs import quote
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import DeferredInserts, Mapping, SymbolTable, Uses, clone_func, clone_op, enclosing, erase_ops
from shardwise.ir.sdy import (
    CALL,
    NAMED_COMPUTATION,
    ORIGINAL_FUNC_NAME,
    SHARDING_GROUP,
    TERMINATORS,
    call_graph_rpo,
    callee_name,
    is_scalar,
    original_func_name,
    post_order,
    set_callee,
)
from shardwise.ir.types import DYNAMIC, TensorType
from shardwise.passes.registry import Options, register_pass

__all__ = ["ELEMENTWISE_OPS", "constant_or_scalar_splitter", "is_elementwise", "is_pure"]

#: StableHLO ops with MLIR's ``Elementwise`` or StableHLO's ``BroadcastingElementwise`` trait.
ELEMENTWISE_OPS = frozenset(
    "stablehlo." + n
    for n in [
        "abs",
        "cbrt",
        "ceil",
        "convert",
        "count_leading_zeros",
        "cosine",
        "exponential",
        "exponential_minus_one",
        "floor",
        "imag",
        "is_finite",
        "log",
        "log_plus_one",
        "logistic",
        "not",
        "negate",
        "popcnt",
        "real",
        "round_nearest_afz",
        "round_nearest_even",
        "rsqrt",
        "sign",
        "sine",
        "sqrt",
        "tan",
        "tanh",
        "add",
        "atan2",
        "complex",
        "divide",
        "maximum",
        "minimum",
        "multiply",
        "power",
        "remainder",
        "shift_left",
        "shift_right_arithmetic",
        "shift_right_logical",
        "subtract",
        "and",
        "or",
        "xor",
        "compare",
        "uniform_quantize",
        "uniform_dequantize",
        "reduce_precision",
        "clamp",
        "select",
    ]
)

#: Ops without memory effects that are speculatable when their shapes are static.
_NO_MEMORY_EFFECT_OPS = (
    ELEMENTWISE_OPS
    | frozenset(
        "stablehlo." + n
        for n in [
            "constant",
            "iota",
            "create_token",
            "replica_id",
            "partition_id",
            "after_all",
            "get_tuple_element",
            "tuple",
            "dynamic_slice",
            "dynamic_update_slice",
            "broadcast",
            "cross-replica-sum",
            "dot",
            "einsum",
            "unary_einsum",
            "get_dimension_size",
            "torch_index_select",
            "optimization_barrier",
            "batch_norm_grad",
            "batch_norm_inference",
            "batch_norm_training",
            "bitcast_convert",
            "broadcast_in_dim",
            "cholesky",
            "concatenate",
            "convolution",
            "dot_general",
            "fft",
            "gather",
            "reshape",
            "pad",
            "reverse",
            "slice",
            "transpose",
            "triangular_solve",
            "rng_bit_generator",
            "set_dimension_size",
        ]
    )
    | frozenset(
        {"sdy.constant", "sdy.reshard", "sdy.propagation_barrier", "sdy.return", "stablehlo.return", "func.return"}
    )
)


#: Ops that can be constant-preserving (``_Splitter.constant_preserving``): pure ops that are
#: element-wise (``is_elementwise``: ``bitcast_convert`` only when it keeps the shape), a
#: broadcast, a reshape or a slice. Others are not, whatever their types.
_PRESERVING_CANDIDATES = _NO_MEMORY_EFFECT_OPS & (
    ELEMENTWISE_OPS
    | {"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.slice", "stablehlo.bitcast_convert"}
    | {"sdy.propagation_barrier", "sdy.sharding_constraint", "sdy.reshard"}
)


def is_pure(op: Op) -> bool:
    """MLIR's ``isPure`` for the ops Shardy's passes ask about: no memory effects and
    speculatable (static shapes)."""
    if op.name not in _NO_MEMORY_EFFECT_OPS:
        return False
    for values in (op.operands, op.results):
        for v in values:
            t = v.type
            if isinstance(t, TensorType) and DYNAMIC in t.shape:
                return False
    return True


def is_elementwise(op: Op) -> bool:
    """Shardy's ``isElementwise``: element-wise StableHLO ops, a ``bitcast_convert`` that keeps
    the shape, and ``sdy.propagation_barrier`` / ``sdy.sharding_constraint`` / ``sdy.reshard``."""
    if op.name in ELEMENTWISE_OPS:
        return True
    if op.name == "stablehlo.bitcast_convert":
        return op.operands[0].type.shape == op.results[0].type.shape
    return op.name in ("sdy.propagation_barrier", "sdy.sharding_constraint", "sdy.reshard")


# ---------------------------------------------------------------------------------- splitter


class _Splitter:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.symbols = SymbolTable(module)
        self.non_const_named: set[str] = set()
        self.non_const_funcs: set[str] = set()
        self.uses = Uses(module)
        self.inserts = DeferredInserts()

    def _named(self, op: Op) -> str:
        return op.attributes.get("name", "")

    def constant_preserving(self, op: Op) -> bool:
        if op.name == CALL:
            return self._callee_original_name(op) not in self.non_const_funcs
        if op.name == NAMED_COMPUTATION:
            return self._named(op) not in self.non_const_named
        if op.name not in _PRESERVING_CANDIDATES or not is_pure(op):
            return False
        if op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.slice"):
            return True
        return is_elementwise(op)

    def _callee_original_name(self, call: Op) -> str:
        return original_func_name(self.symbols.lookup_func(callee_name(call)))

    def clone_sub_computation(self, result: Value) -> Value:
        if is_scalar(result):
            return result
        mapping = Mapping()
        self._clone(result, mapping)
        return mapping.lookup(result)

    def _clone(self, result: Value, mapping: Mapping) -> None:
        if is_scalar(result) or result in mapping:
            return
        op = result.defining_op
        assert op is not None
        for v in op.operands:
            if v.defining_op is not None:
                self._clone(v, mapping)
        new = clone_op(op, mapping)
        self.inserts.before(op, new)
        self.uses.add(new)
        if new.name == CALL:
            callee = self.symbols.lookup_func(callee_name(new))
            set_callee(new, self.symbols.insert(self._clone_func_recursively(callee)))
        for user in self.uses.users(result):
            if user.name == SHARDING_GROUP:
                group = clone_op(user, mapping)
                self.inserts.before(op, group)
                self.uses.add(group)

    def _clone_func_recursively(self, func: Func) -> Func:
        new = clone_func(func, func.sym_name)
        new.attributes[ORIGINAL_FUNC_NAME] = quote(original_func_name(func))
        calls = [o for o in post_order(new) if o.name == CALL]
        for call in calls:
            callee = self.symbols.lookup_func(callee_name(call))
            set_callee(call, self.symbols.insert(self._clone_func_recursively(callee)))
        return new

    def process(
        self,
        op: Op,
        func_name: str,
        constants: dict[int, Op],
        expansions: dict[int, Op],
        named_of: dict[int, Op | None],
    ) -> None:
        """One op of the walk (``func_name``: the original name of the function walked;
        ``named_of``: the enclosing named computation of each block met so far, by id)."""
        if isinstance(op, Func) or op.name == SHARDING_GROUP:
            return
        if op.name in ("sdy.constant", "stablehlo.iota"):
            constants[id(op)] = op
            return
        # A constant expression (constant-preserving, every operand a constant one), else a
        # non-constant op; ``constant_preserving`` asked once.
        # (A value's owner is its defining op or, for a block argument, a block: never a key.)
        preserving = self.constant_preserving(op)
        if preserving and all(id(v.owner) in constants for v in op.operands):
            constants[id(op)] = op
            return
        if not preserving and op.name not in TERMINATORS:
            block = op.parent
            if id(block) in named_of:
                named = named_of[id(block)]
            else:
                named = named_of[id(block)] = enclosing(op, NAMED_COMPUTATION)
            if named is not None:
                self.non_const_named.add(self._named(named))
            self.non_const_funcs.add(func_name)
        if op.name == "stablehlo.broadcast_in_dim" and is_scalar(op.operands[0]):
            expansions[id(op)] = op
            return
        for i, v in enumerate(op.operands):
            d = id(v.owner)
            if d in constants or d in expansions:
                self.uses.set_operand(op, i, self.clone_sub_computation(v))

    def walk_region(self, ops: list[Op], func: Func) -> None:
        constants: dict[int, Op] = {}
        expansions: dict[int, Op] = {}
        named_of: dict[int, Op | None] = {}
        func_name = original_func_name(func)

        def walk(block_ops: list[Op]) -> None:
            for op in list(block_ops):
                self.process(op, func_name, constants, expansions, named_of)
                if op.name == NAMED_COMPUTATION:
                    continue
                for r in op.regions:
                    for b in r.blocks:
                        walk(b.ops)  # noqa: F821 (a recursive closure, deleted after use)

        walk(ops)
        # A recursive closure refers to itself (and here to the splitter and its use lists):
        # without this, the cycle waits for the cyclic collector.
        del walk
        self.inserts.flush()
        erased: list[Op] = []
        seen: set[int] = set()
        for op in [*expansions.values(), *reversed(list(constants.values()))]:
            users = (
                self.uses.users(op.results[0])
                if len(op.results) == 1
                else [u for r in op.results for u in self.uses.users(r)]
            )
            if not all(u.name == SHARDING_GROUP for u in users):
                continue
            for u in users:
                if u.parent is not None and id(u) not in seen:
                    seen.add(id(u))
                    erased.append(u)
                    self.uses.drop(u)
            erased.append(op)
            self.uses.drop(op)
        erase_ops(erased, release=True)

    def run(self) -> None:
        for op in list(self.module.walk()):
            if op.name == "stablehlo.constant":
                op.name = "sdy.constant"
        for func in reversed(call_graph_rpo(self.module, self.symbols)):
            for named in [o for o in post_order(func) if o.name == NAMED_COMPUTATION]:
                self.walk_region(named.regions[0].entry.ops, func)
            self.walk_region(func.body.ops, func)


@register_pass("sdy-constant-or-scalar-splitter", adds=frozenset({"sdy.constant"}))
def constant_or_scalar_splitter(module: Module, options: Options | None = None) -> None:
    """Turns every ``stablehlo.constant`` into ``sdy.constant`` and gives each non-constant
    user of a constant sub-computation (constants, iotas, and broadcasts, reshapes, slices,
    element-wise ops, named computations and calls of constant-preserving functions applied to
    them) or of a broadcast of a scalar its own copy, then removes the originals; called
    functions are cloned (``sdy.original_func_name`` records the original). Mirrors Shardy's
    ``constant_or_scalar_splitter.cc``."""
    _Splitter(module).run()
