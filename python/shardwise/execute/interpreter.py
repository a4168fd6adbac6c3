"""A StableHLO interpreter over shardwise's program IR, written once against the array API.

``run(func_or_module, inputs)`` evaluates a function op by op on arrays of any array-API
namespace (numpy by default; cupy works the same way). Ops follow the StableHLO specification
(github.com/openxla/stablehlo/blob/main/docs/spec.md); where the specification leaves a result
implementation-defined (integer division by zero, float-to-int overflow), XLA's CPU behaviour is
followed and the op's docstring says so. Collectives (``stablehlo.all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``collective_permute``) go through a ``Communicator``
(``shardwise.execute.comm``); ``stablehlo.partition_id`` is the ``rank``.

The interpreter frees every value after its last use and records ``live_bytes`` /
``peak_bytes``: the sum of the sizes (bytes) of the arrays its environment holds.

The op implementations live in the ``ops_*`` modules; they register in the op table
(``shardwise.execute.registry``), which ``shardwise.execute.ops`` fills and this module reads.
Ops see the interpreter only as the object passed to them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.execute._util import astype, nbytes, quiet_fp
from shardwise.execute.comm import Communicator
from shardwise.execute.dtypes import xp_dtype
from shardwise.execute.ops import ELEMENTWISE, OPS
from shardwise.execute.registry import register
from shardwise.ir.core import Block, Func, Module, Op, Region, Value
from shardwise.ir.types import TensorType

__all__ = ["ELEMENTWISE", "OPS", "Interpreter", "register", "run"]


#: Floating element types and the type ``wide`` interpretation computes them in.
_WIDE = {"f16": "f64", "bf16": "f64", "f32": "f64", "f8E4M3FN": "f64", "f8E5M2": "f64", "complex<f32>": "complex<f64>"}


class Interpreter:
    """Evaluates functions of one module. ``xp`` is the array namespace, ``comm`` the
    communicator for collectives (``None``: a program with collectives raises
    ``ProgramError``), ``rank`` the value of ``stablehlo.partition_id``.

    ``wide``: every floating value is computed in float64 (complex in complex128) whatever its
    declared type, so the program runs without its own rounding: the reference against which
    ``shardwise run --check`` measures both the partitioned and the unpartitioned program. Bit
    reinterpretation (``bitcast_convert``) still sees the declared type (``declared_dtype``)."""

    def __init__(
        self, module: Module | None, xp: Any, comm: Communicator | None = None, rank: int = 0, *, wide: bool = False
    ) -> None:
        self.xp = xp
        self.wide = wide
        self.comm = comm
        self.rank = comm.rank if comm is not None else rank
        self.funcs: dict[str, Func] = {f.sym_name: f for f in module.funcs} if module is not None else {}
        self.live_bytes = 0
        self.peak_bytes = 0
        self._plans: dict[int, tuple[Block, list[list[Value]], list[Value]]] = {}
        self._vector_depth = 0
        self._env: dict[Value, Any] = {}

    def for_rank(self, comm: Communicator | None, rank: int) -> Interpreter:
        """A fresh interpreter of the same functions and namespace (not ``wide``) as rank
        ``rank`` with communicator ``comm``: what an op runs a body per device with
        (``sdy.manual_computation``)."""
        inner = Interpreter(None, self.xp, comm, rank)
        inner.funcs = self.funcs
        return inner

    # -- values ---------------------------------------------------------------------------
    def dtype(self, v: Value) -> Any:
        """The namespace dtype the interpreter holds value ``v`` in: its element type's, or
        float64 / complex128 for a floating type under ``wide``."""
        t = v.type
        if not isinstance(t, TensorType):
            raise ProgramError(f"value of type {t} is not a tensor")
        e = t.element_type
        return xp_dtype(self.xp, _WIDE.get(e, e) if self.wide else e)

    def declared_dtype(self, v: Value) -> Any:
        """The namespace dtype of value ``v``'s declared element type (also under ``wide``)."""
        t = v.type
        if not isinstance(t, TensorType):
            raise ProgramError(f"value of type {t} is not a tensor")
        return xp_dtype(self.xp, t.element_type)

    def result_dtype(self, op: Op, i: int = 0) -> Any:
        return self.dtype(op.results[i])

    def _define(self, env: dict[Value, Any], v: Value, x: Any) -> None:
        env[v] = x
        self.live_bytes += nbytes(self.xp, x)
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _free(self, env: dict[Value, Any], v: Value) -> None:
        x = env.pop(v, None)
        if x is not None:
            self.live_bytes -= nbytes(self.xp, x)

    # -- functions, blocks, regions -------------------------------------------------------
    def call(self, func: Func, args: Sequence[Any]) -> list[Any]:
        """Runs ``func`` on ``args`` (arrays of the argument types) and returns its results."""
        if not func.regions[0].blocks:
            raise ProgramError(f"{func.where()}: @{func.sym_name} is a declaration without a body")
        if len(args) != len(func.args):
            raise ProgramError(f"@{func.sym_name} takes {len(func.args)} arguments, got {len(args)}")
        xs = []
        for i, (v, x) in enumerate(zip(func.args, args)):
            x = self.xp.asarray(x)
            if isinstance(v.type, TensorType) and tuple(x.shape) != v.type.shape:
                raise ProgramError(
                    f"@{func.sym_name} argument {i}: expected shape {v.type.shape} ({v.type}), got {tuple(x.shape)}"
                )
            xs.append(x)
        return self.run_block(func.body, xs, {})

    def run_region(self, region: Region, args: Sequence[Any], env: dict[Value, Any]) -> list[Any]:
        """Runs the entry block of ``region`` with block arguments ``args`` inside ``env``
        (values of enclosing blocks stay visible); returns the terminator's operands."""
        return self.run_block(region.entry, args, env)

    def run_block(self, block: Block, args: Sequence[Any], env: dict[Value, Any]) -> list[Any]:
        _, frees, unused_args = self._plan(block)
        if len(args) != len(block.args):
            raise ProgramError(f"block takes {len(block.args)} arguments, got {len(args)}")
        for v, x in zip(block.args, args):
            self._define(env, v, x)
        for v in unused_args:
            self._free(env, v)
        ops = block.ops
        last = len(ops) - 1
        for i, op in enumerate(ops):
            if i == last and op.name in _TERMINATORS:
                out = [self._get(env, v, op) for v in op.operands]
                for v in list(block.args) + [r for o in ops for r in o.results]:
                    self._free(env, v)
                return out
            self._execute(op, env)
            for v in frees[i]:
                self._free(env, v)
        raise ProgramError(f"block ends without a terminator (last op {ops[-1].where() if ops else 'none'})")

    def _get(self, env: dict[Value, Any], v: Value, user: Op) -> Any:
        try:
            return env[v]
        except KeyError:
            raise ProgramError(
                f"{user.where()}: operand {v} has no value (used after its last use or never defined)"
            ) from None

    def _execute(self, op: Op, env: dict[Value, Any]) -> None:
        fn = OPS.get(op.name)
        if fn is None:
            raise ProgramError(f"{op.where()}: the interpreter has no implementation of {op.name}")
        operands = [self._get(env, v, op) for v in op.operands]
        self._env = env
        try:
            results = fn(self, op, operands)
        except ProgramError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError) as e:
            raise ProgramError(f"{op.where()}: {type(e).__name__}: {e}") from e
        if len(results) != len(op.results):
            raise ProgramError(f"{op.where()}: produced {len(results)} results, the op declares {len(op.results)}")
        for v, x in zip(op.results, results):
            if self._vector_depth == 0 and isinstance(v.type, TensorType):
                if tuple(x.shape) != v.type.shape:
                    raise ProgramError(
                        f"{op.where()}: result shape {tuple(x.shape)} differs from the declared {v.type}"
                    )
                want = self.dtype(v)
                if x.dtype != want:
                    x = astype(self.xp, x, want)
            self._define(env, v, x)

    def env(self) -> dict[Value, Any]:
        """The environment of the op being executed (for ops with regions)."""
        return self._env

    def _plan(self, block: Block) -> tuple[Block, list[list[Value]], list[Value]]:
        """For each op index, the values defined in ``block`` whose last use is that op (uses
        inside nested regions count at the enclosing op); and the unused block arguments."""
        key = id(block)
        plan = self._plans.get(key)
        if plan is not None and plan[0] is block:
            return plan
        local: set[Value] = set(block.args)
        last: dict[Value, int] = {}
        for i, op in enumerate(block.ops):
            for used in _uses(op):
                if used in local:
                    last[used] = i
            local.update(op.results)
        frees: list[list[Value]] = [[] for _ in block.ops]
        n = len(block.ops)
        for i, op in enumerate(block.ops):
            for r in op.results:
                if r not in last:
                    frees[i].append(r)
        for v, i in last.items():
            if i < n - 1:
                frees[i].append(v)
        unused = [a for a in block.args if a not in last]
        plan = (block, frees, unused)
        self._plans[key] = plan
        return plan

    # -- regions as functions of arrays ---------------------------------------------------
    def region_fn(self, region: Region) -> Callable[..., list[Any]]:
        """``region`` as a Python function of its block arguments, evaluated in the current
        environment. If every op of the region is elementwise, the function accepts whole arrays
        (scalar block arguments broadcast), so bodies of reduce/sort/scatter run vectorized."""
        env = self._env

        def fn(*args: Any) -> list[Any]:
            saved = self._env
            try:
                return self.run_region(region, args, env)
            finally:
                self._env = saved

        return fn

    def is_elementwise(self, region: Region) -> bool:
        return all(o.name in ELEMENTWISE or o.name in _TERMINATORS for o in region.entry.ops)

    @property
    def in_vectorized_body(self) -> bool:
        """True while a scalar body runs on whole arrays (see ``vectorized``)."""
        return self._vector_depth > 0

    @contextlib.contextmanager
    def vectorized(self) -> Iterator[None]:
        """Within this context, result shapes are not checked against the declared types (a
        scalar body evaluated on whole arrays)."""
        self._vector_depth += 1
        try:
            yield
        finally:
            self._vector_depth -= 1


