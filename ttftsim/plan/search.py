"""The search: bound every candidate, bisect capacities best-first in fixed waves (pruning candidates whose
optimistic cost cannot beat the best found), size replicas, confirm the cheapest with cluster runs. The
cheapest candidate of a GPU type that had every candidate pruned is still bisected, so that each type shows
its best cost and what binds it (plan/explain.py); each row ends with its answer in plain words.

Results depend only on the plan and its seed: tasks are pure functions of their inputs, waves have a
fixed size whatever the number of workers, and ties are broken by the candidate's key. So the local
process pool, Ray, one worker or many, fresh or resumed from the checkpoint give the same plan.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ttftsim.config.plan import Plan
from ttftsim.errors import InputError
from ttftsim.metrics.slo import SloFigures, judge
from ttftsim.plan import day, evaluate, stored
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.explain import check_key, missed, sentence
from ttftsim.plan.store import Store
from ttftsim.processes import local_pool, usable_workers
from ttftsim.workload.expected import output_tokens_per_unit

WAVE = 8  # capacity bisections per pruning decision (fixed: the same result for any worker count)
PREDICT_TOP = 20
SHOW_TRIES = 3  # pruned candidates bisected per GPU type that has none sized, to show what it would cost

Progress = Callable[[str, int, int], None]  # (phase, done, total)


def candidates(plan: Plan) -> list[Candidate]:
    """The product of the search space's lists, in Candidate's field order (the last fields vary fastest)."""
    space = plan.search
    names = [item.name for item in fields(Candidate)]
    values: list[list[Any]] = [list(getattr(space, name)) for name in names]
    found = [Candidate(**dict(zip(names, combo, strict=True))) for combo in itertools.product(*values)]
    # vLLM uses expert parallelism only over more than one GPU (FusedMoEParallelConfig.make: use_ep needs
    # TP x DP > 1): on one it is the same deployment as without
    return [c for c in found if not (c.enable_expert_parallel and c.tensor_parallel_size * c.data_parallel_size == 1)]


def run_task(plan_json: str, base: str, kind: str, cand: dict[str, Any], arg: float) -> Any:
    """A worker's entry point (module level, so processes and Ray can run it)."""
    plan = Plan.model_validate_json(plan_json)
    candidate = Candidate(**cand)
    if kind == "bound":
        return evaluate.bound(plan, base, candidate)
    if kind == "capacity":
        return evaluate.capacity(plan, base, candidate, arg)
    if kind == "predict":
        return evaluate.predict(plan, base, candidate, int(arg))
    if kind == "day":  # arg = option index * 1000 + the fixed fleet's replicas (plan/day.py)
        index, fixed = divmod(int(arg), 1000)
        return day.run_day(plan, base, candidate, index - 1, fixed)
    return evaluate.confirm(plan, base, candidate, int(arg))


