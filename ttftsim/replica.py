"""Build one engine replica from a scenario: resolve its model and hardware references, the engine
arguments, the memory plan (KV blocks) and the iteration-cost model (roofline, calibrated kernel times, or
measured step costs: step_costs.py). What the single-replica run, the cluster's pods, the plan and validate all
start engines from; it builds values only and runs nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ttftsim.calibration.factors import scaled_api_server, scaled_kernel_costs, with_overhead
from ttftsim.config.deployment_calibration import DeploymentCalibration, Factors
from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.loading import load_file
from ttftsim.config.resolved_engine import ResolvedEngine, WindowedGroups, resolve_engine
from ttftsim.config.scenario import Scenario
from ttftsim.errors import ArgumentError, InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.inputs.files import exists, is_file
from ttftsim.model.catalog import load_model
from ttftsim.model.spec import ModelSpec
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import RooflineCosts
from ttftsim.perf.kv_groups import KvCacheGroups
from ttftsim.perf.linear import StepCostModel
from ttftsim.perf.memory import MemoryPlan, MemorySettings, plan_memory
from ttftsim.step_costs import kernel_costs_for, step_cost


@dataclass(frozen=True)
class Replica:
    """Everything needed to start one engine: resolved arguments, cost model, KV blocks."""

    engine: ResolvedEngine
    perf: IterationModel
    memory: MemoryPlan | None
    num_blocks: int
    cost: StepCostModel  # what the engine is timed with: the roofline model, or measured costs
    kernel_costs: str = "roofline"  # which kernel times the model uses, and from where


def resolve_ref(ref: str, base: Path) -> str:
    """Paths in a scenario are relative to its file, a model's folder named bare (`model: mymodel`, holding its
    config.json) too; names (presets, profiles) pass through, whatever else lies beside the file (an output
    folder named after a GPU)."""
    candidate = base / ref
    path = "/" in ref or ref.endswith((".json", ".yaml", ".yml")) or is_file(candidate / "config.json")
    if not path or exists(candidate):
        return str(candidate) if path else ref
    # a file found nowhere beside the file naming it: as given where it exists from the working directory, else
    # beside that file, so that the error names where it was looked for; an org/name is a Hugging Face id
    if not ref.endswith((".json", ".yaml", ".yml")) or exists(Path(ref)):
        return ref
    return str(candidate)


def engine_field(exc: ValueError) -> str:
    """Where an error resolving the engine arguments is in the file: the argument it names, else the section."""
    return f"engine.{exc.argument}" if isinstance(exc, ArgumentError) else "engine"


def build_replica(scenario: Scenario, base: Path, source: str = "scenario") -> Replica:
    """The replica a scenario describes (its paths relative to base; source names it in errors): the engine
    arguments resolved, the memory planned and counted in KV blocks, host transfers sized, the cost model chosen."""
    model = load_model(resolve_ref(scenario.model, base), source)
    disaggregated = is_disaggregated(scenario)
    hardware = load_hardware(resolve_ref(scenario.hardware, base), source)
    factors = deployment_factors(scenario.engine.calibration, hardware, base, source)
    try:
        engine = _resolved_engine(scenario, model, hardware, factors)
        deployment = _deployment(scenario, engine, model, hardware, factors, source, base)
    except ValueError as exc:
        raise InputError(source, engine_field(exc), str(exc)) from None
    memory = plan_memory(deployment, _memory_settings(engine, disaggregated))
    blocks = engine.num_gpu_blocks_override or memory.num_blocks
    windowed = windowed_groups(model, engine, memory, disaggregated)
    if windowed is not None:  # the windowed KV manager's pool; vLLM's override counts one group's blocks
        engine = replace(engine, windowed_kv=windowed)
        if engine.num_gpu_blocks_override:
            blocks = engine.num_gpu_blocks_override // (windowed.full + windowed.windowed)
    engine = _with_lora_loads(scenario, engine, deployment, hardware)
    engine = _with_kv_tiers(engine, model, hardware, memory, source)
    return _with_costs(scenario, engine, deployment, hardware, memory, blocks, factors, source)


def _resolved_engine(
    scenario: Scenario, model: ModelSpec, hardware: HardwareProfile, factors: Factors
) -> ResolvedEngine:
    """The engine arguments with every default applied, the API server's costs scaled and the run's seed."""
    engine = resolve_engine(
        scenario.engine, hardware, model.max_position_embeddings, model.native_dtype, model.mla_nope_dim
    )
    return replace(engine, api_server=scaled_api_server(engine.api_server, factors), seed=scenario.seed)


def _deployment(
    scenario: Scenario,
    engine: ResolvedEngine,
    model: ModelSpec,
    hardware: HardwareProfile,
    factors: Factors,
    source: str,
    base: Path,
) -> Deployment:
    """The model on the hardware as the engine runs it: parallelism, dtypes, CUDA graphs, the host's time per
    iteration (with the deployment factors), speculation's draft, LoRA's rank, the experts' layout and the vLLM
    release that loads the weights."""
    eager_s, graph_s = engine.iteration_overhead_s, engine.decode_graph_iteration_s
    host_used = scenario.measured_step_cost is None  # a measured step cost holds its own host time
    return Deployment(
        model,
        hardware,
        engine.tp,
        engine.weight_dtype,
        engine.kv_dtype,
        engine.capture_sizes,
        engine.cudagraph_mode,
        with_overhead(hardware.overhead.iteration_s if eager_s is None else eager_s, factors, used=host_used),
        with_overhead(
            hardware.overhead.decode_graph_iteration_s if graph_s is None else graph_s, factors, used=host_used
        ),
        engine.max_num_seqs,
        engine.async_scheduling,
        engine.pp,
        *speculation(engine, hardware, source, base, scenario.engine.vllm_version),
        engine.max_lora_rank if engine.lora_slots else 0,
        scenario.engine.enable_expert_parallel,
        engine.dp,
        scenario.engine.expert_load_imbalance,
        scenario.engine.vllm_version,
    )


def _memory_settings(engine: ResolvedEngine, disaggregated: bool) -> MemorySettings:
    """What the memory plan reads of the engine's arguments."""
    return MemorySettings(
        engine.gpu_memory_utilization,
        engine.max_num_batched_tokens,
        engine.max_num_seqs,
        engine.block_size,
        engine.max_model_len,
        engine.cudagraph_mode == "NONE",
        hybrid_kv_cache(engine, disaggregated),
        engine.measured_kv_sizing,
        engine.lora_slots,
    )


