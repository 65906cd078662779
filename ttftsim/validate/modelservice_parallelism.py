"""llm-d ModelService's `decode.parallelism` as its chart resolves it, and the environment the chart gives every
container from it (llm-d-incubation/llm-d-modelservice @ 3051935, chart v0.4.12,
charts/llm-d-modelservice/templates/_helpers.tpl: `tensorParallelism`, `dataParallelism`, `dataLocalParallelism`,
`numWorkers`, and `parallelismEnv`, which the `container` helper includes after the user's `env` in every container,
whatever its `modelCommand`). A custom script may so read `$TP_SIZE`, `$DP_SIZE` and `$DP_SIZE_LOCAL`; the
`vllmServe` and `imageDefault` commands get them as flags (`vllmServeModelCommand`, `imageDefaultModelCommand`)."""

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

    def vllm_flags(self) -> list[str]:
        """The parallel sizes `vllmServeModelCommand` and `imageDefaultModelCommand` write, each only above 1:
        --tensor-parallel-size, --data-parallel-size, --data-parallel-size-local."""
        sizes = (
            ("--tensor-parallel-size", self.tensor),
            ("--data-parallel-size", self.data),
            ("--data-parallel-size-local", self.data_local),
        )
        return [word for flag, size in sizes if size > 1 for word in (flag, str(size))]

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


def chart_workers(parallelism: Fields) -> int:
    """`numWorkers`, the pods of a multinode LeaderWorkerSet (decode-lws.yaml `leaderWorkerTemplate.size`, the only
    template that includes it): workers, else data / dataLocal (helm template fails when dataLocal does not divide
    data), else 1."""
    if parallelism.count("workers", 0):
        return parallelism.count("workers", 0)
    data, data_local = parallelism.count("data", 0), parallelism.count("dataLocal", 0)
    if data and data_local and data % data_local:
        message = f"{data} is not a multiple of dataLocal ({data_local}): helm template fails"
        raise InputError(parallelism.source, parallelism.where("data"), message)
    return data // data_local if data and data_local else 1