_TERMINATORS = {"func.return", "stablehlo.return", "sdy.return", "return"}


def _uses(op: Op) -> Iterator[Value]:
    yield from op.operands
    for r in op.regions:
        for b in r.blocks:
            for inner in b.ops:
                yield from _uses(inner)


def run(
    func_or_module: Func | Module,
    inputs: Sequence[Any],
    *,
    xp: Any = None,
    comm: Communicator | None = None,
    rank: int = 0,
    func: str = "main",
    wide: bool = False,
) -> list[Any]:
    """Runs a function (``Func``, or function ``func`` of a ``Module``) on ``inputs`` and returns
    its results as arrays of namespace ``xp`` (numpy when ``None``).

    ``inputs``: one array per argument, of the argument's shape (dtype is converted to the
    argument's element type). ``comm``: the communicator collectives use; ``rank``: the value of
    ``stablehlo.partition_id`` when there is no communicator. ``wide``: compute every float in
    float64 (see ``Interpreter``); the float results then come back as float64.

    Raises ``ProgramError`` naming the op and its location for an op the interpreter lacks, a
    malformed attribute, or inputs of the wrong count or shape.
    """
    interp, f = _prepare(func_or_module, xp, comm, rank, func, wide)
    return run_with(interp, f, inputs)


def _prepare(
    func_or_module: Func | Module, xp: Any, comm: Communicator | None, rank: int, func: str, wide: bool = False
) -> tuple[Interpreter, Func]:
    if xp is None:
        import array_api_compat.numpy as xp_numpy

        xp = xp_numpy
    if isinstance(func_or_module, Module):
        module: Module | None = func_or_module
        try:
            f = func_or_module.func(func)
        except KeyError as e:
            raise ProgramError(str(e.args[0])) from None
    elif isinstance(func_or_module, Func):
        f = func_or_module
        module = _module_of(f)
    else:
        raise ProgramError(f"run expects a Func or a Module, got {type(func_or_module).__name__}")
    interp = Interpreter(module, xp, comm, rank, wide=wide)
    if module is None:
        interp.funcs[f.sym_name] = f
    return interp, f


def run_with(interp: Interpreter, f: Func, inputs: Sequence[Any]) -> list[Any]:
    """Runs ``f`` with an existing interpreter (its byte counters keep accumulating)."""
    if len(inputs) != len(f.args):
        raise ProgramError(f"@{f.sym_name} takes {len(f.args)} arguments, got {len(inputs)}")

    xs = [
        astype(interp.xp, interp.xp.asarray(x), interp.dtype(v)) if isinstance(v.type, TensorType) else x
        for x, v in zip(inputs, f.args)
    ]
    with quiet_fp():
        return interp.call(f, xs)


def _module_of(f: Func) -> Module | None:
    block = f.parent
    region = block.parent if block is not None else None
    mop = region.parent if region is not None else None
    if mop is None or mop.name != "builtin.module":
        return None
    m = Module.__new__(Module)
    m.op = mop
    return m
