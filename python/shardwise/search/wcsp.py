"""The relaxed problem of :mod:`shardwise.search.penalty` as a cost function network (weighted
CSP), solved by toulbar2 (``pytoulbar2``; Cooper, de Givry, Sanchez, Schiex, Zytnicki & Werner,
"Soft arc consistency revisited", Artif. Intell. 174, 2010) in a worker process.

The network is built on the exact reductions of :mod:`shardwise.search.reduce`: one variable per
free node (domain: its kept strategies), a unary cost function
``c_vs + w_v · (u_vs − min_s u_vs)`` (node cost plus the node's usage penalty ``w_v`` per unit of
usage above its least usage) and a binary cost function per edge. Entries >= 10**18 (the
contest's forbidden combinations) become :data:`HARD_COST`, which no optimum takes while a finite
alternative exists. toulbar2 searches it by DGVNS (:data:`RELAXED_OPTIONS`), trying first the
strategies of a hint (the previous relaxed optimum, :meth:`Network.solve`).

:meth:`Network.solve_limited` solves the whole problem instead: no penalties, and the usage
limit as one linear constraint per time point, ``Σ_v (u_v,x_v − min_s u_vs) <= limit − base −
Σ_v min_s u_vs`` over the free nodes live there (``base``: the usage of the fixed nodes live
there), which toulbar2 propagates as a knapsack constraint (its
``AddGeneralizedLinearConstraint``). Time points whose largest possible usage fits are left out,
and of time points with the same free nodes only the tightest is kept.

toulbar2 keeps its state in process globals, enforces its time limit with a signal and prints
to standard output, so it runs in a child process (``python -m shardwise.search.wcsp_worker``,
started with :mod:`subprocess`, hence safe beside threads and after fork): the parent sends the
graph once and then one penalty vector per solve, over pickled length-prefixed messages on the child's
standard input and a duplicate of its standard output; the child's own standard output goes to
``/dev/null``.
"""

from __future__ import annotations

import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Any, Self

import numpy as np
import numpy.typing as npt

from shardwise.errors import SearchError
from shardwise.search.graph import StrategyGraph
from shardwise.search.ilp import FORBIDDEN_COST
from shardwise.search.local import on_stop
from shardwise.search.reduce import Reduced, reduce_graph

F64 = npt.NDArray[np.float64]

#: Cost given to forbidden entries (finite, far above any real cost, exact in float64).
HARD_COST = 1e16


#: Seconds a worker has to answer after its interrupt (toulbar2's time-out signal, on which it
#: answers with its best assignment) before it is killed.
KILL_SECONDS = 0.5

#: Longest toulbar2 time limit (its timer takes a C int): a longer one means no limit in practice.
MAX_SECONDS = 2**31 - 1

#: toulbar2 options for the penalised networks: decomposition-guided variable neighbourhood
#: search (DGVNS; Ouali, Allouche, de Givry, Loudni, Lebbah, Eckhardt & Loukil, "Iterative
#: decomposition guided variable neighborhood search for graphical model energy
#: minimization", UAI 2017), the settings of pytoulbar2's ``CFN(vns=-4)``. On one relaxed
#: problem of the shared instance S, 8 CPU seconds: 1.8266e9, 1.8282e9 and 1.8294e9 (three
#: seeds) against 1.8646e9 with the defaults (hybrid best-first search; 1.8382e9 in 30 s); on
#: K: 3.1260e9 against 3.1419e9. (Eliminating variables of degree 2 in preprocessing,
#: ``elimDegree_preprocessing=2``, made toulbar2 crash on K.)
RELAXED_OPTIONS: dict[str, int] = {
    "searchMethod": 2,
    "vnsInitSol": -4,
    "lds": 4,
    "restart": 10000,
    "vnsNeighborVarHeur": 3,
}
#: toulbar2's own defaults for the same options, for the whole problem with its knapsack
#: constraints (:meth:`Network.solve_limited`).
LIMITED_OPTIONS: dict[str, int] = {"searchMethod": 0, "vnsInitSol": -4, "lds": 0, "restart": -1}


