"""llm-d ModelService's `decode.parallelism` as its chart resolves it, and the environment the chart gives every
container from it (llm-d-incubation/llm-d-modelservice @ 3051935, chart v0.4.12,
charts/llm-d-modelservice/templates/_helpers.tpl: `tensorParallelism`, `dataParallelism`, `dataLocalParallelism`,
and `parallelismEnv`, which the `container` helper includes after the user's `env` in every container, whatever
its `modelCommand`). A custom script may so read `$TP_SIZE`, `$DP_SIZE` and `$DP_SIZE_LOCAL`.

Left out: `numWorkers` (the LeaderWorkerSet's size is read from `workers` by the values reader)."""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.errors import InputError
from ttftsim.validate.yaml_fields import Fields


@dataclass(frozen=True)
class ChartParallelism:
    """The sizes the chart's helpers give; each at least 1 (an unset or zero size is 1, as Helm's `and` reads 0)."""

    tensor: int
    data: int
    data_local: int

    def env(self) -> list[dict[str, str]]:
        """`parallelismEnv`: DP_SIZE, TP_SIZE and DP_SIZE_LOCAL, in that order, as quoted strings."""
        return [
            {"name": "DP_SIZE", "value": str(self.data)},
            {"name": "TP_SIZE", "value": str(self.tensor)},
            {"name": "DP_SIZE_LOCAL", "value": str(self.data_local)},
        ]


def chart_parallelism(parallelism: Fields) -> ChartParallelism:
    """tensor (default 1); data, else dataLocal x workers, else dataLocal, else 1; dataLocal, else data / workers
    (helm template fails when workers does not divide data), else data, else 1."""
    tensor = parallelism.count("tensor", 0) or 1
    data, data_local, workers = (parallelism.count(key, 0) for key in ("data", "dataLocal", "workers"))
    return ChartParallelism(tensor, data or data_local * (workers or 1) or 1, data_local or _local(parallelism))


def _local(parallelism: Fields) -> int:
    """dataLocalParallelism without dataLocal: data / workers when both are set, else data, else 1."""
    data, workers = parallelism.count("data", 0), parallelism.count("workers", 0)
    if data and workers and data % workers:
        message = f"{data} is not a multiple of workers ({workers}): helm template fails"
        raise InputError(parallelism.source, parallelism.where("data"), message)
    return data // workers if data and workers else data or 1