@dataclass
class Runner:
    plan: Plan
    base: str
    store: Store
    backend: str = "local"
    workers: int = 1
    progress: Progress | None = None
    computed: int = 0
    _pool: Any = field(default=None, repr=False)
    _demand: float | None = field(default=None, repr=False)

    def demand(self) -> float:
        """Output tokens the traffic asks for per unit of the plan's rate (workload/expected.py): every row's
        $/M tokens and output tokens/s are at this one demand, not at its own run's sample of lengths."""
        if self._demand is None:
            self._demand = output_tokens_per_unit(self.plan.workload, Path(self.base))
        return self._demand

    def run(self, phase: str, jobs: list[tuple[str, Candidate, float]]) -> list[Any]:
        """Results of (kind, candidate, arg) jobs in order: from the checkpoint, or computed (and stored)."""
        keys = [f"{kind}|{cand.key}|{arg!r}" for kind, cand, arg in jobs]
        todo = [(i, job) for i, (key, job) in enumerate(zip(keys, jobs, strict=True)) if key not in self.store]
        results: list[Any] = [self._reused(key) if key in self.store else None for key in keys]
        done = len(jobs) - len(todo)
        self._tick(phase, done, len(jobs))
        plan_json = self.plan.model_dump_json()
        for index, value in self._execute(plan_json, todo):
            self.store.put(keys[index], value)
            results[index] = value
            self.computed += 1
            done += 1
            self._tick(phase, done, len(jobs))
        return results

    def _reused(self, key: str) -> Any:
        """A result from the checkpoint, with the shape its task returns (plan/stored.py), else one line."""
        value = self.store.get(key)
        wrong = stored.problem(key.split("|", 1)[0], value)
        if wrong is not None:
            raise InputError(
                str(self.store.path), key, f"a stored result that is not what the task returns ({wrong}); drop --resume"
            )
        return value

    def _tick(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)

    def _execute(self, plan_json: str, todo: list[tuple[int, tuple[str, Candidate, float]]]) -> Any:
        if not todo:
            return
        if self.backend == "ray":
            yield from self._execute_ray(plan_json, todo)
            return
        if usable_workers(self.workers) <= 1:
            for index, (kind, cand, arg) in todo:
                yield index, run_task(plan_json, self.base, kind, asdict(cand), arg)
            return
        if self._pool is None:  # kept for every phase: as many processes as the CPUs allow
            self._pool = local_pool(usable_workers(self.workers))
        futures = {
            self._pool.submit(run_task, plan_json, self.base, kind, asdict(cand), arg): index
            for index, (kind, cand, arg) in todo
        }
        for future in as_completed(futures):
            yield futures[future], future.result()

    def _execute_ray(self, plan_json: str, todo: list[tuple[int, tuple[str, Candidate, float]]]) -> Any:
        """The tasks as Ray tasks. Ray itself failing (it cannot start or reach its cluster, a worker or
        node dies, the object store or the disk is full) is one line naming the backend: the tasks already
        finished are in the checkpoint, and `--resume` recomputes only the others. An error of the plan in
        a task is that error; any other exception a task raises is ours and keeps its traceback."""
        import ray
        from ray.exceptions import RayError, RayTaskError

        address = os.environ.get("RAY_ADDRESS")  # an existing cluster (`ray start --head`, KubeRay, ...)
        where = f"--backend ray (RAY_ADDRESS={address})" if address else "--backend ray"
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
                else:  # a local one of `workers` processes for this run
                    ray.init(
                        num_cpus=self.workers, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
                    )
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... as it starts
                raise _ray_failed(where, "did not start", exc) from exc
        remote = ray.remote(run_task)
        pending: dict[Any, int] = {}
        try:
            for index, (kind, cand, arg) in todo:
                pending[remote.remote(plan_json, self.base, kind, asdict(cand), arg)] = index
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    yield pending.pop(ref), ray.get(ref)
        except RayTaskError:  # the task's own exception, as an instance of its class (InputError...)
            raise
        except (RayError, ConnectionError) as exc:  # a Ray Client losing its cluster raises ConnectionError
            with contextlib.suppress(Exception):  # the cluster may be gone: nothing left to cancel
                for ref in pending:
                    ray.cancel(ref)
            raise _ray_failed(where, "failed", exc) from exc

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)  # after Ctrl-C, queued tasks are not run


def _ray_failed(where: str, what: str, exc: BaseException) -> InputError:
    """Ray's failure on one line; the tasks that finished before it are in the checkpoint either way."""
    first = (str(exc).strip().splitlines() or [""])[0]
    remedy = "check the Ray cluster or use --backend local" if what == "did not start" else "rerun with --resume"
    return InputError(where, "", f"Ray {what} ({type(exc).__name__}: {first}); {remedy} (finished tasks are kept)")


@dataclass
class Row:
    """One candidate in the ranked table."""

    candidate: Candidate
    status: str  # confirmed, missed, estimate, pruned, infeasible
    reason: str = ""
    saturated_rate: float = math.nan
    max_rate: float = math.nan  # requests/s one replica sustains within the SLO
    binding: str = ""  # the target that limits max_rate (plan/explain.py), or "throughput"
    nearest: str = ""  # with throughput the limit: the target nearest its own there
    low_load_miss: float = math.nan  # missed even at low load: the worst figure over its target there
    needed: int = 0  # replicas the peak needs, before the availability asked
    replicas: int = 0
    gpus: int = 0
    cost_per_hour: float = math.nan
    cost_per_million_tokens: float = math.nan
    headroom: float = math.nan
    ttft_p50_s: float = math.nan
    ttft_p99_s: float = math.nan
    tpot_mean_s: float = math.nan
    tpot_p99_s: float = math.nan
    output_tokens_per_s: float = math.nan  # of the whole deployment at the peak rate
    lower_bound_cost: float = math.nan
    pods_lost: int = 0  # in the confirming run (N+1 redundancy: one)
    figures: dict[str, float] = field(default_factory=dict)  # each SLO target's figure, by key
    explanation: str = ""

    def head(self) -> str:
        """'8 x H100-SXM5-80GB TP2, least_outstanding ($48.00/h)'."""
        return f"{self.replicas} x {self.candidate.label()} (${self.cost_per_hour:,.2f}/h)"

    def take_figures(self, plan: Plan, figures: SloFigures, demand: float) -> None:
        """The figures of a prediction or confirmation: the table's, each target's, the sentence; the output
        tokens at the traffic's `demand` (output tokens per unit of rate), the same for every row."""
        self.ttft_p50_s, self.ttft_p99_s = figures.ttft_p50_s, figures.ttft_p99_s
        self.tpot_mean_s, self.tpot_p99_s = figures.tpot_mean_s, figures.tpot_p99_s
        self.output_tokens_per_s = plan.target_rate * demand
        self.cost_per_million_tokens = _per_million(self.cost_per_hour, self.output_tokens_per_s)
        verdict = judge(plan.slo, figures)
        checks = () if verdict is None else verdict.checks
        self.figures = {check_key(c): math.nan if c.figure_s is None else c.figure_s for c in checks}
        self.explanation = sentence(self.head(), self.binding, self.max_rate, plan.slo, figures, self.nearest)


