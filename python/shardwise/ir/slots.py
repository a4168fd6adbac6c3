"""Where each op keeps its shardings in MLIR (Shardy's dialect definitions in
``shardy/dialect/sdy/ir/ops.td``): the attribute holding the shardings of the results, and of
the operands for ops that have them. Importers move these attributes into ``Value.sharding`` /
``Op.operand_shardings``; the printer (``ir.printer``) writes them back.
"""

from __future__ import annotations

from typing import Literal, NamedTuple


class Slot(NamedTuple):
    attribute: str
    #: "single": one ``#sdy.sharding`` for the single result; "per_value": a
    #: ``#sdy.sharding_per_value`` with one sharding per result.
    form: Literal["single", "per_value"]
    #: whether the op must have it
    required: bool = False


DEFAULT_RESULT_SLOT = Slot("sdy.sharding", "per_value")

#: Shardy's collectives that move a sharding (all but the two ``*_to_unreduced`` ones): their
#: ``out_sharding`` is a result slot; the partitioner lowers them and the loader checks them.
SDY_COLLECTIVES = (
    "sdy.all_gather",
    "sdy.all_slice",
    "sdy.all_to_all",
    "sdy.collective_permute",
    "sdy.all_reduce",
    "sdy.reduce_scatter",
)

RESULT_SLOTS: dict[str, Slot] = {
    "sdy.sharding_constraint": Slot("sharding", "single", True),
    "sdy.reshard": Slot("sharding", "single", True),
    "sdy.data_flow_edge": Slot("sharding", "single"),
    "sdy.manual_computation": Slot("out_shardings", "per_value", True),
    "sdy.named_computation": Slot("out_shardings", "per_value"),
    **{name: Slot("out_sharding", "single", True) for name in SDY_COLLECTIVES},
}

OPERAND_SLOTS: dict[str, Slot] = {
    "sdy.manual_computation": Slot("in_shardings", "per_value", True),
    "sdy.named_computation": Slot("in_shardings", "per_value"),
}


def result_slot(op_name: str) -> Slot:
    return RESULT_SLOTS.get(op_name, DEFAULT_RESULT_SLOT)
