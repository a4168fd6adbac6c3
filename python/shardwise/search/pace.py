"""HiGHS's pace on the ILPs of one search: seconds against the reduced model's columns.

The penalty search (:mod:`shardwise.search.penalty`) merges pools of assignments of one graph
many times (:mod:`shardwise.search.merge`); each merge is an ILP over a sub-instance of the same
graph. The first merges are small (the start merges span three assignments); a whole merge of
the pool spans every basin the search has visited and can be several times larger. HiGHS's time
grew about with the square of the reduced model's columns over the merges of one run: on the
validation instance N (docs/search.md, twenty-fifth session) start merges of 6,790 / 11,424 /
31,750 columns took 0.2 / 0.6 / 5.0 s (log-log slope 2.1), and the whole merge of 65,102 columns
that followed ran out of its 30 s without improving the best. :class:`HighsPace` records each
run and predicts a new model's seconds as ``t_ref * (columns / c_ref) ** PACE_EXPONENT`` from the
largest model HiGHS solved to optimality so far; :func:`shardwise.search.ilp.solve_ilp` raises
:class:`TooSlow` (after its reductions and build, before HiGHS runs) when the prediction is over
the share of its time the caller allows, so the caller spends the time elsewhere.
"""

from __future__ import annotations

import threading

from shardwise.errors import SearchError

#: Exponent of HiGHS's seconds in the reduced model's columns (module docstring).
PACE_EXPONENT = 2.0


class TooSlow(SearchError):
    """HiGHS is predicted (:class:`HighsPace`) to need more of the time than its caller allows;
    raised before HiGHS runs. ``columns``: the reduced model's; ``predicted`` and ``allowed``:
    seconds."""

    def __init__(self, columns: int, predicted: float, allowed: float) -> None:
        super().__init__(
            f"ILP of {columns} columns: HiGHS predicted to take {predicted:.1f} s, over the {allowed:.1f} s allowed"
        )
        self.columns = columns
        self.predicted = predicted
        self.allowed = allowed


class HighsPace:
    """HiGHS's runs on the ILPs of one search (module docstring); safe to share between threads.
    :meth:`predict` answers from the largest model (columns) HiGHS solved to optimality."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (columns, seconds) of the largest model solved to optimality so far; columns 0: none.
        self.reference = (0, 0.0)

    def record(self, columns: int, seconds: float, optimal: bool) -> None:
        """One ILP's HiGHS runs: the reduced model's ``columns`` and HiGHS's ``seconds`` (every
        run of its lazy usage rows together), ``optimal`` when it proved its optimum (only those
        become the reference: a run the clock stopped says only that it takes longer)."""
        if not optimal or columns <= 0:
            return
        with self._lock:
            if columns >= self.reference[0]:
                self.reference = (columns, max(seconds, 0.0))

    def predict(self, columns: int) -> float | None:
        """Predicted HiGHS seconds for a model of ``columns`` columns; ``None`` before any
        optimal run was recorded."""
        c_ref, t_ref = self.reference
        if c_ref <= 0:
            return None
        return float(t_ref * (columns / c_ref) ** PACE_EXPONENT)
