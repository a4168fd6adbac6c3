"""Local search on a strategy graph, in Rust (``rust/src/search/local.rs``). With a usage limit,
the first 80% of the time is a Lagrangian phase (``rust/src/search/lagrange.rs``; Fisher,
Mgmt. Sci. 1981): memory priced per time point (projected subgradient steps), the priced problem
solved by descent, exact dynamic programming over spanning forests that take the edges with
forbidden (>= 10**18) entries first, and (graphs of at most 4096 nodes, or without forbidden edge
entries) PBQP by graph reduction (``rust/src/search/pbqp.rs``; Scholz & Eckstein 2002: exact
R0/R1/R2 folds, heuristic RN with a pilot look-ahead), each result repaired to fit the limit (cheapest cost per
byte freed at the peak) and improved by feasible descent. The best feasible assignment (or the
least-usage one, feasible iff the instance is) then goes through coordinate descent over nodes
and edges with exact cost deltas and a segment-tree memory check, and iterated local search
(Lourenço, Martin & Stützle 2003) until the time limit. The GIL is released while it runs."""

from __future__ import annotations

import atexit
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from shardwise import _native
from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph

log = logging.getLogger("shardwise.search")


@dataclass(frozen=True)
class Solution:
    """A solver's answer: ``assignment`` (strategy index per node), its exact ``cost``,
    ``peak_usage``, ``feasible``, the ``method`` that found it, whether it is proven
    ``optimal`` (ILP only), the ``seconds`` the solver ran, whether a Ctrl-C (or
    :func:`request_stop`) ``interrupted`` it (the answer is then the best found so far), a
    ``note`` for the user (e.g. why another method than the one asked for ran), or ``""``, and
    a proven ``lower_bound`` of the optimum where the solver gives one (the ILP: HiGHS's dual
    bound), else ``None``."""

    assignment: tuple[int, ...]
    cost: int
    peak_usage: int
    feasible: bool
    method: str
    optimal: bool = False
    seconds: float = 0.0
    interrupted: bool = False
    note: str = ""
    lower_bound: int | None = None


_STOP = threading.Event()
_LOCK = threading.Lock()
_HOOKS: dict[int, Callable[[], None]] = {}
_HOOK_IDS = iter(range(1 << 62))
#: The graph of the search :func:`interruptible` runs, and the best answer offered for it.
_TOP: list[object] = [None]
_INCUMBENT: list[Solution] = []
#: Counts :func:`interruptible`'s calls: an abandoned search lifts the stop it leaves standing
#: when it ends, unless another search began since.
_GENERATION = [0]

#: Seconds a stopped search may take to hand back its answer before :func:`interruptible`
#: returns the best one offered so far instead (HiGHS's presolve and a toulbar2 worker's
#: set-up do not answer interrupts) ...
GRACE_SECONDS = 0.5
#: ... how often its main thread looks ...
POLL_SECONDS = 0.05
#: ... and the seconds past its deadline after which it stops the search itself, as a Ctrl-C.
OVERRUN_SECONDS = 1.0


def request_stop() -> None:
    """Asks every search running in this process to stop and return its best answer so far:
    the Rust searches at their next deadline check (``_native.search_stop``), HiGHS at its
    next interrupt callback, toulbar2 workers at once (their time-out signal, then a kill);
    searches started while the request stands return at once. Process-wide, as a Ctrl-C is;
    :func:`clear_stop` lifts it."""
    _STOP.set()
    _native.search_stop(True)
    with _LOCK:
        hooks = list(_HOOKS.values())
    for hook in hooks:
        hook()


def clear_stop() -> None:
    """Lifts :func:`request_stop`: searches run to their time limits again (the parts already
    stopped stay stopped)."""
    _STOP.clear()
    _native.search_stop(False)


def stop_requested() -> bool:
    """Whether :func:`request_stop` is in force."""
    return _STOP.is_set()


@contextmanager
def on_stop(hook: Callable[[], None]) -> Iterator[threading.Event]:
    """Calls ``hook()`` (from the thread that requests the stop; it must not block) if
    :func:`request_stop` is called while the block runs, or at once if it was already; yields
    an event set at that moment, which stays set after :func:`clear_stop`."""
    stopped = threading.Event()

    def fire() -> None:
        stopped.set()
        hook()

    with _LOCK:
        key = next(_HOOK_IDS)
        _HOOKS[key] = fire
    try:
        if _STOP.is_set():
            fire()
        yield stopped
    finally:
        with _LOCK:
            del _HOOKS[key]


