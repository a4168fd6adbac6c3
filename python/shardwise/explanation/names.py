"""Value names for ``shardwise.explain``: the SSA names the printed module uses.

``Module.to_mlir`` (and so ``shardwise propagate -o OUT.mlir``) prints through jaxlib, whose
MLIR printer names values per function: arguments ``%arg0, %arg1, ...``, op results ``%0, %1,
...`` in program order (``%3#1`` for result 1 of a multi-result op), numbering on inside nested
regions as MLIR does. ``value_names`` asks jaxlib's printer state for these names, so they are
exactly those of the printed text. Without jax the generic form's names are used
(``%v1, %v2, ...``, as ``to_mlir(generic=True)`` prints them).

A name given to ``resolve`` is looked up in the main function (``@main``, or the only one) first:
``%12``, ``12``, ``%arg0``, ``arg0``, ``%3#1``; ``result0`` names the value the main function
returns as its result 0; ``@f:%2`` names ``%2`` in function ``@f``.
"""

from __future__ import annotations

import difflib
from typing import Any

from shardwise.errors import UnknownValueError
from shardwise.ir.core import Block, Func, Module, Op, Value
from shardwise.ir.printer import Writer

__all__ = ["UnknownValueError", "resolve", "value_names"]


def _main(module: Module) -> Func | None:
    funcs = module.funcs
    if len(funcs) == 1:
        return funcs[0]
    return next((f for f in funcs if f.sym_name == "main"), None)


def _func_of(op: Op) -> Func | None:
    cur: Any = op
    while cur is not None and not isinstance(cur, Func):
        block = cur.parent
        region = getattr(block, "parent", None)
        cur = None if region is None else region.parent
    return cur


def _walk_pairs(ours: Op, theirs: Any, out: list[tuple[Value, Any]]) -> None:
    for v, w in zip(ours.results, theirs.results):
        out.append((v, w))
    for region, jregion in zip(ours.regions, theirs.regions):
        for block, jblock in zip(region.blocks, jregion.blocks):
            for a, ja in zip(block.args, jblock.arguments):
                out.append((a, ja))
            for op, jop in zip(block.ops, jblock.operations):
                _walk_pairs(op, jop.operation, out)


def value_names(module: Module) -> list[tuple[Value, str, Func | None]]:
    """``(value, printed name, function)`` for every value of ``module``, in program order
    (see the module documentation)."""
    writer = Writer()
    text = writer.module(module)
    values: list[Value] = []

    def collect(op: Op) -> None:
        values.extend(op.results)
        for region in op.regions:
            for block in region.blocks:
                values.extend(block.args)
                for o in block.ops:
                    collect(o)

    try:
        from shardwise._jaxlib import context, ir
    except ImportError:  # pragma: no cover - jax is a test dependency
        collect(module.op)
        return [(v, writer.names[id(v)], _func_of_value(v)) for v in values]
    _ir = ir()
    with context():
        jm = _ir.Module.parse(text)
        state = _ir.AsmState(jm.operation)
        pairs: list[tuple[Value, Any]] = []
        _walk_pairs(module.op, jm.operation, pairs)
        return [(v, str(w.get_name(state)), _func_of_value(v)) for v, w in pairs]


def _func_of_value(v: Value) -> Func | None:
    if isinstance(v.owner, Block):
        region = v.owner.parent
        owner = None if region is None else region.parent
        if isinstance(owner, Func):
            return owner
        return None if owner is None else _func_of(owner)
    return _func_of(v.owner)


def resolve(module: Module, name: str) -> tuple[Value, str]:
    """The value named ``name`` (see the module documentation) and its printed name (with
    ``@f:`` for a function other than the main one). Raises ``UnknownValueError`` listing close
    names when there is none, or when a plain name is ambiguous outside the main function."""
    main = _main(module)
    text = name.strip()
    if text.startswith("result") and text[6:].isdigit():
        k = int(text[6:])
        ret = main.regions[0].entry.ops[-1] if main is not None and main.regions[0].blocks else None
        if ret is None or k >= len(ret.operands):
            n = 0 if ret is None else len(ret.operands)
            raise UnknownValueError(
                f"no value named {name!r}: the main function has {n} results (result0..result{max(n - 1, 0)})"
            )
        return resolve_value(module, ret.operands[k])
    func_name = None
    if text.startswith("@") and ":" in text:
        func_name, text = text[1:].split(":", 1)
    if not text.startswith("%"):
        text = "%" + text
    names = value_names(module)
    candidates = [(v, n, f) for v, n, f in names if n == text]
    if func_name is not None:
        candidates = [c for c in candidates if c[2] is not None and c[2].sym_name == func_name]
    elif len(candidates) > 1:
        in_main = [c for c in candidates if c[2] is main]
        candidates = in_main or candidates
    if len(candidates) == 1:
        return candidates[0][0], _qualified(candidates[0][1], candidates[0][2], main)
    known = sorted({_qualified(n, f, main) for _, n, f in names})
    if candidates:
        raise UnknownValueError(
            f"value name {name!r} is ambiguous: {', '.join(_qualified(n, f, main) for _, n, f in candidates)}; prefix it with @func:"
        )
    close = difflib.get_close_matches(name if name.startswith(("%", "@")) else "%" + name, known, n=8, cutoff=0.5)
    hint = f"; close names: {', '.join(close)}" if close else f"; names run {known[0]} .. {known[-1]}" if known else ""
    raise UnknownValueError(
        f"no value named {name!r} in the printed module (names are those of `shardwise propagate` output: "
        f"%argN, %N, %N#K, resultN, @func:%N){hint}"
    )


def resolve_value(module: Module, value: Value) -> tuple[Value, str]:
    """``value`` and its printed name. Raises ``UnknownValueError`` when it is not in
    ``module``."""
    main = _main(module)
    for v, n, f in value_names(module):
        if v is value:
            return v, _qualified(n, f, main)
    raise UnknownValueError(f"{value!r} is not a value of this module")


def _qualified(name: str, func: Func | None, main: Func | None) -> str:
    return name if func is main or func is None else f"@{func.sym_name}:{name}"
