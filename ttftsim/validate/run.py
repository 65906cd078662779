"""`ttftsim validate`: check a deployment against what vLLM and Kubernetes will do with it, then predict its
TTFT under the declared traffic. Each finding has a severity, what is wrong and why, and the fix.
Exit 0 when no finding is an error, 1 otherwise, 2 when the input cannot be read.
This module reads the deployment into a Target (target.py) and runs the checks in order: pod_checks.py,
gpu_scheduling.py, engine_check.py, then the prediction (prediction.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ttftsim.config.base import COMMAND_LINE
from ttftsim.config.deploy import Deploy
from ttftsim.config.engine import EngineArgs
from ttftsim.config.loading import load_file
from ttftsim.config.slo import unit_warnings
from ttftsim.config.versions import version_warnings
from ttftsim.errors import InputError
from ttftsim.inputs.limits import current_limits
from ttftsim.model.hf_ids import name_key, parse_model_id
from ttftsim.model.not_modelled import model_warnings
from ttftsim.replica import window_kept
from ttftsim.validate.engine_check import check_engine
from ttftsim.validate.formats import render_workloads
from ttftsim.validate.gpu_scheduling import check_gpu_scheduling, check_mig, gpu_label, label_hardware
from ttftsim.validate.host_memory import check_host_memory
from ttftsim.validate.k8s_schema import (
    SchemaFinding,
    UnsupportedDeploymentError,
    check_objects,
    misplaced_vllm,
    unsupported_deployment,
)
from ttftsim.validate.kserve import MODEL_SOURCE
from ttftsim.validate.manifests import NoServingWorkloadError, ServingWorkload, find_serving, read_documents
from ttftsim.validate.pod_checks import check_manifests, check_probes_and_hpa, not_modelled
from ttftsim.validate.prediction import predict
from ttftsim.validate.report import Finding, Report
from ttftsim.validate.target import Target
from ttftsim.validate.vllm_args import flag_of
from ttftsim.validate.vllm_checks import unread_image_version
from ttftsim.workload.budget import check_workload
from ttftsim.workload.file_refs import check_files


def validate(path: Path, extra_manifests: list[Path]) -> Report:
    deploy = load_file(Deploy, path)
    check_workload(deploy.traffic, str(path), "traffic", None, current_limits())  # bounded work, said up front
    base = path.parent  # as the user named it: messages and --json hold the same paths wherever the checkout lies
    check_files(deploy.traffic, base, str(path), "traffic")
    report = Report(deploy.name)
    try:
        target = _target(deploy, path, base, extra_manifests)
    except UnsupportedDeploymentError as exc:  # no workload the checks can read: what the files hold, named
        report.findings += [Finding(f.severity, f.check, f.message, f.fix) for f in exc.findings]
        report.deployment = {"model": None, "hardware": None, "replicas": 0, "engine": {}}
        return report
    report.findings += [Finding(f.severity, f.check, f.message, f.fix) for f in target.schema_findings]
    report.deployment = {
        "model": target.model,
        "hardware": target.hardware,
        "replicas": target.replicas,
        "engine": target.engine.model_dump(exclude_defaults=True),
    }
    if target.serving is not None:
        report.findings += [Finding(f.severity, "vllm-args", f.message, f.fix) for f in target.serving.command_findings]
        check_manifests(report, target.serving, target)
        check_gpu_scheduling(report, target.serving, target, deploy.gpus_per_node)
        check_mig(report, target.serving)
        report.warnings += not_modelled(target.serving)
        _check_image_version(report, target.serving, deploy)
    report.warnings += unit_warnings(deploy.slo)
    replica = check_engine(report, deploy, target, base, str(path))
    if replica is not None:
        engine = replica.engine
        report.warnings += version_warnings(target.engine.vllm_version)
        deployment = replica.perf.deployment
        kept = window_kept(deployment.model, engine)
        report.warnings += model_warnings(deployment.model, engine.max_model_len, engine.weight_dtype, kept)
    if replica is not None and target.hardware is not None:
        weights = float(replica.memory.weight_bytes * replica.engine.tp) if replica.memory else 0.0  # one stage's
        if target.serving is not None:
            check_probes_and_hpa(report, target.serving, weights, replica.engine)
            check_host_memory(report, target.serving, weights)
        predict(report, deploy, target, base)
    return report


def _check_image_version(report: Report, serving: ServingWorkload, deploy: Deploy) -> None:
    """An image whose name does not say the vLLM it runs, with no vllm_version in the deployment file."""
    if "vllm_version" in deploy.model_fields_set:
        return
    why = unread_image_version(str(serving.container.get("image") or ""), deploy.vllm_version)
    if why is not None:
        fix = "set vllm_version in the deployment file to the vLLM release the image runs"
        report.add("warning", "vllm-version", f"{serving.kind}/{serving.name}: {why}", fix)


def _read_manifests(files: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for file in files:
        read = read_documents(file)
        if not read:
            raise InputError(str(file), "", "no Kubernetes object in it (empty, or only comments and --- separators)")
        documents += read
    return documents


def _target(deploy: Deploy, path: Path, base: Path, extra: list[Path]) -> Target:
    source = str(path)
    # a file named twice (in manifests: and by --manifest, one path relative, one not) is read once
    files = list({file.resolve(): file for file in [base / m for m in deploy.manifests] + list(extra)}.values())
    if not files:
        return _target_without_manifests(deploy, source)
    documents = _read_manifests(files)
    rendered = render_workloads(documents)  # formats.py: KServe resources and chart values as their workloads
    schema_findings = rendered.kept(check_objects(documents)) + rendered.findings  # before the deployment checks
    if deploy.model is not None:  # the deployment file names the model that KServe's storage holds
        schema_findings = [f for f in schema_findings if f.check != MODEL_SOURCE]
    documents = documents + rendered.documents
    serving = _serving(documents, deploy.vllm_version, schema_findings)
    if deploy.engine is not None or deploy.replicas is not None:
        field_name = "engine" if deploy.engine is not None else "replicas"
        raise InputError(
            source,
            field_name,
            f"the manifests set the {'engine arguments (vllm serve)' if field_name == 'engine' else 'replicas'}; "
            f"{field_name} is for a deployment without manifests: remove one or the other",
        )
    model = deploy.model or serving.model
    if model is None:
        raise InputError(
            serving.source, "vllm serve", "no model named (vllm serve MODEL) and none in the deployment file"
        )
    engine = _engine_args(deploy, serving)
    label = gpu_label(serving)
    pinned = label_hardware(label) if label else None
    hardware = deploy.hardware or pinned
    schema_findings += _overrides(deploy, serving, pinned, source)
    return Target(model, hardware, engine, serving.replicas, serving, schema_findings)


def _target_without_manifests(deploy: Deploy, source: str) -> Target:
    """The deployment file's own model, hardware and engine arguments (both named, or an input error)."""
    if deploy.model is None or deploy.hardware is None:
        missing = "model" if deploy.model is None else "hardware"
        raise InputError(
            source,
            missing,
            f"no {missing}: give Kubernetes manifests, or model and hardware (and engine arguments)",
        )
    engine = deploy.engine if deploy.engine is not None else EngineArgs(vllm_version=deploy.vllm_version)
    return Target(deploy.model, deploy.hardware, engine, deploy.replicas or 1, None)


