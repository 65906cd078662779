"""The API server's admission limits (engine/admission.py; vLLM AsyncLLM.check_admission, 0.29+): small cases by
hand with a linear step cost (10 ms + 1 ms per token) and a synchronous engine without API-server costs."""

from __future__ import annotations

import pytest

from tests.factories import engine_config, feed, make_engine, request
from ttftsim.config.engine import EngineArgs
from ttftsim.engine.data_parallel import serving_engine
from ttftsim.engine.recorder import Recorder
from ttftsim.perf.linear import LinearStepModel

COST = LinearStepModel(0.01, 0.001)
NEW = {"vllm_version": "0.32.0"}


def _statuses(recorder: Recorder) -> list[tuple[int, str, str | None]]:
    frame = recorder.requests_frame().sort_values("request_id")
    return [(int(r.request_id), str(r.status), r.reason or None) for r in frame.itertuples()]


def test_max_num_queued_reqs_refuses_the_request_that_would_exceed_it() -> None:
    """Two unfinished requests at most: of three sent at once the third gets a 503; one sent after the first
    finished (at 0.01 + 0.2 = 0.21 s its prefill of 100 + 100 tokens, then 2 decode steps of 12 ms) is admitted."""
    env, engine, recorder = make_engine(cost=COST, max_num_queued_reqs=2, **NEW)
    feed(env, engine, [request(0, 0.0, 100, 3), request(1, 0.0, 100, 3), request(2, 0.0, 100, 3)])
    feed(env, engine, [request(3, 1.0, 100, 3)])
    env.run()
    assert _statuses(recorder) == [
        (0, "finished", None),
        (1, "finished", None),
        (2, "rejected", "HTTP 503: 2 unfinished requests, max_num_queued_reqs 2"),
        (3, "finished", None),
    ]
    assert (engine.admission.unfinished, engine.admission.prefill_tokens) == (0, 0)


def test_max_num_queued_tokens_counts_prompts_until_their_first_token() -> None:
    """Prompts of 600 tokens, a limit of 1000: the first two are admitted (0, then 600 < 1000), the third sees
    1200 and is refused; the fourth, sent at 2 s after both first tokens (one step of 1,200 prompt tokens:
    10 ms + 1.2 s), sees none in prefill and is admitted."""
    env, engine, recorder = make_engine(cost=COST, max_num_queued_tokens=1000, **NEW)
    feed(env, engine, [request(0, 0.0, 600, 2), request(1, 0.0, 600, 2), request(2, 0.0, 600, 2)])
    feed(env, engine, [request(3, 2.0, 600, 2)])
    env.run()
    assert _statuses(recorder)[2] == (
        2,
        "rejected",
        "HTTP 503: 1200 prompt tokens awaiting a first token, max_num_queued_tokens 1000",
    )
    assert [status for _, status, _ in _statuses(recorder)] == ["finished", "finished", "rejected", "finished"]


def test_a_request_past_its_first_token_no_longer_counts_its_prompt() -> None:
    """The first request's prompt (600) is done at 0.01 + 0.6 = 0.61 s; it then decodes 49 more tokens. A second
    one sent at 0.7 s sees no prompt tokens in prefill and is admitted though the first is unfinished; a third sent
    with it sees the second's 600 and is refused."""
    env, engine, recorder = make_engine(cost=COST, max_num_queued_tokens=600, **NEW)
    feed(env, engine, [request(0, 0.0, 600, 50), request(1, 0.7, 600, 2), request(2, 0.7, 600, 2)])
    env.run()
    assert [status for _, status, _ in _statuses(recorder)] == ["finished", "finished", "rejected"]


def test_data_parallel_ranks_share_one_api_servers_count() -> None:
    """vLLM counts over every rank the API server routes to: two ranks, a limit of 2, three requests at once."""
    import simpy

    env, recorder = simpy.Environment(), Recorder()
    engine = serving_engine(env, engine_config(dp=2, max_num_queued_reqs=2, **NEW), COST, 1000, recorder, False)
    feed(env, engine, [request(0, 0.0, 100, 3), request(1, 0.0, 100, 3), request(2, 0.0, 100, 3)])
    env.run()
    assert [status for _, status, _ in _statuses(recorder)] == ["finished", "finished", "rejected"]


def test_the_limits_need_vllm_0_29() -> None:
    with pytest.raises(ValueError, match=r"vLLM 0\.15\.1 has none \(0\.29\+\)"):
        EngineArgs(max_num_queued_reqs=4)
