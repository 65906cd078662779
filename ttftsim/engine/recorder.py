"""Collects what the engine does: one row per request, one row per iteration, inter-token latencies.

Rows are appended in simulation order and kept as numpy columns, a chunk at a time (Columns); inter-token
gaps in typed arrays. The frames are built at the end. Rows for requests still in flight are added by
`close()` at the horizon.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttftsim.engine.state import RequestState

REQUEST_COLUMNS = (
    "request_id",
    "replica",
    "status",
    "reason",
    "arrival_s",
    "first_scheduled_s",
    "first_token_s",
    "finish_s",
    "prompt_tokens",
    "output_tokens",
    "generated_tokens",
    "cached_tokens",
    "num_preemptions",
    "first_preempt_s",
    "ttft_s",
    "gateway_s",
    "queue_s",
    "recompute_s",
    "prefill_s",
    "waiting_s",
    "stream_s",
    "frontend_s",
    "tpot_s",
    "e2e_s",
    "priority",
    "session_id",
)
_INT_COLUMNS = (
    "request_id",
    "replica",
    "prompt_tokens",
    "output_tokens",
    "generated_tokens",
    "cached_tokens",
    "num_preemptions",
    "priority",
    "session_id",
)
_TEXT_COLUMNS = ("status", "reason")
_REQUEST_DTYPES = {
    c: ("int64" if c in _INT_COLUMNS else "object" if c in _TEXT_COLUMNS else "float64") for c in REQUEST_COLUMNS
}
STEP_COLUMNS = ("time_s", "duration_s", "replica", "num_tokens", "running", "waiting", "kv_usage", "num_steps")
_STEP_DTYPES = {c: ("float64" if c in ("time_s", "duration_s", "kv_usage") else "int64") for c in STEP_COLUMNS}
CHUNK_ROWS = 1 << 16  # rows held as tuples before they become one chunk of columns


class Columns:
    """A table appended row by row: the newest rows as tuples (an append is one list append), every
    CHUNK_ROWS of them turned into one numpy array per column (8 bytes a number, where a row tuple of
    Python objects takes about 35: some 28 million iterations in a day, about 7.8 GB as tuples, 1.8 GB so).
    `frame()` joins the chunks once and builds the frame on those arrays without copying them again; rows
    appended later go to new chunks, so a frame already built keeps its rows."""

    def __init__(self, columns: tuple[str, ...], dtypes: dict[str, str], chunk_rows: int = CHUNK_ROWS) -> None:
        self.columns = columns
        self.dtypes = dtypes
        self.chunk_rows = chunk_rows
        self.chunks: list[list[NDArray[Any]]] = []  # each: one array per column, the same length
        self.pending: list[tuple[Any, ...]] = []
        self._numeric = tuple(i for i, c in enumerate(columns) if dtypes[c] != "object")  # the number columns

    def append(self, row: tuple[Any, ...]) -> None:
        self.pending.append(row)
        if len(self.pending) >= self.chunk_rows:
            self._compact()

    def _compact(self) -> None:
        """The pending rows become one chunk: their numbers read in one pass into a table of doubles (exact for
        the integer columns, counts and ids far below 2**53), each column cast from it; text columns one by one.
        Four times faster than a numpy conversion per column of the transposed rows."""
        rows = self.pending
        if not rows:
            return
        self.pending = []
        numeric = self._numeric
        if len(numeric) == len(self.columns):
            values: Iterator[Any] = chain.from_iterable(rows)
        elif len(numeric) > 1:
            values = chain.from_iterable(map(itemgetter(*numeric), rows))
        else:  # itemgetter of one index gives the value itself, of none fails
            values = (row[index] for row in rows for index in numeric)
        table = np.fromiter(values, dtype=np.float64, count=len(rows) * len(numeric)).reshape(len(rows), len(numeric))
        if next(values, None) is not None:  # (fromiter itself refuses too few)
            raise ValueError(f"rows longer than the {len(self.columns)} columns {self.columns}")
        chunk: list[NDArray[Any]] = []
        numbers = iter(table.T)  # the number columns, in order
        for index, name in enumerate(self.columns):
            dtype = self.dtypes[name]
            if dtype == "object":
                chunk.append(np.array([row[index] for row in rows], dtype=object))
                continue
            column = next(numbers)
            if dtype != "float64" and not bool((np.abs(column) < 2.0**53).all()):  # NaN, inf, or past exact doubles
                raise ValueError(f"column {name} ({dtype}) holds a value that is no integer below 2**53")
            chunk.append(column.astype(dtype))
        self.chunks.append(chunk)

    def __len__(self) -> int:
        return sum(len(chunk[0]) for chunk in self.chunks) + len(self.pending)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self.rows_from(0)

    def rows_from(self, start: int) -> Iterator[tuple[Any, ...]]:
        """The rows from index `start` on, as tuples of Python values."""
        first = 0
        for chunk in self.chunks:
            size = len(chunk[0])
            if start < first + size:
                yield from zip(*(column[max(0, start - first) :].tolist() for column in chunk), strict=True)
            first += size
        yield from self.pending[max(0, start - first) :]

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [value for chunk in self.chunks for value in chunk[index].tolist()] + [r[index] for r in self.pending]

    def arrays(self) -> list[NDArray[Any]]:
        """Every row so far as one numpy array per column, kept as the only chunk. The chunks are joined a
        column at a time, each column's parts let go once joined: joining costs one column's copy at most
        (a day's requests are 26 columns of 4.3 million rows)."""
        self._compact()
        if not self.chunks:
            self.chunks = [[np.empty(0, dtype=self.dtypes[c]) for c in self.columns]]
        elif len(self.chunks) > 1:
            joined = []
            for index in range(len(self.columns)):
                joined.append(np.concatenate([chunk[index] for chunk in self.chunks]))
                for chunk in self.chunks:
                    chunk[index] = joined[index][:0]
            self.chunks = [joined]
        return self.chunks[0]

    def column_array(self, name: str) -> NDArray[Any]:
        """One column of every row so far, as a numpy array."""
        return self.arrays()[self.columns.index(name)]

    def frame(self) -> pd.DataFrame:
        """The rows as a frame on the column arrays themselves (no copy)."""
        return _frame(self.columns, self.dtypes, self.arrays())

    def sort_by(self, name: str) -> None:
        """Keep the rows so far in the stable order of column `name`, a column at a time (nothing to do when
        they already are: requests finish out of id order, iterations of several replicas out of time order)."""
        arrays = self.arrays()
        key = arrays[self.columns.index(name)]
        if len(key) < 2 or not bool((key[1:] < key[:-1]).any()):
            return
        order = np.argsort(key, kind="stable")
        for index, column in enumerate(arrays):
            arrays[index] = column[order]


def _frame(columns: tuple[str, ...], dtypes: dict[str, str], arrays: list[NDArray[Any]]) -> pd.DataFrame:
    # an explicit dtype on each Series: pandas 3 would read an object array of strings as its str dtype
    data = {c: pd.Series(values, dtype=dtypes[c], copy=False) for c, values in zip(columns, arrays, strict=True)}
    return pd.DataFrame(data, copy=False)


class Recorder:
    """Sink for engine events of one or many replicas."""

    def __init__(self, client_latency_s: float = 0.0) -> None:
        self.client_latency_s = client_latency_s  # fixed latency on every request's tokens (ResolvedEngine's)
        self.client_timeout_s: float | None = None  # clients give up this long after sending (the engine sets it)
        self.rows = Columns(REQUEST_COLUMNS, _REQUEST_DTYPES)
        self.steps = Columns(STEP_COLUMNS, _STEP_DTYPES)
        # every inter-token gap (8 bytes) and its weight (a count of requests, 4 bytes), in the order recorded
        # (a list held a float object and a pointer for each; a numpy array per decode run some 100 bytes of
        # header, 59,000 runs an hour)
        self._itl = array("d")
        self._itl_weight = array("I")

    def step(self, row: tuple[float, float, int, int, int, int, float, int]) -> None:
        self.steps.append(row)

    def itl(self, seconds: float, weight: int = 1) -> None:
        """An inter-token gap of `seconds` seen by `weight` requests."""
        self._itl.append(seconds)
        self._itl_weight.append(weight)

    def itl_run(self, durations: NDArray[np.float64] | list[float], weight: int) -> None:
        """The gaps of a run of iterations, each seen by `weight` requests."""
        if isinstance(durations, list):
            self._itl.extend(durations)
            self._itl_weight.extend([weight] * len(durations))
        else:
            self._itl.frombytes(np.ascontiguousarray(durations, dtype=np.float64).tobytes())
            self._itl_weight.frombytes(np.full(len(durations), weight, dtype=np.uint32).tobytes())

    def request(self, state: RequestState, replica: int, status: str | None = None) -> None:
        """Record a request that finished, was rejected, or is still in flight (status given)."""
        req = state.req
        has_token = state.visible_s >= 0  # TTFT as the client sees it
        frontend = state.ingress_s + state.output_delay_s + self.client_latency_s  # API server + fixed extra
        ttft = state.visible_s + state.output_delay_s - req.arrival_s + self.client_latency_s if has_token else np.nan
        finished = state.finish_s >= 0
        e2e = state.finish_s - req.arrival_s + state.output_delay_s + self.client_latency_s if finished else np.nan
        timeout = self.client_timeout_s
        if timeout is not None:  # the client's deadline as the engine computes it (arrival + timeout), to the bit
            deadline, late = req.arrival_s + timeout, state.output_delay_s + self.client_latency_s
            if finished and state.finish_s + late > deadline:  # done after the client gave up: it saw no end
                status, finished, e2e = "aborted", False, np.nan
                state.rejected_reason = f"client timeout after {timeout:g} s"
            if has_token and state.visible_s + late > deadline:  # nor the first token
                has_token, ttft = False, np.nan
        gateway = queue = recompute = prefill = waiting = stream = np.nan
        if has_token:
            gateway = state.submitted_s - state.ingress_s - req.arrival_s  # no ready replica, a retry
            queue = state.first_scheduled_s - state.submitted_s
            recompute = state.last_admit_s - state.first_scheduled_s
            prefill = state.prefill_s
            waiting = max(0.0, state.first_token_s - state.last_admit_s - prefill)  # float noise only
            stream = state.visible_s - state.first_token_s
        tpot = (
            (state.finish_s - state.first_token_s) / (state.num_output - 1)
            if finished and state.num_output > 1
            else np.nan
        )
        self.rows.append(
            (
                req.request_id,
                replica,
                status or state.status,
                state.rejected_reason,
                req.arrival_s,
                _or_nan(state.first_scheduled_s),
                _or_nan(state.first_token_s),
                _or_nan(state.finish_s),
                req.prompt_tokens,
                req.output_tokens,
                state.num_output,
                state.cached_tokens,
                state.num_preemptions,
                _or_nan(state.first_preempt_s),
                ttft,
                gateway,
                queue,
                recompute,
                prefill,
                waiting,
                stream,
                frontend if has_token else np.nan,
                tpot,
                e2e,  # finish_s already counts the ingress (the engine had the request only after it)
                req.priority,
                req.session_id,
            )
        )

    def requests_frame(self) -> pd.DataFrame:
        """The request rows in request-id order (ties in the order recorded); the recorder keeps them in
        that order from then on, so the frame is no second copy of them."""
        self.rows.sort_by("request_id")
        return self.rows.frame()

    def steps_frame(self) -> pd.DataFrame:
        return self.steps.frame()

    def itl_samples(self, copy: bool = True) -> tuple[NDArray[np.float64], NDArray[np.uint32]]:
        """(values, integer weights) of every inter-token gap so far. copy=False, at the end of a run, hands
        over the recorded arrays themselves (a day's gaps are about 600 MB) and starts new, empty ones."""
        values = np.frombuffer(self._itl, dtype=np.float64)
        weights = np.frombuffer(self._itl_weight, dtype=np.uint32)
        if copy:
            return values.copy(), weights.copy()
        self._itl, self._itl_weight = array("d"), array("I")
        return values, weights


def _or_nan(value: float) -> float:
    return value if value >= 0 else float("nan")
