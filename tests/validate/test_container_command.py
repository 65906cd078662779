"""What a container runs, read as Kubernetes and the shell read it (ttftsim/validate/container_command.py,
container_env.py and shell_words.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ttftsim.validate.container_command import container_words, shell_script
from ttftsim.validate.container_env import kubernetes_expand

ENV = [{"name": "TP", "value": "2"}, {"name": "MODEL", "value": "Qwen/Qwen2.5-7B-Instruct"}]
ENV += [{"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]


def words(command: list[str] | None = None, args: list[str] | None = None, env: Any = ENV) -> list[str]:
    container: dict[str, Any] = {"env": env}
    if command is not None:
        container["command"] = command
    if args is not None:
        container["args"] = args
    return container_words(container)


def test_kubernetes_expands_its_own_references_from_literal_env_values_only() -> None:
    env = {"TP": "2"}
    assert kubernetes_expand("$(TP)", env) == "2"
    assert kubernetes_expand("--tp=$(TP)x$(TP)", env) == "--tp=2x2"
    assert kubernetes_expand("$$(TP)", env) == "$(TP)"  # escaped
    assert kubernetes_expand("$(SECRET)", env) == "$(SECRET)"  # not known here: kept as written
    assert kubernetes_expand("$TP ${TP}", env) == "$TP ${TP}"  # the shell's syntax, not Kubernetes'


def test_args_get_kubernetes_expansion() -> None:
    assert words(["vllm", "serve"], ["$(MODEL)", "--tensor-parallel-size", "$(TP)", "--api-key", "$(SECRET)"]) == [
        "vllm",
        "serve",
        "Qwen/Qwen2.5-7B-Instruct",
        "--tensor-parallel-size",
        "2",
        "--api-key",
        "$(SECRET)",
    ]


@pytest.mark.parametrize(
    "wrapper",
    [["sh", "-c"], ["/bin/sh", "-ec"], ["bash", "-lc"], ["/bin/bash", "-x", "-c"], ["/usr/bin/env", "bash", "-c"]],
)
def test_shell_wrappers_run_their_script(wrapper: list[str]) -> None:
    assert words(wrapper, ["vllm serve m --max-model-len 8192"]) == ["vllm", "serve", "m", "--max-model-len", "8192"]


def test_only_the_word_after_the_c_option_is_the_script() -> None:
    assert shell_script(["sh", "-c", "vllm serve m", "argv0", "--ignored"]) == "vllm serve m"
    assert shell_script(["sh", "start.sh", "-c"]) is None  # a script file: not read
    assert shell_script(["bash", "--login", "-c", "x"]) == "x"  # bash's long options come first
    assert shell_script(["bash", "-o", "pipefail", "-c", "x"]) == "x"  # -o takes an argument
    assert shell_script(["bash", "-e", "+x", "-c", "x"]) == "x"
    assert shell_script(["python3", "-c", "x"]) is None


def test_a_script_reads_as_the_shell_reads_it() -> None:
    """Backslash-newlines join lines, newlines end commands, comments and redirections are the shell's, variables
    with a literal value expand (not in single quotes), other text stays as written."""
    script = (
        "# start the server\n"
        "pip install hf_transfer && \\\n"
        "vllm serve ${MODEL} \\\n"
        "  --tensor-parallel-size $TP --served-model-name '$TP' \\\n"
        '  --api-key "$SECRET" 2>&1 | tee /tmp/log\n'
        "echo done > /dev/null\n"
    )
    assert words(["/bin/sh", "-c"], [script]) == [
        ";",
        "pip",
        "install",
        "hf_transfer",
        "&&",
        "vllm",
        "serve",
        "Qwen/Qwen2.5-7B-Instruct",
        "--tensor-parallel-size",
        "2",
        "--served-model-name",
        "$TP",
        "--api-key",
        "$SECRET",
        "|",
        "tee",
        "/tmp/log",
        ";",
        "echo",
        "done",
        ";",
    ]


def test_a_number_inside_a_word_or_quotes_is_not_a_file_descriptor() -> None:
    assert words(["sh", "-c"], ['vllm serve m -tp 2 --x "1>2" &>/dev/null']) == [
        "vllm",
        "serve",
        "m",
        "-tp",
        "2",
        "--x",
        "1>2",
    ]


def test_an_unbalanced_quote_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="quotation"):
        words(["sh", "-c"], ["vllm serve 'm"])


def test_defaults_and_command_substitutions_in_a_script() -> None:
    """${NAME:-word} is the value when set and not empty, else word (${NAME-word}: when unset); $(...) that
    Kubernetes did not expand (a valueFrom variable, a command substitution) stays one word."""
    env = [{"name": "TP", "value": "2"}, {"name": "EMPTY", "value": ""}]
    script = "vllm serve m -tp ${TP:-1} --max-num-seqs ${SEQS:-128} --a ${EMPTY:-x} --b ${EMPTY-y} "
    script += '--port $(PORT) --c "$(date)"'  # --b: set but empty, so no word at all (as the shell splits it)
    assert words(["sh", "-c"], [script], env) == [
        "vllm",
        "serve",
        "m",
        "-tp",
        "2",
        "--max-num-seqs",
        "128",
        "--a",
        "x",
        "--b",
        "--port",
        "$(PORT)",
        "--c",
        "$(date)",
    ]


def test_env_values_are_built_in_order_as_the_kubelet_builds_them() -> None:
    """makeEnvironmentVariables: a value expands the variables before it (not after); a later entry of the same
    name replaces an earlier one, a valueFrom one too (unknown here: references to it stay as written)."""
    env = [{"name": "A", "value": "x"}, {"name": "B", "value": "$(A)-y"}, {"name": "C", "value": "$(D)"}]
    env += [{"name": "D", "value": "late"}, {"name": "TP", "value": "2"}, {"name": "E", "value": ""}]
    env += [{"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "tp"}}}]
    assert words(["vllm"], ["$(B)", "$(C)", "$(TP)", "[$(E)]"], env) == ["vllm", "x-y", "$(D)", "$(TP)", "[]"]


def test_configmap_and_secret_values_in_the_files_are_known_others_stay_as_written() -> None:
    """valueFrom's configMapKeyRef / secretKeyRef and envFrom (with its prefix) take the values of the ConfigMaps and
    Secrets given in the files (a Secret's data is base64, its stringData plain); an object not in the files leaves
    the reference as written."""
    from ttftsim.validate.container_env import config_data

    stores = config_data(
        [
            ("k8s.yaml#0", {"kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"LEN": "16384", "TP": "4"}}),
            ("k8s.yaml#1", {"kind": "Secret", "metadata": {"name": "sec"}, "data": {"SEQS": "MTI4"}}),
            ("k8s.yaml#2", {"kind": "Secret", "metadata": {"name": "plain"}, "stringData": {"DTYPE": "half"}}),
        ]
    )
    container = {
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "VLLM_"}, {"secretRef": {"name": "plain"}}],
        "env": [
            {"name": "LEN", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "LEN"}}},
            {"name": "SEQS", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "SEQS"}}},
            {"name": "GONE", "valueFrom": {"configMapKeyRef": {"name": "elsewhere", "key": "LEN"}}},
        ],
        "command": ["vllm", "serve"],
        "args": ["m", "$(LEN)", "$(SEQS)", "$(VLLM_TP)", "$(DTYPE)", "$(GONE)"],
    }
    assert container_words(container, stores) == ["vllm", "serve", "m", "16384", "128", "4", "half", "$(GONE)"]


def test_a_pod_reads_the_configmap_of_its_own_namespace() -> None:
    """The kubelet looks a configMapKeyRef up in the pod's namespace: of two ConfigMaps of one name in two
    namespaces the pod's is read, one in another namespace is not known here, one that names none is (applied to
    the same namespace as the pod)."""
    from ttftsim.validate.container_env import config_data

    def configmap(namespace: str | None, length: str) -> tuple[str, dict[str, object]]:
        metadata = {"name": "cfg"} | ({"namespace": namespace} if namespace else {})
        return ("k8s.yaml", {"kind": "ConfigMap", "metadata": metadata, "data": {"LEN": length}})

    container = {
        "env": [{"name": "LEN", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "LEN"}}}],
        "command": ["vllm", "serve", "m", "$(LEN)"],
    }
    both = [configmap("prod", "8192"), configmap("staging", "4096")]
    assert container_words(container, config_data(both, "prod"))[-1] == "8192"
    assert container_words(container, config_data(both, "staging"))[-1] == "4096"
    assert container_words(container, config_data([configmap("staging", "4096")], "prod"))[-1] == "$(LEN)"
    assert container_words(container, config_data([configmap(None, "2048")], "prod"))[-1] == "2048"
    assert container_words(container, config_data([configmap("prod", "8192")], None))[-1] == "8192"


def test_a_reference_is_undefined_only_where_no_env_entry_source_or_injection_may_define_it() -> None:
    """Kubernetes passes `$(NAME)` as written where the container's environment cannot hold NAME: an env entry of
    that name (even of an unknown value), an envFrom object in the files with that key (after its prefix), and the
    names the kubelet or a controller adds define it; an envFrom object that is not in the files may hold any."""
    from ttftsim.validate.container_env import config_data, undefined_references

    stores = config_data([("k8s.yaml#1", {"kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"TP": "2"}})])
    references = ["$(A)", "$(B)", "$(VLLM_TP)", "$(TP)", "$(LWS_GROUP_SIZE)", "$(VLLM_PORT)", "$(ROUTER_SERVICE_HOST)"]
    container: dict[str, Any] = {
        "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "VLLM_"}],
    }
    assert undefined_references(["vllm", "serve", "m", *references], container, stores) == {"B", "TP"}
    container["envFrom"].append({"secretRef": {"name": "elsewhere"}})
    assert undefined_references(references, container, stores) == set()


def test_a_value_that_is_still_a_variable_is_one_line_naming_the_flag_and_the_variable() -> None:
    from ttftsim.errors import InputError
    from ttftsim.validate.vllm_command import read_vllm_container

    for words, field in (
        (["vllm", "serve", "m", "--max-model-len", "$(MAX_LEN)"], "--max-model-len"),
        (["vllm", "serve", "${MODEL_ID}"], "model"),
    ):
        with pytest.raises(InputError) as caught:
            read_vllm_container(words, [], "0.15.1", "Deployment/svc", "k8s.yaml#0 container vllm")
        assert caught.value.field == field
        assert ("the variable" in caught.value.message or "$(MAX_LEN)" in caught.value.message) and (
            "not known here" in caught.value.message
        )


def test_a_flag_ttftsim_does_not_model_with_an_unknown_variable_is_a_warning_not_an_error() -> None:
    # llm-d's LWS example computes the data-parallel start rank in its script: the prediction does not use it.
    from ttftsim.validate.vllm_command import read_vllm_container

    command = read_vllm_container(
        ["vllm", "serve", "m", "--data-parallel-start-rank", "$START_RANK"], [], "0.15.1", "LWS/x", "k8s.yaml#0"
    )
    (finding,) = [f for f in command.findings if "--data-parallel-start-rank" in f.message]
    assert finding.severity == "warning" and "does not model this flag" in finding.message


def test_the_scripts_own_assignments_are_its_variables_and_computed_ones_stay_unknown() -> None:
    from ttftsim.validate.shell_words import script_assignments

    script = 'A="x y"; B=$A; D=$NOPE; E=; export F=$(( 1 + 2 )) && G=`hostname`; export H=8192 I=2 && run'
    assert script_assignments(script, {}) == ({"A": "x y", "B": "x y", "E": "", "H": "8192", "I": "2"}, {"D", "F", "G"})
    assert words(["/bin/sh", "-c"], ["SEQS=64; exec vllm serve m --max-num-seqs $SEQS"])[-2:] == [
        "--max-num-seqs",
        "64",
    ]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # an assignment inside quotes is text (sh: `echo "x; N=5"` sets nothing)
        ('echo "starting; N=5"; exec vllm serve m --max-num-seqs ${N:-16}', "16"),
        # a branch the script takes on a value not known here: the name is not known either
        ('if [ "$BIG" = 1 ]; then\n N=256\nelse\n N=8\nfi\nexec vllm serve m --max-num-seqs $N', "$N"),
        # set after the command that runs vLLM, or for one command alone (a prefix): not its value
        ("exec vllm serve m --max-num-seqs $N; N=5", "$N"),
        ("N=5 vllm serve m --max-num-seqs $N", "$N"),
        ("N=7; exec vllm serve m --max-num-seqs $N; N=5", "7"),
    ],
)
def test_a_scripts_variable_is_the_value_the_shell_gives_it_or_not_known(script: str, expected: str) -> None:
    read = words(["/bin/sh", "-c"], [script])
    assert read[read.index("--max-num-seqs") + 1] == expected


def test_a_variables_value_is_one_field_in_double_quotes_and_split_unquoted_never_reparsed() -> None:
    kv = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    assert words(["sh", "-c"], [f"KV='{kv}'; exec vllm serve m --kv-transfer-config \"$KV\""])[-1] == kv
    assert words(["sh", "-c"], ["EXTRA='--hf-overrides {\"a\":1}'; vllm serve m $EXTRA"])[-2:] == [
        "--hf-overrides",
        '{"a":1}',
    ]
    env = [{"name": "X", "value": '--served-model-name "a b"'}]  # quotes in a value are text to the shell
    assert words(["sh", "-c", "vllm serve m $X"], env=env)[-3:] == ["--served-model-name", '"a', 'b"']


def test_the_scripts_positional_parameters_are_the_words_after_it() -> None:
    # POSIX sh -c SCRIPT NAME ARG...: NAME is $0, the rest $1 ... ("$@" one word each, quotes and all; no
    # parameters: no word at all)
    assert words(["/bin/sh", "-c", 'exec vllm serve "$@"', "--"], ["m", "--max-model-len", "8192"]) == [
        "exec",
        "vllm",
        "serve",
        "m",
        "--max-model-len",
        "8192",
    ]
    assert words(["bash", "-c", 'vllm serve "$@"'], ["zero", "m", "--chat-template", 'a "b" $c']) == [
        "vllm",
        "serve",
        "m",
        "--chat-template",
        'a "b" $c',
    ]
    assert words(["sh", "-c", "vllm serve $1 --max-num-seqs $2", "sh", "m", "64"])[-3:] == ["m", "--max-num-seqs", "64"]
    assert words(["sh", "-c", 'exec vllm serve m "$@"', "--"]) == ["exec", "vllm", "serve", "m"]
    assert words(["sh", "-c", 'exec vllm serve "$0"', "Qwen/Qwen2.5-7B-Instruct"])[-1] == "Qwen/Qwen2.5-7B-Instruct"
    assert words(["sh", "-c", "vllm serve m --max-num-seqs ${1:-16} ${@}", "x"])[-2:] == ["--max-num-seqs", "16"]
    assert words(["sh", "-c", "vllm serve m --max-num-seqs ${1:-16}", "x", "32"])[-1] == "32"
    assert words(["sh", "-c", "MODEL=$1; exec vllm serve $MODEL", "--", "Qwen/Q"])[-1] == "Qwen/Q"


def test_an_unknown_flag_names_the_nearest_one_vllm_has() -> None:
    from ttftsim.validate.vllm_command import read_vllm_container

    typo = read_vllm_container(["vllm", "serve", "m", "--gpu-memory-utilisation", "0.9"], [], "0.15.1", "D/x", "k")
    (finding,) = [f for f in typo.findings if f.severity == "error"]
    assert finding.fix.startswith("did you mean --gpu-memory-utilization? check --gpu-memory-utilisation")
    other = read_vllm_container(["vllm", "serve", "m", "--frobnicate", "1"], [], "0.15.1", "D/x", "k")
    assert [f.fix for f in other.findings if f.severity == "error"] == [
        "check --frobnicate against `vllm serve --help=all` of vLLM 0.15.1"
    ]


def test_a_value_the_shell_computes_is_said_to_be_computed() -> None:
    from ttftsim.errors import InputError
    from ttftsim.validate.vllm_command import read_vllm_container

    read = words(["sh", "-c"], ["exec vllm serve m --max-model-len $((4096*2))"])
    with pytest.raises(InputError, match=r"computed by the shell"):
        read_vllm_container(read, [], "0.15.1", "D/x", "k.yaml")
