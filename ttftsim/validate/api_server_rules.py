"""What the API server's validation refuses beyond the OpenAPI schemas (k8s_schema.py checks those), in every
container list of an object: a port number out of range, a negative resource quantity, a request above its
limit. The rest of pkg/apis/core/validation (names, label syntax, volume sources, ...) is not reproduced here;
selector_rules.py checks a workload's selector against its template."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from ttftsim.validate.builtin_schemas import QUANTITY_PATTERN

# resource.Quantity's suffixes (k8s.io/apimachinery/pkg/api/resource/suffix.go): binary and decimal SI
SCALES = {"Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40)}
SCALES |= {"Pi": Fraction(2**50), "Ei": Fraction(2**60), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6)}
SCALES |= {"m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9)}
SCALES |= {"T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18)}


def api_server_rules(document: Any, path: str = "") -> list[str]:
    """What the API server's validation refuses beyond the OpenAPI schemas, in every container list of the object
    (pod templates of any kind, a LeaderWorkerSet's two): a containerPort outside 1-65535, a hostPort outside
    0-65535 (k8s.io/kubernetes pkg/apis/core/validation validateContainerPorts), a negative resource quantity
    (ValidateResourceQuantityValue: "must be greater than or equal to 0"), a request above the same resource's
    limit (ValidateResourceRequirements: "must be less than or equal to ... limit")."""
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
    return problems + _requests_over_limits(resources, path)


def _requests_over_limits(resources: Any, path: str) -> list[str]:
    """Each resource whose request is above its limit (a quantity the schema check refuses is left to it)."""
    if not isinstance(resources, dict) or not isinstance(resources.get("requests"), dict):
        return []
    limits = resources.get("limits")
    problems = []
    for name, request in resources["requests"].items():
        limit = limits.get(name) if isinstance(limits, dict) else None
        asked, allowed = quantity_value(request), quantity_value(limit)
        if asked is not None and allowed is not None and asked > allowed:
            problems.append(
                f"{path}.resources.requests.{name}: {request} must be less than or equal to the {name} limit of "
                f"{limit}; the API server refuses it"
            )
    return problems


def quantity_value(quantity: Any) -> Fraction | None:
    """A resource.Quantity's exact value (128Mi, 1.5G, 500m, 1e3, or a plain number); None when it is not one (the
    grammar is the schema check's, QUANTITY_PATTERN; an exponent is read by Fraction itself)."""
    if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
        return None
    text = str(quantity).strip()
    if re.fullmatch(QUANTITY_PATTERN, text) is None:
        return None
    suffix = text[-2:] if text[-2:] in SCALES else text[-1] if text[-1] in SCALES else ""  # 1E: exa; 1E3: 1000
    try:
        return Fraction(text[: len(text) - len(suffix)]) * SCALES.get(suffix, Fraction(1))
    except ValueError:  # a fractional exponent, which the pattern admits and Fraction does not
        return None
