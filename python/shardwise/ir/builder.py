"""``Builder``: write a program by hand, without JAX. Produces the same IR (and the same
attribute texts) as importing what JAX lowers for the same computation.

    b = Builder(Mesh({"x": 2, "y": 4}))
    x = b.arg((32, 64), sharding=TensorSharding(b.mesh, [["x"], None]))
    w = b.arg((64, 128))
    h = b.tanh(b.dot_general(x, w, contracting=((1,), (0,))))
    module = b.ret(b.reduce(h, dims=(1,), kind="sum"))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shardwise.ir.core import Block, Func, Module, Op, Region, Value, tensor_type
from shardwise.ir.types import TensorType, Type
from shardwise.mesh import Mesh
from shardwise.sharding import TensorSharding

__all__ = ["Builder"]


def _i64s(v: Sequence[int]) -> str:
    return "array<i64" + (": " + ", ".join(str(int(x)) for x in v) if len(v) else "") + ">"


def _list(v: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(x)) for x in v) + "]"


class Builder:
    """Builds one function ``@main`` of a new module, op by op. Shapes are checked as each op is
    added (``ValueError`` naming the op, what was expected and what was got)."""

    def __init__(
        self,
        mesh: Mesh | Mapping[str, int] | None = None,
        *,
        mesh_name: str = "mesh",
        module_name: str = "main_module",
        func_name: str = "main",
    ) -> None:
        self.module = Module(module_name)
        self.mesh: Mesh | None = None
        self.mesh_name = mesh_name
        if mesh is not None:
            self.mesh = mesh if isinstance(mesh, Mesh) else Mesh(mesh)
            self.module.add_mesh(mesh_name, self.mesh)
        self.func = Func(func_name, attributes={"sym_visibility": '"public"'})
        self.module.op.regions[0].entry.append(self.func)
        self._done = False

    # ------------------------------------------------------------------ plumbing

    def _block(self) -> Block:
        if self._done:
            raise ValueError("the function is finished (ret was called)")
        return self.func.body

    def op(
        self,
        name: str,
        operands: Sequence[Value],
        result_types: Sequence[Type],
        attributes: Mapping[str, str] | None = None,
        regions: Sequence[Region] = (),
    ) -> Op:
        """Adds any op: ``attributes`` maps names to MLIR attribute text."""
        return self._block().append(Op(name, operands, result_types, dict(attributes or {}), regions))

    def _one(
        self,
        name: str,
        operands: Sequence[Value],
        t: Type,
        attributes: Mapping[str, str] | None = None,
        regions: Sequence[Region] = (),
    ) -> Value:
        return self.op(name, operands, [t], attributes, regions).result

    def arg(self, shape: Sequence[int], dtype: str = "f32", *, sharding: TensorSharding | None = None) -> Value:
        """A new function argument of type ``tensor<shape x dtype>``."""
        t = TensorType(tuple(shape), dtype)
        if sharding is not None:
            sharding.validate(t.shape, meshes=self.mesh)
        self.func.arg_attrs.append({})
        return self.func.body.add_arg(t, sharding)

    def sharding(self, dims: Sequence[object], **kwargs: object) -> TensorSharding:
        """``TensorSharding(builder mesh, dims, ...)`` bound to the builder's mesh name."""
        if self.mesh is None:
            raise ValueError("this Builder has no mesh; pass one to Builder(mesh)")
        return TensorSharding(self.mesh, dims, mesh_name=self.mesh_name, **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ ops

    def constant(self, value: float | bool, dtype: str = "f32", shape: Sequence[int] = ()) -> Value:
        """A splat ``stablehlo.constant``."""
        t = TensorType(tuple(shape), dtype)
        if dtype == "i1":
            lit = "true" if value else "false"
        elif dtype.startswith(("f", "bf")):
            lit = f"{float(value):.6e}"
        else:
            lit = str(int(value))
        return self._one("stablehlo.constant", [], t, {"value": f"dense<{lit}> : {t}"})

    def iota(self, shape: Sequence[int], dim: int, dtype: str = "i32") -> Value:
        return self._one("stablehlo.iota", [], TensorType(tuple(shape), dtype), {"iota_dimension": f"{dim} : i64"})

    def unary(self, name: str, x: Value) -> Value:
        """``stablehlo.<name>`` of one operand (abs, exponential, log, tanh, negate, …)."""
        return self._one(f"stablehlo.{name}", [x], x.type)

    def binary(self, name: str, x: Value, y: Value) -> Value:
        """``stablehlo.<name>`` of two operands of the same type (add, multiply, maximum, …)."""
        if x.type != y.type:
            raise ValueError(f"stablehlo.{name}: operands must have the same type, got {x.type} and {y.type}")
        return self._one(f"stablehlo.{name}", [x, y], x.type)

    def add(self, x: Value, y: Value) -> Value:
        return self.binary("add", x, y)

    def subtract(self, x: Value, y: Value) -> Value:
        return self.binary("subtract", x, y)

    def multiply(self, x: Value, y: Value) -> Value:
        return self.binary("multiply", x, y)

    def divide(self, x: Value, y: Value) -> Value:
        return self.binary("divide", x, y)

    def maximum(self, x: Value, y: Value) -> Value:
        return self.binary("maximum", x, y)

    def tanh(self, x: Value) -> Value:
        return self.unary("tanh", x)

    def exp(self, x: Value) -> Value:
        return self.unary("exponential", x)

    def negate(self, x: Value) -> Value:
        return self.unary("negate", x)

    def convert(self, x: Value, dtype: str) -> Value:
        t = tensor_type(x)
        return self._one("stablehlo.convert", [x], TensorType(t.shape, dtype))

    def broadcast_in_dim(self, x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        """Result dimension ``dims[i]`` is operand dimension ``i`` (size equal, or 1 broadcast)."""
        t = tensor_type(x)
        if len(dims) != t.rank or any(
            not (0 <= d < len(shape)) or t.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)
        ):
            raise ValueError(f"stablehlo.broadcast_in_dim: dims {list(dims)} do not map {t} into shape {tuple(shape)}")
        return self._one(
            "stablehlo.broadcast_in_dim",
            [x],
            TensorType(tuple(shape), t.element_type),
            {"broadcast_dimensions": _i64s(dims)},
        )

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        t = tensor_type(x)
        if _prod(shape) != _prod(t.shape):
            raise ValueError(
                f"stablehlo.reshape: {t} has {_prod(t.shape)} elements, shape {tuple(shape)} has {_prod(shape)}"
            )
        return self._one("stablehlo.reshape", [x], TensorType(tuple(shape), t.element_type))

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        t = tensor_type(x)
        if sorted(perm) != list(range(t.rank)):
            raise ValueError(f"stablehlo.transpose: permutation {list(perm)} is not one of {t.rank} dims")
        return self._one(
            "stablehlo.transpose",
            [x],
            TensorType(tuple(t.shape[p] for p in perm), t.element_type),
            {"permutation": _i64s(perm)},
        )

    def dot_general(
        self,
        lhs: Value,
        rhs: Value,
        *,
        contracting: tuple[Sequence[int], Sequence[int]],
        batch: tuple[Sequence[int], Sequence[int]] = ((), ()),
        dtype: str | None = None,
    ) -> Value:
        """``stablehlo.dot_general``: result dims are batch, lhs free, rhs free (in order)."""
        a, b = tensor_type(lhs), tensor_type(rhs)
        (lb, rb), (lc, rc) = batch, contracting
        if (
            len(lb) != len(rb)
            or len(lc) != len(rc)
            or any(a.shape[i] != b.shape[j] for i, j in [*zip(lb, rb), *zip(lc, rc)])
        ):
            raise ValueError(
                f"stablehlo.dot_general: batch {batch} / contracting {contracting} dims do not match {a} and {b}"
            )
        lf = [i for i in range(a.rank) if i not in (*lb, *lc)]
        rf = [i for i in range(b.rank) if i not in (*rb, *rc)]
        shape = [a.shape[i] for i in lb] + [a.shape[i] for i in lf] + [b.shape[i] for i in rf]
        parts = []
        for key, v in (
            ("lhs_batching_dimensions", lb),
            ("rhs_batching_dimensions", rb),
            ("lhs_contracting_dimensions", lc),
            ("rhs_contracting_dimensions", rc),
        ):
            if len(v):
                parts.append(f"{key} = {_list(v)}")
        attrs = {"dot_dimension_numbers": f"#stablehlo.dot<{', '.join(parts)}>"}
        return self._one("stablehlo.dot_general", [lhs, rhs], TensorType(tuple(shape), dtype or a.element_type), attrs)

    def reduce(self, x: Value, dims: Sequence[int], kind: str = "sum") -> Value:
        """``stablehlo.reduce`` over ``dims`` with ``kind`` sum, max or min (init 0, -inf, +inf)."""
        t = tensor_type(x)
        body_op = {"sum": "stablehlo.add", "max": "stablehlo.maximum", "min": "stablehlo.minimum"}.get(kind)
        if body_op is None or any(not 0 <= d < t.rank for d in dims):
            raise ValueError(
                f"stablehlo.reduce: expected kind sum/max/min and dims within rank {t.rank}, got {kind!r}, {list(dims)}"
            )
        init = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[kind]
        scalar = TensorType((), t.element_type)
        if kind == "sum":
            init_v = self.constant(0.0, t.element_type)
        else:
            hexval = {"max": "0xFF800000", "min": "0x7F800000"}[kind] if t.element_type == "f32" else f"{init:e}"
            init_v = self._one("stablehlo.constant", [], scalar, {"value": f"dense<{hexval}> : {scalar}"})
        block = Block([scalar, scalar])
        combined = block.append(Op(body_op, block.args, [scalar]))
        block.append(Op("stablehlo.return", [combined.result], []))
        shape = tuple(s for i, s in enumerate(t.shape) if i not in dims)
        return self._one(
            "stablehlo.reduce",
            [x, init_v],
            TensorType(shape, t.element_type),
            {"dimensions": _i64s(sorted(dims))},
            [Region([block])],
        )

    def slice(
        self, x: Value, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None = None
    ) -> Value:
        t = tensor_type(x)
        strides = list(strides) if strides is not None else [1] * t.rank
        if not (len(start) == len(limit) == len(strides) == t.rank) or any(
            not (0 <= s <= e <= n) or st < 1 for s, e, n, st in zip(start, limit, t.shape, strides)
        ):
            raise ValueError(f"stablehlo.slice: [{list(start)}:{list(limit)}:{strides}] is not a slice of {t}")
        shape = tuple(-(-(e - s) // st) for s, e, st in zip(start, limit, strides))
        attrs = {"start_indices": _i64s(start), "limit_indices": _i64s(limit), "strides": _i64s(strides)}
        return self._one("stablehlo.slice", [x], TensorType(shape, t.element_type), attrs)

    def concatenate(self, xs: Sequence[Value], dim: int) -> Value:
        ts = [tensor_type(x) for x in xs]
        ok = ts and all(
            t.rank == ts[0].rank and all(t.shape[i] == ts[0].shape[i] for i in range(t.rank) if i != dim) for t in ts
        )
        if not ok or not 0 <= dim < ts[0].rank:
            raise ValueError(
                f"stablehlo.concatenate: operands {[str(t) for t in ts]} do not concatenate along dim {dim}"
            )
        shape = list(ts[0].shape)
        shape[dim] = sum(t.shape[dim] for t in ts)
        return self._one(
            "stablehlo.concatenate",
            list(xs),
            TensorType(tuple(shape), ts[0].element_type),
            {"dimension": f"{dim} : i64"},
        )

    def sharding_constraint(self, x: Value, sharding: TensorSharding) -> Value:
        """``sdy.sharding_constraint``: the result has ``sharding``."""
        sharding.validate(tensor_type(x).shape, meshes=self.mesh)
        v = self._one("sdy.sharding_constraint", [x], x.type)
        v.sharding = sharding
        return v

    def ret(self, *values: Value, shardings: Sequence[TensorSharding | None] | None = None) -> Module:
        """Ends the function with ``func.return values`` (with optional result shardings) and
        returns the module."""
        self._block().append(Op("func.return", list(values), []))
        self.func.result_types = [v.type for v in values]
        self.func.result_attrs = [{} for _ in values]
        self.func.result_shardings = list(shardings) if shardings is not None else [None] * len(values)
        if len(self.func.result_shardings) != len(values):
            raise ValueError(f"ret: {len(values)} results but {len(self.func.result_shardings)} shardings")
        self._done = True
        return self.module


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
