"""vLLM command lines read as vLLM reads them: every case vLLM's own parser parsed (tests/validate/data,
written by benchmarks/vllm_args/extract.py for each modelled version) gives the same model, values and
refusals here; and what validate makes of them: an underscore flag changes the KV capacity by the hand-computed
amount, an unknown flag is an error finding, a known flag that is not modelled a warning naming it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ttftsim.errors import InputError
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.k8s.spec import vllm_args as plan_vllm_args
from ttftsim.plan.run import load_plan
from ttftsim.validate.run import validate
from ttftsim.validate.vllm_arg_list import arg_list_for, listed_versions
from ttftsim.validate.vllm_args import parse_command, vllm_arguments
from ttftsim.validate.vllm_command import read_vllm_container

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "validate"
VERSIONS = ["0.10", "0.14", "0.15", "0.32", "0.33", "0.34"]


def _oracle_cases() -> list[tuple[str, dict[str, Any]]]:
    return [
        (version, case)
        for version in VERSIONS
        for case in json.loads((DATA / f"vllm_parse_cases_{version}.json").read_text())["cases"]
    ]


def test_every_modelled_version_has_its_own_list() -> None:
    assert listed_versions() == VERSIONS
    assert all(arg_list_for(v).is_exact for v in VERSIONS)
    assert arg_list_for("0.15.1").args.version == "0.15.1"


@pytest.mark.parametrize(("version", "case"), _oracle_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_parse_agrees_with_vllms_own_parser(version: str, case: dict[str, Any]) -> None:
    parsed = parse_command(case["argv"][1:], arg_list_for(version))
    if "error" in case:
        assert parsed.refusals, case["error"]
        return
    assert parsed.refusals == ()
    expected = case["parsed"]
    assert parsed.model == expected["model_tag"]
    for given in parsed.given:
        if given.flag.dest in expected:
            assert str(given.value) == str(expected[given.flag.dest]), given


def test_underscores_equals_abbreviations_and_human_readable_numbers() -> None:
    words = [
        "--max_num_batched_tokens=8k",
        "--gpu-memory-util",
        "0.85",
        "--enable_prefix_caching",
        "--max-model-len",
        "32K",
    ]
    parsed = parse_command(words, arg_list_for("0.15"), positional_model=False)
    values = {g.flag.dest: g.value for g in parsed.given}
    assert values == {
        "max_num_batched_tokens": 8000,
        "gpu_memory_utilization": 0.85,
        "enable_prefix_caching": True,
        "max_model_len": 32768,
    }
    assert [g.option for g in parsed.given][1] == "--gpu-memory-utilization"


def test_an_abbreviation_that_became_ambiguous_is_refused_by_the_later_version() -> None:
    words = ["m", "--enable-chunked"]
    assert parse_command(words, arg_list_for("0.32")).refusals == ()
    (refusal,) = parse_command(words, arg_list_for("0.33")).refusals
    assert refusal.kind == "unknown"
    assert refusal.message == (
        "ambiguous option: --enable-chunked could match --enable-chunked-mm-input, --enable-chunked-prefill"
    )


def test_json_flags_whole_and_by_key() -> None:
    words = ["m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']
    words += ["--compilation-config.cudagraph_mode", "FULL", "--compilation_config.pass_config.fuse", "true"]
    parsed = parse_command(words, arg_list_for("0.32"))
    assert parsed.value("speculative_config") == {"method": "ngram", "num_speculative_tokens": 3}
    assert parsed.value("compilation_config") == {"cudagraph_mode": "FULL", "pass_config": {"fuse": True}}


def test_entry_points() -> None:
    api = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--port", "8000"]
    assert vllm_arguments(api) == (["--model", "m", "--port", "8000"], False)
    shell = ["pip", "install", "x", "&&", "vllm", "serve", "m", "-tp", "2", ";", "sleep", "1"]
    assert vllm_arguments(shell) == (["m", "-tp", "2"], True)
    assert vllm_arguments(["--model", "m"]) == (["--model", "m"], True)  # the image's ENTRYPOINT runs vllm serve
    assert vllm_arguments(["python3", "train.py"]) is None
    command = read_vllm_container(api, [], "0.15.1", "Deployment/x", "k8s.yaml")
    assert (command.model, command.findings) == ("m", [])


def test_unknown_flag_is_an_error_known_unmodelled_a_warning_noeffect_silent() -> None:
    words = ["vllm", "serve", "m", "--no-such-flag", "3", "--cpu-offload-gb", "4", "--port", "8000"]
    command = read_vllm_container(words, [], "0.15.1", "Deployment/x", "k8s.yaml")
    assert [(f.severity, f.message) for f in command.findings] == [
        (
            "error",
            "Deployment/x: vLLM 0.15.1 refuses this command line and exits at start: "
            "unrecognized arguments: --no-such-flag 3",
        )
    ]
    assert command.not_modelled == ["--cpu-offload-gb"]


def test_a_version_without_its_own_list_only_warns_about_unknown_flags() -> None:
    words = ["vllm", "serve", "m", "--no-such-flag"]
    (finding,) = read_vllm_container(words, [], "0.20.0", "Deployment/x", "k8s.yaml").findings
    assert finding.severity == "warning"
    assert finding.message.endswith("(ttftsim has no argument list for vLLM 0.20.0; read with vLLM 0.15.1's)")


def test_a_value_vllm_cannot_read_is_an_input_error_naming_the_flag() -> None:
    with pytest.raises(InputError, match=r"--max-num-seqs: vLLM 0.32.0 refuses it: invalid int value: 'many'"):
        read_vllm_container(["vllm", "serve", "m", "--max_num_seqs", "many"], [], "0.32.0", "D/x", "k8s.yaml")


def test_environment_variables_against_the_versions_list() -> None:
    env = [{"name": "VLLM_USE_V1", "value": "0"}, {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]
    on_010 = read_vllm_container(["vllm", "serve", "m"], env, "0.10.2", "D/x", "k8s.yaml").findings
    assert [(f.severity, f.message) for f in on_010] == [
        (
            "warning",
            "D/x: environment variable VLLM_USE_V1 is read by vLLM 0.10.2 but not modelled: VLLM_USE_V1=0 runs "
            "the V0 engine, whose scheduler ttftsim does not model (V1's is)",
        )
    ]
    (on_015,) = read_vllm_container(["vllm", "serve", "m"], env, "0.15.1", "D/x", "k8s.yaml").findings
    assert on_015.severity == "warning" and "does not read the environment variable VLLM_USE_V1" in on_015.message
    strict = ["vllm", "serve", "m", "--fail-on-environ-validation"]
    (on_032,) = read_vllm_container(strict, env, "0.32.0", "D/x", "k8s.yaml").findings
    assert on_032.severity == "error" and "refuses to start" in on_032.message


def _deploy(tmp_path: Path, args: str, version: str = "0.15.1") -> Path:
    """The shipped validate example with its vllm args replaced, and a short traffic sample."""
    k8s = (EXAMPLE / "k8s.yaml").read_text()
    old = 'args: [--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching]'
    assert old in k8s
    (tmp_path / "k8s.yaml").write_text(k8s.replace(old, f"args: [{args}]"))
    deploy = (EXAMPLE / "deploy.yaml").read_text().replace("duration_s: 120", "duration_s: 5")
    (tmp_path / "deploy.yaml").write_text(deploy + f"vllm_version: {version}\n")
    return tmp_path / "deploy.yaml"


def _kv_tokens(report: Any) -> int:
    (message,) = [f.message for f in report.findings if f.check == "kv-capacity" and f.message.startswith("KV cache")]
    return int(message.split()[2].replace(",", ""))


def test_an_underscore_flag_is_read_and_changes_kv_capacity_by_hand(tmp_path: Path) -> None:
    default = validate(_deploy(tmp_path, '--max-model-len, "8192"'), [])
    underscored = validate(_deploy(tmp_path, '--max_model_len, "8192", --gpu_memory_utilization, "0.8"'), [])
    assert underscored.deployment["engine"]["gpu_memory_utilization"] == 0.8
    assert (_kv_tokens(default), _kv_tokens(underscored)) == (442_240, 376_992)
    # 0.1 of the H100's 85,520,809,984 bytes over Llama-3.1-8B's 131,072 KV bytes per token
    # (2 x 32 layers x 8 KV heads x 128 x 2 bytes) = 65,247.6 tokens; capacity is whole 16-token blocks
    assert abs((_kv_tokens(default) - _kv_tokens(underscored)) - 0.1 * 85_520_809_984 / 131_072) < 16
    assert not [f for f in underscored.findings if f.check == "vllm-args"]


def test_validate_reports_the_unknown_flag_as_an_error_and_still_predicts(tmp_path: Path) -> None:
    report = validate(_deploy(tmp_path, '--max-model-len, "8192", --max-num-batch-size, "64"'), [])
    errors = [f for f in report.findings if f.severity == "error"]
    assert [(f.check, f.message) for f in errors] == [
        (
            "vllm-args",
            "Deployment/chat-8b: vLLM 0.15.1 refuses this command line and exits at start: "
            "unrecognized arguments: --max-num-batch-size 64",
        )
    ]
    assert not report.passed and report.prediction is not None


def test_validate_warns_about_a_known_flag_it_does_not_model(tmp_path: Path) -> None:
    report = validate(_deploy(tmp_path, '--max-model-len, "8192", --cpu_offload_gb, "4"', "0.32.0"), [])
    assert report.passed
    assert report.warnings == [
        "vLLM flag --cpu-offload-gb (Deployment/chat-8b) is parsed but not modelled: its effect is not predicted"
    ]


def test_an_image_of_another_version_is_said() -> None:
    words = ["vllm", "serve", "m"]
    (finding,) = read_vllm_container(words, [], "0.15.1", "D/x", "k8s.yaml", "vllm/vllm-openai:v0.10.2").findings
    assert (finding.severity, finding.fix) == ("warning", "set vllm_version: 0.10.2 in the deployment file")
    (older,) = read_vllm_container(words, [], "0.15.1", "D/x", "k8s.yaml", "vllm/vllm-openai:v0.8.5").findings
    assert older.fix.startswith("use a newer image: 0.8.5 predates every modelled vLLM (version profiles 0.10, ")
    for image in ("vllm/vllm-openai:v0.15.0", "nginx:1.25", "opea/vllm-gaudi:1.22.0", "vllm/vllm-openai@sha256:ab"):
        assert read_vllm_container(words, [], "0.15.1", "D/x", "k8s.yaml", image).findings == []
    for image in ("vllm/vllm-openai:latest", "vllm/vllm-openai", "docker.io/vllm/vllm-openai:nightly"):
        (unpinned,) = read_vllm_container(words, [], "0.15.1", "D/x", "k8s.yaml", image).findings
        assert unpinned.severity == "warning" and "is not pinned to a release" in unpinned.message


def test_a_config_file_is_named_not_read() -> None:
    words = ["vllm", "serve", "m", "--config", "/etc/vllm/serve.yaml"]
    command = read_vllm_container(words, [], "0.32.0", "D/x", "k8s.yaml")
    assert [f.message for f in command.findings] == [
        "D/x: --config /etc/vllm/serve.yaml: vLLM reads more arguments from this file in the container; "
        "ttftsim cannot see it and predicts without them"
    ]
    assert command.not_modelled == []


@pytest.mark.parametrize("version", VERSIONS)
def test_what_plan_writes_every_modelled_vllm_reads_back(version: str) -> None:
    """plan --emit's `vllm serve` line (plan/k8s/spec.py vllm_args) parses without a refusal in each version,
    and validate reads back the candidate it was written from."""
    plan = load_plan(EXAMPLES / "plans" / "quickstart.yaml")
    for chunked, cached, quant, kv in ((True, True, None, "auto"), (False, False, "fp8", "fp8")):
        cand = Candidate("H100-SXM5-80GB", 2, 64, 4096, chunked, cached, quant, kv, "least_outstanding", 0)
        words = plan_vllm_args(plan, cand, "meta-llama/Llama-3.1-8B-Instruct", "bf16")
        command = read_vllm_container(words, [], version, "D/x", "k8s.yaml")
        assert command.findings == [] and command.not_modelled == []
        expected: dict[str, object] = {"tensor_parallel_size": 2, "max_num_seqs": 64, "max_model_len": 8192}
        expected |= {"max_num_batched_tokens": 4096}
        expected |= {"enable_prefix_caching": cached, "enable_chunked_prefill": chunked}
        expected |= {"quantization": "fp8", "kv_cache_dtype": "fp8"} if quant else {}
        assert command.engine == expected
    levers = {"optimization_level": 1, "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [1, 8, 64]}
    levers |= {"performance_mode": "throughput"} if version >= "0.17" else {}
    levers |= {"max_num_queued_reqs": 64, "max_num_queued_tokens": 8000} if version >= "0.29" else {}
    tuned = plan.model_copy(update={"engine": plan.engine.model_copy(update={"vllm_version": version, **levers})})
    cand = Candidate("H100-SXM5-80GB", 1, None, None, True, True, None, "auto", "least_outstanding", 0)
    command = read_vllm_container(plan_vllm_args(tuned, cand, "m", "bf16"), [], version, "D/x", "k8s.yaml")
    assert command.findings == [] and command.not_modelled == []
    assert {k: command.engine[k] for k in levers} == levers


def test_the_levers_ttftsim_models_are_read_from_the_command_line() -> None:
    words = ["vllm", "serve", "m", "--enable-lora", "--max-loras", "4", "--max_lora_rank", "32"]
    words += ["--kv-offloading-size", "16", "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3}']
    command = read_vllm_container(words, [], "0.15.1", "Deployment/x", "k8s.yaml")
    assert {k: command.engine[k] for k in ("enable_lora", "max_loras", "max_lora_rank", "kv_offloading_size")} == {
        "enable_lora": True,
        "max_loras": 4,
        "max_lora_rank": 32,
        "kv_offloading_size": 16,
    }
    assert command.engine["speculative_config"] == {"method": "eagle3", "num_speculative_tokens": 3}
    assert command.not_modelled == []
    (start,) = command.findings  # 0.15.1 exits at start: its offloading connector and the hybrid manager
    assert start.severity == "error" and "exits at start with --kv-offloading-size" in start.message
    assert start.fix == "add --disable-hybrid-kv-cache-manager"
    fixed = read_vllm_container([*words, "--disable-hybrid-kv-cache-manager"], [], "0.15.1", "D/x", "k8s.yaml")
    assert fixed.findings == [] and fixed.engine["disable_hybrid_kv_cache_manager"] is True
    assert read_vllm_container(words, [], "0.32.0", "D/x", "k8s.yaml").findings == []  # read in 0.15.1 only
    ngram = ["vllm", "serve", "m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']
    assert read_vllm_container(ngram, [], "0.15.1", "Deployment/x", "k8s.yaml").not_modelled == [
        "--speculative-config {'method': 'ngram', 'num_speculative_tokens': 3}"  # its acceptance: no default
    ]


def test_compilation_and_graph_levers_are_read_from_the_command_line() -> None:
    """-O, --compilation-config's graph keys, --cudagraph-capture-sizes and --performance-mode are engine arguments
    (config/graphs.py); another key of the compilation config is named as not modelled; -cc and -O are the flags'
    own spellings, not abbreviations."""
    words = ["vllm", "serve", "m", "-O1", "-cc", '{"cudagraph_mode": "full_decode_only", "pass_config": {"x": 1}}']
    words += ["--cudagraph-capture-sizes", "1", "2", "4", "8", "--performance-mode", "interactivity"]
    command = read_vllm_container(words, [], "0.34.0", "Deployment/x", "k8s.yaml")
    assert command.engine == {
        "optimization_level": 1,
        "cudagraph_mode": "FULL_DECODE_ONLY",
        "cudagraph_capture_sizes": [1, 2, 4, 8],
        "performance_mode": "interactivity",
    }
    assert command.not_modelled == ["-cc.pass_config {'x': 1}"] and command.findings == []
    old = read_vllm_container(["vllm", "serve", "m", "-O2"], [], "0.10.2", "Deployment/x", "k8s.yaml")
    assert old.engine == {"optimization_level": 2} and old.findings == []  # 0.10: the compilation level
    newer = read_vllm_container(["vllm", "serve", "m", "-cc", '{"level": 0}'], [], "0.15.1", "D/x", "k8s.yaml")
    assert newer.not_modelled == ["-cc.level 0"]  # from 0.13 the deprecated compilation mode, not -O


def test_a_compilation_config_given_twice_keeps_the_last_whole() -> None:
    """FlexibleArgumentParser joins the dotted keys (-cc.key=value, --compilation-config.key value) into one more
    --compilation-config after the others, and argparse keeps the last: an earlier JSON is dropped whole."""
    dotted = ["vllm", "serve", "m", "-cc.cudagraph_mode=FULL", "-cc.max_cudagraph_capture_size", "64"]
    command = read_vllm_container(dotted, [], "0.15.1", "Deployment/x", "k8s.yaml")
    assert command.findings == [] and command.engine == {"cudagraph_mode": "FULL", "max_cudagraph_capture_size": 64}
    twice = ["vllm", "serve", "m", "-cc", '{"cudagraph_mode": "PIECEWISE"}', "--compilation-config.cudagraph_mode=FULL"]
    command = read_vllm_container(twice, [], "0.15.1", "Deployment/x", "k8s.yaml")
    assert command.engine == {"cudagraph_mode": "FULL"}
    (finding,) = command.findings
    assert finding.severity == "warning" and "vLLM takes the last" in finding.message


def test_vllm_allow_long_max_model_len_makes_a_longer_context_a_warning(tmp_path: Path) -> None:
    """vLLM _get_and_verify_max_len: above max_position_embeddings it raises, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is
    1 or true (vllm/envs.py), when it warns and starts."""
    path = _deploy(tmp_path, '--max-model-len, "262144"')
    refused = validate(path, [])
    assert any("exceeds the model's max_position_embeddings 131072" in f.message for f in refused.findings)
    k8s = tmp_path / "k8s.yaml"
    image = "image: vllm/vllm-openai:v0.15.1\n"
    allowed = "env: [{name: VLLM_ALLOW_LONG_MAX_MODEL_LEN, value: 'True'}]\n"
    k8s.write_text(k8s.read_text().replace(image, image + "          " + allowed))
    report = validate(path, [])
    assert not [f for f in report.findings if f.severity == "error"], report.findings
    assert report.deployment["engine"]["max_model_len"] == 262144
    assert [w for w in report.warnings if "262,144 exceeds Llama-3.1-8B's max_position_embeddings 131,072" in w]
    # the same from a ConfigMap in the files; then a later literal "0" turns it off again
    from_map = "env: [{name: VLLM_ALLOW_LONG_MAX_MODEL_LEN, valueFrom: {configMapKeyRef: {name: c, key: long}}}]"
    configmap = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {long: '1'}\n"
    k8s.write_text(k8s.read_text().replace(allowed.strip(), from_map) + configmap)
    assert not [f for f in validate(path, []).findings if f.severity == "error"]
    off = from_map.replace("}}}]", "}}}, {name: VLLM_ALLOW_LONG_MAX_MODEL_LEN, value: '0'}]")
    k8s.write_text(k8s.read_text().replace(from_map, off))
    assert any("exceeds the model's max_position_embeddings" in f.message for f in validate(path, []).findings)


def test_float32_is_an_error_finding_not_a_silent_bf16_prediction() -> None:
    for value in ("float32", "float"):
        read = read_vllm_container(["vllm", "serve", "m", "--dtype", value], [], "0.15.1", "D/x", "k8s.yaml")
        (finding,) = read.findings
        assert finding.severity == "error" and f"--dtype {value}: 32-bit weights" in finding.message
        assert "dtype" not in read.engine
    read = read_vllm_container(["vllm", "serve", "m", "--dtype", "half"], [], "0.15.1", "D/x", "k8s.yaml")
    assert (read.findings, read.engine) == ([], {"dtype": "fp16"})


@pytest.mark.parametrize(
    ("model", "method", "finding"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "awq", ("error", "the publisher's unquantized weights")),
        ("acme/llama-3.1-8b-tuned", "gptq_marlin", ("warning", "whose name carries no quantization suffix")),
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "fp8", ("error", "an AWQ checkpoint")),
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "awq_marlin", None),
        ("Qwen/Qwen2.5-72B-Instruct-AWQ", "marlin", None),  # AWQMarlinConfig.override_quantization_method claims it
        ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", "moe_wna16", None),  # MoeWNA16Config's override claims a GPTQ MoE
        ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", "awq", ("error", "a GPTQ checkpoint")),
        ("meta-llama/Llama-3.1-8B-Instruct", "fp8", None),  # quantized in flight
    ],
)
def test_quantization_against_the_checkpoint_the_id_names(
    model: str, method: str, finding: tuple[str, str] | None
) -> None:
    """vLLM's get_quant_config raises without the checkpoint's AWQ/GPTQ config; _verify_quantization refuses a
    method other than the checkpoint's."""
    words = ["vllm", "serve", model, "--quantization", method]
    found = [(f.severity, f.message) for f in read_vllm_container(words, [], "0.15.1", "D/x", "k8s.yaml").findings]
    if finding is None:
        assert found == []
    else:
        ((severity, message),) = found
        assert severity == finding[0] and finding[1] in message and "exits at start" in message