def offer_incumbent(graph: object, sol: Solution) -> None:
    """Offers ``sol``, an answer for ``graph``, as the best so far of the search
    :func:`interruptible` runs (kept when it is that search's graph and better: feasible first,
    then cheaper); returned if the search must be abandoned."""
    with _LOCK:
        if graph is _TOP[0] and (
            not _INCUMBENT or (not sol.feasible, sol.cost) < (not _INCUMBENT[0].feasible, _INCUMBENT[0].cost)
        ):
            _INCUMBENT[:] = [sol]


T = TypeVar("T")


def wait_for(event: threading.Event, seconds: float | None = None) -> bool:
    """Waits until ``event`` is set or ``seconds`` have passed (``None``: no limit); returns
    whether it is set. For the main thread, which signals interrupt: it sleeps and looks at the
    flag instead of waiting on the event's condition, because a ``KeyboardInterrupt`` raised
    inside ``Condition.wait`` can leave the condition's lock released, and leaving the ``with``
    block then raises ``RuntimeError: release unlocked lock`` instead (seen under SIGINT with
    CPython 3.11, in ``Event.wait``). The sleeps grow from 0.2 ms to :data:`POLL_SECONDS`, so
    a short run is answered at once."""
    end = None if seconds is None else time.monotonic() + seconds
    nap = 0.0002
    while not event.is_set():
        if end is not None:
            left = end - time.monotonic()
            if left <= 0:
                return False
            nap = min(nap, left)
        time.sleep(nap)
        nap = min(nap * 2, POLL_SECONDS)
    return True


class OnThread(Generic[T]):
    """``run()`` on a daemon thread of its own, named ``name`` (a daemon thread does not hold up
    the process's exit, so one that is abandoned finishes in the background or not at all).
    ``on_end`` is called on that thread once ``run`` has returned or raised. :attr:`done` is set
    when it has ended; :meth:`result` then gives its answer or raises its exception."""

    def __init__(self, run: Callable[[], T], name: str, on_end: Callable[[], None] | None = None) -> None:
        self.done = threading.Event()
        self._box: list[T] = []
        self._errors: list[BaseException] = []

        def target() -> None:
            try:
                self._box.append(run())
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread, which raises it
                self._errors.append(e)
            finally:
                with _LOCK:
                    _RUNNING.discard(self)
                self.done.set()
                if on_end is not None:
                    on_end()

        with _LOCK:
            _RUNNING.add(self)
        threading.Thread(target=target, name=name, daemon=True).start()

    @property
    def failed(self) -> BaseException | None:
        """The exception ``run`` raised, if it has ended with one."""
        return self._errors[0] if self._errors else None

    def result(self) -> T:
        """The answer of ``run`` once :attr:`done` is set; its exception is raised here."""
        if self._errors:
            raise self._errors[0]
        return self._box[0]


#: :class:`OnThread` runs that have not ended (some abandoned by their caller).
_RUNNING: set[OnThread[Any]] = set()
#: Seconds the interpreter's exit waits for each of them once stopped (:func:`_stop_at_exit`).
EXIT_WAIT_SECONDS = 10.0


@atexit.register
def _stop_at_exit() -> None:
    """At the interpreter's exit, stops the :class:`OnThread` runs still going (a last merge or
    descent round the search left to end in the background) and waits for each, at most
    :data:`EXIT_WAIT_SECONDS`: a HiGHS run still going on its daemon thread when the C++
    static destructors run aborts the process ("terminate called without an active
    exception", SIGABRT, after a K run had printed its answer). Python's exit handlers run
    before those destructors."""
    with _LOCK:
        running = list(_RUNNING)
    if not running:
        return
    request_stop()
    for r in running:
        r.done.wait(EXIT_WAIT_SECONDS)


