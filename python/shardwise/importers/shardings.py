"""``ShardingReader``: takes the sharding attributes of ops read from MLIR into the IR's values
(``Value.sharding``, ``Op.operand_shardings``), where ``ir/slots.py`` says each op keeps them;
shared by the jaxlib importer (``importers/mlir.py``) and the native one (``importers/native.py``).
"""

from __future__ import annotations

from shardwise.errors import ProgramError, ShardingError
from shardwise.ir.core import Op
from shardwise.ir.slots import OPERAND_SLOTS, Slot, result_slot
from shardwise.ir.types import TensorType, Type
from shardwise.mesh import Mesh
from shardwise.sharding import TensorSharding

__all__ = ["ShardingReader", "check_rank"]


class ShardingReader:
    """Parses shardings against the module's meshes (``meshes``: name -> mesh, filled by the
    importer from the ``sdy.mesh`` ops before any other op)."""

    def __init__(self) -> None:
        self.meshes: dict[str, Mesh] = {}
        # Each distinct attribute text is parsed once (shardings are immutable, so values
        # share them): a propagated program holds few distinct shardings.
        self._parsed: dict[tuple[str, str], tuple[TensorSharding, ...]] = {}

    def sharding(self, text: str | None, op: Op, what: str) -> TensorSharding | None:
        if text is None:
            return None
        try:
            return TensorSharding.parse(text, self._meshes_for(text))
        except ShardingError as e:
            raise _located(e, f"{op.where()}, {what}") from None

    def _meshes_for(self, text: str) -> dict[str, Mesh] | None:
        return self.meshes if self.meshes else None

    def take_shardings(self, op: Op) -> None:
        slot = result_slot(op.name)
        # A result-less op (a side-effecting custom call) may carry a maximal sharding that
        # places it on one device; it stays an attribute of the op.
        shardings = self._take(op, slot, "results") if op.results else None
        if shardings is not None:
            if len(shardings) != len(op.results):
                raise ProgramError(
                    f"{op.where()}: {len(shardings)} shardings in {slot.attribute} for {len(op.results)} results"
                )
            for i, (v, s) in enumerate(zip(op.results, shardings)):
                v.sharding = check_rank(s, v.type, op, f"result {i}")
        if op.name in OPERAND_SLOTS:
            op.operand_shardings = self._take(op, OPERAND_SLOTS[op.name], "operands")
            for i, (v, s) in enumerate(zip(op.operands, op.operand_shardings or ())):
                check_rank(s, v.type, op, f"operand {i}")

    def _take(self, op: Op, slot: Slot, what: str) -> tuple[TensorSharding, ...] | None:
        text = op.attributes.pop(slot.attribute, None)
        if text is None:
            return None
        key = (slot.form, text)
        parsed = self._parsed.get(key)
        if parsed is not None:
            return parsed
        try:
            if slot.form == "single":
                parsed = (TensorSharding.parse(text, self._meshes_for(text)),)
            else:
                parsed = TensorSharding.parse_per_value(text, self._meshes_for(text))
        except ShardingError as e:
            raise _located(e, f"{op.where()}, {what}") from None
        self._parsed[key] = parsed
        return parsed


def check_rank(sharding: TensorSharding, type: Type, op: Op, what: str) -> TensorSharding:
    """``sharding``, or ``ProgramError`` when its rank is not the tensor's (Shardy's verifier
    rule, checked here for the native reader, which runs no verifier). A sharding on a mesh
    without axes (a maximal mesh) has no dimensions whatever the rank."""
    maximal = sharding.rank == 0 and isinstance(sharding.mesh, Mesh) and not sharding.mesh.axes
    if isinstance(type, TensorType) and sharding.rank != type.rank and not maximal:
        raise ProgramError(f"{op.where()}, {what}: sharding doesn't match tensor rank: {sharding.rank} != {type.rank}")
    return sharding


def _located(e: ShardingError, where: str) -> ShardingError:
    """The same error class and attributes, its message prefixed with the op and location."""
    new = type(e)(f"{where}: {e}")
    for attr in ("rule", "offset"):
        if hasattr(e, attr):
            setattr(new, attr, getattr(e, attr))
    return new
