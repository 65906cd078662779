"""Which command reads a file given to another one: a scenario, a plan file and a deploy file share their first
fields (model, engine, slo) and differ in the rest, so a file given to the wrong command fails on a top-level field
the right one has. The error then says which command reads it."""

from __future__ import annotations

from pathlib import Path

from ttftsim.config.deploy import Deploy
from ttftsim.config.loading import read_mapping
from ttftsim.config.plan import Plan
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError

KINDS = (
    (Scenario, "a scenario", "ttftsim simulate"),
    (Plan, "a plan file", "ttftsim plan"),
    (Deploy, "a deploy file", "ttftsim validate"),
)


# the top-level fields of a run's summary.json (simulate --out, --json) that no input file has
SUMMARY_FIELDS = frozenset({"ttft_s", "tpot_s", "ttft_breakdown_mean_s", "simulation"})


def with_kind_hint(error: InputError) -> InputError:
    """The error, its message ending with the command that reads the file when its unknown top-level field makes
    it one kind's (every top-level field is that kind's and no other's), or saying it is a run's result (a
    summary.json given where a scenario is read); otherwise the error as it was."""
    if not error.message.startswith("unknown field") or not error.field:
        return error
    try:
        keys = set(read_mapping(Path(error.source)))
    except (InputError, OSError):  # not a file (an option), or not a mapping: no hint
        return error
    if keys >= SUMMARY_FIELDS:
        return InputError(
            error.source,
            "",
            "this is a run's result (summary.json of simulate --out), not an input file: compare and simulate read "
            "scenario files; the dashboard (ttftsim dashboard FOLDER) shows results side by side",
        )
    if "." in error.field:
        return error
    fits = [(kind, command) for schema, kind, command in KINDS if keys <= set(schema.model_fields)]
    if len(fits) != 1:
        return error
    kind, command = fits[0]
    return InputError(error.source, error.field, f"{error.message}: this looks like {kind}, which {command} reads")
