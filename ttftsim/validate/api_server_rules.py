"""What the API server's validation refuses beyond the OpenAPI schemas (k8s_schema.py checks those), in every
container list of an object: a port number out of range, a negative resource quantity. The rest of
pkg/apis/core/validation (names, label syntax, volume sources, ...) is not reproduced here."""

from __future__ import annotations

from typing import Any


def api_server_rules(document: Any, path: str = "") -> list[str]:
    """What the API server's validation refuses beyond the OpenAPI schemas, in every container list of the object
    (pod templates of any kind, a LeaderWorkerSet's two): a containerPort outside 1-65535, a hostPort outside
    0-65535 (k8s.io/kubernetes pkg/apis/core/validation validateContainerPorts), a negative resource quantity
    (ValidateResourceQuantityValue: "must be greater than or equal to 0")."""
    problems: list[str] = []
    if isinstance(document, dict):
        for key, value in document.items():
            here = f"{path}.{key}" if path else str(key)
            if key in ("containers", "initContainers") and isinstance(value, list):
                for index, container in enumerate(value):
                    if isinstance(container, dict):
                        problems += _container_rules(container, f"{here}.{index}")
            else:
                problems += api_server_rules(value, here)
    elif isinstance(document, list):
        for index, value in enumerate(document):
            problems += api_server_rules(value, f"{path}.{index}")
    return problems


def _container_rules(container: dict[str, Any], path: str) -> list[str]:
    problems = []
    ports = container.get("ports")
    for index, port in enumerate(ports if isinstance(ports, list) else []):
        if not isinstance(port, dict):
            continue
        for key, low in (("containerPort", 1), ("hostPort", 0)):
            number = port.get(key)
            if isinstance(number, int) and not isinstance(number, bool) and not low <= number <= 65535:
                problems.append(
                    f"{path}.ports.{index}.{key}: {number} is not a port ({low}-65535); the API server refuses it"
                )
    resources = container.get("resources")
    for part in ("requests", "limits"):
        values = resources.get(part) if isinstance(resources, dict) else None
        for name, quantity in (values if isinstance(values, dict) else {}).items():
            if str(quantity).strip().startswith("-") and str(quantity).strip("-0. ") != "":
                problems.append(
                    f"{path}.resources.{part}.{name}: {quantity} is negative (must be greater than or equal to 0); "
                    "the API server refuses it"
                )
    return problems
