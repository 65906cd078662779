"""The API server's rule that a workload's selector matches its own pod template (k8s.io/kubernetes
pkg/apis/apps/validation: ValidateDeploymentSpec, ValidateStatefulSetSpec, ValidateReplicaSetSpec and
ValidateDaemonSetSpec call ValidatePodTemplateSpecForReplicaSet, which refuses "`selector` does not match
template `labels`"; an empty selector is refused as "empty selector is invalid for deployment"). The schemas
cannot say it: each field is valid alone."""

from __future__ import annotations

from typing import Any

KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet")


def selector_rules(document: dict[str, Any]) -> list[str]:
    """Why an apps/v1 workload's selector and template labels would be refused; [] when they agree (or the
    fields are absent or malformed: the schema check reports those)."""
    if document.get("apiVersion") != "apps/v1" or document.get("kind") not in KINDS:
        return []
    spec = document.get("spec")
    selector = spec.get("selector") if isinstance(spec, dict) else None
    template = spec.get("template") if isinstance(spec, dict) else None
    if not isinstance(selector, dict) or not isinstance(template, dict):
        return []
    metadata = template.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        return []
    if not match_labels and not expressions:
        return ["spec.selector: empty selector is invalid (it would select every pod); the API server refuses it"]
    missing = [f"{k}={v}" for k, v in match_labels.items() if labels.get(str(k)) != str(v)]
    missing += [_describe(e) for e in expressions if isinstance(e, dict) and not _matches(e, labels)]
    if not missing:
        return []
    return [
        f"spec.selector does not match the template's labels ({', '.join(missing)} not among "
        f"{_shown(labels)}); the API server refuses it"
    ]


def _matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    """One matchExpressions requirement (apimachinery labels.Requirement.Matches)."""
    key, operator = str(expression.get("key")), expression.get("operator")
    values = _values(expression)
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return True  # an unknown operator: the schema check's, not this rule's


def _values(expression: dict[str, Any]) -> list[str]:
    """An expression's values; none when they are not a list (the schema check reports that)."""
    values = expression.get("values")
    return [str(v) for v in values] if isinstance(values, list) else []


def _describe(expression: dict[str, Any]) -> str:
    values = ",".join(_values(expression))
    return f"{expression.get('key')} {expression.get('operator')}" + (f" ({values})" if values else "")


def _shown(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in labels.items()) + "}" if labels else "no labels"
