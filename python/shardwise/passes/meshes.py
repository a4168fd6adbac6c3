"""Mesh passes: ``sdy-lift-inlined-meshes``, ``sdy-inline-meshes`` and
``sdy-remove-size-one-axes`` (Shardy's ``transforms/import/lift_inlined_meshes.cc``,
``inline_meshes.cc`` and ``remove_size_one_axes.cc``)."""

from __future__ import annotations

import re

from shardwise.errors import ProgramError
from shardwise.ir.attrs import quote, unquote
from shardwise.ir.core import Module, Op
from shardwise.ir.rewrite import SymbolTable, insert_after, insert_at_start, symbol_name
from shardwise.ir.sdy import ShardingSite, make_sharding, mesh_ref, symbol_ref, transform_shardings, with_parts
from shardwise.mesh import Mesh
from shardwise.passes.registry import Options, register_pass
from shardwise.sharding import DimSharding, TensorSharding

__all__ = ["inline_meshes", "lift_inlined_meshes", "remove_size_one_axes"]

_STABLEHLO_MESH = "stablehlo.mesh"


def _mesh_ops(module: Module) -> list[Op]:
    return [op for op in module.ops if op.name == "sdy.mesh"]


def _stablehlo_mesh_dict(mesh: Mesh) -> str:
    axes = ", ".join(f"{{name = {quote(a.name)}, size = {a.size} : i64}}" for a in mesh.axes)
    fields = [f"axes = [{axes}]"]
    if mesh.device_ids:
        ids = ", ".join(str(d) for d in mesh.device_ids)
        fields.append(f"device_ids = dense<[{ids}]> : tensor<{len(mesh.device_ids)}xi64>")
    return "{" + ", ".join(fields) + "}"


def _new_mesh_name(mesh: Mesh) -> str:
    if mesh.is_maximal:
        return f"maximal_mesh_{mesh.device_ids[0]}"
    if mesh.is_empty:
        return "empty_mesh"
    return "mesh"


@register_pass("sdy-lift-inlined-meshes", adds=frozenset({"sdy.mesh"}))
def lift_inlined_meshes(module: Module, options: Options | None = None) -> None:
    """Replaces every inlined mesh in a sharding by a reference to an ``sdy.mesh`` with the same
    mesh, creating one when none exists (named ``maximal_mesh_<id>``, ``empty_mesh`` or the
    first free of ``mesh``, ``mesh_0``, ``mesh_1``, …); duplicate ``sdy.mesh`` definitions are
    removed and references to them redirected to the first one; every ``sdy.mesh`` gets a
    ``stablehlo.mesh`` attribute describing it. Mirrors Shardy's ``lift_inlined_meshes.cc``.
    Raises ``ProgramError`` for a mesh definition that cannot be read."""
    symbols = SymbolTable(module)
    # mesh -> name of the sdy.mesh now holding it; old name of a deduped mesh -> new name.
    by_mesh: dict[Mesh, str] = {}
    renamed: dict[str, str] = {}
    last: Op | None = None
    for op in _mesh_ops(module):
        mesh = _parse_mesh(op)
        name = symbol_name(op)
        assert name is not None
        if mesh in by_mesh:
            renamed[name] = by_mesh[mesh]
            symbols.erase(op)
        else:
            by_mesh[mesh] = name
            last = op
    meshes = {n: m for m, n in by_mesh.items()}
    anchor: list[Op | None] = [last]

    def lift(s: TensorSharding, site: ShardingSite) -> TensorSharding:
        if s.mesh_name is not None:
            new = renamed.get(s.mesh_name)
            if new is None:
                return s
            return with_parts(s, ref=(new, meshes[new]))
        assert s.mesh is not None
        name = by_mesh.get(s.mesh)
        if name is None:
            name = _add_mesh(module, symbols, anchor, s.mesh, _new_mesh_name(s.mesh))
            by_mesh[s.mesh] = name
            meshes[name] = s.mesh
        return with_parts(s, ref=(name, s.mesh))

    transform_shardings(module, lift)

    # Meshes inlined in the replica groups of StableHLO collectives, op kind by op kind as
    # Shardy's pattern walks (one walk collects them: the rewrites below touch no other op).
    by_kind: dict[str, list[Op]] = {kind: [] for kind in _REPLICA_GROUP_OPS}
    for op in module.walk():
        if op.name in by_kind and "replica_groups" in op.attributes:
            by_kind[op.name].append(op)
    shlo_names: dict[str, str] = {}
    for kind in _REPLICA_GROUP_OPS:
        for op in by_kind[kind]:
            m = _REPLICA_GROUPS.fullmatch(op.attributes["replica_groups"])
            if m is None:
                continue
            mesh_text, axes_text = m.group(1), m.group(2)
            new_name: str | None = None
            if mesh_text.startswith("@"):
                new_name = renamed.get(_ref_name(mesh_text))
            elif mesh_text.startswith("#sdy.mesh"):
                mesh = Mesh.parse(mesh_text)
                new_name = by_mesh.get(mesh)
                if new_name is None:
                    new_name = _add_mesh(module, symbols, anchor, mesh, _new_mesh_name(mesh))
                    by_mesh[mesh] = new_name
            elif mesh_text.startswith("#stablehlo.mesh"):
                new_name = shlo_names.get(mesh_text)
                if new_name is None:
                    axes = [(unquote(f'"{n}"'), int(z)) for n, z in _SHLO_AXIS.findall(mesh_text)]
                    new_name = _add_mesh(module, symbols, anchor, Mesh(axes), "mesh")
                    shlo_names[mesh_text] = new_name
            if new_name is not None:
                op.attributes["replica_groups"] = (
                    f"#stablehlo.replica_group_mesh_axes<mesh = @{symbol_ref(new_name)}, axes = {axes_text}>"
                )

    for op in _mesh_ops(module):
        if _STABLEHLO_MESH not in op.attributes:
            op.attributes[_STABLEHLO_MESH] = _stablehlo_mesh_dict(_parse_mesh(op))


