"""The words a container runs, as Kubernetes and the shell turn its `command` and `args` into a process.

1. Kubernetes expands `$(NAME)` in command and args from the container's environment before the process starts
   (`$$` is a literal `$`; a reference to a variable it does not define is left as written): kubernetes
   pkg/kubelet/kuberuntime/kuberuntime_container.go makeRunContainerArgs -> third_party/forked/golang/expansion.
   Only variables with a literal `value` are known here; `valueFrom` ones (a ConfigMap, a field of the pod) and
   those a controller injects (LeaderWorkerSet's LWS_GROUP_SIZE) stay as written.
2. A shell wrapper (`sh -c SCRIPT`, `bash -lc`, `/bin/sh -ec`, `/usr/bin/env bash -c`) runs its script, the one word
   after the option group holding `c` (later words are the script's $0, $1, ...). In the script, a backslash before
   a newline joins the lines, an unquoted newline ends a command as `;` does, `#` starts a comment, `$NAME` and
   `${NAME}` are the environment's literal values (as in 1) or the script's own literal assignments
   (`NAME=value;`, `export NAME=value &&`), and redirections (`2>&1`, `> log`, `&>/dev/null`) are the shell's,
   not the command's. A value the script computes (`$(( ... ))`, `$(cmd)`) is not known here.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
from typing import Any

SHELLS = ("sh", "bash", "dash", "ash", "zsh", "ksh")
INIT_WRAPPERS = ("tini", "tini-static", "dumb-init", "catatonit")  # a container's init: runs the rest as given
REDIRECTIONS = (">", ">>", "<", ">&", "<&", "&>", "&>>", ">|", "<>")
_K8S_REFERENCE = re.compile(r"\$(\$|\(([A-Za-z_][A-Za-z0-9_.-]*)\))")
_SHELL_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_FD_BEFORE_REDIRECTION = re.compile(r"\d+(?=[<>])")


ConfigData = dict[tuple[str, str], dict[str, str]]  # (ConfigMap or Secret, name) -> its keys' values


def config_data(documents: list[tuple[str, dict[str, Any]]], namespace: str | None = None) -> ConfigData:
    """The ConfigMaps' `data` and the Secrets' `data` (base64) and `stringData` in the files, by kind and name, that
    a pod in `namespace` reads: the kubelet looks a reference up in the pod's own namespace, so an object that names
    another namespace than the pod's is not the one it reads (an object or a pod that names none is applied to the
    namespace kubectl is given, the same for both)."""
    found: ConfigData = {}
    for _, document in documents:
        metadata = document.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        kind, name, placed = document.get("kind"), str(metadata.get("name", "")), metadata.get("namespace")
        if namespace is not None and placed is not None and str(placed) != namespace:
            continue
        if kind == "ConfigMap":
            found[(kind, name)] = {str(k): str(v) for k, v in (document.get("data") or {}).items()}
        elif kind == "Secret":
            data = (document.get("data") or {}).items()
            values = {str(k): text for k, v in data if (text := _decoded(v)) is not None}
            found[(kind, name)] = values | {str(k): str(v) for k, v in (document.get("stringData") or {}).items()}
    return found


def _decoded(value: Any) -> str | None:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def literal_env(container: dict[str, Any], stores: ConfigData | None = None) -> dict[str, str]:
    """The container's environment variables whose value is known here, as the kubelet builds them (kubernetes
    pkg/kubelet/kubelet_pods.go makeEnvironmentVariables): first `envFrom` (a ConfigMap's or Secret's keys, with
    its prefix), then `env` in order: a non-empty `value` with `$(NAME)` expanded from the variables before it,
    else a `valueFrom` (a ConfigMap's or Secret's key, known when that object is in the files; anything else
    unknown here, hiding an earlier value), else the empty string; a later entry of the same name replaces an
    earlier one."""
    stores = stores or {}
    values: dict[str, str] = {}
    sources = container.get("envFrom")
    for source in sources if isinstance(sources, list) else []:
        for kind, ref in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            name = ((source or {}).get(ref) or {}).get("name") if isinstance(source, dict) else None
            prefix = str(source.get("prefix") or "") if isinstance(source, dict) else ""
            values |= {prefix + key: value for key, value in stores.get((kind, str(name)), {}).items()}
    env = container.get("env")
    for entry in env if isinstance(env, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        value = "" if entry.get("value") is None else str(entry["value"])
        if value:
            values[entry["name"]] = kubernetes_expand(value, values)
        elif entry.get("valueFrom") is not None:
            known = _key_value(entry["valueFrom"], stores)
            if isinstance(known, str):
                values[entry["name"]] = known
            elif known is not _SKIPPED:
                values.pop(entry["name"], None)
        else:
            values[entry["name"]] = ""
    return values


_SKIPPED = object()  # an optional key its object lacks: the kubelet skips the entry (an earlier value stays)
KEY_REFS = (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef"))


def _key_ref(value_from: Any) -> tuple[str, dict[str, Any]] | None:
    """The kind and selector (name, key, optional) of a valueFrom's configMapKeyRef or secretKeyRef; None for any
    other source (a field or resource of the pod)."""
    for kind, ref in KEY_REFS:
        selector = value_from.get(ref) if isinstance(value_from, dict) else None
        if isinstance(selector, dict):
            return kind, selector
    return None


def _key_value(value_from: Any, stores: ConfigData) -> str | object | None:
    """A configMapKeyRef's or secretKeyRef's value when that object is in the files (None: not known here;
    _SKIPPED: an optional key the object in the files lacks, which the kubelet skips)."""
    found = _key_ref(value_from)
    if found is None:
        return None
    kind, selector = found
    store = stores.get((kind, str(selector.get("name"))))
    value = store.get(str(selector.get("key"))) if store is not None else None
    if value is None and store is not None and selector.get("optional") is True:
        return _SKIPPED
    return value


def missing_keys(container: dict[str, Any], stores: ConfigData) -> list[str]:
    """The env entries whose (non-optional) configMapKeyRef or secretKeyRef names a key that object in the files lacks:
    the kubelet does not start the container (CreateContainerConfigError: couldn't find key)."""
    missing = []
    env = container.get("env")
    for entry in env if isinstance(env, list) else []:
        found = _key_ref(entry.get("valueFrom")) if isinstance(entry, dict) else None
        if found is None or found[1].get("optional") is True:
            continue
        kind, selector = found
        store = stores.get((kind, str(selector.get("name"))))
        if store is not None and str(selector.get("key")) not in store:
            missing.append(f"{entry.get('name')}: {kind} {selector.get('name')} has no key {selector.get('key')}")
    return missing


def kubernetes_expand(word: str, env: dict[str, str]) -> str:
    """`$(NAME)` replaced by its value where the environment defines it, `$$` by `$`; anything else kept."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        return env.get(match.group(2), match.group(0))

    return _K8S_REFERENCE.sub(replace, word)


def container_words(container: dict[str, Any], stores: ConfigData | None = None) -> list[str]:
    """The program and arguments the container runs: command + args expanded by Kubernetes, and a shell wrapper's
    script read as the shell reads it (its first command line through the separators `&&`, `;`, `|` kept as
    words). Raises ValueError for a script shlex cannot split (an unbalanced quote)."""
    env = literal_env(container, stores)
    words: list[str] = []
    for part in ("command", "args"):
        value = container.get(part)
        if isinstance(value, str):  # not what Kubernetes accepts (the schema check says so): read it as written
            words += shlex.split(value)
        elif isinstance(value, list):
            words += [kubernetes_expand(str(word), env) for word in value]
    script = shell_script(words)
    return words if script is None else script_words(script, env, script_parameters(words))


def container_words_are_shell(container: dict[str, Any]) -> bool:
    """The container runs a shell wrapper (its script is one word holding many)."""
    words = [str(w) for part in ("command", "args") if isinstance(container.get(part), list) for w in container[part]]
    return shell_script(words) is not None


def _after_launchers(words: list[str]) -> int:
    """Where the program starts after an init (`tini --`, `dumb-init`) and `env [VAR=value ...]`."""
    start = 0
    while start < len(words) and words[start].rsplit("/", 1)[-1] in INIT_WRAPPERS:  # tini -- sh -c ..., dumb-init
        start += 1
        while start < len(words) and words[start].startswith("-"):
            start += 1  # their switches (-s, -g, --single-child) and the `--` that ends them
    if start < len(words) and words[start].rsplit("/", 1)[-1] == "env":
        start += 1
        while start < len(words) and (words[start].startswith("-") or "=" in words[start]):
            start += 1  # env's own options and VAR=value assignments
    return start


def shell_script(words: list[str]) -> str | None:
    """The script a shell wrapper runs (`[tini --] [env] sh [-options]c SCRIPT ...`); None when the words do not run
    one."""
    index = _script_index(words)
    return None if index is None else (words[index] if index < len(words) else "")


def script_parameters(words: list[str]) -> list[str]:
    """The script's $0, $1, $2, ...: the words after the script (POSIX `sh -c`: the first is $0)."""
    index = _script_index(words)
    return [] if index is None else words[index + 1 :]


def _script_index(words: list[str]) -> int | None:
    """Where a shell wrapper's script is in the words (len(words) when `-c` ends them); None: no shell wrapper."""
    start = _after_launchers(words)
    if start >= len(words) or words[start].rsplit("/", 1)[-1] not in SHELLS:
        return None
    index = start + 1
    while index < len(words):
        word = words[index]
        if word in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2  # an option with its argument (set -o pipefail, shopt -O name, bash's rc file)
            continue
        if word.startswith("--"):
            index += 1  # bash's long options: --login, --noprofile, --norc, --posix, ...
            continue
        if not word.startswith(("-", "+")):
            return None  # `sh script.sh`: a script file, not read
        if word.startswith("-") and "c" in word[1:]:
            return index + 1
        index += 1
    return None


_NAME_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", ";;", "(", ")"})
_COMPOUND_OPEN = frozenset({"if", "case", "for", "while", "until", "{", "("})
_COMPOUND_CLOSE = frozenset({"fi", "esac", "done", "}", ")"})
_KEYWORDS = frozenset({"then", "else", "elif", "do", "!", "exec", "nohup", "time"})  # a command follows


def script_assignments(
    script: str, env: dict[str, str], parameters: list[str] | None = None
) -> tuple[dict[str, str], set[str]]:
    """The variables a script sets before the command that runs vLLM, in order, and the names whose value is not
    known here. An assignment is a command of `NAME=value` words (or `export NAME=value ...`), outside quotes; its
    value has the variables before it expanded. Not known: a value the shell computes (a command substitution,
    arithmetic, backquotes) or takes from a variable not known here, and any name set inside a compound command
    (if, case, a loop, a group), whose branch is not followed. `NAME=value cmd` sets NAME for that command alone,
    not for the words the shell expands: no assignment."""
    words = _lexed(_normalised(script, {}, parameters))  # variables still as written
    known, assigned, unknown = dict(env), dict[str, str](), set[str]()
    depth, start = 0, True
    for index, word in enumerate(words):
        if word in _SEPARATORS:
            depth += {"(": 1, ")": -1}.get(word, 0)
            start = True
            continue
        if not start:
            continue
        if word in _COMPOUND_OPEN or word in _COMPOUND_CLOSE or word in _KEYWORDS or word == "export":
            depth += 1 if word in _COMPOUND_OPEN else -1 if word in _COMPOUND_CLOSE else 0
            continue  # the next word starts a command too
        if runs_vllm_word(word):
            break  # what the vLLM command expands is set by now
        match = _NAME_VALUE.fullmatch(word)
        after = words[index + 1] if index + 1 < len(words) else ";"
        if match is None or not (after in _SEPARATORS or _NAME_VALUE.fullmatch(after)):
            start = False  # a command (with any prefix assignments): no variable set for the script
            continue
        name, value = match.group(1), match.group(2)
        computed = "$(" in value or "`" in value
        value = _SHELL_VARIABLE.sub(lambda m: _known_value(m, known), value)
        if depth > 0 or computed or _SHELL_VARIABLE.search(value):
            known.pop(name, None)
            assigned.pop(name, None)
            unknown.add(name)
            continue
        known[name] = assigned[name] = value
        unknown.discard(name)
    return assigned, unknown


def _known_value(match: re.Match[str], known: dict[str, str]) -> str:
    """A variable reference replaced by its value (or its default), left as written when not known."""
    name, operator, word = match.group(1) or match.group(4), match.group(2), match.group(3)
    value = known.get(name)
    if operator is not None and (value is None or (operator.startswith(":") and not value)):
        value = word
    return match.group(0) if value is None else value


def runs_vllm_word(word: str) -> bool:
    """A command word that starts vLLM's server (`vllm`, a path to it, or the API-server module)."""
    return word.rsplit("/", 1)[-1] == "vllm" or "vllm.entrypoints" in word


def _lexed(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # comments were removed with the quotes in view
    return list(lexer)


def script_words(script: str, env: dict[str, str], parameters: list[str] | None = None) -> list[str]:
    """The words of a shell script with the separators `&&`, `||`, `;`, `|`, `&` as words, newlines as `;`,
    redirections and comments left out, variables with a literal value (the environment's, or set by the
    script before: script_assignments) expanded, and `$0`, `$@`, `$*`, `$1`... from the script's `parameters`
    (the words after the script: its $0 first)."""
    assigned, unknown = script_assignments(script, env, parameters)
    env = {name: value for name, value in (env | assigned).items() if name not in unknown}
    words = [w for w in _lexed(_normalised(script, env, parameters or [])) if w != _NO_FIELDS]
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in REDIRECTIONS:
            skip = True  # the redirection's target
            continue
        out.append(word)
    return out


def _normalised(script: str, env: dict[str, str], parameters: list[str] | None = None) -> str:
    """The script with line continuations joined, unquoted newlines as ` ; `, comments dropped, `$NAME` and
    `${NAME}` replaced where the environment has a literal value, and file-descriptor numbers before a
    redirection dropped (`2>&1` as `>&1`): quotes are followed so that none of this happens inside them
    (single quotes keep everything; double quotes still expand variables)."""
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(script):
        char = script[index]
        if quote == "'":
            quote = "" if char == "'" else quote
            out.append(char)
            index += 1
            continue
        text, after = _special(script, index, env, quoted=bool(quote), parameters=parameters)
        if after > index:
            out.append(text)
            index = after
            continue
        if char in "'\"":
            quote = "" if quote == char else (quote or char)
        out.append(char)
        index += 1
    return "".join(out)


def _special(
    script: str, index: int, env: dict[str, str], quoted: bool, parameters: list[str] | None = None
) -> tuple[str, int]:
    """What the shell makes of the text at `index` outside single quotes, and where it ends (`index` itself when
    the character is an ordinary one): an escape, a line continuation, a variable, a positional parameter
    (`parameters` given); unquoted, a newline, a comment, a file-descriptor number before a redirection."""
    char = script[index]
    if char == "$":
        return _dollar(script, index, env, quoted, parameters)
    if char == "\\" and index + 1 < len(script):
        return ("" if script[index + 1] == "\n" else script[index : index + 2]), index + 2
    if quoted:
        return "", index
    starts_word = index == 0 or script[index - 1].isspace()
    if char == "\n":
        return " ; ", index + 1
    if char == "#" and starts_word:
        end = script.find("\n", index)
        return "", len(script) if end < 0 else end
    if char.isdigit() and starts_word and (match := _FD_BEFORE_REDIRECTION.match(script, index)):
        return "", match.end()
    return "", index


_POSITIONAL = re.compile(r"\$(?:\{([0-9]+|[@*])(?:(:?[-=])([^}]*))?\}|([0-9@*]))")
_NO_FIELDS = "\x00no fields\x00"  # what an empty "$@" leaves: a word dropped after lexing (zero fields)


def _dollar(
    script: str, index: int, env: dict[str, str], quoted: bool, parameters: list[str] | None
) -> tuple[str, int]:
    """A `$` at `index`: a positional parameter, a variable with a known value (or its default), a command
    substitution kept as one word; anything else left as it is. A value goes in as the shell would leave it:
    inside double quotes one field, unquoted split at blanks, its quotes and backslashes plain text."""
    if parameters is not None and (match := _POSITIONAL.match(script, index)):
        return _positional(match, parameters, quoted), match.end()
    if match := _SHELL_VARIABLE.match(script, index):
        name, operator, word = match.group(1) or match.group(4), match.group(2), match.group(3)
        value = env.get(name)
        if operator is not None and (value is None or (operator.startswith(":") and not value)):
            return word, match.end()  # ${NAME:-word}, ${NAME-word}, ${NAME:=word}: the default, as script text
        return (_as_fields(value, quoted), match.end()) if value is not None else ("", index)
    if script.startswith("$(", index) and not quoted:
        end = _closing_parenthesis(script, index + 1)
        if end > 0:  # a command substitution or an unexpanded $(VAR): one word, as written
            return "'" + script[index : end + 1].replace("'", "'\\''") + "'", end + 1
    return "", index


def _positional(match: re.Match[str], parameters: list[str], quoted: bool) -> str:
    """`$0`, `$@`, `$*`, `$N`, `${N}`, `${N:-word}` as the shell expands them from `parameters` ($0 first)."""
    name, operator, word = match.group(1) or match.group(4), match.group(2), match.group(3)
    if name in ("@", "*"):
        chosen = parameters[1:]
        if quoted and name == "@":  # one field per parameter; none at all when there are none
            return '" "'.join(_in_double_quotes(p) for p in chosen) if chosen else _NO_FIELDS
        return _as_fields(" ".join(chosen), quoted)
    value = parameters[int(name)] if int(name) < len(parameters) else None
    if operator is not None and (value is None or (operator.startswith(":") and not value)):
        return word
    return _as_fields(value or "", quoted)


def _as_fields(value: str, quoted: bool) -> str:
    """An expanded value written for shlex: inside double quotes as it is, unquoted split at blanks (field
    splitting), each field quoted so that shlex reads no syntax into it."""
    return _in_double_quotes(value) if quoted else " ".join(shlex.quote(field) for field in value.split())


def _in_double_quotes(text: str) -> str:
    """Text as it stays itself inside double quotes, as shlex reads them (the script is not expanded again)."""
    return re.sub(r'([\\"])', r"\\\1", text)


def _closing_parenthesis(script: str, start: int) -> int:
    """The index of the `)` that closes the `(` at start (-1: none)."""
    depth = 0
    for index in range(start, len(script)):
        depth += {"(": 1, ")": -1}.get(script[index], 0)
        if depth == 0:
            return index
    return -1