def search(runner: Runner) -> list[Row]:
    plan = runner.plan
    cands = candidates(plan)
    bounds = runner.run("bounds", [("bound", c, 0.0) for c in cands])
    rows: dict[str, Row] = {}
    feasible = []
    for cand, result in zip(cands, bounds, strict=True):
        if not result["feasible"]:
            rows[cand.key] = Row(cand, "infeasible", result["reason"])
            continue
        lower = evaluate.sizing(plan, cand, result["saturated_rate"])["cost_per_hour"]
        rows[cand.key] = Row(cand, "pending", saturated_rate=result["saturated_rate"], lower_bound_cost=lower)
        feasible.append(cand)
    feasible.sort(key=lambda c: (rows[c.key].lower_bound_cost, c.key))
    _capacities(runner, feasible, rows)
    shown = _best_of_pruned_types(runner, rows)
    sized = sorted((r for r in rows.values() if r.status == "estimate"), key=_cost_order)
    _predict(runner, sized[:PREDICT_TOP] + shown)
    sized.sort(key=_cost_order)  # equal costs: the lower predicted P99 first
    start = 0
    while start < min(len(sized), 3 * plan.confirm_top) and not any(r.status == "confirmed" for r in rows.values()):
        _confirm(runner, sized[start : start + plan.confirm_top])  # the cheapest first, until one holds
        start += plan.confirm_top
    for row in rows.values():
        if not row.explanation:
            row.explanation = _unsimulated(row, plan)
    return sorted(rows.values(), key=_rank_order)


def _unsimulated(row: Row, plan: Plan) -> str:
    """The sentence of a row never simulated at its size: its limit, or why it is out."""
    if row.cost_per_hour == row.cost_per_hour:
        return (
            sentence(row.head(), row.binding, row.max_rate, plan.slo, None, row.nearest)
            + f" ({row.status}: {row.reason})"
        )
    return f"{row.candidate.label()}: {row.status}: {row.reason}"


def _capacities(runner: Runner, ordered: list[Candidate], rows: dict[str, Row]) -> None:
    plan, best = runner.plan, math.inf
    for start in range(0, len(ordered), WAVE):
        wave = []
        for cand in ordered[start : start + WAVE]:
            row = rows[cand.key]
            if row.lower_bound_cost > best:
                row.status, row.reason = (
                    "pruned",
                    f"cannot beat ${best:,.2f}/h (at best ${row.lower_bound_cost:,.2f}/h)",
                )
            else:
                wave.append(cand)
        jobs = [("capacity", c, rows[c.key].saturated_rate) for c in wave]
        for cand, result in zip(wave, runner.run("capacity", jobs), strict=True):
            if _take_capacity(plan, rows[cand.key], result):
                rows[cand.key].status = "estimate"
                best = min(best, rows[cand.key].cost_per_hour)


def _take_capacity(plan: Plan, row: Row, result: dict[str, Any]) -> bool:
    """A capacity task's result on its row: the limit, and the sizing when it can serve the peak (True)."""
    row.binding, row.nearest = result.get("binding", ""), result.get("nearest", "")
    if not result["feasible"]:
        row.status, row.reason = "infeasible", result["reason"]
        row.low_load_miss = max(result["probes"][0]["ratios"].values(), default=math.nan)
        return False
    size = evaluate.sizing(plan, row.candidate, result["max_rate"])
    row.max_rate = result["max_rate"]
    row.needed, row.replicas, row.gpus = size["needed"], size["replicas"], size["gpus"]
    row.cost_per_hour, row.headroom = size["cost_per_hour"], size["headroom"]
    if size["replicas"] > plan.search.max_replicas:  # its cost stays: what the type would take
        row.status, row.reason = "infeasible", f"needs {size['replicas']} replicas > max_replicas"
        return False
    return True


