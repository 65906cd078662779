"""`ttftsim plan`: load the plan, search with a checkpoint, write the ranked table, the Pareto front and
the winner's vLLM arguments and Kubernetes manifests."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ttftsim.config.deployment_calibration import DeploymentCalibration
from ttftsim.config.loading import load_file
from ttftsim.config.plan import Plan
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.config.slo import unit_warnings
from ttftsim.config.versions import version_warnings
from ttftsim.config.workload import TraceWorkload
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.metrics.token_price import demand_output_tokens_per_s
from ttftsim.model.catalog import load_model
from ttftsim.model.not_modelled import model_warnings
from ttftsim.plan import allreduce, day, evaluate
from ttftsim.plan.explain import rate_unit
from ttftsim.plan.manifests import write_deployment
from ttftsim.plan.ranking import Row, best_per_gpu, pareto, tie_order
from ttftsim.plan.runner import Progress, Runner
from ttftsim.plan.search import search
from ttftsim.plan.served_model import served_model
from ttftsim.plan.store import Store
from ttftsim.replica import calibration_file, engine_field, resolve_ref, window_kept
from ttftsim.result_folder import staged
from ttftsim.run_info import write_run_info
from ttftsim.workload.budget import check_plan as check_plan_work
from ttftsim.workload.file_refs import check_files


@dataclass(frozen=True)
class PlanResult:
    plan: Plan
    rows: list[Row]
    front: list[Row]
    winner: Row | None
    computed: int
    reused: int
    output_tokens_per_s: float  # the traffic's demand at the peak rate: every row is priced at it
    warnings: tuple[str, ...] = ()  # what the plan reads but does not model
    day: list[dict[str, Any]] = field(default_factory=list)  # the winner over the day: HPA settings, fixed last

    @property
    def fully_simulated(self) -> int:
        return sum(1 for r in self.rows if r.status in ("confirmed", "missed"))

    def closest(self) -> str:
        """What came closest when nothing meets the SLOs, and why."""
        missed = [r for r in self.rows if r.status == "missed"]
        if missed:
            best = min(missed, key=lambda r: (r.ttft_p99_s, tie_order(r)))
            return f"{best.candidate.label()}: {best.reason}"
        infeasible = [r for r in self.rows if r.status == "infeasible"]
        if infeasible:
            started = [r for r in infeasible if r.saturated_rate == r.saturated_rate]
            pool = started or infeasible
            best = max(pool, key=lambda r: r.saturated_rate if r.saturated_rate == r.saturated_rate else 0.0)
            return f"{best.candidate.label()}: {best.reason}"
        return "no candidate"

    def as_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan.name,
            "target_rate": self.plan.target_rate,
            "rate_unit": rate_unit(self.plan.workload),  # of target_rate and each row's max_rate, saturated_rate
            "output_tokens_per_s": self.output_tokens_per_s,
            "slo": self.plan.slo.model_dump(exclude_none=True, exclude_defaults=True),
            "availability": self.plan.availability.model_dump(),
            "candidates": len(self.rows),
            "fully_simulated": self.fully_simulated,
            "recommendation": self.winner.explanation if self.winner else None,
            "winner": _row_json(self.winner) if self.winner else None,
            "closest": None if self.winner else self.closest(),
            "best_per_gpu": {hw: _row_json(row) for hw, row in best_per_gpu(self.rows).items()},
            "pareto": [_row_json(r) for r in self.front],
            "ranked": [_row_json(r) for r in self.rows],
            "warnings": list(self.warnings),
            "day": self.day_json(),
        }

    def day_json(self) -> dict[str, Any] | None:
        """The day's options with their cost and SLO-violation minutes per day, and the recommended one."""
        if not self.day or self.plan.day is None:
            return None
        hpa, fixed = self.day[:-1], self.day[-1]
        best = day.recommend(hpa, self.plan.day)
        return {
            "recommendation": day.sentence(best, fixed),
            "best": best,
            "fixed": fixed,
            "options": hpa,
            "metric": self.plan.day.metric,
        }

    def run_info(self) -> dict[str, Any]:
        """What differs between a fresh and a resumed run of the same plan (ttftsim/run_info.py)."""
        return {"tasks": {"computed": self.computed, "from_checkpoint": self.reused}}


