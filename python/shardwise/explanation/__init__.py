"""``shardwise.explanation``: ``explain(module, value)``, why a value got its sharding.

``explain(module, value)`` propagates ``module`` (a copy) with the solver's records on
(``PropagationTrace``: the data of Shardy's ``debug-sharding-origins`` and
``debug-propagation-edge-sharding``, plus the layer of each step and the axes dropped by
conflicts, ``rust/src/propagation/explain.rs``) and returns an ``Explanation`` of ``value``:

* its final sharding;
* per axis of it: the user sharding it came from (a function argument or result, a sharding
  constraint, a manual computation's in or out sharding: Shardy's origin, with the op and its
  location), the layer that decided it (user priority, op priority step, basic or aggressive
  strategy: the layer of the step that brought it) and the chain of steps it travelled from
  the user sharding to the value (op, location, factor of the op's sharding rule, the operand or
  result it entered by and left by, step and layer), found by following the recorded moves
  backwards, each to an earlier step;
* the axes it could have had but does not: each axis that another operand or result of an op
  had along a factor of the value and that the value did not take, with the reason (see
  ``shardwise.propagation.records.REASONS``: another sharding of the same factor, an axis used by another factor, a
  closed or lower-priority dimension, a non-divisible size, ...) and what it conflicted with,
  as decided at the last visit of the op.

Values are named as the printed module names them (``names``): ``%12``, ``%arg0``, ``result0``,
``@f:%3``. ``Explanation.to_dict()`` is JSON-serialisable (schema in ``Explanation``);
``Explanation.render()`` gives rich tables.

Modules: ``model`` (the ``Explanation`` data and its dict form), ``names`` (value names),
``build`` (``explain``: propagating with the solver's records and building the explanation;
it sits above ``shardwise.api``), ``render`` (rich tables).
"""

from __future__ import annotations

from shardwise.explanation.build import explain
from shardwise.explanation.model import AxisExplanation, ChainStep, DroppedAxis, Explanation, OriginInfo
from shardwise.explanation.names import UnknownValueError

__all__ = ["AxisExplanation", "ChainStep", "DroppedAxis", "Explanation", "OriginInfo", "UnknownValueError", "explain"]
