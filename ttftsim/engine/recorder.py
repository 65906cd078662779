"""Collects what the engine does: one row per request, one row per iteration, inter-token latencies.

Rows are appended in simulation order and kept as numpy columns, a chunk at a time (Columns); inter-token
gaps in typed arrays. The frames are built at the end. Rows for requests still in flight are added by
`close()` at the horizon.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterator
from operator import itemgetter
from typing import Any, Final

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
CHUNK_ROWS = 1 << 16  # rows held packed before they become one chunk of columns
NAN: Final = math.nan  # (np.nan is an attribute read each time)
_CODES = {"int64": "q", "float64": "d", "object": ""}  # struct's code of each column dtype kept


def _getter(indices: tuple[int, ...]) -> Any:
    """The values of a row at `indices`, as a tuple (itemgetter of one index gives the value itself)."""
    if len(indices) < 2:  # (of none it fails)
        if not indices:
            return lambda row: ()
        index = indices[0]
        return lambda row: (row[index],)
    return itemgetter(*indices)


class Columns:
    """A table appended row by row: the numbers of the newest rows packed as they come into one buffer of 8-byte
    values (int64 or float64 by column, `struct`), text values in a list per column; every CHUNK_ROWS rows the
    buffer becomes one numpy array per column (8 bytes a number, where a row tuple of Python objects takes about
    35: some 28 million iterations in a day, about 7.8 GB as tuples, 1.8 GB so). A row's values are converted
    while they are fresh and freed at once, not held as Python objects until their chunk is built.
    `frame()` joins the chunks once and builds the frame on those arrays without copying them again; rows
    appended later go to new chunks, so a frame already built keeps its rows."""

    def __init__(self, columns: tuple[str, ...], dtypes: dict[str, str], chunk_rows: int = CHUNK_ROWS) -> None:
        self.columns = columns
        self.dtypes = dtypes
        self.chunk_rows = chunk_rows
        self.chunks: list[list[NDArray[Any]]] = []  # each: one array per column, the same length
        unknown = sorted({dtypes[c] for c in columns} - set(_CODES))
        if unknown:
            raise ValueError(f"columns of dtype {unknown}: only {sorted(_CODES)} are kept")
        numeric = tuple(i for i, c in enumerate(columns) if dtypes[c] != "object")
        self._numeric = numeric  # the number columns' indices
        self._text = tuple(i for i, c in enumerate(columns) if dtypes[c] == "object")
        self._packer = struct.Struct("<" + "".join(_CODES[dtypes[columns[i]]] for i in numeric))
        self.pack: Any = self._packer.pack  # a row's numbers, in column order, as the bytes append_packed takes
        # a row's numbers as a tuple (None: the row is all numbers, packed as it is)
        self._numbers_of: Any = None if len(numeric) == len(columns) else _getter(numeric)
        self._packed = bytearray()  # the pending rows' numbers
        self._texts: list[list[Any]] = [[] for _ in self._text]  # the pending rows' text, a list per column
        self._pending = 0  # rows appended since the last chunk

    def append(self, row: tuple[Any, ...]) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"a row of {len(row)} values for the {len(self.columns)} columns {self.columns}")
        numbers_of = self._numbers_of
        try:
            packed = self.pack(*row) if numbers_of is None else self.pack(*numbers_of(row))
        except struct.error as error:  # a value its column cannot hold: NaN, a float or None in an integer column...
            raise ValueError(f"a row the columns {self.columns} cannot hold exactly: {row} ({error})") from None
        self.append_packed(packed, () if numbers_of is None else tuple(row[index] for index in self._text))

    def append_packed(self, packed: bytes, texts: tuple[Any, ...]) -> None:
        """A row as its numbers packed by `pack` (in column order, the text columns left out) and its text values
        (in column order): what `append` makes of a row, for a caller that has the values apart and so builds no
        row tuple (the recorder's request and iteration rows; a value `pack` cannot hold raises struct.error there)."""
        columns = self._texts
        if len(packed) != self._packer.size or len(texts) != len(columns):  # checked before anything is kept
            raise ValueError(f"a packed row of {len(packed)} bytes and {len(texts)} text values for {self.columns}")
        self._packed += packed
        for index in range(len(texts)):  # (zip's keyword parsing costs more than the appends)
            columns[index].append(texts[index])
        self._pending += 1
        if self._pending >= self.chunk_rows:
            self._compact()

    def _compact(self) -> None:
        """The pending rows become one chunk: each number column copied out of the packed buffer, each text column
        made from its list."""
        if not self._pending:
            return
        packed, texts = self._packed, iter(self._texts)
        self._packed, self._texts, self._pending = bytearray(), [[] for _ in self._text], 0
        table = np.frombuffer(packed, dtype=self._record_dtype()) if self._numeric else None
        chunk: list[NDArray[Any]] = []
        for index, name in enumerate(self.columns):
            if self.dtypes[name] == "object":
                chunk.append(np.array(next(texts), dtype=object))
            else:
                assert table is not None
                chunk.append(table[f"c{index}"].copy())  # contiguous, apart from the buffer
        self.chunks.append(chunk)

    def _record_dtype(self) -> np.dtype[Any]:
        """One packed row of the buffer as a numpy record (fields c<column index>)."""
        return np.dtype([(f"c{i}", "<" + _CODES[self.dtypes[self.columns[i]]]) for i in self._numeric])

    def _pending_rows(self, start: int) -> list[tuple[Any, ...]]:
        """The pending rows from pending index `start` on, as tuples of Python values."""
        size = self._packer.size
        if not size:  # text columns only
            numbers: list[tuple[Any, ...]] = [()] * (self._pending - start)
        else:
            numbers = list(self._packer.iter_unpack(bytes(self._packed[start * size :])))
        if self._numbers_of is None:
            return numbers
        rows = []
        for offset, values in enumerate(numbers):
            row: list[Any] = list(values)
            for texts, index in zip(self._texts, self._text, strict=True):
                row.insert(index, texts[start + offset])
            rows.append(tuple(row))
        return rows

    def __len__(self) -> int:
        return sum(len(chunk[0]) for chunk in self.chunks) + self._pending

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
        if self._pending:
            yield from self._pending_rows(max(0, start - first))

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [value for chunk in self.chunks for value in chunk[index].tolist()] + [
            row[index] for row in self._pending_rows(0)
        ]

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

    def step(
        self,
        time_s: float,
        duration_s: float,
        replica: int,
        num_tokens: int,
        running: int,
        waiting: int,
        kv_usage: float,
        num_steps: int,
    ) -> None:
        """One iteration row: one argument per column of STEP_COLUMNS, packed in that order (no row tuple)."""
        steps = self.steps
        steps.append_packed(
            steps.pack(time_s, duration_s, replica, num_tokens, running, waiting, kv_usage, num_steps), ()
        )

    def itl(self, seconds: float, weight: int = 1) -> None:
        """An inter-token gap of `seconds` seen by `weight` requests."""
        self._itl.append(seconds)
        self._itl_weight.append(weight)

    def itl_run(self, durations: NDArray[np.float64] | list[float], weight: int) -> None:
        """The gaps of a run of iterations, each seen by `weight` requests."""
        if isinstance(durations, list):
            self._itl.extend(durations)
            self._itl_weight.extend(array("I", (weight,)) * len(durations))  # (a list's values converted one by one)
        else:
            self._itl.frombytes(np.ascontiguousarray(durations, dtype=np.float64).tobytes())
            self._itl_weight.frombytes(np.full(len(durations), weight, dtype=np.uint32).tobytes())

    def request(self, state: RequestState, replica: int, status: str | None = None) -> None:
        """Record a request that finished, was rejected, or is still in flight (status given)."""
        req = state.req
        has_token = state.visible_s >= 0  # TTFT as the client sees it
        frontend = state.ingress_s + state.output_delay_s + self.client_latency_s  # API server + fixed extra
        ttft = state.visible_s + state.output_delay_s - req.arrival_s + self.client_latency_s if has_token else NAN
        finished = state.finish_s >= 0
        e2e = state.finish_s - req.arrival_s + state.output_delay_s + self.client_latency_s if finished else NAN
        timeout = self.client_timeout_s
        if timeout is not None:  # the client's deadline as the engine computes it (arrival + timeout), to the bit
            deadline, late = req.arrival_s + timeout, state.output_delay_s + self.client_latency_s
            if finished and state.finish_s + late > deadline:  # done after the client gave up: it saw no end
                status, finished, e2e = "aborted", False, NAN
                state.rejected_reason = f"client timeout after {timeout:g} s"
            if has_token and state.visible_s + late > deadline:  # nor the first token
                has_token, ttft = False, NAN
        gateway = queue = recompute = prefill = waiting = stream = NAN
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
            else NAN
        )
        rows = self.rows  # the number columns packed in REQUEST_COLUMNS' order, then the text columns
        numbers = rows.pack(
            req.request_id,
            replica,
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
            frontend if has_token else NAN,
            tpot,
            e2e,  # finish_s already counts the ingress (the engine had the request only after it)
            req.priority,
            req.session_id,
        )
        rows.append_packed(numbers, (status or state.status, state.rejected_reason))

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
    return value if value >= 0 else NAN
