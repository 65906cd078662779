"""The scheduler counts each step's sliding-window attention exactly when the engine knows the model's window
(perf/batch.py window sums; docs/engine-semantics.md 17): pairs and keys by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import simpy
from numpy.typing import NDArray

from tests.factories import engine_config, feed, request
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.linear import LinearStepModel


class Recording:
    """A linear cost (wrapped: the compiled class cannot be subclassed) that keeps every shape it times."""

    def __init__(self) -> None:
        self.linear = LinearStepModel(0.01, 0.001, 0.0)
        self.shapes: list[BatchShape] = []

    def time_s(self, shape: BatchShape) -> float:
        self.shapes.append(shape)
        return self.linear.time_s(shape)

    def idle_start_s(self, shape: BatchShape) -> float:
        return self.time_s(shape)

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]:
        return self.linear.decode_step_s(num_seqs)

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        return self.linear.decode_run_s(num_seqs, kv_tokens, steps)


def _shapes(window: int) -> list[BatchShape]:
    cost = Recording()
    env = simpy.Environment()
    engine = Engine(env, engine_config(), cost, 100, Recorder(0.0), closed_form_decode=False, attention_window=window)
    feed(env, engine, [request(0, 0.0, 10, 3)])
    env.run()
    return cost.shapes


def test_a_prefill_and_its_decodes_counted_for_a_window_of_4() -> None:
    prefill, first, second = _shapes(4)
    # 10 queries at positions 0..9, each sees min(p + 1, 4) keys: 1 + 2 + 3 + 4 x 7
    assert (prefill.window, prefill.prefill_window_pairs, prefill.prefill_window_kv_tokens) == (4, 34, 10)
    assert prefill.prefill_attn_pairs == 55  # the full layers: 10 x 11 / 2
    assert (first.decode_window_kv_tokens, first.decode_kv_tokens) == (4, 11)  # 11 cached, 4 inside the window
    assert (second.decode_window_kv_tokens, second.decode_kv_tokens) == (4, 12)


def test_without_a_window_nothing_is_counted() -> None:
    shapes: list[Any] = _shapes(0)
    assert all(s.window == 0 and s.prefill_window_pairs == 0 and s.decode_window_kv_tokens == 0 for s in shapes)