def interruptible(run: Callable[[], Solution], graph: object = None, time_limit: float | None = None) -> Solution:
    """``run()``, made to answer Ctrl-C and to keep its time limit: from the main thread,
    ``run`` goes to a worker thread and the main thread waits, so a ``KeyboardInterrupt``
    reaches it at once even while the search holds no GIL (Rust, HiGHS) or waits on a
    toulbar2 worker.

    On the first Ctrl-C every search is asked to stop (:func:`request_stop`) and its answer
    returned with ``interrupted=True``; a search that has not answered after
    :data:`GRACE_SECONDS` is abandoned (it goes on in the background, asked to stop, and
    lifts the request when it ends unless another search began meanwhile) and the
    best answer offered for ``graph`` (:func:`offer_incumbent`) returned instead, marked
    interrupted. With ``time_limit`` (seconds from the call), a search still running
    :data:`OVERRUN_SECONDS` past it is stopped the same way (its answer is not marked
    interrupted). A second Ctrl-C while waiting, or a Ctrl-C when ``run`` ended with an error
    or nothing was offered, raises ``KeyboardInterrupt``; other exceptions in the main thread
    (``SystemExit`` from SIGTERM) also stop the search and propagate. From any other thread
    ``run()`` is called directly."""
    if threading.current_thread() is not threading.main_thread():
        return run()
    clear_stop()  # a stop left standing by an abandoned search (its parts keep theirs)
    with _LOCK:
        _TOP[0] = graph
        _INCUMBENT.clear()
        _GENERATION[0] += 1
        generation = _GENERATION[0]
    abandoned = threading.Event()

    def ended() -> None:
        with _LOCK:
            last = _GENERATION[0] == generation
        if abandoned.is_set() and last:
            clear_stop()

    # Its event is waited on instead of the thread: a KeyboardInterrupt inside Thread.join()
    # can leave the thread looking finished while it runs on (CPython 3.11's
    # _wait_for_tstate_lock).
    search = OnThread(run, "shardwise-search", ended)
    done = search.done
    end = None if time_limit is None else time.perf_counter() + time_limit + OVERRUN_SECONDS
    interrupted = overran = False
    try:
        while not wait_for(done, POLL_SECONDS):
            if end is not None and time.perf_counter() > end:
                overran = True
                break
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        request_stop()
        wait_for(done, GRACE_SECONDS)
        raise
    if interrupted or overran:
        request_stop()
        wait_for(done, GRACE_SECONDS)  # a second Ctrl-C propagates
        with _LOCK:
            offered = list(_INCUMBENT)
        if not done.is_set():
            if offered:  # the search is abandoned, asked to stop; its best answer so far
                abandoned.set()
                log.debug(
                    "search abandoned (%s): the best answer offered so far, %.6g by %s",
                    "interrupted" if interrupted else "overran",
                    offered[0].cost,
                    offered[0].method,
                )
                why = "interrupted" if interrupted else f"still running {OVERRUN_SECONDS:g} s past its time limit"
                return replace(
                    offered[0], interrupted=interrupted, note=f"search {why}: the best answer offered so far"
                )
            wait_for(done)  # nothing to answer with yet: wait for it
        clear_stop()
    with _LOCK:
        _TOP[0] = None
        _INCUMBENT.clear()
    if interrupted and search.failed is not None:
        raise KeyboardInterrupt from search.failed
    return replace(search.result(), interrupted=True) if interrupted else search.result()


def check_time_limit(time_limit: float) -> float:
    """Seconds as a float; raises :class:`SearchError` unless finite and >= 0."""
    t = float(time_limit)
    if not (math.isfinite(t) and t >= 0):
        raise SearchError(f"time_limit: expected a finite number of seconds >= 0, got {time_limit!r}")
    return t


_NATIVE: weakref.WeakKeyDictionary[StrategyGraph, _native.StrategyGraph] = weakref.WeakKeyDictionary()
_NATIVE_LOCK = threading.Lock()


def native_graph(graph: StrategyGraph) -> _native.StrategyGraph:
    """``graph`` as the Rust searches take it (``rust/src/py/search.rs``, ``StrategyGraph``):
    converted the first time (its int64 arrays as little-endian bytes; 0.1 to 0.4 s on the
    contest's largest instances, with the GIL held) and kept while ``graph`` lives (a copy of
    its arrays, 8 bytes per cost, usage and edge-cost entry), so that the searches of a
    portfolio, called many times on one graph, never convert it again. A ``StrategyGraph``'s
    arrays are not to be changed once it is built (it is frozen)."""
    with _NATIVE_LOCK:
        found = _NATIVE.get(graph)
    if found is not None:
        return found
    le = np.dtype("<i8")
    made = _native.StrategyGraph(
        [int(x) for x in graph.offsets],
        graph.cost.astype(le).tobytes(),
        graph.usage.astype(le).tobytes(),
        [(int(a), int(b)) for a, b in graph.intervals],
        [(int(a), int(b)) for a, b in graph.edges],
        [int(x) for x in graph.edge_offsets],
        graph.edge_cost.astype(le).tobytes(),
        graph.usage_limit,
    )
    return keep_native_graph(graph, made)