def available() -> bool:
    """True when ``pytoulbar2`` can be imported."""
    try:
        import pytoulbar2  # noqa: F401
    except ImportError:
        return False
    return True


class Network:
    """The reduced problem in toulbar2's terms, built once: free nodes, their base unary costs
    and usage above their least usage, and the flat binary cost lists."""

    def __init__(self, graph: StrategyGraph) -> None:
        self.graph = graph
        self.red: Reduced = reduce_graph(graph)
        self.free = self.red.free_nodes()
        self.index = {v: {s: j for j, s in enumerate(self.red.keep[v])} for v in self.free}
        pos = {v: i for i, v in enumerate(self.free)}
        self.unary: list[F64] = []
        self.extra_usage: list[F64] = []
        live = graph.intervals[:, 0] < graph.intervals[:, 1]
        for v in self.free:
            c = self.red.node_cost[v].astype(np.float64)
            c[self.red.node_cost[v] >= FORBIDDEN_COST] = HARD_COST
            self.unary.append(c)
            u = self.red.node_usage[v].astype(np.float64)
            self.extra_usage.append(u - u.min() if live[v] else np.zeros_like(u))
        self.binary: list[tuple[int, int, list[float]]] = []
        for (a, b), m in self.red.edges.items():
            if m.any():
                mf = m.astype(np.float64)
                mf[m >= FORBIDDEN_COST] = HARD_COST
                self.binary.append((pos[a], pos[b], mf.reshape(-1).tolist()))

    def exchange_rate(self) -> float:
        """Median over free nodes of (cost of the least-usage strategy − least cost) / usage
        saved: the price per usage unit at which a typical node is indifferent (at least 1e-9;
        1.0 when no node trades cost for usage)."""
        rates = []
        for c, u in zip(self.unary, self.extra_usage, strict=True):
            cheap, low = int(np.argmin(c)), int(np.argmin(u))
            du, dc = u[cheap] - u[low], c[low] - c[cheap]
            if du > 0 and dc > 0 and c[low] < HARD_COST:
                rates.append(dc / du)
        return max(float(np.median(rates)), 1e-9) if rates else 1.0

    def _network(self, w: F64 | None, seed: int) -> Any:
        """The toulbar2 network: variables, unary costs (penalised by ``w`` when given) and
        binary costs. A penalised network is searched by DGVNS (:data:`RELAXED_OPTIONS`), the
        whole problem by toulbar2's defaults
        (:data:`LIMITED_OPTIONS`); toulbar2's options are process globals, so both are set
        each time."""
        import pytoulbar2

        cfn = pytoulbar2.CFN(verbose=-1, seed=seed)
        for name, value in (RELAXED_OPTIONS if w is not None else LIMITED_OPTIONS).items():
            setattr(cfn.Option, name, value)
        for i, v in enumerate(self.free):
            cfn.AddVariable(f"x{v}", list(range(len(self.unary[i]))))
        for i, v in enumerate(self.free):
            c = self.unary[i] + w[v] * self.extra_usage[i] if w is not None and w[v] > 0 else self.unary[i]
            cfn.AddFunction([i], np.round(c).tolist())
        for a, b, costs in self.binary:
            cfn.AddFunction([a, b], costs)
        return cfn

    def _solved(self, cfn: Any, seconds: int) -> list[int] | None:
        res = cfn.Solve(timeLimit=min(max(int(seconds), 1), MAX_SECONDS))
        if not res:
            return None
        return self.red.expand({v: int(res[0][i]) for i, v in enumerate(self.free)})

    def solve(self, w: F64, seconds: int, seed: int, hint: list[int] | None = None) -> list[int] | None:
        """Strategy per node of the penalised network's optimum, or toulbar2's best within
        ``seconds`` CPU seconds (at least 1); ``None`` if it found none. ``hint``: an
        assignment whose strategies toulbar2 tries first (its value heuristic)."""
        cfn = self._network(w, seed)
        if hint is not None:
            wcsp = cfn.CFN.wcsp
            for i, v in enumerate(self.free):
                j = self.index[v].get(hint[v])
                if j is not None:
                    wcsp.setBestValue(i, j)
        return self._solved(cfn, seconds)

    def usage_constraints(self) -> list[tuple[list[tuple[int, int, int]], int]]:
        """The usage limit as linear constraints (module docstring): per kept time point,
        ``(terms, bound)`` with ``terms`` as ``(variable, value, coefficient)`` and the
        constraint ``Σ coefficient · [x_variable == value] <= bound``. Empty without a limit."""
        g = self.graph
        if g.usage_limit is None:
            return []
        p, first, last = g.time_points()
        live_free: list[list[int]] = [[] for _ in range(p)]
        base = [0] * p
        for v in range(g.num_nodes):
            if first[v] >= last[v]:
                continue
            keep = self.red.keep[v]
            if len(keep) == 1:
                u = int(g.node_usages(v)[keep[0]])
                for t in range(int(first[v]), int(last[v])):
                    base[t] += u
            else:
                for t in range(int(first[v]), int(last[v])):
                    live_free[t].append(v)
        least = {v: int(self.red.node_usage[v].min()) for v in self.free}
        most = {v: int(self.red.node_usage[v].max()) for v in self.free}
        tightest: dict[tuple[int, ...], int] = {}
        for t in range(p):
            nodes = tuple(live_free[t])
            room = g.usage_limit - base[t] - sum(least[v] for v in nodes)
            if sum(most[v] - least[v] for v in nodes) <= room:
                continue
            if nodes not in tightest or room < tightest[nodes]:
                tightest[nodes] = room
        pos = {v: i for i, v in enumerate(self.free)}
        out = []
        for nodes, room in tightest.items():
            terms = [
                (pos[v], s, int(u) - least[v])
                for v in nodes
                for s, u in enumerate(self.red.node_usage[v])
                if int(u) > least[v]
            ]
            out.append((terms, room))
        return out

    def solve_limited(self, seconds: float, seed: int) -> list[int] | None:
        """Strategy per node of the whole problem's optimum, the usage limit included (module
        docstring), or toulbar2's best within ``seconds`` (building the constraints included;
        toulbar2 gets the whole CPU seconds left, at least 1); ``None`` if it found none (or the
        limit cannot be met)."""
        begin = time.perf_counter()
        cfn = self._network(None, seed)
        for terms, room in self.usage_constraints():
            if room < 0:
                return None
            if terms:
                cfn.AddGeneralizedLinearConstraint(terms, "<=", room)
        return self._solved(cfn, int(seconds - (time.perf_counter() - begin)))


