"""Re-measure calibration/fits/*.json against the kernel tables without refitting their curves:

    python -m calibration.assess ../shared/data/kernels/aiconfigurator

Writes each file back with the errors of `ttftsim.calibration.fit.assess` (held-out shape regions with
settings tuned on validation regions; the old every-fifth-row error) and the curves, corrections and ranges
exactly as they were. `ttftsim calibrate --from` refits the curves too, and lsqr's last digits differ from
machine to machine, which moves every recorded prediction a little; this does not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ttftsim.calibration.costs import fit_path
from ttftsim.calibration.fit import assess
from ttftsim.calibration.tables import import_aiconfigurator
from ttftsim.hardware.catalog import load_hardware


def main(argv: list[str]) -> int:
    source = Path(argv[0] if argv else "../shared/data/kernels/aiconfigurator")
    for gpu, table in import_aiconfigurator(source).items():
        path = fit_path(gpu)
        if not path.exists():
            print(f"{gpu}: no fit at {path}, skipped (ttftsim calibrate --from fits one)")
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        data.update(assess(table, load_hardware(gpu), data["fits"]))
        staged = path.with_suffix(".json.tmp")  # replaced in one step: a simulation reading it never sees half
        staged.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
        staged.replace(path)
        print(f"{gpu}: {len(data['fits'])} curves re-measured -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