@pytest.mark.parametrize("model_flag", [["--model", "m"], ["--model=m"]])
def test_serve_moves_the_model_flag_to_the_front_so_a_stray_word_is_unrecognized(model_flag: list[str]) -> None:
    """FlexibleArgumentParser (0.11+): `vllm serve --model M ... --enable-chunked-prefill False` runs as
    `vllm serve M ...`; 'False' is then an unrecognized argument (it was read as the model)."""
    words = ["vllm", "serve", *model_flag, "--enable-chunked-prefill", "False"]
    read = read_vllm_container(words, [], "0.15.1", "D/x", "k8s.yaml")
    assert read.model == "m"
    assert [f.message for f in read.findings] == [
        "D/x: vLLM 0.15.1 refuses this command line and exits at start: unrecognized arguments: False"
    ]
    plain = read_vllm_container(["vllm", "serve", *model_flag, "--max-model-len", "4096"], [], "0.15.1", "D/x", "k")
    assert (plain.model, plain.engine, plain.findings) == ("m", {"max_model_len": 4096}, [])


def test_admission_limits_are_read_from_the_command_line() -> None:
    """vLLM 0.29+: --max-num-queued-reqs and --max-num-queued-tokens (a human-readable int, as 8k) are engine
    arguments (engine/admission.py); 0.15 refuses them."""
    words = ["vllm", "serve", "m", "--max-num-queued-reqs", "64", "--max-num-queued-tokens", "8k"]
    command = read_vllm_container(words, [], "0.32.0", "Deployment/x", "k8s.yaml")
    assert command.engine == {"max_num_queued_reqs": 64, "max_num_queued_tokens": 8000}
    assert command.findings == [] and command.not_modelled == []
    with pytest.raises(InputError, match="--max-num-queued-tokens"):
        read_vllm_container([*words[:-1], "lots"], [], "0.32.0", "Deployment/x", "k8s.yaml")
    (refused,) = read_vllm_container(words, [], "0.15.1", "Deployment/x", "k8s.yaml").findings
    assert refused.severity == "error" and "unrecognized arguments: --max-num-queued-reqs" in refused.message