def send(out: IO[bytes], obj: Any) -> None:
    """Writes ``obj`` pickled, after its length (8 bytes, little-endian)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()


def recv(inp: IO[bytes]) -> Any:
    """Reads one message written by :func:`send`; ``EOFError`` when the pipe is closed."""
    head = inp.read(8)
    if len(head) < 8:
        raise EOFError("the other side closed the pipe")
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(inp.read(n))


class WorkerStopped(SearchError):
    """A toulbar2 worker was interrupted (its deadline, or a stop request:
    :func:`shardwise.search.local.request_stop`) and killed before it answered."""


class RelaxedSolver:
    """A toulbar2 worker process holding one graph's network (module docstring). Use as a
    context manager, or call :meth:`close`.

    ``deadline`` (a :func:`time.perf_counter` time; ``None``: none) bounds every call, the
    network's construction included, as a stop request (:func:`shardwise.search.local.request_stop`)
    does at any time: the worker gets toulbar2's time-out signal (a solve then answers with
    its best assignment) and is killed if it has not answered :data:`KILL_SECONDS` later.

    Raises :class:`SearchError` when ``pytoulbar2`` is missing or the worker fails,
    :class:`WorkerStopped` when it was interrupted before its network was built."""

    def __init__(self, graph: StrategyGraph, deadline: float | None = None) -> None:
        if not available():
            raise SearchError("method 'penalty' needs pytoulbar2 (pip install pytoulbar2)")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "shardwise.search.wcsp_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in, self._out = self._proc.stdout, self._proc.stdin
        self._n = int(getattr(graph, "num_nodes", 0))
        self._deadline = deadline
        self._lock = threading.Lock()
        #: Whether the worker was interrupted (it answers no more solves after that).
        self.interrupted = False
        try:
            rate, seconds = self._call(graph)
            self.exchange_rate: float = float(rate)
            #: Seconds the worker took to build the network (the worker process's start and
            #: imports excluded): about what each solve's set-up costs again.
            self.build_seconds: float = float(seconds)
        except SearchError:
            self.close()
            raise

    def _interrupt(self) -> None:
        """toulbar2's time-out signal to the worker (a solve answers with its best; elsewhere
        the signal ends the worker), and a kill :data:`KILL_SECONDS` later."""
        with self._lock:
            if self.interrupted or self._proc.poll() is not None:
                return
            self.interrupted = True
        try:
            self._proc.send_signal(signal.SIGVTALRM)
        except OSError:  # ended already
            return
        killer = threading.Timer(KILL_SECONDS, self._kill)
        killer.daemon = True
        killer.start()

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()

    def _call(self, msg: Any) -> Any:
        if self.interrupted:
            raise WorkerStopped("toulbar2 worker: interrupted (deadline or stop request)")
        timer = None
        if self._deadline is not None:
            timer = threading.Timer(max(self._deadline - time.perf_counter(), 0.0), self._interrupt)
            timer.daemon = True
            timer.start()
        try:
            with on_stop(self._interrupt):
                send(self._out, msg)
                kind, value = recv(self._in)
        except (OSError, EOFError, ValueError) as e:  # ValueError: the pipe is closed
            self.close()
            if self.interrupted:
                raise WorkerStopped(
                    "toulbar2 worker: interrupted (deadline or stop request) before it answered"
                ) from None
            raise SearchError(f"toulbar2 worker: expected a reply, got {type(e).__name__}: {e}") from None
        finally:
            if timer is not None:
                timer.cancel()
        if kind == "error":
            raise SearchError(f"toulbar2 worker: {value}")
        return value

    def solve(self, w: F64, seconds: int, seed: int, hint: list[int] | None = None) -> list[int] | None:
        """Optimum (or best within ``seconds`` CPU seconds, or by the deadline or a stop
        request) of the network with usage penalties ``w`` (shape ``(num_nodes,)``, cost per
        usage unit); ``None`` if none was found (or the worker was interrupted before it had
        one). ``hint``: an assignment (strategy per node) whose strategies toulbar2 tries first."""
        w = np.asarray(w, dtype=np.float64)
        if w.shape != (self._n,):
            raise SearchError(f"w: expected one penalty per node, shape ({self._n},), got shape {w.shape}")
        if hint is not None and len(hint) != self._n:
            raise SearchError(f"hint: expected one strategy per node ({self._n}), got {len(hint)}")
        try:
            result: list[int] | None = self._call((w, int(seconds), int(seed), None if hint is None else list(hint)))
        except WorkerStopped:
            return None
        return result

    def solve_limited(self, seconds: float, seed: int) -> list[int] | None:
        """Optimum (or best within ``seconds``, or by the deadline or a stop request) of the
        whole problem, the usage limit as linear constraints (see
        :meth:`Network.solve_limited`); ``None`` if none was found."""
        try:
            result: list[int] | None = self._call(("limited", float(seconds), int(seed)))
        except WorkerStopped:
            return None
        return result

    def close(self) -> None:
        """Stops the worker and closes its pipes (idempotent)."""
        if self._proc.poll() is None:
            try:
                send(self._out, None)
            except (OSError, ValueError):  # ValueError: closed already
                pass
            try:
                self._proc.wait(timeout=KILL_SECONDS if self.interrupted else 5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for pipe in (self._out, self._in):
            try:
                pipe.close()
            except OSError:
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