def _row_json(row: Row) -> dict[str, Any]:
    """plan.json's row (and ranked.csv's): a candidate out before it was sized (pruned by the cost bound,
    infeasible in memory) has no replica count, written as null rather than 0."""
    data = asdict(row)
    if not row.replicas:
        data.update(needed=None, replicas=None, gpus=None)
    data["candidate"] = row.candidate.as_dict()
    data["label"] = row.candidate.label()
    data["figures"] = {k: _finite(v) for k, v in row.figures.items()}
    return {k: _finite(v) for k, v in data.items()}


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _csv_row(row: Row) -> dict[str, Any]:
    """ranked.csv's row: plan.json's, each SLO target's figure a column of its own (slo.<key>)."""
    data = _row_json(row)
    figures = data.pop("figures")
    data.pop("candidate")
    return data | {f"slo.{key}": value for key, value in figures.items()}


def load_plan(path: Path) -> Plan:
    return load_file(Plan, path)


def run_plan(
    path: Path,
    out: Path,
    workers: int = 1,
    backend: str = "local",
    resume: bool = False,
    progress: Progress | None = None,
) -> PlanResult:
    plan = profile_names(load_plan(path), path)
    warnings = check_plan(plan, path)
    if isinstance(plan.workload, TraceWorkload) and plan.peak_rate is None:  # plan for the trace's own rate
        rate = evaluate.trace_rate(plan.workload.model_dump_json(), str(path.resolve().parent))
        plan = plan.model_copy(update={"peak_rate": rate})
    store = Store(out / "checkpoint.sqlite", evaluate.plan_digest(plan), resume)
    runner = Runner(plan, str(path.resolve().parent), store, backend, workers, progress)
    # $/M tokens at what the traffic asks for (metrics/token_price.py, as compare prices), not at each run's own sample
    demand = demand_output_tokens_per_s(plan.workload, plan.target_rate, path.resolve().parent)
    try:
        rows = search(runner, demand)
        lost_sizes = allreduce.explain_lost_sizes(plan, runner.base, rows)  # TPs the all-reduce rules out, in words
        winner = next((r for r in rows if r.status == "confirmed"), None)
        day_results = _day(runner, winner)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): the tasks running are not waited for (--resume redoes them)
        runner.close(wait=False)
        store.close()
        raise
    runner.close()
    store.close()
    warnings += runner.warnings()  # the tasks' own, each once with its candidates
    warnings += lost_sizes
    result = PlanResult(
        plan, rows, pareto(rows), winner, runner.computed, store.reused, demand, tuple(warnings), day_results
    )
    write_outputs(result, out, str(path.resolve().parent))
    return result


def _day(runner: Runner, winner: Row | None) -> list[dict[str, Any]]:
    """The winner over the day's rate curve: each HPA setting, then the fixed fleet (plan/day.py)."""
    plan = runner.plan
    if plan.day is None or winner is None:
        return []
    fixed = day.fixed_replicas(plan, winner.candidate, winner.max_rate)
    count = len(day.options(plan.day))
    jobs = [("day", winner.candidate, float((i + 1) * 1000 + fixed)) for i in range(count)]
    jobs.append(("day", winner.candidate, float(fixed)))  # index FIXED (-1) + 1 = 0
    return runner.run("day", jobs)


def profile_names(plan: Plan, path: Path) -> Plan:
    """The plan with each hardware name (a prefix such as h100, any case) and each gpu_prices key as its profile's
    full name, so tables, plan.json and the prices agree; a price for no known profile is an error."""
    source, base = str(path), path.resolve().parent
    files: dict[str, str] = {}  # a profile file's profile name -> its path (a price may name either)

    def name(ref: str, field: str) -> str:
        if Path(ref).suffix in (".yaml", ".yml"):  # a profile file: by its path from the plan's folder, whatever the
            found = str(Path(resolve_ref(ref, base)).resolve())  # working directory (every run loads it by path)
            try:
                files[load_hardware(found, source).name] = found
            except InputError as exc:
                raise InputError(source, field, exc.message) from None
            return found
        if ref in files:
            return files[ref]
        try:
            return load_hardware(resolve_ref(ref, base), source).name
        except InputError as exc:
            raise InputError(source, field, exc.message) from None

    hardware = [name(ref, f"search.hardware.{i}") for i, ref in enumerate(plan.search.hardware)]
    prices = {name(key, f"gpu_prices.{key}"): price for key, price in plan.gpu_prices.items()}
    search = plan.search.model_copy(update={"hardware": hardware})
    return plan.model_copy(update={"search": search, "gpu_prices": prices})


