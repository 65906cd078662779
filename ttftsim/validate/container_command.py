"""The words a container runs, as Kubernetes and the shell turn its `command` and `args` into a process: command +
args with `$(NAME)` expanded from the container's environment as the kubelet builds it (container_env.py), and a
shell wrapper's script read as the shell reads it (shell_words.py).

A shell wrapper (`sh -c SCRIPT`, `bash -lc`, `/bin/sh -ec`, `/usr/bin/env bash -c`, after an init such as
`tini --`) runs its script, the one word after the option group holding `c` (later words are the script's $0, $1,
...). A script file (`sh start.sh`) is not read; a command or args written as one string (not what Kubernetes
accepts) is split as written, without expansion.
"""

from __future__ import annotations

import shlex
from typing import Any

from ttftsim.validate.container_env import ConfigData, kubernetes_expand, literal_env
from ttftsim.validate.shell_words import script_words

SHELLS = ("sh", "bash", "dash", "ash", "zsh", "ksh")
INIT_WRAPPERS = ("tini", "tini-static", "dumb-init", "catatonit")  # a container's init: runs the rest as given


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
