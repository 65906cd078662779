"""Multi-turn conversations resend their history, and prefix caching reuses the earlier turns."""

from __future__ import annotations

from pathlib import Path

from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate


def test_later_turns_hit_the_cached_history() -> None:
    scenario = Scenario.model_validate(
        {
            "model": "Llama-3.1-8B",
            "hardware": "H100-SXM5-80GB",
            "workload": {
                "type": "conversation",
                "arrivals": {"type": "constant", "rate": 1},
                "turns": {"type": "fixed", "value": 3},
                "system_prompt_tokens": 64,
                "user_tokens": {"type": "fixed", "value": 100},
                "output_tokens": {"type": "fixed", "value": 50},
                "think_time_s": 1.0,
                "num_requests": 2,
            },
        }
    )
    requests = simulate(scenario, Path()).requests
    assert len(requests) == 6
    by_prompt = requests.sort_values("arrival_s")
    prompts = sorted(set(by_prompt["prompt_tokens"]))
    assert prompts == [164, 314, 464]  # system + user, then + answer + user each turn
    second_turns = requests[requests["prompt_tokens"] == 314]
    # history of 214 tokens (system, user, answer) = 13 full blocks of 16 are reused
    assert set(second_turns["cached_tokens"]) == {208}
    first_turns = requests[requests["prompt_tokens"] == 164]
    assert sorted(first_turns["cached_tokens"]) == [0, 64]  # the second conversation shares the system prompt
