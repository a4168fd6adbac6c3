"""The shardwise exception family. Every class is a ``ValueError``.

``ShardwiseError``
  ├─ ``ShardingError``: a mesh or sharding is malformed, invalid or not convertible
  │    ├─ ``ShardingParseError``: malformed text; ``.offset`` is where parsing stopped
  │    ├─ ``InvalidShardingError``: an invariant is broken; ``.rule`` names it
  │    │    (e.g. ``"duplicate-axis"``, ``"unsorted-replicated"``, ``"dim-exhausted"``; the list
  │    │    is in ``rust/src/sharding.rs``)
  │    │    └─ ``InvalidRuleError``: an operation sharding rule breaks an invariant
  │    │         (identifiers in ``rust/src/rule.rs`` and ``rust/src/rule/``)
  │    ├─ ``MeshError``: a mesh is malformed, or a named mesh is missing
  │    └─ ``ConversionError``: another format cannot express the value
  ├─ ``ProgramError``: a program (MLIR text or IR) is malformed or unsupported; the message
  │    names the op and its source location
  │    ├─ ``LaunchError``: an MPI job of ``shardwise launch`` ended badly
  │    │    └─ ``LaunchTimeout``: it ran past its timeout
  │    └─ ``RankAborted``: a simulated rank stopped because another rank failed
  ├─ ``PipelineError``: a pass pipeline cannot be run (malformed text, unknown pass or option)
  ├─ ``UnknownValueError``: a value name that names no value of the module
  ├─ ``OpInfoError``: an op cannot be read by the rule registry (a missing or malformed
  │    attribute, shapes that do not fit the op)
  └─ ``SearchError``: a strategy graph or search input (IOPDDL instance, memory budget,
       method, assignment) is malformed or out of range

and one warning, ``PassWarning`` (a ``UserWarning``): a pass did what Shardy warns about.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shardwise.ir.core import Module
    from shardwise.search.report import Report

from shardwise._native import (
    ConversionError,
    InvalidRuleError,
    InvalidShardingError,
    MeshError,
    ShardingError,
    ShardingParseError,
    ShardwiseError,
)


class ProgramError(ShardwiseError):
    """A program is malformed or uses something shardwise does not support; the message names
    the op and its location (``loc("file":line:col)``) when known."""


class LaunchError(ProgramError):
    """An MPI job ended badly. ``returncode``: mpiexec's exit status (``None`` after a
    timeout); ``rank``: the first rank that reported a failure (``None`` when none did);
    ``output``: the job's combined stdout and stderr (lines prefixed ``[rank]``)."""

    def __init__(self, message: str, *, returncode: int | None, rank: int | None, output: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.rank = rank
        self.output = output


class LaunchTimeout(LaunchError):
    """The job ran past its timeout and its process group was killed."""


class RankAborted(ProgramError):
    """Raised in a rank waiting in a collective when another rank failed."""


class PipelineError(ShardwiseError):
    """A pass pipeline cannot be run: malformed pipeline text, an unknown pass or option, an
    option value of the wrong type, or a pass shardwise does not implement here."""


class UnknownValueError(ShardwiseError):
    """A value name that names no value of the module (the message lists close names)."""


class OpInfoError(ShardwiseError):
    """An op description cannot be read: a missing or malformed attribute, or shapes that do
    not fit the op. The message names the op, the attribute or value, what was expected and
    what was got."""


class SearchError(ShardwiseError):
    """A sharding-search input is malformed: a strategy graph or IOPDDL instance (the message
    names the node or edge), an assignment, a memory budget, a method or a time limit."""


class InfeasibleBudget(SearchError):
    """No plan the search found fits the memory budget. The message names the budget, the
    smallest peak found, a lower bound on any plan's peak and the nodes that dominate the peak;
    ``module`` and ``report`` hold that plan (``report.feasible`` is false)."""

    def __init__(self, message: str, module: "Module", report: "Report") -> None:
        super().__init__(message)
        self.module = module
        self.report = report


class PassWarning(UserWarning):
    """A pass did what Shardy warns about (e.g. cloning a function called several times)."""


__all__ = [
    "ConversionError",
    "InfeasibleBudget",
    "InvalidRuleError",
    "InvalidShardingError",
    "LaunchError",
    "LaunchTimeout",
    "MeshError",
    "OpInfoError",
    "PassWarning",
    "PipelineError",
    "ProgramError",
    "RankAborted",
    "SearchError",
    "ShardingError",
    "ShardingParseError",
    "ShardwiseError",
    "UnknownValueError",
]