def check_plan(plan: Plan, path: Path) -> list[str]:
    """What the schema cannot know: the model and hardware exist, the engine arguments resolve. Returns
    what the plan's model declares that is not modelled (warnings)."""
    source, base = str(path), path.resolve().parent
    check_plan_work(plan, source)  # candidates, probes, confirming runs and pods within the limits
    check_files(plan.workload, base, source, "workload")
    model = load_model(resolve_ref(plan.model, base), source)
    if plan.engine.calibration is not None:  # a bad file is the plan's input error, not every candidate's
        load_file(DeploymentCalibration, calibration_file(plan.engine.calibration, base, source))
    warnings = unit_warnings(plan.slo) + version_warnings(plan.engine.vllm_version)
    for index, name in enumerate(plan.search.hardware):
        try:
            hardware = load_hardware(resolve_ref(name, base), source)
        except InputError as exc:
            raise InputError(source, f"search.hardware.{index}", exc.message) from None
        try:
            engine = resolve_engine(
                plan.engine, hardware, model.max_position_embeddings, model.native_dtype, model.mla_nope_dim
            )
        except ValueError as exc:
            raise InputError(source, engine_field(exc), str(exc)) from None
        warnings += model_warnings(model, engine.max_model_len, engine.weight_dtype, window_kept(model, engine))
    stand_in = served_model(plan, base)[1]
    return list(dict.fromkeys(warnings + replaced_length(plan) + ([stand_in] if stand_in else [])))


def replaced_length(plan: Plan) -> list[str]:
    """The workload's own length (num_requests, duration_s), which every run of a plan replaces with its own: a
    probe sends probe_requests, the confirming run confirm_s at the peak rate. It may be left out (config/plan.py);
    when given it is said. A trace's keep choosing the part of the trace whose rate is planned, and are not said."""
    workload = plan.workload
    if isinstance(workload, TraceWorkload):
        return []
    given = [f"{name} ({value:g})" for name in ("num_requests", "duration_s") if (value := getattr(workload, name))]
    if not given or (workload.duration_s is None and workload.num_requests == plan.probe_requests):
        return []  # left out (config/plan.py gives it probe_requests) or the probes' own length
    unit = "conversations" if rate_unit(workload) == "conversations/s" else "requests"
    return [
        f"workload.{' and '.join(given)} {'is' if len(given) == 1 else 'are'} replaced in a plan: each single-replica"
        f" run sends probe_requests ({plan.probe_requests:,} {unit}), the confirming cluster run lasts confirm_s "
        f"({plan.confirm_s:g} s) at the peak rate ({evaluate.confirm_requests(plan):,} {unit})"
    ]


def model_id(plan: Plan, base: Path = Path()) -> str:
    """The id the written deployment files serve (served_model.py)."""
    return served_model(plan, base)[0]


def write_outputs(result: PlanResult, out: Path, base: str) -> None:
    """The outputs, crash-safe: staged beside out, marked complete last, then moved in (ttftsim/result_folder.py);
    the checkpoint already in out stays where it is."""
    with staged(out, "plan") as folder:
        _write_files(result, folder, base)
    write_run_info(out, result.run_info())  # beside the result, not part of it (as simulate's): facts of this run


def _write_files(result: PlanResult, out: Path, base: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(result.as_json(), indent=1) + "\n", encoding="utf-8")
    pd.DataFrame([_csv_row(r) for r in result.rows]).to_csv(out / "ranked.csv", index=False)
    winner = result.winner
    if winner is None:
        return
    plan = result.plan
    weights = evaluate.bound_weight_bytes(plan, base, winner.candidate)
    write_deployment(out, plan, winner.candidate, winner.replicas, weights, model_id(plan, Path(base)), Path(base))