def _with_lora_loads(
    scenario: Scenario, engine: ResolvedEngine, deployment: Deployment, hardware: HardwareProfile
) -> ResolvedEngine:
    """With LoRA on: an adapter's copy into its GPU slot, and its read from disk into host memory."""
    if engine.lora_slots:
        lora = getattr(scenario.workload, "lora", None)
        adapter = deployment.lora_adapter_bytes(lora.rank if lora is not None else engine.max_lora_rank)
        read_bw = scenario.engine.lora_read_bytes_per_s
        engine = replace(
            engine,
            lora_h2d_s=adapter / hardware.host_to_device_bw_bytes_per_s,
            lora_read_s=adapter * engine.rank_gpus / read_bw,
        )
    return engine


def _with_kv_tiers(
    engine: ResolvedEngine, model: ModelSpec, hardware: HardwareProfile, memory: MemoryPlan, source: str
) -> ResolvedEngine:
    """The KV tiers beyond the GPU sized from the memory plan: the CPU tier of KV offloading (blocks, a block's
    load time) and LMCache's chunks; a chunk LMCache's capacities cannot hold is refused."""
    if engine.kv_offloading_gib:
        capacity, load_s = offload_sizes(engine, memory, hardware)
        engine = replace(engine, kv_offload_blocks=capacity, kv_load_s_per_block=load_s)
    if engine.lmcache is not None:  # LMCache's chunks: their bytes on each GPU (engine/loading.py sizes tiers)
        chunk = engine.lmcache.chunk_size * memory.kv_bytes_per_token
        problem = engine.lmcache.capacity_problem(chunk)
        if problem is not None:
            raise InputError(source, f"engine.lmcache.{problem[0]}", problem[1])
        host_bw, layers = hardware.host_to_device_bw_bytes_per_s, model.num_hidden_layers
        engine = replace(engine, lmcache_chunk_bytes=chunk, lmcache_h2d_bytes_per_s=host_bw, lmcache_num_layers=layers)
    return engine


def _with_costs(
    scenario: Scenario,
    engine: ResolvedEngine,
    deployment: Deployment,
    hardware: HardwareProfile,
    memory: MemoryPlan,
    num_blocks: int,
    factors: Factors,
    source: str,
) -> Replica:
    """The replica with its cost model (step_costs.py): the iteration model on the kernel times asked for, and
    what the engine is timed with; its note says which kernel times and factors were used."""
    measured = scenario.measured_step_cost
    # measured step costs replace the kernel costs: asking for a calibration that does not exist refuses nothing
    choice = "auto" if measured is not None and scenario.kernel_costs == "calibrated" else scenario.kernel_costs
    kernel_costs, kernel_note = kernel_costs_for(choice, hardware, source)
    perf = IterationModel(
        deployment, scaled_kernel_costs(RooflineCosts(hardware) if kernel_costs is None else kernel_costs, factors)
    )
    cost = step_cost(scenario, engine, perf, factors, source)
    note = kernel_note if measured is None else "measured step costs (measured_step_cost)"
    if scenario.engine.calibration is not None:
        note += f", deployment factors of {scenario.engine.calibration}"
    return Replica(engine, perf, memory, num_blocks, cost, note)


