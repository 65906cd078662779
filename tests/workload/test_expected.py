"""The demand a workload asks for (workload/expected.py): each length distribution's mean as lengths.py draws it
(rounded, then clipped), and output tokens per unit of a plan's rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ttftsim.config.workload import (
    ConversationWorkload,
    EmpiricalLength,
    FixedLength,
    LognormalLength,
    NormalLength,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    UniformLength,
)
from ttftsim.workload.expected import expected_length, output_tokens_per_unit
from ttftsim.workload.lengths import sample_lengths


def test_closed_forms() -> None:
    assert expected_length(FixedLength(type="fixed", value=128), Path()) == 128.0
    assert expected_length(UniformLength(type="uniform", low=10, high=21), Path()) == 15.5
    # symmetric about its mean inside a symmetric clip: exactly the mean
    clipped = NormalLength(type="normal", mean=100, std=30, low=90, high=110)
    assert expected_length(clipped, Path()) == pytest.approx(100.0, abs=1e-9)
    far = NormalLength(type="normal", mean=1000, std=10)  # the bulk far above low = 1: the sum starts near 920
    assert expected_length(far, Path()) == pytest.approx(1000.0, abs=1e-9)
    assert expected_length(NormalLength(type="normal", mean=7.6, std=0), Path()) == 8.0  # rounded
    assert expected_length(NormalLength(type="normal", mean=6.5, std=0), Path()) == 6.0  # a half to even, as np.rint


def test_a_one_sided_clip_moves_the_mean() -> None:
    """Normal(50, 40) clipped at 1 from below: every draw under 0.5 counts as 1, so the mean rises above 50 to
    that of max(X, 1) with X cut at 0.5: mu * Q(a) + sigma * phi(a) + Phi(a), a = (0.5 - mu) / sigma (rounding the
    draws above moves it by far less than the tolerance)."""
    from scipy import stats

    spec = NormalLength(type="normal", mean=50, std=40)
    a = (0.5 - 50) / 40
    continuous = 50 * stats.norm.sf(a) + 40 * stats.norm.pdf(a) + 1 * stats.norm.cdf(a)
    assert expected_length(spec, Path()) == pytest.approx(continuous, abs=2e-3)
    assert expected_length(spec, Path()) > 52


@pytest.mark.parametrize(
    "spec",
    [
        LognormalLength(type="lognormal", mean=211, std=163, high=1000),
        LognormalLength(type="lognormal", mean=300, std=3000),
        NormalLength(type="normal", mean=3.2, std=0.3),
    ],
)
def test_the_mean_of_what_the_sampler_draws(spec: LognormalLength | NormalLength) -> None:
    draws = sample_lengths(spec, np.random.default_rng(7), 2_000_000)
    standard_error = draws.std() / np.sqrt(len(draws))
    assert abs(expected_length(spec, Path()) - draws.mean()) < 4 * standard_error


def test_output_tokens_per_unit_of_each_workload(tmp_path: Path) -> None:
    lengths = tmp_path / "out.json"
    lengths.write_text("[10, 20, 60]")
    empirical = {"type": "empirical", "path": str(lengths)}
    synthetic = SyntheticWorkload.model_validate(
        {
            "type": "synthetic",
            "arrivals": {"type": "poisson", "rate": 2},
            "prompt_tokens": {"type": "fixed", "value": 100},
            "output_tokens": empirical,
            "num_requests": 10,
        }
    )
    assert expected_length(EmpiricalLength.model_validate(empirical), Path()) == 30.0
    assert output_tokens_per_unit(synthetic, Path()) == 30.0
    shared = SharedPrefixWorkload.model_validate(
        {
            "type": "shared_prefix",
            "arrivals": {"type": "poisson", "rate": 2},
            "num_groups": 2,
            "num_prompts_per_group": 2,
            "system_prompt_len": 100,
            "question_len": 20,
            "output_len": 17,
            "num_requests": 10,
        }
    )
    assert output_tokens_per_unit(shared, Path()) == 17.0
    chat = ConversationWorkload.model_validate(
        {
            "type": "conversation",
            "arrivals": {"type": "poisson", "rate": 1},
            "turns": {"type": "uniform", "low": 2, "high": 4},
            "user_tokens": {"type": "fixed", "value": 50},
            "output_tokens": {"type": "fixed", "value": 40},
            "num_requests": 5,
        }
    )
    assert output_tokens_per_unit(chat, Path()) == 3 * 40  # per conversation: turns x answer tokens
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0,10,5\n1,10,0\n2,10,10\n3,10,30\n")
    replay = TraceWorkload.model_validate({"type": "trace", "format": "csv", "path": str(trace), "num_requests": 1})
    assert output_tokens_per_unit(replay, Path()) == (5 + 1 + 10 + 30) / 4  # every row, each at least one token
    # the window (from start_s, for duration_s) its rate is measured on: the rows at 1 and 2 s
    window = replay.model_copy(update={"start_s": 1.0, "duration_s": 1.5})
    assert output_tokens_per_unit(window, Path()) == (1 + 10) / 2


def test_a_heavy_tail_past_the_summed_terms_is_integrated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lognormal(300, 3000) summed term by term, against the same with all but the first 1,000 terms integrated;
    and turns of mean 5 and std 500 clipped at 1e9 (1e-15 tail at 1.5e9 tokens) without an array of that length."""
    from ttftsim.workload import expected

    spec = LognormalLength(type="lognormal", mean=300, std=3000)
    summed = expected_length(spec, Path())
    monkeypatch.setattr(expected, "SUMMED", 1000)
    assert expected_length(spec, Path()) == pytest.approx(summed, abs=1e-4)
    monkeypatch.undo()
    heavy = LognormalLength(type="lognormal", mean=5, std=500, high=1_000_000_000)
    draws = sample_lengths(heavy, np.random.default_rng(3), 2_000_000)
    assert 5 < expected_length(heavy, Path()) < 7 and abs(expected_length(heavy, Path()) - draws.mean()) < 1.0