def test_a_flag_given_twice_is_a_warning_and_the_last_value_is_used() -> None:
    words = ["vllm", "serve", "m", "--max-model-len", "8192", "--max_model_len", "2048"]
    command = read_vllm_container(words, [], "0.15.1", "Deployment/x", "k8s.yaml")
    (finding,) = command.findings
    assert finding.severity == "warning" and command.engine["max_model_len"] == 2048
    assert finding.message == (
        "Deployment/x: --max-model-len is given more than once (--max-model-len 8192, then --max-model-len 2048): "
        "vLLM takes the last"
    )


def test_a_flag_value_the_engine_refuses_is_named_as_the_flag_with_its_value(tmp_path: Path) -> None:
    """--gpu-memory-utilization 1.5: vLLM refuses it at start; the error names the flag as written and the
    value, not the engine's field (a new user met 'vllm args gpu_memory_utilization: ...')."""
    with pytest.raises(InputError) as raised:
        validate(_deploy(tmp_path, '--gpu-memory-utilization, "1.5"'), [])
    assert raised.value.one_line().endswith(
        "k8s.yaml#0: vllm serve --gpu-memory-utilization: 1.5: Input should be less than or equal to 1"
    )


def test_a_low_memory_share_that_leaves_no_kv_cache_is_the_first_fix_named(tmp_path: Path) -> None:
    report = validate(_deploy(tmp_path, '--gpu-memory-utilization, "0.2"'), [])
    (fit,) = [f for f in report.findings if f.check == "memory-fit"]
    assert "leaves no KV cache: 17.1 GB requested per GPU" in fit.message
    assert fit.fix == "raise --gpu-memory-utilization (0.2), raise tensor parallelism, quantize, or lower max_model_len"