def keep_native_graph(graph: StrategyGraph, native: _native.StrategyGraph) -> _native.StrategyGraph:
    """Records ``native`` as ``graph``'s Rust copy for :func:`native_graph` (a reader that made
    both at once, :func:`shardwise.search.read_instance`, spares the conversion); the copy
    already recorded if there is one."""
    with _NATIVE_LOCK:
        return _NATIVE.setdefault(graph, native)


def solve_local(
    graph: StrategyGraph,
    time_limit: float = 10.0,
    *,
    seed: int = 0,
    initial: Sequence[int] | None = None,
    max_rounds: int | None = None,
    lagrange_share: float = 0.8,
) -> Solution:
    """Best assignment local search finds within ``time_limit`` seconds (wall clock).

    ``initial``: a warm start; one over the usage limit is first repaired (usage-lowering
    moves, cheapest per byte freed) and used if that makes it fit. ``max_rounds`` caps the
    perturbation rounds (the result then depends only on ``seed``). ``lagrange_share``: the
    share of the time (0 to 1) for the Lagrangian memory-price phase before the feasible search
    (0: polish ``initial`` only). From the main thread a Ctrl-C stops it at once with its best
    assignment (``Solution.interrupted``; :func:`interruptible`). Raises :class:`SearchError`
    for a bad time limit or share, or a warm start of the wrong length / out-of-range index.
    """

    t = check_time_limit(time_limit)
    if not 0.0 <= lagrange_share <= 1.0:
        raise SearchError(f"lagrange_share: expected a share of the time limit in [0, 1], got {lagrange_share!r}")
    if initial is not None and len(initial) != graph.num_nodes:
        raise SearchError(f"initial: expected {graph.num_nodes} strategy indices, got {len(initial)}")
    start = time.perf_counter()

    def run() -> Solution:
        try:
            native = native_graph(graph)
            warm_w = None if initial is None else [int(x) for x in initial]
            # The limit counts from the call: converting the graph the first time takes its
            # share (0.46 s of a 9.7M-entry instance, which the search then overran its limit by).
            left = max(t - (time.perf_counter() - start), 0.0)
            r = _native.search_local(native, left, seed, warm_w, max_rounds, lagrange_share)
        except _native.InvalidShardingError as e:
            raise SearchError(str(e)) from None
        except OverflowError:
            raise SearchError("initial: strategy indices must be >= 0") from None
        sol = Solution(
            tuple(r.assignment),
            int(r.cost),
            int(r.peak_usage),
            bool(r.feasible),
            "local",
            seconds=time.perf_counter() - start,
        )
        offer_incumbent(graph, sol)
        return sol

    return interruptible(run, graph, t)


def lagrange_prices(
    graph: StrategyGraph, time_limit: float, *, seed: int = 0, max_cycles: int | None = None
) -> tuple[npt.NDArray[np.float64], float] | None:
    """Memory prices from the Lagrangian cycles of the local search alone
    (``rust/src/search/lagrange.rs``, ``lagrange_prices``; Fisher, Mgmt. Sci. 1981), run for
    ``time_limit`` seconds or ``max_cycles`` cycles: per node, a price in cost units per usage
    unit (shape ``(num_nodes,)``) under which the priced assignment (descent and exact forest
    moves, not an exact optimum) fits the usage limit: the average of the cycles' prices from the
    first one whose priced assignment fitted (else the last prices); and the overflow of the
    priced assignment under them as a share of the limit (<= 0: it fitted). ``None`` without a
    usage limit. Raises :class:`SearchError` for a bad time limit or graph."""

    start = time.perf_counter()
    t = check_time_limit(time_limit)
    try:
        native = native_graph(graph)
        r = _native.search_prices(native, max(t - (time.perf_counter() - start), 0.0), seed, max_cycles)
    except _native.InvalidShardingError as e:
        raise SearchError(str(e)) from None
    if r is None:
        return None
    log.debug(
        "price search: %d cycles in %.1f s, priced assignment %+.2f %% over the limit",
        r.cycles,
        time.perf_counter() - start,
        100 * r.overflow,
    )
    return np.asarray(r.prices, dtype=np.float64), float(r.overflow)
