"""``from_jax``: lower a JAX function with ``jax.jit(fn).lower(*args)`` and import the StableHLO +
sdy text it produces."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shardwise.errors import MeshError
from shardwise.ir.core import Module
from shardwise.mesh import Mesh


def from_jax(
    fn: Callable[..., Any],
    *args: Any,
    mesh: Mesh | Any | None = None,
    in_specs: Sequence[Any] | None = None,
    **jit_kwargs: Any,
) -> Module:
    """Lowers ``jax.jit(fn, **jit_kwargs)`` on ``args`` (arrays or ``jax.ShapeDtypeStruct``) and
    imports the result. With ``mesh`` (a ``jax.sharding.Mesh`` or a shardwise ``Mesh``, made into
    a JAX mesh with ``AxisType.Auto`` axes, so JAX leaves propagation to Shardy) and ``in_specs``
    (one ``PartitionSpec`` or None per argument), the arguments carry those input shardings.

    Raises ``ImportError`` without jax, ``ValueError`` when ``in_specs`` does not match ``args``,
    ``MeshError`` when JAX has fewer devices than ``mesh`` (the message says how to get CPU
    devices), and what ``load_mlir`` raises.
    """
    import jax
    from jax.sharding import NamedSharding

    from shardwise.importers.mlir import load_mlir

    if in_specs is not None:
        if mesh is None or len(in_specs) != len(args):
            raise ValueError(
                f"in_specs needs a mesh and one spec per argument: {len(args)} arguments, got {in_specs!r}"
            )
        jmesh = _jax_mesh(mesh)
        args = tuple(
            jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=None if s is None else NamedSharding(jmesh, s))  # type: ignore[no-untyped-call]
            for a, s in zip(args, in_specs)
        )
    return load_mlir(jax.jit(fn, **jit_kwargs).lower(*args).as_text())


def _jax_mesh(mesh: Any) -> Any:
    import jax
    from jax.sharding import AxisType

    if not isinstance(mesh, Mesh):
        return mesh
    if mesh.device_ids:
        raise MeshError(f"meshes with an explicit device order cannot be made into a JAX mesh here: {mesh}")
    n = len(mesh.axes)
    have = len(jax.devices())
    if have < mesh.size:
        raise MeshError(
            f"mesh {mesh} needs {mesh.size} devices, JAX has {have}; for CPU devices set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={mesh.size} before jax is first imported "
            f"(e.g. os.environ['XLA_FLAGS'] = ... at the top of the script)"
        )
    return jax.make_mesh(tuple(a.size for a in mesh.axes), mesh.axis_names, axis_types=(AxisType.Auto,) * n)
