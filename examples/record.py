"""Run every example scenario and record its summary in examples/expected/ (the tests compare against it).

python examples/record.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ttftsim.simulate import load_scenario, simulate

HERE = Path(__file__).resolve().parent


def recorded_summary(path: Path) -> dict[str, object]:
    """The summary of one example without the wall-clock figures."""
    result = simulate(load_scenario(path), path.parent, source=str(path))
    summary = result.summary().to_json()
    summary.pop("simulation")
    return summary


def main() -> int:
    for path in sorted(HERE.glob("*.yaml")):
        try:
            summary = recorded_summary(path)
        except Exception as exc:  # an example whose data is absent (e.g. ../shared) is skipped
            print(f"skipped {path.name}: {exc}")
            continue
        out = HERE / "expected" / f"{path.stem}.json"
        out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"recorded {out.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
