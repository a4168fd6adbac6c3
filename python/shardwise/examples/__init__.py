"""Example programs shipped with shardwise (package data), as JAX 0.10.2 lowered them on a 2x4
mesh: ``shardwise example NAME -o FILE`` writes one, ``text(NAME)`` returns it.

* ``transformer_step``: one transformer block's training step (``jax.value_and_grad`` of
  attention + MLP), from XLA's dump (calls inlined), batch on ``x``, weights on ``y``;
* ``mlp_adam``: a flax MLP classifier's training step with optax's adam, lowered raw with
  ``jax.jit(step).lower(...).as_text()``: private functions and ``func.call`` as a user gets
  them, batch on ``data``, weights on ``model``.
"""

from __future__ import annotations

from importlib.resources import files

from shardwise.errors import ShardwiseError

__all__ = ["EXAMPLES", "names", "text"]

#: name -> one line on what the program is.
EXAMPLES = {
    "transformer_step": "a transformer block's training step (attention + MLP, value_and_grad), mesh x=2,y=4",
    "mlp_adam": "a flax MLP + optax adam training step, raw jax.jit lowering with func.call, mesh data=2,model=4",
}


def names() -> list[str]:
    """The names of the bundled example programs."""
    return list(EXAMPLES)


def text(name: str) -> str:
    """The MLIR text of example ``name``; ``ShardwiseError`` naming the examples otherwise."""
    if name not in EXAMPLES:
        raise ShardwiseError(f"no example {name!r}; the examples are {', '.join(EXAMPLES)}")
    return files("shardwise.examples").joinpath(f"{name}.mlir").read_text()
