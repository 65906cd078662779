"""Where the search's tasks run: each task (bound, capacity, predict, confirm, day) is a pure function of the
plan, the base folder, a candidate and one number, run in this process, on a local process pool or as Ray
tasks; every result is stored in the checkpoint and read back from it when resumed.

The order results arrive in does not matter: `Runner.run` returns them in the order of its jobs. What the
tasks compute is plan/evaluate.py and plan/day.py; which tasks run, and when, is plan/search.py.

A task's calibration-range warnings (a kernel shape outside the calibrated range) come back with its result,
are stored beside it, and are given once per message with the candidates that raised it (`Runner.warnings`),
rather than printed by each worker process as it meets them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import warnings
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

from ttftsim.calibration.costs import forget_warnings
from ttftsim.config.plan import Plan
from ttftsim.errors import CalibrationRangeWarning, InputError
from ttftsim.plan import day, evaluate, stored
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.store import Store
from ttftsim.processes import local_pool, usable_workers

Progress = Callable[[str, int, int], None]  # (phase, done, total)
WARNINGS = "warnings|"  # the checkpoint's key of a task's warnings: this before the task's own key


def run_task(plan_json: str, base: str, kind: str, cand: dict[str, Any], arg: float) -> tuple[Any, list[str]]:
    """A worker's entry point (module level, so processes and Ray can run it): the task's result and the
    calibration-range warnings it raised, its own (what earlier tasks in the same process were warned of is
    forgotten first); any other warning is shown as it would be without the record."""
    forget_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # once per place per task
        value = _task(plan_json, base, kind, cand, arg)
    ranges: dict[str, None] = {}  # each message once, in the order raised
    for caught_one in caught:
        if issubclass(caught_one.category, CalibrationRangeWarning):
            ranges[str(caught_one.message)] = None
        else:  # shown as it would have been without the record
            warnings.showwarning(caught_one.message, caught_one.category, caught_one.filename, caught_one.lineno)
    return value, list(ranges)


def _task(plan_json: str, base: str, kind: str, cand: dict[str, Any], arg: float) -> Any:
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
    found: dict[str, list[str]] = field(default_factory=dict)  # each warning: the candidates that raised it
    _pool: Any = field(default=None, repr=False)

    def run(self, phase: str, jobs: list[tuple[str, Candidate, float]]) -> list[Any]:
        """Results of (kind, candidate, arg) jobs in order: from the checkpoint, or computed (and stored)."""
        keys = [f"{kind}|{cand.key}|{arg!r}" for kind, cand, arg in jobs]
        todo = [(i, job) for i, (key, job) in enumerate(zip(keys, jobs, strict=True)) if key not in self.store]
        results: list[Any] = [None] * len(jobs)
        for index, (key, (_, cand, _)) in enumerate(zip(keys, jobs, strict=True)):
            if key in self.store:  # from the checkpoint, with the warnings stored beside it
                results[index] = self._reused(key)
                self._found(_messages(self.store.beside(WARNINGS + key)), cand)
        done = len(jobs) - len(todo)
        self._tick(phase, done, len(jobs))
        plan_json = self.plan.model_dump_json()
        for index, (value, messages) in self._execute(plan_json, todo):
            if messages:  # before the result: a result stored means its warnings are too
                self.store.put(WARNINGS + keys[index], {"warnings": messages})
            self.store.put(keys[index], value)
            results[index] = value
            self._found(messages, jobs[index][1])
            self.computed += 1
            done += 1
            self._tick(phase, done, len(jobs))
        return results

    def _found(self, messages: list[str], cand: Candidate) -> None:
        label = cand.label()
        for message in messages:
            labels = self.found.setdefault(message, [])
            if label not in labels:
                labels.append(label)

    def warnings(self) -> list[str]:
        """Each task warning once, with the candidates that raised it (the first three named); sorted, so the
        order tasks finished in (several workers) does not show."""
        lines = []
        for message, found in sorted(self.found.items()):
            labels = sorted(found)
            named = "; ".join(labels[:3]) + (f"; and {len(labels) - 3} more" if len(labels) > 3 else "")
            lines.append(f"{message} (candidates: {named})")
        return lines

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

    def close(self, wait: bool = True) -> None:
        """Queued tasks are not run; with wait=False (interrupted) the running ones are not waited for either: the
        workers are ended (what they computed is not in the checkpoint, and --resume computes it again)."""
        pool = self._pool
        if pool is None:
            return
        pool.shutdown(wait=wait, cancel_futures=True)
        if not wait:
            for worker in multiprocessing.active_children():  # the pool's workers: a plan starts no other process
                worker.terminate()


def _messages(stored: Any) -> list[str]:
    """A task's stored warnings (none if absent or not as written)."""
    messages = stored.get("warnings") if isinstance(stored, dict) else None
    return [m for m in messages if isinstance(m, str)] if isinstance(messages, list) else []


def _ray_failed(where: str, what: str, exc: BaseException) -> InputError:
    """Ray's failure on one line; the tasks that finished before it are in the checkpoint either way."""
    first = (str(exc).strip().splitlines() or [""])[0]
    remedy = "check the Ray cluster or use --backend local" if what == "did not start" else "rerun with --resume"
    return InputError(where, "", f"Ray {what} ({type(exc).__name__}: {first}); {remedy} (finished tasks are kept)")