@register_pass("sdy-inline-meshes")
def inline_meshes(module: Module, options: Options | None = None) -> None:
    """Replaces every mesh reference in a sharding by the mesh itself and removes every
    ``sdy.mesh``. Mirrors Shardy's ``inline_meshes.cc``. Raises ``ProgramError`` for a
    reference to an undefined mesh."""
    meshes = {symbol_name(op) or "": _parse_mesh(op) for op in _mesh_ops(module)}

    def inline(s: TensorSharding, site: ShardingSite) -> TensorSharding:
        if s.mesh_name is None:
            return s
        mesh = s.mesh if s.mesh is not None else meshes.get(s.mesh_name)
        if mesh is None:
            raise ProgramError(f"sharding {s} refers to mesh @{s.mesh_name}, which the module does not define")
        return with_parts(s, ref=(None, mesh))

    transform_shardings(module, inline)
    symbols = SymbolTable(module)
    for op in _mesh_ops(module):
        symbols.erase(op)


@register_pass("sdy-remove-size-one-axes", adds=frozenset())
def remove_size_one_axes(module: Module, options: Options | None = None) -> None:
    """Removes axes of size one from every sharding (dimension, replicated and unreduced axes;
    a closed dimension left empty loses its priority) when some ``sdy.mesh`` has a size-one
    axis; meshes and manual axes are kept. Mirrors Shardy's ``remove_size_one_axes.cc``.
    Raises ``ProgramError`` for a reference to an undefined mesh."""
    meshes = {symbol_name(op) or "": _parse_mesh(op) for op in _mesh_ops(module)}
    if not any(a.size == 1 for m in meshes.values() for a in m.axes):
        return

    def remove(s: TensorSharding, site: ShardingSite) -> TensorSharding:
        mesh = s.mesh if s.mesh is not None else meshes.get(s.mesh_name or "")
        if mesh is None:
            raise ProgramError(f"sharding {s} refers to mesh @{s.mesh_name}, which the module does not define")

        def keep(a: object) -> bool:
            from shardwise.sharding import AxisRef

            assert isinstance(a, AxisRef)
            return a.full_size(mesh) != 1

        dims = []
        for d in s.dims:
            axes = [a for a in d.axes if keep(a)]
            priority = None if not axes and d.closed else d.priority
            dims.append(DimSharding(axes, d.closed, priority))
        rep = [a for a in s.replicated if keep(a)]
        unr = [a for a in s.unreduced if keep(a)]
        if tuple(dims) == s.dims and tuple(rep) == s.replicated and tuple(unr) == s.unreduced:
            return s
        return make_sharding(
            mesh_ref(s) if s.mesh is not None else (s.mesh_name, mesh), dims, rep, unr, s.reduction if unr else "sum"
        )

    transform_shardings(module, remove)


_REPLICA_GROUP_OPS = (
    "stablehlo.all_gather",
    "stablehlo.all_reduce",
    "stablehlo.reduce_scatter",
    "stablehlo.all_to_all",
    "stablehlo.collective_broadcast",
)
_REPLICA_GROUPS = re.compile(r"#stablehlo\.replica_group_mesh_axes<mesh = (.*?), axes = (\[.*\])>", re.DOTALL)
_SHLO_AXIS = re.compile(r'<name = "((?:[^"\\]|\\.)*)", size = (\d+)>')


def _ref_name(text: str) -> str:
    body = text[1:]
    return unquote(body) if body.startswith('"') else body


def _add_mesh(module: Module, symbols: SymbolTable, anchor: list[Op | None], mesh: Mesh, name: str) -> str:
    op = Op("sdy.mesh", attributes={"mesh": str(mesh), "sym_name": quote(name)})
    if anchor[0] is None:
        insert_at_start(module.op.regions[0].entry, op)
    else:
        insert_after(anchor[0], op)
    anchor[0] = op
    return symbols.insert(op)


def _parse_mesh(op: Op) -> Mesh:
    try:
        return Mesh.parse(op.attributes["mesh"])
    except (KeyError, ValueError) as e:
        raise ProgramError(f"{op.where()}: cannot read the mesh: {e}") from None