def test_lora_slots_count_against_the_kv_cache_and_can_leave_the_model_unable_to_start(tmp_path: Path) -> None:
    """vLLM allocates max_loras adapter slots of max_lora_rank when the model loads (perf/memory.py lora_bytes): 4
    slots of rank 16 on Llama-3.1-8B take 4 x 83,886,080 bytes = 2,560 KV tokens of 131,072 bytes; 64 of rank
    256 do not fit on the H100 at all (a cold trial found such a deployment passing)."""
    plain = validate(_deploy(tmp_path, '--max-model-len, "8192"'), [])
    lora = validate(_deploy(tmp_path, '--max-model-len, "8192", --enable-lora, --max-loras, "4"'), [])
    assert _kv_tokens(plain) - _kv_tokens(lora) == 2_560
    huge = '--max-model-len, "8192", --enable-lora, --max-loras, "64", --max-lora-rank, "256"'
    (fit,) = [f for f in validate(_deploy(tmp_path, huge), []).findings if f.check == "memory-fit"]
    assert "with 64 LoRA slots of rank 256 (85.9 GB) needs 102.0 GB of weights" in fit.message
    assert fit.fix == "lower --max-loras or --max-lora-rank, raise tensor parallelism, quantize, or lower max_model_len"


def test_an_image_that_does_not_say_its_vllm_is_predicted_as_the_default_and_says_so(tmp_path: Path) -> None:
    """lmcache/vllm-openai:latest tags LMCache's releases: without vllm_version in the deployment file the
    prediction follows the default vLLM, and a warning says so (a cold trial saw it silent); a deployment file that
    names the version is not warned, nor is vLLM's own image (check_image reads its tag)."""
    path = _deploy(tmp_path, '--max-model-len, "8192"')
    named = path.read_text()
    path.write_text(named.replace("vllm_version: 0.15.1\n", ""))
    assert validate(path, []).findings and not [f for f in validate(path, []).findings if f.check == "vllm-version"]
    k8s = tmp_path / "k8s.yaml"
    image = re.search(r"image: (\S+)", k8s.read_text())
    assert image is not None and image.group(1).startswith("vllm/vllm-openai")
    k8s.write_text(k8s.read_text().replace(image.group(1), "lmcache/vllm-openai:latest"))
    (finding,) = [f for f in validate(path, []).findings if f.check == "vllm-version"]
    assert finding.message.endswith(
        "the image lmcache/vllm-openai:latest is not vLLM's own (vllm/vllm-openai), so the vLLM it runs is not read "
        "from its tag; flags, defaults and the prediction follow vLLM 0.15.1, the default"
    )
    path.write_text(named)
    assert not [f for f in validate(path, []).findings if f.check == "vllm-version"]


def test_the_vllm_console_scripts_module_serve_is_vllm_serve(tmp_path: Path) -> None:
    """`python3 -m vllm.entrypoints.cli.main serve MODEL ...` is what the `vllm` script runs: read as `vllm serve`
    (a cold review found it reported as another entrypoint that validate does not read)."""
    path = _deploy(tmp_path, '--max-model-len, "4096"')
    k8s = tmp_path / "k8s.yaml"
    text = k8s.read_text()
    old = "command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]"
    assert old in text
    module = "command: [python3, -m, vllm.entrypoints.cli.main, serve, meta-llama/Llama-3.1-8B]"
    k8s.write_text(text.replace(old, module))
    report = validate(path, [])
    assert report.deployment["engine"]["max_model_len"] == 4096
    assert not [f for f in report.findings if f.check == "unsupported-kind"]
