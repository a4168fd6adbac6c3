"""``sdy-apply-sharding-constraints`` on the Python IR (Shardy's
``transforms/import/apply_sharding_constraints.cc``), for what the native pass does not do yet:
the propagation debugging records (``debug-sharding-origins``,
``debug-propagation-edge-sharding``). Otherwise the pass runs natively
(``shardwise.passes.native``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from shardwise.ir.core import Module, Op, Value
from shardwise.ir.rewrite import Uses, insert_after_value, move_after, move_before
from shardwise.ir.sdy import (
    DATA_FLOW_EDGE,
    MANUAL_COMPUTATION,
    RETURN,
    SHARDING_CONSTRAINT,
    SHARDING_RULE,
    fully_replicated,
    get_sharding,
    lookup_data_flow_edge,
    mesh_ref,
    post_order,
    set_sharding,
    shardable_value,
    with_parts,
)
from shardwise.passes.registry import Options, register_pass
from shardwise.propagation.debug import DebugInfo
from shardwise.sharding import TensorSharding

if TYPE_CHECKING:
    from shardwise.rules.from_ir import RuleCache

__all__ = ["apply_sharding_constraints"]


class _Constraints:
    def __init__(self, module: Module, origins: bool = False, edges: bool = False) -> None:
        self.module = module
        self.uses = Uses(module)
        self._rules: RuleCache | None = None
        self.debug = DebugInfo(origins, edges, self.uses)

    def rule_text(self, op: Op) -> str | None:
        from shardwise.rules.from_ir import RuleCache

        if self._rules is None:
            self._rules = RuleCache(self.module)
        rule = self._rules.rule(op)
        return None if rule is None else str(rule)

    def used_by_constraint_with_different_sharding(self, value: Value, sharding: TensorSharding) -> bool:
        for user, index in self.uses.of(value):
            if user.name == SHARDING_CONSTRAINT and user.results[0].sharding != sharding:
                return True
            if (
                user.name == MANUAL_COMPUTATION
                and user.operand_shardings is not None
                and user.operand_shardings[index] != sharding
            ):
                return True
        return False

    def used_by_constraint(self, value: Value, excluded: Op | None = None) -> bool:
        return any(
            u is not excluded and u.name in (SHARDING_CONSTRAINT, MANUAL_COMPUTATION) for u in self.uses.users(value)
        )

    def should_apply(self, value: Value, sharding: TensorSharding) -> bool:
        if shardable_value(value, self.uses) is None:
            return False
        if get_sharding(value, self.uses) is not None:
            return False
        if not all(d.closed for d in sharding.dims):
            return False
        return not self.used_by_constraint_with_different_sharding(value, sharding)

    def apply(self, op: Op, value: Value, sharding: TensorSharding, constraint_after_value: Callable[[], Op]) -> None:
        if not self.should_apply(value, sharding):
            return
        defining = value.defining_op
        if (defining is not None and defining.name == DATA_FLOW_EDGE) or lookup_data_flow_edge(
            value, self.uses
        ) is not None:
            constraint = constraint_after_value()
            self.uses.replace_all_uses(value, constraint.results[0], except_ops=[constraint])
            if sharding.unreduced:
                current = get_sharding(value, self.uses)
                if current is None:
                    current = fully_replicated(mesh_ref(sharding), sharding.rank, False)
                set_sharding(value, with_parts(current, unreduced=sharding.unreduced), self.uses)
            return
        rule = op.attributes.get(SHARDING_RULE)
        if rule is None:
            rule = self.rule_text(op)
            if rule is not None:
                op.attributes[SHARDING_RULE] = rule
        set_sharding(value, sharding, self.uses)
        if self.debug.active and rule is not None and sharding.rank > 0:
            self.debug.record_constraint(op)

    def chain_tail(self, head: Op) -> Op | None:
        inp = head.operands[0]
        if inp.defining_op is not None and inp.defining_op.name == SHARDING_CONSTRAINT:
            return None
        if get_sharding(inp, self.uses) is not None:
            return None
        if self.used_by_constraint(inp, head):
            return None
        tail = head
        while True:
            users = self.uses.users(tail.results[0])
            if len(users) == 1 and users[0].name == SHARDING_CONSTRAINT:
                tail = users[0]
            else:
                break
        if tail is head:
            return None
        if self.used_by_constraint(tail.results[0]):
            return None
        return tail

    def run(self) -> None:
        if self.debug.active:
            self.debug.prepare(self.module)
        for top in list(self.module.ops):
            for op in post_order(top):
                if op.name == SHARDING_CONSTRAINT:
                    self.constraint(op)
                elif op.name == MANUAL_COMPUTATION:
                    self.manual(op)
        if self.debug.active:
            self.debug.save(self.module)

    def constraint(self, op: Op) -> None:
        tail = self.chain_tail(op)
        if tail is not None:
            t = tail

            def pred(user: Op, index: int) -> bool:
                return user is not op and user.name != RETURN and user.parent is t.parent and _before(t, user)

            self.uses.replace_uses_if(op.operands[0], tail.results[0], pred)
        value = op.operands[0]
        sharding = op.results[0].sharding
        assert sharding is not None

        def after() -> Op:
            _move_after_value(op, value)
            return op

        self.apply(op, value, sharding, after)

    def manual(self, op: Op) -> None:
        if op.operand_shardings is None:
            return
        for value, sharding in zip(list(op.operands), op.operand_shardings):

            def after(value: Value = value, sharding: TensorSharding = sharding) -> Op:
                c = Op(SHARDING_CONSTRAINT, [value], [value.type], location=op.location)
                c.results[0].sharding = sharding
                insert_after_value(value, c)
                self.uses.add(c)
                return c

            self.apply(op, value, sharding, after)


def _before(a: Op, b: Op) -> bool:
    block = a.parent
    assert block is not None
    ia = ib = -1
    for i, o in enumerate(block.ops):
        if o is a:
            ia = i
        if o is b:
            ib = i
    return ia < ib


def _move_after_value(op: Op, value: Value) -> None:
    d = value.defining_op
    if d is not None:
        move_after(op, d)
    else:
        block = value.owner
        assert not isinstance(block, Op)
        if block.ops and block.ops[0] is not op:
            move_before(op, block.ops[0])


@register_pass(
    "sdy-apply-sharding-constraints",
    options={"debug-sharding-origins": False, "debug-propagation-edge-sharding": False},
    acts_on=frozenset({SHARDING_CONSTRAINT, MANUAL_COMPUTATION}),
    acts_always_with=("debug-sharding-origins", "debug-propagation-edge-sharding"),
    native=True,
)
def apply_sharding_constraints(module: Module, options: Options | None = None) -> None:
    """Gives the input of each ``sdy.sharding_constraint`` (and each operand of a manual
    computation) the constraint's sharding when the input has none, the sharding is fully
    closed and no other constraint on it disagrees; an input that is a data flow edge target
    instead has all its uses go through the constraint (moved right after it). A chain of
    constraints also takes over the later uses of the chain's input in its block. Mirrors
    Shardy's ``apply_sharding_constraints.cc``; ``debug-sharding-origins`` and
    ``debug-propagation-edge-sharding`` record where each axis came from
    (``sdy.sharding_origins``, ``sdy.sharding_origin_name``) and the edges that moved it
    (``sdy.propagation_edges``), as Shardy's ``SourceShardingHandler`` does."""
    opts = options or {}
    origins, edges = (
        bool(opts.get("debug-sharding-origins", False)),
        bool(opts.get("debug-propagation-edge-sharding", False)),
    )
    if (
        not origins
        and not edges
        and not any(op.name in (SHARDING_CONSTRAINT, MANUAL_COMPUTATION) for op in module.walk())
    ):
        return  # nothing to apply and nothing to record
    _Constraints(module, origins, edges).run()


# ---------------------------------------------------------------------------------- sharding groups