def _best_of_pruned_types(runner: Runner, rows: dict[str, Row]) -> list[Row]:
    """For each GPU type with no candidate sized (all pruned or out), bisect its pruned candidates cheapest
    bound first, one per type per round, until one has a cost (at most SHOW_TRIES rounds): the rows that show
    what the type would cost and what binds it. They stay pruned."""
    waiting: dict[str, list[Row]] = {}
    for hardware in runner.plan.search.hardware:
        group = [r for r in rows.values() if r.candidate.hardware == hardware]
        if not any(r.status == "estimate" for r in group):
            pruned = sorted(
                (r for r in group if r.status == "pruned"), key=lambda r: (r.lower_bound_cost, r.candidate.key)
            )
            waiting[hardware] = pruned[:SHOW_TRIES]
    shown: list[Row] = []
    for round_ in range(SHOW_TRIES):
        chosen = [queue[round_] for queue in waiting.values() if len(queue) > round_]
        jobs = [("capacity", r.candidate, r.saturated_rate) for r in chosen]
        for row, result in zip(chosen, runner.run("capacity", jobs), strict=True):
            reason = row.reason
            if _take_capacity(runner.plan, row, result):
                row.status, row.reason = "pruned", f"{reason}; costs ${row.cost_per_hour:,.2f}/h"
                shown.append(row)
            if row.cost_per_hour == row.cost_per_hour:
                waiting.pop(row.candidate.hardware)
    return shown


def _predict(runner: Runner, rows: list[Row]) -> None:
    jobs = [("predict", r.candidate, float(r.replicas)) for r in rows]
    for row, result in zip(rows, runner.run("predict", jobs), strict=True):
        row.take_figures(runner.plan, SloFigures.from_dict(result), runner.demand())
        if row.status == "pruned":
            row.explanation += f" (pruned: {row.reason})"


def _confirm(runner: Runner, rows: list[Row]) -> None:
    plan = runner.plan
    jobs = [("confirm", r.candidate, float(r.replicas)) for r in rows]
    for row, result in zip(rows, runner.run("confirm", jobs), strict=True):
        size_gpus = (result["replicas"] + row.candidate.warm_pool) * evaluate.replica_gpus(plan, row.candidate)
        row.replicas, row.gpus = result["replicas"], size_gpus
        row.cost_per_hour = size_gpus * evaluate.price_per_gpu_hour(plan, row.candidate.hardware)
        row.pods_lost = int(result.get("pods_lost", 0))
        figures = SloFigures.from_dict(result)
        row.take_figures(plan, figures, runner.demand())
        if row.max_rate == row.max_rate:
            row.headroom = 1.0 - plan.target_rate / (row.replicas * row.max_rate)
        row.status = "confirmed" if result["met"] else "missed"
        if not result["met"]:
            row.reason = f"cluster run misses with {result['replicas']} replicas: {missed(plan.slo, figures)}"


def _per_million(cost_per_hour: float, output_tokens_per_s: float) -> float:
    tokens_per_hour = output_tokens_per_s * 3600
    return cost_per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else math.nan


STATUS_ORDER = {"confirmed": 0, "estimate": 1, "missed": 2, "pruned": 3, "infeasible": 4, "pending": 5}


def _known(value: float) -> float:
    return value if value == value else math.inf


def _cost_order(row: Row) -> tuple[float, float, str]:
    return (row.cost_per_hour, _known(row.ttft_p99_s), row.candidate.key)


def _rank_order(row: Row) -> tuple[int, float, float, float, str]:
    status = STATUS_ORDER[row.status]
    return (status, _known(row.cost_per_hour), _known(row.ttft_p99_s), _known(row.lower_bound_cost), row.candidate.key)


def pareto(rows: list[Row]) -> list[Row]:
    """Rows no other row beats on both cost per hour and P99 TTFT (among those with both known)."""
    known = [r for r in rows if r.status in ("confirmed", "estimate") and r.ttft_p99_s == r.ttft_p99_s]
    known.sort(key=lambda r: (r.cost_per_hour, r.ttft_p99_s, r.candidate.key))
    front, best_p99 = [], math.inf
    for row in known:
        if row.ttft_p99_s < best_p99:
            front.append(row)
            best_p99 = row.ttft_p99_s
    return front


def best_per_gpu(rows: list[Row]) -> dict[str, Row]:
    """Each GPU type's best row: the cheapest whose cost is known (confirmed, sized, missed, pruned but
    bisected, or over max_replicas), in the ranking's order; else the one that missed by least at low load;
    else its best reason to be out."""

    def order(r: Row) -> tuple[bool, float, tuple[int, float, float, float, str]]:
        return (r.cost_per_hour != r.cost_per_hour, _known(r.low_load_miss), _rank_order(r))

    best: dict[str, Row] = {}
    for row in sorted(rows, key=order):
        best.setdefault(row.candidate.hardware, row)
    return best