def hybrid_kv_cache(engine: ResolvedEngine, disaggregated: bool = False) -> bool:
    """Whether vLLM's hybrid KV-cache manager is on: not with a KV connector (vLLM 0.15.1 config/vllm.py
    VllmConfig.__post_init__ turns it off when kv_transfer_config is set: LMCache, the prefill/decode pods of a
    disaggregated deployment), not with --disable-hybrid-kv-cache-manager. KV offloading (--kv-offloading-size)
    sets its connector after that decision, and the connector then refuses to start beside the hybrid manager
    unless --disable-hybrid-kv-cache-manager is given (distributed/kv_transfer/kv_connector/factory.py: no 0.15.1
    connector supports it): modelled as given, and validate says when it is missing. Off, a model with full and
    sliding-window layers keeps every token in every layer (perf/kv_groups.py)."""
    return engine.hybrid_kv_cache_manager and not kv_connector(engine, disaggregated)


def kv_connector(engine: ResolvedEngine, disaggregated: bool = False) -> bool:
    """Whether the engine runs a KV connector: KV offloading, LMCache, or a disaggregated pod's KV transfer."""
    return bool(engine.kv_offloading_gib) or engine.lmcache is not None or disaggregated


def is_disaggregated(scenario: Scenario) -> bool:
    """Whether the scenario's pods are prefill and decode pools (each with a KV transfer connector)."""
    return scenario.cluster is not None and scenario.cluster.disaggregation is not None


def windowed_groups(
    model: ModelSpec, engine: ResolvedEngine, memory: MemoryPlan, disaggregated: bool = False
) -> WindowedGroups | None:
    """The sliding-window groups whose blocks the engine frees as they leave the window (kvcache/windowed.py),
    or None: no windowed group, or an engine the windowed KV manager does not run in (static or no KV cache,
    a CPU tier, LMCache; window_kept says when vLLM would free them there)."""
    groups = KvCacheGroups.of(model, hybrid_kv_cache(engine, disaggregated))
    if not groups.windowed_groups or engine.kv_cache_mode != "paged" or kv_connector(engine, disaggregated):
        return None
    count = engine.num_gpu_blocks_override or memory.vllm_num_blocks(groups)
    return WindowedGroups(groups.full_groups, groups.windowed_groups, groups.window, count)


def window_kept(model: ModelSpec, engine: ResolvedEngine, disaggregated: bool = False) -> bool:
    """Whether the windowed layers keep tokens here that vLLM frees: a model whose layers all share one window
    keeps vLLM's sliding-window manager with a KV connector too, but the windowed KV manager does not run beside
    the CPU tier, LMCache or a disaggregated pod's transfer (the run warns: model/not_modelled.py)."""
    groups = KvCacheGroups.of(model, hybrid_kv_cache(engine, disaggregated))
    return bool(groups.windowed_groups) and (kv_connector(engine, disaggregated) or engine.kv_cache_mode == "static")


def offload_sizes(engine: ResolvedEngine, memory: MemoryPlan, hardware: HardwareProfile) -> tuple[int, float]:
    """The CPU tier's capacity in blocks (kv_offloading_gib over a block's bytes on every GPU of the replica)
    and the time to copy one block back (each GPU its shard, in parallel, at its host-to-device bandwidth)."""
    block_bytes_per_gpu = memory.block_size * memory.kv_bytes_per_token
    capacity = int(engine.kv_offloading_gib * 2**30 // (block_bytes_per_gpu * engine.rank_gpus))
    return capacity, block_bytes_per_gpu / hardware.host_to_device_bw_bytes_per_s


def speculation(
    engine: ResolvedEngine, hardware: HardwareProfile, source: str, base: Path, vllm_version: str
) -> tuple[str, int, Deployment | None]:
    """(proposer, draft tokens, draft model's deployment) of the engine's speculative config: a draft model
    runs on the same TP group in its own checkpoint dtype (vLLM's default draft_tensor_parallel_size), loaded by
    the same vLLM release."""
    spec = engine.speculative
    if spec is None:
        return "", 0, None
    draft = None
    if spec.model is not None:
        draft_model = load_model(resolve_ref(spec.model, base), f"{source} engine.speculative_config.model")
        draft = Deployment(
            draft_model, hardware, engine.tp, draft_model.native_dtype, engine.kv_dtype, vllm_version=vllm_version
        )
    return spec.method, spec.num_speculative_tokens, draft


def calibration_file(calibration: str, base: Path, source: str) -> Path:
    """engine.calibration's file, relative to the scenario's or plan's file (`source`); missing, that field is
    what is wrong, not the file it names."""
    path = base / calibration
    if not is_file(path):
        raise InputError(source, "engine.calibration", f"no calibration file {path}")
    return path


def deployment_factors(calibration: str | None, hardware: HardwareProfile, base: Path, source: str) -> Factors:
    """The factors of a calibration file written by `ttftsim fit` (path relative to the scenario's file, `source`),
    or the neutral ones; a file fitted on other hardware is refused."""
    if calibration is None:
        return Factors()
    path = calibration_file(calibration, base, source)
    loaded = load_file(DeploymentCalibration, path)
    if loaded.hardware != hardware.name:
        raise InputError(
            str(path), "hardware", f"fitted on {loaded.hardware}, the deployment runs on {hardware.name}: "
            "fit the runs of this hardware (ttftsim fit)",
        )  # fmt: skip
    return loaded.factors
