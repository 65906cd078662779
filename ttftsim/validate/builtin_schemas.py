"""The strict JSON schemas of Kubernetes' built-in kinds, as kubernetes-validate ships them for each release
(generated from that release's OpenAPI document), for k8s_schema.py: a validator per release, apiVersion and kind,
made once per run, with a resource.Quantity's text checked as the API server parses it; and the apiVersions that
serve a kind. Custom resources' schemas are crd_schemas.py's."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema
from referencing import Registry, Resource

# the releases kubernetes-validate 1.37 ships schemas for, from the oldest still on the clouds' extended support
KUBERNETES_VERSIONS = ("1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
CHECKED_VERSIONS = (KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1])


@cache
def served_versions(kind: str) -> list[str]:
    """The apiVersions (group's first label / version, as kubernetes-validate names its files) that serve a
    built-in kind in any checked release; empty for a kind no release serves (a custom resource's)."""
    found: set[str] = set()
    for version in CHECKED_VERSIONS:
        folder = files("kubernetes_validate").joinpath("kubernetes-json-schema", f"v{version}.0-local-strict")
        prefix = f"{kind.lower()}-"
        for entry in folder.iterdir():
            name = entry.name
            if name.startswith(prefix) and name.endswith(".json"):
                group, _, api = name[len(prefix) : -len(".json")].rpartition("-")
                found.add(f"{FULL_GROUPS.get(group, group)}/{api}" if group else api)
    return sorted(found)


# kubernetes-validate names a schema file by its group's first label: the built-in groups' full names
FULL_GROUPS = (
    {
        label: f"{label}.k8s.io"
        for label in ("networking", "storage", "scheduling", "coordination", "node", "discovery", "certificates")
    }
    | {label: f"{label}.k8s.io" for label in ("admissionregistration", "apiextensions", "events", "resource")}
    | {
        "rbac": "rbac.authorization.k8s.io",
        "authentication": "authentication.k8s.io",
        "authorization": "authorization.k8s.io",
        "flowcontrol": "flowcontrol.apiserver.k8s.io",
        "apiregistration": "apiregistration.k8s.io",
        "internal": "internal.apiserver.k8s.io",
    }
)


@cache
def builtin_validator(version: str, api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """kubernetes-validate's strict schema of a built-in kind in one release, made once per run (its own
    validate() reads and parses the 1 MB definitions file on every call: ~35 ms an object). Same files, same
    lookup as kubernetes_validate.utils.validate: `<kind>-<group's first label>-<version>.json` beside
    `_definitions.json` in `v<release>.0-local-strict`; None when the release does not serve the kind."""
    folder = files("kubernetes_validate").joinpath("kubernetes-json-schema", f"v{version}.0-local-strict")
    name = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = folder.joinpath(f"{kind.lower()}-{name}.json")
    if not path.is_file():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, registry=_definitions(version) @ Registry())


@cache
def _definitions(version: str) -> Resource[Any]:
    """kubernetes-validate's shared definitions, with a Quantity's text checked as the API server parses it:
    its schema says only "string or number", so `memory: 64Gb` would pass here and be refused by kubectl."""
    folder = files("kubernetes_validate").joinpath("kubernetes-json-schema", f"v{version}.0-local-strict")
    contents = json.loads(folder.joinpath("_definitions.json").read_text(encoding="utf-8"))
    contents["$defs"][QUANTITY_DEFINITION] = {"type": ["string", "number", "null"], "pattern": QUANTITY_PATTERN}
    return Resource.from_contents(contents)


QUANTITY_DEFINITION = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# A resource.Quantity's text (k8s.io/apimachinery/pkg/api/resource/quantity.go, ParseQuantity's grammar: a signed
# decimal, then a binary suffix Ki..Ei, a decimal one n u m k M G T P E, or an exponent), the pattern
# controller-gen writes into every CRD's Quantity fields (as in the vendored LeaderWorkerSet CRD)
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
