"""Arrival processes, length distributions, shared prefixes, traces and conversations."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ttftsim.config.workload import (
    ConstantArrivals,
    EmpiricalLength,
    GammaArrivals,
    LognormalLength,
    NormalLength,
    PoissonArrivals,
    RateCurveArrivals,
    SharedPrefixWorkload,
    Stage,
    StagedArrivals,
    TraceWorkload,
    UniformLength,
    WeibullArrivals,
)
from ttftsim.errors import InputError
from ttftsim.perf.linear import LinearStepModel
from ttftsim.workload.arrivals import arrival_times, scaled_exponential, weibull_shape_for_cv
from ttftsim.workload.lengths import sample_lengths
from ttftsim.workload.request import ContentIds
from ttftsim.workload.sources import WorkloadContext, open_loop_requests
from ttftsim.workload.traces import load_trace


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _cv(times: np.ndarray) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


def test_poisson_rate_and_cv() -> None:
    times = arrival_times(PoissonArrivals(type="poisson", rate=10), rng(), 2000.0, None)
    assert len(times) / 2000 == pytest.approx(10, rel=0.02)
    assert _cv(times) == pytest.approx(1.0, rel=0.03)


def test_constant_interval_is_exact() -> None:
    times = arrival_times(ConstantArrivals(type="constant", rate=4), rng(), 10.0, None)
    assert list(times) == [i / 4 for i in range(40)]


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_and_weibull_hit_the_requested_cv(cv: float) -> None:
    gamma = arrival_times(GammaArrivals(type="gamma", rate=5, cv=cv), rng(1), None, 200_000)
    weibull = arrival_times(WeibullArrivals(type="weibull", rate=5, cv=cv), rng(2), None, 200_000)
    for times in (gamma, weibull):
        assert _cv(times) == pytest.approx(cv, rel=0.05)
        assert len(times) / times[-1] == pytest.approx(5, rel=0.03)
    assert weibull_shape_for_cv(1.0) == pytest.approx(1.0, rel=1e-6)  # Weibull k=1 is exponential


def test_stages_run_one_after_another() -> None:
    spec = StagedArrivals(
        type="stages", process="constant", stages=[Stage(rate=2, duration_s=5), Stage(rate=10, duration_s=2)]
    )
    times = arrival_times(spec, rng(), None, None)
    assert len(times) == 10 + 20
    assert times[10] == 5.0 and times[-1] == pytest.approx(6.9)


def test_inference_perf_constant_stages_scale_exponential_gaps_to_the_stage() -> None:
    """inference-perf's ConstantLoadTimer: int(rate x duration) exponential gaps scaled to add up to the stage;
    the sends are not every 1/rate (the validation README's reading), and given their number fall as Poisson."""
    spec = StagedArrivals(
        type="stages",
        process="inference-perf-constant",
        stages=[Stage(rate=2, duration_s=5), Stage(rate=10, duration_s=2.05)],
    )
    times = arrival_times(spec, rng(), None, None)
    assert len(times) == 10 + 20  # int(2 x 5), int(10 x 2.05)
    assert times[0] == 0.0 and times[10] == 5.0 and times[9] < 5.0 and times[-1] < 7.05
    gaps = np.random.default_rng(0).exponential(0.5, 10)  # the generator's first draws, the first stage's
    assert times[:10] == pytest.approx(np.concatenate(([0.0], np.cumsum(gaps[:-1]))) * 5.0 / gaps.sum())
    many = scaled_exponential(rng(), 20_000, 10_000.0)
    spacing = np.diff(many)
    assert spacing.mean() == pytest.approx(0.5, rel=0.02) and spacing.std() / spacing.mean() == pytest.approx(
        1.0, abs=0.03
    )  # exponential spacing (CV 1), where evenly spaced sends have CV 0


def test_inference_perf_poisson_stages_draw_a_count_per_second() -> None:
    spec = StagedArrivals(type="stages", process="inference-perf-poisson", stages=[Stage(rate=3, duration_s=40)])
    times = arrival_times(spec, rng(), None, None)
    assert len(times) == 120  # int(3 x 40) sends, the stage's count
    per_second = np.bincount(np.floor(times).astype(int))
    assert per_second.var() / per_second.mean() == pytest.approx(1.0, abs=0.45)  # Poisson counts: variance = mean


def test_rate_curve_follows_the_curve() -> None:
    spec = RateCurveArrivals(type="rate_curve", points=[(0, 2.0), (100, 20.0), (200, 2.0)], repeat=True)
    times = arrival_times(spec, rng(), 20_000.0, None)
    assert len(times) / 20_000 == pytest.approx(11.0, rel=0.03)  # mean of the triangle
    phase = np.mod(times, 200)
    assert ((phase > 90) & (phase < 110)).sum() > 5 * ((phase < 10) | (phase > 190)).sum()


def test_length_distributions() -> None:
    uniform = sample_lengths(UniformLength(type="uniform", low=3, high=5), rng(), 10_000)
    assert set(uniform) == {3, 4, 5}
    lognormal = sample_lengths(LognormalLength(type="lognormal", mean=500, std=300), rng(), 200_000)
    assert lognormal.mean() == pytest.approx(500, rel=0.02)
    assert lognormal.std() == pytest.approx(300, rel=0.05)
    normal = sample_lengths(NormalLength(type="normal", mean=100, std=80, low=50, high=120), rng(), 10_000)
    assert normal.min() == 50 and normal.max() == 120


def test_empirical_lengths_from_file(tmp_path: Path) -> None:
    (tmp_path / "lengths.csv").write_text("tokens\n10\n20\n30\n")
    values = sample_lengths(EmpiricalLength(type="empirical", path="lengths.csv"), rng(), 1000, tmp_path)
    assert set(values) == {10, 20, 30}
    with pytest.raises(InputError, match="length file not found"):
        sample_lengths(EmpiricalLength(type="empirical", path="nope.csv"), rng(), 10, tmp_path)


def test_a_column_of_lengths_without_a_header_keeps_its_first_line(tmp_path: Path) -> None:
    """The first line is a number: a length, not the column's name (it was read as the header, and lost)."""
    (tmp_path / "lengths.csv").write_text("5000\n10\n10\n")
    values = sample_lengths(EmpiricalLength(type="empirical", path="lengths.csv"), rng(), 1000, tmp_path)
    assert set(values) == {5000, 10}
    (tmp_path / "lengths.csv").write_text("5000\n10\nabc\n")
    with pytest.raises(InputError, match="line 3: not a whole number: 'abc'"):  # lines counted from the first
        sample_lengths(EmpiricalLength(type="empirical", path="lengths.csv"), rng(), 10, tmp_path)
    (tmp_path / "lengths.csv").write_text("tokens\n10\nabc\n")
    with pytest.raises(InputError, match="line 3 tokens: not a whole number: 'abc'"):  # after a header, as before
        sample_lengths(EmpiricalLength(type="empirical", path="lengths.csv"), rng(), 10, tmp_path)


def test_shared_prefix_is_inference_perf_semantics() -> None:
    spec = SharedPrefixWorkload(
        type="shared_prefix",
        arrivals=ConstantArrivals(type="constant", rate=10),
        num_groups=4,
        num_prompts_per_group=5,
        system_prompt_len=100,
        question_len=20,
        output_len=8,
        num_requests=60,
    )
    requests = open_loop_requests(spec, WorkloadContext(rng(), Path()))
    assert len(requests) == 60
    assert all(r.prompt_tokens == 120 and r.output_tokens == 8 for r in requests)
    first_round = [r.segments for r in requests[:20]]
    assert len(set(first_round)) == 20  # 20 distinct prompts, shuffled once
    assert all(requests[i].segments == requests[i % 20].segments for i in range(60))  # request i sends prompt i % 20
    systems = {segments[0] for segments in first_round}
    assert len(systems) == 4 and all(length == 100 for _, length in systems)


def test_azure_trace_loads(shared: Path) -> None:
    spec = TraceWorkload(type="trace", format="azure", path="AzureLLMInferenceTrace_conv.csv")
    requests = load_trace(spec, shared / "data/traces/azure2023", rng(), ContentIds())
    assert len(requests) == 19_366
    assert requests[0].arrival_s == 0.0 and requests[0].prompt_tokens == 374
    assert requests[-1].arrival_s == pytest.approx(3502, abs=5)


def test_mooncake_hash_ids_become_shared_segments(shared: Path) -> None:
    spec = TraceWorkload(type="trace", format="mooncake", path="conversation_trace.jsonl", num_requests=50)
    requests = load_trace(spec, shared / "data/traces/mooncake", rng(), ContentIds())
    first_blocks = {r.segments[0] for r in requests}
    assert len(first_blocks) == 1  # every request starts with hash id 0 (one 512-token system prefix)
    assert all(sum(length for _, length in r.segments) == r.prompt_tokens for r in requests)


def test_plain_csv_trace_and_missing_column(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,input_tokens,output_tokens\n0.1,50,5\n0.5,100,10\n")
    requests = load_trace(TraceWorkload(type="trace", format="csv", path="t.csv"), tmp_path, rng(), ContentIds())
    # times from the first request, as in the other formats (epoch seconds replay from 0)
    assert [(r.arrival_s, r.prompt_tokens) for r in requests] == [(0.0, 50), (pytest.approx(0.4), 100)]
    (tmp_path / "unsorted.csv").write_text("arrival_s,input_tokens,output_tokens\n0.5,100,10\n0.1,50,5\n")
    with pytest.raises(InputError, match="line 3 arrival_s: times go back"):  # replayed as written, never re-sorted
        load_trace(TraceWorkload(type="trace", format="csv", path="unsorted.csv"), tmp_path, rng(), ContentIds())
    (tmp_path / "bad.csv").write_text("time,in,out\n0,1,1\n")
    with pytest.raises(InputError, match="arrival_s"):
        load_trace(TraceWorkload(type="trace", format="csv", path="bad.csv"), tmp_path, rng(), ContentIds())


@pytest.mark.parametrize("shared_prefix", [0, 64])
def test_synthetic_requests_are_made_as_read_and_equal_a_list_built_at_once(shared_prefix: int) -> None:
    """The lazy sequence draws everything when made (so later draws are unchanged) and reserves its ids; each
    request read equals the one the list of before held (the same draws, ids given out one by one)."""
    from ttftsim.config.workload import SyntheticWorkload
    from ttftsim.workload.request import Request
    from ttftsim.workload.sources import SyntheticRequests

    spec = SyntheticWorkload(
        type="synthetic",
        arrivals=PoissonArrivals(type="poisson", rate=50),
        prompt_tokens=UniformLength(type="uniform", low=10, high=300),
        output_tokens=UniformLength(type="uniform", low=1, high=50),
        shared_prefix_tokens=shared_prefix,
        priority_levels=3,
        num_requests=10_000,
    )
    ctx = WorkloadContext(rng(5), Path())
    next(ctx.request_ids), ctx.content.new()  # ids already given out before the workload's
    requests = open_loop_requests(spec, ctx)
    assert isinstance(requests, SyntheticRequests) and len(requests) == 10_000
    after = (next(ctx.request_ids), ctx.content.new(), float(ctx.rng.random()))

    draw = rng(5)  # the list as it was built before: the same draws, then ids one by one
    times = arrival_times(spec.arrivals, draw, spec.duration_s, spec.num_requests)
    prompts = sample_lengths(spec.prompt_tokens, draw, len(times), Path())
    outputs = sample_lengths(spec.output_tokens, draw, len(times), Path())
    priorities = draw.integers(0, 3, len(times))
    request_id, content = 1, 1
    shared = ((content, shared_prefix),) if shared_prefix else ()
    content += bool(shared_prefix)
    expected = []
    for t, p, o, prio in zip(times.tolist(), prompts.tolist(), outputs.tolist(), priorities.tolist(), strict=True):
        segments = (*shared, (content, p))
        expected.append(Request(request_id, t, shared_prefix + p, o, segments, prio, private=not shared))
        request_id, content = request_id + 1, content + 1
    assert list(requests) == expected  # across the 4,096-request chunks
    assert after == (request_id, content, float(draw.random()))
    assert requests[0] == expected[0] and requests[-1] == expected[-1] and requests[5000] == expected[5000]
    assert requests[4095:4098] == expected[4095:4098]
    with pytest.raises(IndexError):
        requests[10_000]


def test_an_attached_feed_is_read_a_chunk_at_a_time() -> None:
    """The engine reads a lazy sequence of arrivals FEED_CHUNK at a time: after the first ones are admitted,
    the rest has not been made."""
    from collections.abc import Iterator

    from tests.factories import make_engine, request
    from ttftsim.engine.feed import FEED_CHUNK
    from ttftsim.workload.request import Request

    made = []

    def arrivals() -> Iterator[Request]:
        for i in range(3 * FEED_CHUNK + 5):
            made.append(i)
            yield request(i, 1.0 + i * 1e-3, 16, 2)

    env, engine, recorder = make_engine(cost=LinearStepModel(1e-4), num_blocks=100_000)
    engine.attach_feed(arrivals())
    assert len(made) == FEED_CHUNK
    env.run(until=1.0 + FEED_CHUNK * 1e-3 + 0.5)
    assert FEED_CHUNK < len(made) <= 2 * FEED_CHUNK
    env.run()
    assert len(made) == 3 * FEED_CHUNK + 5 and len(recorder.requests_frame()) == 3 * FEED_CHUNK + 5


def test_a_second_feed_follows_the_first() -> None:
    from tests.factories import make_engine, request
    from ttftsim.engine.feed import FEED_CHUNK

    first = [request(i, 1.0 + i * 1e-3, 16, 2) for i in range(FEED_CHUNK + 3)]
    second = [request(FEED_CHUNK + 3 + i, 10.0 + i * 1e-3, 16, 2) for i in range(5)]
    env, engine, recorder = make_engine(cost=LinearStepModel(1e-4), num_blocks=100_000)
    engine.attach_feed(iter(first))
    engine.attach_feed(iter(second))
    env.run()
    frame = recorder.requests_frame()
    assert frame["request_id"].tolist() == list(range(FEED_CHUNK + 8)) and set(frame["status"]) == {"finished"}
    assert frame["arrival_s"].is_monotonic_increasing


def test_inference_perf_poisson_at_rates_far_below_and_above_one() -> None:
    """One step per non-empty second: a rate of 1e-6 req/s does not walk a million empty seconds per send,
    and a rate of 1,000 req/s still draws Poisson counts (e^-rate underflows)."""
    spec = StagedArrivals(type="stages", process="inference-perf-poisson", stages=[Stage(rate=1e-6, duration_s=2e9)])
    sparse = arrival_times(spec, rng(), None, None)
    assert 1900 <= len(sparse) <= 2000 and np.all(np.diff(sparse) >= 0)  # of 2,000 drawn, those before the end
    assert np.median(np.diff(sparse)) == pytest.approx(math.log(2) / 1e-6, rel=0.15)  # exponential gaps
    dense = arrival_times(
        StagedArrivals(type="stages", process="inference-perf-poisson", stages=[Stage(rate=1000, duration_s=50)]),
        rng(),
        None,
        None,
    )
    counts = np.bincount(np.floor(dense).astype(int))[:-1]  # whole seconds
    assert 49_000 <= len(dense) <= 50_000 and counts.var() / counts.mean() == pytest.approx(1.0, abs=0.5)


def test_a_trace_is_parsed_once_while_its_text_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan simulates its trace for every candidate: the parsed table is kept, keyed by the file's whole text,
    so a file rewritten in place (same name, same size, within the file system's timestamp resolution) is read
    anew, and the requests are the same either way."""
    import ttftsim.workload.traces as traces

    monkeypatch.setattr(traces, "_TABLES", {})
    parsed: list[str] = []
    parse = traces._parse_table
    monkeypatch.setattr(traces, "_parse_table", lambda text, *rest: parsed.append(text) or parse(text, *rest))
    spec = TraceWorkload(type="trace", format="csv", path="t.csv")
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.0,50,5\n0.5,100,10\n")
    first = load_trace(spec, tmp_path, rng(), ContentIds())
    again = load_trace(spec, tmp_path, rng(), ContentIds())
    assert len(parsed) == 1
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in again] == [
        (r.arrival_s, r.prompt_tokens, r.output_tokens) for r in first
    ]
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.0,70,5\n0.5,100,10\n")  # same size
    changed = load_trace(spec, tmp_path, rng(), ContentIds())
    assert len(parsed) == 2 and changed[0].prompt_tokens == 70
    for i in range(traces._TABLES_KEPT + 2):  # only the last few tables are kept
        (tmp_path / f"{i}.csv").write_text("arrival_s,input_tokens,output_tokens\n0.0,50,5\n")
        load_trace(TraceWorkload(type="trace", format="csv", path=f"{i}.csv"), tmp_path, rng(), ContentIds())
    assert len(traces._TABLES) == traces._TABLES_KEPT
