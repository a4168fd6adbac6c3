"""Per-operator sharding strategies, as MindSpore's ``op.shard(((2, 1), (1, 4)))`` (MindSpore r1.7
design note "Sharding Propagation", ``shared/references/mindspore-sharding-propagation.md``:
"Sharding Strategy" and "Configuring the Sharding Propagation").

An :class:`OpStrategy` says how an op's operands are split, in one of two forms:

* **MindSpore**: per operand a tuple of how many ways each of its dimensions is split, e.g.
  ``((2, 4), (4, 1))`` for a MatMul on a ``data=2, model=4`` mesh (rows of X by 2, the
  contracting dimension of X and W by 4). The text is Python's tuple syntax; MindSpore's
  printed shorthands are read as MindSpore means them: ``((2, 4))`` (all numbers: one operand)
  and ``((2, 4), (4))`` (a bare number among tuples: a 1-D operand).
* **Shardy**: per operand the mesh axes of each dimension (major to minor), e.g.
  ``[[["data"], ["model"]], [["model"], []]]``. Its text writes each dimension as a Shardy
  dimension sharding and each operand as a bracketed list of them, operands separated by
  commas (outer brackets optional): ``[{"data"}, {"model"}], [{"model"}, {}]``. Only closed
  dimensions of full axes are accepted (no ``?``, no sub-axes).

:func:`configure` records a strategy on an op as the string attribute ``shardwise.strategy``
(the strategy's text), so it survives ``Module.copy``, ``save`` and ``load_mlir``;
``auto_shard`` reads it (:func:`select_strategy`), gives the op's node exactly that strategy,
and the module it returns no longer carries the attribute.

Matching (:func:`select_strategy`): the op's valid strategies are those of its factor rule
(``enumerate_strategies`` with a cap of :data:`MATCH_CAP`; an op without a rule has only the
replicated one). A Shardy-form strategy matches the one whose operand shardings have exactly
its axes. A MindSpore-form strategy matches those whose operand split counts (per dimension the
product of its axes' sizes) equal its numbers; when several do, the numbers are mapped onto the
mesh axes in order, major to minor: the one whose axes, read along the operands' dimensions in
order, come in mesh order is taken; when that still leaves strategies with different operand
shardings, the strategy is ambiguous (an error listing them: write it in the Shardy form).
Strategies with the same operand shardings (an all-reduce and its reduce-scatter variants)
are one choice: the first in ``enumerate_strategies``' order (the all-reduce) is taken.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Union

from shardwise.errors import SearchError, ShardwiseError
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.core import Func, Module, Op
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.rules.rule import OpShardingRule
from shardwise.search.strategies import Strategy, enumerate_strategies, replicated
from shardwise.sharding import TensorSharding

__all__ = [
    "MATCH_CAP",
    "STRATEGY_ATTR",
    "OpStrategy",
    "configure",
    "configure_spec",
    "configured",
    "mindspore_splits",
    "select_strategy",
]

#: The op attribute that holds a configured strategy's text (an MLIR string).
STRATEGY_ATTR = "shardwise.strategy"
#: Cap on the valid strategies enumerated to match a configured one.
MATCH_CAP = 1 << 16
#: How many valid choices an error lists before giving only their count.
_SHOWN = 12

Splits = tuple[tuple[int, ...], ...]
Axes = tuple[tuple[tuple[str, ...], ...], ...]
StrategyLike = Union["OpStrategy", str, Sequence[object]]


@dataclass(frozen=True)
class OpStrategy:
    """How each operand of an op is split: ``splits`` (MindSpore form: per operand per
    dimension the number of ways) or ``axes`` (Shardy form: per operand per dimension the mesh
    axis names, major to minor); exactly one of the two is set. Build with :meth:`of`,
    :meth:`parse`, :meth:`mindspore` or :meth:`shardy`; ``str()`` is its text (module
    docstring), which :meth:`parse` reads back. Raises :class:`SearchError` for a malformed
    one (a count below 1, an empty axis name, both or neither form)."""

    splits: Splits | None = None
    axes: Axes | None = None

    def __post_init__(self) -> None:
        if (self.splits is None) == (self.axes is None):
            raise SearchError("OpStrategy: expected exactly one of splits (MindSpore form) and axes (Shardy form)")
        if self.splits is not None:
            for op in self.splits:
                for n in op:
                    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                        raise SearchError(
                            f"strategy {_splits_text(self.splits)}: expected split counts >= 1, got {n!r}"
                        )
        if self.axes is not None:
            for op_ in self.axes:
                for dim in op_:
                    for a in dim:
                        if not isinstance(a, str) or not a:
                            raise SearchError(f"strategy {_axes_text(self.axes)}: expected mesh axis names, got {a!r}")

    @staticmethod
    def mindspore(splits: Sequence[Sequence[int] | int]) -> OpStrategy:
        """The MindSpore form from nested sequences of ints (a bare int: a 1-D operand)."""
        return OpStrategy(splits=tuple((s,) if isinstance(s, int) else tuple(s) for s in splits))

    @staticmethod
    def shardy(axes: Sequence[Sequence[Sequence[str]]]) -> OpStrategy:
        """The Shardy form from per operand, per dimension, lists of axis names."""
        return OpStrategy(axes=tuple(tuple(tuple(dim) for dim in op) for op in axes))

    @staticmethod
    def parse(text: str) -> OpStrategy:
        """Reads either text form (module docstring): one starting with ``(`` is MindSpore's,
        anything else Shardy's. Raises :class:`SearchError` naming the text otherwise."""
        t = text.strip()
        if t.startswith("("):
            try:
                val = ast.literal_eval(t)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise SearchError(
                    f"strategy {text!r}: expected MindSpore's nested tuple of split counts like ((2, 4), (4, 1))"
                ) from None
            return OpStrategy.of(val if isinstance(val, tuple) else (val,))
        if "?" in t or ":" in t:
            raise SearchError(
                f"strategy {text!r}: only closed dimensions of full mesh axes are accepted (no '?', no sub-axes)"
            )

        def dim(m: re.Match[str]) -> str:
            inner = m.group(1).strip()
            return f"({inner},)" if inner else "()"

        try:
            val = ast.literal_eval(re.sub(r"\{([^{}]*)\}", dim, t))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            val = None
        ops: object
        if isinstance(val, tuple) and all(isinstance(o, list) for o in val):
            ops = list(val)  # operands separated by commas at the top
        elif isinstance(val, list) and all(isinstance(d, tuple) for d in val):
            ops = [val]  # one operand
        elif isinstance(val, list) and all(isinstance(o, list) for o in val):
            ops = val  # operands in outer brackets
        else:
            ops = None
        if not isinstance(ops, list) or not all(
            isinstance(d, tuple) and all(isinstance(a, str) for a in d) for o in ops for d in o
        ):
            raise SearchError(
                f'strategy {text!r}: expected MindSpore\'s ((2, 4), (4, 1)) or Shardy\'s [{{"data"}}, {{"model"}}], [{{"model"}}, {{}}]'
            )
        return OpStrategy.shardy(ops)

    @staticmethod
    def of(value: StrategyLike) -> OpStrategy:
        """An :class:`OpStrategy` from itself, its text (:meth:`parse`), nested sequences of ints
        (MindSpore form; all ints: one operand) or of lists of axis names (Shardy form). Raises
        :class:`SearchError` naming the value for anything else."""
        if isinstance(value, OpStrategy):
            return value
        if isinstance(value, str):
            return OpStrategy.parse(value)
        if isinstance(value, Sequence):
            items = list(value)
            if items and all(_is_int(n) for n in items):
                return OpStrategy.mindspore([tuple(items)])  # type: ignore[arg-type]
            if all(
                _is_int(n) or (isinstance(n, Sequence) and not isinstance(n, str) and all(_is_int(k) for k in n))
                for n in items
            ):
                return OpStrategy.mindspore(items)  # type: ignore[arg-type]
            if all(
                isinstance(o, Sequence) and not isinstance(o, str)
                and all(isinstance(d, Sequence) and not isinstance(d, str) and all(isinstance(a, str) for a in d) for d in o)
                for o in items
            ):  # fmt: skip
                return OpStrategy.shardy(items)  # type: ignore[arg-type]
        raise SearchError(
            f"strategy {value!r}: expected MindSpore's nested tuple of split counts like ((2, 4), (4, 1)), Shardy's per-operand "
            f"lists of axis names per dimension like [[['data'], ['model']], [['model'], []]], their text or an OpStrategy"
        )

    @property
    def ranks(self) -> tuple[int, ...]:
        """The number of dimensions given for each operand."""
        ops: Sequence[Sequence[object]] = self.splits if self.splits is not None else self.axes or ()
        return tuple(len(o) for o in ops)

    def matches(self, strategy: Strategy, mesh: Mesh) -> bool:
        """Whether ``strategy``'s operand shardings are this (split counts or axes)."""
        if len(strategy.operands) != len(self.ranks):
            return False
        if self.splits is not None:
            return mindspore_splits(strategy.operands, mesh) == self.splits
        return tuple(tuple(tuple(a.name for a in d.axes) for d in s.dims) for s in strategy.operands) == self.axes

    def __str__(self) -> str:
        return _splits_text(self.splits) if self.splits is not None else _axes_text(self.axes or ())


def _is_int(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool)


def _splits_text(splits: Splits) -> str:
    return str(tuple(tuple(o) for o in splits))


def _axes_text(axes: Axes) -> str:
    return ", ".join("[" + ", ".join("{" + ", ".join(f'"{a}"' for a in d) + "}" for d in op) + "]" for op in axes)


def mindspore_splits(shardings: Sequence[TensorSharding], mesh: Mesh) -> Splits:
    """MindSpore's strategy of ``shardings``: per tensor per dimension the product of the sizes
    of its axes (sub-axes by their own size)."""
    out = []
    for s in shardings:
        dims = []
        for d in s.dims:
            n = 1
            for a in d.axes:
                n *= a.size if a.size is not None else mesh.axis_size(a.name)
            dims.append(n)
        out.append(tuple(dims))
    return tuple(out)


def _top_level(op: Op) -> bool:
    block = op.parent
    region = block.parent if block is not None else None
    return region is not None and isinstance(region.parent, Func)


def configure(op: Op, strategy: StrategyLike) -> OpStrategy:
    """Records ``strategy`` (an :class:`OpStrategy`, a nested tuple such as ``((2, 1), (1, 4))``,
    Shardy-form lists or either text) on ``op`` (an op at the top level of a function of a
    loaded or built module) as its ``shardwise.strategy`` attribute, which ``auto_shard`` then
    follows (MindSpore's ``op.shard``; matched to the op's valid strategies there, on the mesh
    of the search). Returns the strategy. Raises :class:`SearchError` naming the op for a
    malformed strategy, an operand count or rank that differs from the op's, or an op that is
    a function, a terminator or nested in another op's region."""
    if isinstance(op, Func) or not isinstance(op, Op):
        raise SearchError(f"configure: expected an op of a function body, got {op!r}")
    where = op.where()
    if not _top_level(op):
        raise SearchError(
            f"configure {where}: only ops at the top level of a function are searched; this one is nested in a region or detached"
        )
    if op.name == "func.return" or not op.results:
        raise SearchError(f"configure {where}: the op has no results to shard")
    try:
        s = OpStrategy.of(strategy)
    except SearchError as e:
        raise SearchError(f"configure {where}: {e}") from None
    ranks = tuple(len(v.type.shape) if isinstance(v.type, TensorType) else 0 for v in op.operands)
    if len(s.ranks) != len(ranks):
        raise SearchError(
            f"configure {where}: strategy {s} gives {len(s.ranks)} operands, the op has {len(ranks)} (ranks {list(ranks)})"
        )
    for k, (got, want) in enumerate(zip(s.ranks, ranks)):
        if got != want:
            raise SearchError(
                f"configure {where}: strategy {s} gives operand {k} {got} dimensions, it has {want} (ranks {list(ranks)})"
            )
    op.attributes[STRATEGY_ATTR] = quote(str(s))
    return s


def configured(op: Op) -> OpStrategy | None:
    """The strategy :func:`configure` recorded on ``op``, or ``None``. Raises
    :class:`SearchError` naming the op for an attribute that is not a strategy's text."""
    text = op.attributes.get(STRATEGY_ATTR)
    if text is None:
        return None
    try:
        return OpStrategy.parse(unquote(text))
    # ShardingParseError from unquote, SearchError from parse
    except ShardwiseError as e:
        raise SearchError(f"{STRATEGY_ATTR} of {op.where()}: {e}") from None


def _axis_order(s: Strategy, order: Mapping[str, int]) -> list[int]:
    seen: list[int] = []
    for sh in s.operands:
        for d in sh.dims:
            for a in d.axes:
                i = order.get(a.name, len(order))
                if i not in seen:
                    seen.append(i)
    return seen


def _choices(valid: Sequence[Strategy], mesh: Mesh, form: str) -> str:
    if form == "splits":
        texts = list(dict.fromkeys(_splits_text(mindspore_splits(s.operands, mesh)) for s in valid))
    else:
        texts = list(
            dict.fromkeys(
                _axes_text(tuple(tuple(tuple(a.name for a in d.axes) for d in o.dims) for o in s.operands))
                for s in valid
            )
        )
    shown = "; ".join(texts[:_SHOWN])
    more = f"; ... ({len(texts)} in all)" if len(texts) > _SHOWN else ""
    return shown + more


def select_strategy(
    op: Op,
    rule: OpShardingRule | None,
    mesh: Mesh,
    mesh_name: str,
    strategy: OpStrategy | None = None,
) -> Strategy:
    """The valid strategy of ``op`` on ``mesh`` that its configured strategy (``strategy``, by
    default the op's ``shardwise.strategy`` attribute) names (module docstring). Raises
    :class:`SearchError` (one line naming the op, the strategy and the valid choices or their
    count) when none matches, the operand count or a rank differs, or a MindSpore-form strategy
    is ambiguous."""
    s = strategy if strategy is not None else configured(op)
    if s is None:
        raise SearchError(f"{op.where()}: no configured strategy ({STRATEGY_ATTR})")
    ranks = tuple(len(v.type.shape) if isinstance(v.type, TensorType) else 0 for v in op.operands)
    where = op.where()
    if s.ranks != ranks:
        raise SearchError(
            f"configured strategy {s} of {where}: expected {len(ranks)} operands of ranks {list(ranks)}, got {len(s.ranks)} of ranks {list(s.ranks)}"
        )
    if rule is None or not op.results:
        rep = Strategy((), tuple(replicated(mesh, mesh_name, r) for r in ranks),
                       tuple(replicated(mesh, mesh_name, len(v.type.shape) if isinstance(v.type, TensorType) else 0) for v in op.results), (), 1)  # fmt: skip
        valid = [rep]
    else:
        valid = enumerate_strategies(rule, mesh, mesh_name=mesh_name, max_strategies=MATCH_CAP)
    form = "splits" if s.splits is not None else "axes"
    found = [v for v in valid if s.matches(v, mesh)]
    if not found:
        why = " (the op has no sharding rule: only the replicated strategy)" if rule is None else ""
        raise SearchError(
            f"configured strategy {s} of {where} on {mesh}: no valid strategy has it{why}; valid: {_choices(valid, mesh, form)}"
        )
    if len(found) == 1:
        return found[0]
    order = {a.name: i for i, a in enumerate(mesh.axes)}
    in_order = [v for v in found if _axis_order(v, order) == sorted(_axis_order(v, order))]
    pick = in_order or found
    first = pick[0]
    if all(v.operands == first.operands for v in pick[1:]):
        return first
    raise SearchError(
        f"configured strategy {s} of {where} on {mesh}: ambiguous, {len(pick)} valid strategies split the operands so "
        f"({_choices(pick, mesh, 'axes')}); write it in the Shardy form"
    )


def configure_spec(module: Module, spec: str) -> Op:
    """Applies one ``NAME[#INDEX]=STRATEGY`` (the CLI's ``--configure``) to ``module``: the op
    is the ``INDEX``-th (from 0, program order: ``Module.walk``) op named ``NAME`` (``#INDEX``
    may be left out when only one op has that name), ``STRATEGY`` either text form of
    :class:`OpStrategy`, e.g. ``stablehlo.dot_general#0=((2, 1), (1, 4))``. Returns the op.
    Raises :class:`SearchError` (one line naming the spec) for a malformed spec, no such op,
    or what :func:`configure` raises."""
    head, sep, text = spec.partition("=")
    name, hsep, index = head.strip().partition("#")
    if not sep or not name or not text.strip() or (hsep and not index.strip().isdigit()):
        raise SearchError(
            f"--configure {spec!r}: expected NAME[#INDEX]=STRATEGY, e.g. 'stablehlo.dot_general#0=((2, 1), (1, 4))'"
        )
    ops = [op for op in module.walk() if op.name == name]
    if not ops:
        raise SearchError(f"--configure {spec!r}: the module has no op {name}")
    if not hsep and len(ops) > 1:
        raise SearchError(
            f"--configure {spec!r}: the module has {len(ops)} ops {name}; say which with {name}#0 .. {name}#{len(ops) - 1}"
        )
    i = int(index) if hsep else 0
    if i >= len(ops):
        raise SearchError(
            f"--configure {spec!r}: op index {i} out of range: the module has {len(ops)} ops {name} (#0 .. #{len(ops) - 1})"
        )
    try:
        configure(ops[i], text)
    except SearchError as e:
        raise SearchError(f"--configure {spec!r}: {e}") from None
    return ops[i]