def _serving(
    documents: list[tuple[str, dict[str, Any]]], vllm_version: str, schema_findings: list[SchemaFinding]
) -> ServingWorkload:
    """The manifests' one vLLM workload; where there is none, and the files deploy a model in a form the checks
    cannot read, the error naming that form instead, or, where a workload's vLLM container is under its `spec`
    rather than its pod template's, the schema's errors, which say where."""
    try:
        return find_serving(documents, vllm_version)
    except NoServingWorkloadError as exc:
        unsupported = unsupported_deployment(documents, schema_findings)
        if unsupported is not None:
            raise unsupported from exc
        if not any(misplaced_vllm(document) for _, document in documents):
            raise
        why = "its container is under spec, where Kubernetes does not read it (spec.template.spec.containers)"
        found = SchemaFinding("error", "no-workload", f"{exc.one_line()}: {why}")
        raise UnsupportedDeploymentError([*(f for f in schema_findings if f.severity == "error"), found]) from exc


def _engine_args(deploy: Deploy, serving: ServingWorkload) -> EngineArgs:
    """The engine arguments of the workload's vllm command line, with the deployment file's vLLM version and
    calibration; a value they refuse is an input error naming the flag."""
    try:
        stages = {"pipeline_parallel_size": serving.pipeline_parallel} if serving.pipeline_parallel > 1 else {}
        fitted = {"calibration": deploy.calibration} if deploy.calibration else {}  # ttftsim fit's factors
        args = {"vllm_version": deploy.vllm_version, **serving.engine, **stages, **fitted}
        return EngineArgs.model_validate(args, context={COMMAND_LINE: True})  # strings, converted as argparse does
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else ""
        if name in serving.engine:  # from the command line: named by its flag (dashed), with the value given
            raise InputError(
                serving.source, f"vllm serve {flag_of(name)}", f"{serving.engine[name]}: {error['msg']}"
            ) from None
        raise InputError(serving.source, "vllm args " + ".".join(str(p) for p in error["loc"]), error["msg"]) from None


def _overrides(deploy: Deploy, serving: ServingWorkload, pinned: str | None, source: str) -> list[SchemaFinding]:
    """The deployment file's model or hardware where the manifests say otherwise: predicted as the file says, with
    a warning naming both (a model served from a path is named by the file: no warning)."""
    notes = []
    served = serving.model
    if deploy.model and served and not served.startswith(("/", ".", "~")) and not _same_model(deploy.model, served):
        notes.append(
            SchemaFinding(
                "warning",
                "model",
                f"{source} predicts model {deploy.model}, but {serving.kind}/{serving.name} serves {served}",
                "remove model: from the deployment file, or make the two agree",
            )
        )
    if deploy.hardware and pinned and deploy.hardware != pinned:
        notes.append(
            SchemaFinding(
                "warning",
                "gpu-affinity",
                f"{source} predicts on {deploy.hardware}, but {serving.kind}/{serving.name} is pinned to {pinned} "
                "nodes",
                "remove hardware: from the deployment file, or make the two agree",
            )
        )
    return notes


def _same_model(named: str, served: str) -> bool:
    """The deployment file's name and the served id name one model (organisation, case, post-training tags,
    quantization suffixes and Meta- before Llama aside: model/hf_ids.py)."""

    return bool(name_key(parse_model_id(named).base) == name_key(parse_model_id(served).base))
