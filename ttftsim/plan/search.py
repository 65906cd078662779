"""The search: bound every candidate, bisect capacities best-first in fixed waves (pruning candidates whose
optimistic cost cannot beat the best found), size replicas, confirm the cheapest with cluster runs.

Results depend only on the plan and its seed: tasks are pure functions of their inputs, waves have a
fixed size whatever the number of workers, and ties are broken by the candidate's key. So the local
process pool, Ray, one worker or many, fresh or resumed from the checkpoint give the same plan.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

from ttftsim.config.plan import Plan
from ttftsim.metrics.slo import SloFigures
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.store import Store

WAVE = 8  # capacity bisections per pruning decision (fixed: the same result for any worker count)
PREDICT_TOP = 20

Progress = Callable[[str, int, int], None]  # (phase, done, total)


def candidates(plan: Plan) -> list[Candidate]:
    space = plan.search
    product = itertools.product(
        space.hardware,
        space.tensor_parallel_size,
        space.max_num_seqs,
        space.max_num_batched_tokens,
        space.enable_chunked_prefill,
        space.enable_prefix_caching,
        space.quantization,
        space.kv_cache_dtype,
        space.router,
        space.warm_pool,
    )
    return [Candidate(*values) for values in product]


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

    def run(self, phase: str, jobs: list[tuple[str, Candidate, float]]) -> list[Any]:
        """Results of (kind, candidate, arg) jobs in order: from the checkpoint, or computed (and stored)."""
        keys = [f"{kind}|{cand.key}|{arg!r}" for kind, cand, arg in jobs]
        todo = [(i, job) for i, (key, job) in enumerate(zip(keys, jobs, strict=True)) if key not in self.store]
        results: list[Any] = [self.store.get(key) if key in self.store else None for key in keys]
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

    def _tick(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)

    def _execute(self, plan_json: str, todo: list[tuple[int, tuple[str, Candidate, float]]]) -> Any:
        if not todo:
            return
        if self.backend == "ray":
            yield from self._execute_ray(plan_json, todo)
            return
        if self.workers <= 1:
            for index, (kind, cand, arg) in todo:
                yield index, run_task(plan_json, self.base, kind, asdict(cand), arg)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        futures = {
            self._pool.submit(run_task, plan_json, self.base, kind, asdict(cand), arg): index
            for index, (kind, cand, arg) in todo
        }
        for future in as_completed(futures):
            yield futures[future], future.result()

    def _execute_ray(self, plan_json: str, todo: list[tuple[int, tuple[str, Candidate, float]]]) -> Any:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        remote = ray.remote(run_task)
        pending = {
            remote.remote(plan_json, self.base, kind, asdict(cand), arg): index for index, (kind, cand, arg) in todo
        }
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield pending.pop(ref), ray.get(ref)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)  # after Ctrl-C, queued tasks are not run


@dataclass
class Row:
    """One candidate in the ranked table."""

    candidate: Candidate
    status: str  # confirmed, missed, estimate, pruned, infeasible
    reason: str = ""
    saturated_rate: float = math.nan
    max_rate: float = math.nan
    replicas: int = 0
    gpus: int = 0
    cost_per_hour: float = math.nan
    cost_per_million_tokens: float = math.nan
    headroom: float = math.nan
    ttft_p50_s: float = math.nan
    ttft_p99_s: float = math.nan
    lower_bound_cost: float = math.nan


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
    sized = sorted((r for r in rows.values() if r.status == "estimate"), key=_cost_order)
    _predict(runner, sized[:PREDICT_TOP])
    sized.sort(key=_cost_order)  # equal costs: the lower predicted P99 first
    start = 0
    while start < min(len(sized), 3 * plan.confirm_top) and not any(r.status == "confirmed" for r in rows.values()):
        _confirm(runner, sized[start : start + plan.confirm_top])  # the cheapest first, until one holds
        start += plan.confirm_top
    return sorted(rows.values(), key=_rank_order)


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
            row = rows[cand.key]
            if not result["feasible"]:
                row.status, row.reason = "infeasible", result["reason"]
                continue
            size = evaluate.sizing(plan, cand, result["max_rate"])
            row.max_rate = result["max_rate"]
            if size["replicas"] > plan.search.max_replicas:
                row.status, row.reason = "infeasible", f"needs {size['replicas']} replicas > max_replicas"
                continue
            row.status = "estimate"
            row.replicas, row.gpus, row.cost_per_hour, row.headroom = (
                size["replicas"],
                size["gpus"],
                size["cost_per_hour"],
                size["headroom"],
            )
            best = min(best, row.cost_per_hour)


def _predict(runner: Runner, rows: list[Row]) -> None:
    jobs = [("predict", r.candidate, float(r.replicas)) for r in rows]
    for row, result in zip(rows, runner.run("predict", jobs), strict=True):
        figures = SloFigures.from_dict(result)
        row.ttft_p50_s, row.ttft_p99_s = figures.ttft_p50_s, figures.ttft_p99_s
        row.cost_per_million_tokens = _per_million(runner.plan, row.cost_per_hour, figures)


def _confirm(runner: Runner, rows: list[Row]) -> None:
    plan = runner.plan
    jobs = [("confirm", r.candidate, float(r.replicas)) for r in rows]
    for row, result in zip(rows, runner.run("confirm", jobs), strict=True):
        size_gpus = (result["replicas"] + row.candidate.warm_pool) * row.candidate.tensor_parallel_size
        row.replicas, row.gpus = result["replicas"], size_gpus
        row.cost_per_hour = size_gpus * evaluate.price_per_gpu_hour(plan, row.candidate.hardware)
        figures = SloFigures.from_dict(result)
        row.ttft_p50_s, row.ttft_p99_s = figures.ttft_p50_s, figures.ttft_p99_s
        row.cost_per_million_tokens = _per_million(plan, row.cost_per_hour, figures)
        if row.max_rate == row.max_rate:
            row.headroom = 1.0 - plan.target_rate / (row.replicas * row.max_rate)
        row.status = "confirmed" if result["met"] else "missed"
        if not result["met"]:
            row.reason = f"cluster run misses: P99 TTFT {figures.ttft_p99_s:.3f} s with {result['replicas']} replicas"


def _per_million(plan: Plan, cost_per_hour: float, figures: SloFigures) -> float:
    tokens_per_hour = plan.target_rate * figures.output_tokens_per_unit * 3600
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
