"""The OpenAPI schemas of the custom resources that LLM deployments use (LeaderWorkerSet, InferencePool,
HTTPRoute, KServe InferenceService), vendored from their projects' published CRDs under
ttftsim/validate/crds/ (README.md there names each source, commit and licence).

What is vendored is each served version's `openAPIV3Schema` with its `description` texts removed (they are
most of the bytes: 3.4 MB of CRDs become ~0.8 MB of JSON, ~60 kB gzipped), nothing else changed. What the
API server does beyond the schema is not checked here: CEL rules (`x-kubernetes-validations`), defaulting,
list-map key uniqueness. Unknown fields are refused, as `kubectl apply` does by default since Kubernetes 1.27
(server-side field validation `Strict`), except under `x-kubernetes-preserve-unknown-fields`.

Regenerate with `python -m ttftsim.validate.crd_schemas CRD.yaml SOURCE_URL` (one CRD file per call).
"""

from __future__ import annotations

import gzip
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CRD_FOLDER = Path(__file__).resolve().parent / "crds"


def schema_file(api_version: str, kind: str) -> Path:
    """Where the schema of one group/version and kind is kept: `<group>_<version>_<kind>.json.gz`."""
    return CRD_FOLDER / f"{api_version.replace('/', '_')}_{kind}.json.gz"


@cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    """The strict schema of a vendored custom resource, None when it is not one of them."""
    path = schema_file(api_version, kind)
    if not path.is_file():
        return None
    schema: dict[str, Any] = strict(json.loads(gzip.decompress(path.read_bytes())))
    return schema


def vendored_kinds() -> list[str]:
    """`apiVersion kind` of every vendored schema, sorted."""
    names = sorted(p.name.removesuffix(".json.gz") for p in CRD_FOLDER.glob("*.json.gz"))
    return [" ".join(_split_name(name)) for name in names]


def strict(node: Any) -> Any:
    """The schema with unknown fields refused in every object that lists its properties and does not
    preserve unknown fields (the API server's strict field validation)."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: (
            {name: strict(sub) for name, sub in value.items()}
            if key == "properties" and isinstance(value, dict)
            else strict(value)
        )
        for key, value in node.items()
    }
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields", False)
    ):
        out["additionalProperties"] = False
    return out


def without_descriptions(node: Any) -> Any:
    """The schema without its `description` texts (a property *named* description is kept)."""
    if isinstance(node, list):
        return [without_descriptions(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: (
            {name: without_descriptions(sub) for name, sub in value.items()}
            if key == "properties" and isinstance(value, dict)
            else without_descriptions(value)
        )
        for key, value in node.items()
        if key != "description" or not isinstance(value, str)
    }


def vendor(crd: dict[str, Any]) -> dict[Path, bytes]:
    """The files to write for one CRD: each served version's schema, descriptions removed, gzipped
    deterministically (no timestamp)."""
    spec = crd["spec"]
    files = {}
    for version in spec["versions"]:
        if not version.get("served", False):
            continue
        schema = without_descriptions(version["schema"]["openAPIV3Schema"])
        text = json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()
        files[schema_file(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = gzip.compress(text, mtime=0)
    return files


def _split_name(name: str) -> tuple[str, str]:
    group, version, kind = name.split("_")
    return f"{group}/{version}", kind


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ttftsim.validate.crd_schemas CRD.yaml SOURCE_URL", file=sys.stderr)
        return 2
    crd = yaml.safe_load(Path(argv[0]).read_text(encoding="utf-8"))
    for path, data in vendor(crd).items():
        path.write_bytes(data)
        print(f"{path.name}: {len(data):,} bytes from {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
