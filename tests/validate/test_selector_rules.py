"""The API server's selector rule for apps/v1 workloads: the selector must match the pod template's labels."""

from __future__ import annotations

from typing import Any

import pytest

from ttftsim.validate.selector_rules import selector_rules


def _deployment(selector: dict[str, Any], labels: dict[str, str], kind: str = "Deployment") -> dict[str, Any]:
    template = {"metadata": {"labels": labels}, "spec": {"containers": []}}
    return {"apiVersion": "apps/v1", "kind": kind, "spec": {"selector": selector, "template": template}}


@pytest.mark.parametrize(
    ("selector", "refused"),
    [
        ({"matchLabels": {"app": "chat-8b"}}, None),
        ({"matchLabels": {"app": "chat"}}, "app=chat not among {app=chat-8b, tier=gpu}"),
        ({"matchLabels": {"app": "chat-8b", "zone": "a"}}, "zone=a not among"),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "cpu"]}]}, None),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["cpu"]}]}, "tier In (cpu) not among"),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}, "tier NotIn (gpu)"),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, None),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, None),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, "zone Exists not among"),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, "tier DoesNotExist not among"),
        ({}, "empty selector is invalid"),
    ],
)
def test_a_selector_must_match_its_template(selector: dict[str, Any], refused: str | None) -> None:
    problems = selector_rules(_deployment(selector, {"app": "chat-8b", "tier": "gpu"}))
    if refused is None:
        assert problems == []
    else:
        assert len(problems) == 1 and refused in problems[0] and "the API server refuses it" in problems[0]


def test_only_apps_v1_workloads_with_both_fields_are_judged() -> None:
    wrong = {"matchLabels": {"app": "other"}}
    assert selector_rules(_deployment(wrong, {"app": "chat"}, kind="StatefulSet"))  # every apps/v1 kind
    assert selector_rules(_deployment(wrong, {"app": "chat"}, kind="LeaderWorkerSet")) == []  # no selector rule
    assert selector_rules({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"selector": wrong}}) == []
    assert selector_rules(_deployment({"matchLabels": "app"}, {"app": "chat"})) == []  # malformed: the schema's
    for values in (5, "chat"):  # not a list: no values (a traceback before; the schema check names the field)
        expression = {"key": "app", "operator": "In", "values": values}
        assert (
            "app In not among {app=chat}"
            in selector_rules(_deployment({"matchExpressions": [expression]}, {"app": "chat"}))[0]
        )
