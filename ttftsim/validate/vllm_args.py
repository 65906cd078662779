"""Read a vLLM command line the way vLLM's parser reads it, against that version's own argument list.

What vLLM does, in order (vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args, then Python's
argparse; vLLM 0.10-0.33):
- `vllm serve MODEL` takes the model as its first positional; `--model M` also works there (moved to the
  front; 0.10 refused it). `python -m vllm.entrypoints.openai.api_server --model M` takes it as a flag.
- In a `--name` (or `--name=value`), underscores before the first `.` become dashes:
  `--max_num_batched_tokens` is `--max-num-batched-tokens`.
- `-O3` / `-O 3` is `--optimization-level 3`.
- `--json-flag.key value` sets one key of a JSON-valued flag (`--compilation-config.mode 3`).
- argparse then accepts any unambiguous prefix of a long option (allow_abbrev is left on): `--max-num-batched`
  is `--max-num-batched-tokens`, while `--max-num` matches several and is refused.
- A name that matches nothing, a missing value, a value of the wrong type or outside the choices: vLLM
  prints an error and exits before loading anything.
- `--max-num-batched-tokens 8k` and `--max-model-len 32k` take human-readable numbers (k = 1000, K = 1024).

Left out: `--config FILE` (the file is not in the manifest: named, not read), and Python 3.12's small
changes to abbreviation matching (the lists and test cases were made with Python 3.11).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ttftsim.inputs.files import excerpt
from ttftsim.validate.vllm_arg_list import ChosenList, VllmFlag

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
CLI_MODULE = "vllm.entrypoints.cli.main"  # the `vllm` console script's module: `python -m ... serve` is `vllm serve`
SHELL_SEPARATORS = ("&&", "||", ";", "|", "&")
# vllm/engine/arg_utils.py get_kwargs: the int flags that take 1k / 2M style values
# (max_num_queued_tokens's lists, written by its type function's name, record it as a string)
HUMAN_READABLE_INTS = {
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "kv_cache_memory_bytes",
    "max_model_len",
    "max_num_queued_tokens",
}
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# vLLM 0.10's FlexibleArgumentParser.parse_args raised ValueError on `vllm serve ... --model M`; from 0.11 it
# moves M to the front with a deprecation warning
SERVE_MODEL_FLAG_SINCE = (0, 11)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True)
class GivenFlag:
    """A flag as the command line wrote it, the flag vLLM reads it as, and its value."""

    written: str
    option: str  # the option string it resolved to (full name)
    flag: VllmFlag
    value: Any


@dataclass(frozen=True)
class Refusal:
    """One reason vLLM's parser exits at start: a name it does not know (`unknown`: unrecognized or
    ambiguous, or --model where 0.10 refused it) or a value it cannot read (`value`), in argparse's words."""

    kind: str  # unknown, value
    option: str
    message: str
    dest: str = ""  # a value refusal's flag destination (vLLM's argument name)


@dataclass(frozen=True)
class ParsedCommand:
    """A vLLM command line as vLLM parses it. `refusals` are vLLM's own reasons to exit at start."""

    model: str | None
    given: tuple[GivenFlag, ...]
    refusals: tuple[Refusal, ...]

    def value(self, dest: str) -> Any:
        """The last value given for this destination (argparse: the last one wins); None if never given."""
        found = [g.value for g in self.given if g.flag.dest == dest]
        return found[-1] if found else None


def vllm_arguments(words: list[str]) -> tuple[list[str], bool] | None:
    """(the arguments after `vllm serve` or the API-server module, whether a positional model is allowed);
    None when the words are not a vLLM command. Words with neither (an image's own entrypoint) are read as
    `vllm serve`'s arguments, as the vllm/vllm-openai image's ENTRYPOINT runs them."""
    for index, word in enumerate(words):
        if word == "serve" and index > 0 and words[index - 1].rsplit("/", 1)[-1] == "vllm":
            return _until_shell_separator(words[index + 1 :]), True
        if word == API_SERVER_MODULE:
            return _until_shell_separator(words[index + 1 :]), False
        if word == CLI_MODULE and words[index + 1 : index + 2] == ["serve"]:
            return _until_shell_separator(words[index + 2 :]), True
    if words and not words[0].startswith("-") and words[0].rsplit("/", 1)[-1] in ("python", "python3", "vllm"):
        return None
    return words, True


def _until_shell_separator(words: list[str]) -> list[str]:
    """The words of one command in a `sh -c` line (`... && vllm serve M ... ; echo done`)."""
    ends = [i for i, word in enumerate(words) if word in SHELL_SEPARATORS]
    return words[: ends[0]] if ends else words


def parse_command(arguments: list[str], chosen: ChosenList, positional_model: bool = True) -> ParsedCommand:
    """The model, flags and refusals of vLLM's parser for these arguments (after `vllm serve`)."""
    tokens = _preprocess(arguments, "--optimization-level" in chosen.args.flags)
    if positional_model and _minor(chosen.args.version) >= SERVE_MODEL_FLAG_SINCE:
        tokens = _model_to_front(tokens)
    parser = _Parser(chosen, tokens)
    model = parser.run(positional_model)
    if positional_model and _minor(chosen.args.version) < SERVE_MODEL_FLAG_SINCE and parser.model_flag_given():
        message = "with `vllm serve`, give the model as the first positional argument, not --model"
        parser.refusals.append(Refusal("unknown", "--model", message))
    return ParsedCommand(model, tuple(parser.given), tuple(parser.refusals))


def _model_to_front(tokens: list[str]) -> list[str]:
    """`vllm serve ... --model M ...` as FlexibleArgumentParser rewrites it from 0.11: the first --model's value
    moved to the front as the positional model (so a stray word elsewhere is an unrecognized argument, not the
    model)."""
    for index, token in enumerate(tokens):
        if token == "--model" and index + 1 < len(tokens):
            return [tokens[index + 1], *tokens[:index], *tokens[index + 2 :]]
        if token.startswith("--model="):
            return [token.removeprefix("--model="), *tokens[:index], *tokens[index + 1 :]]
    return tokens


def _minor(version: str) -> tuple[int, int]:
    major, minor = [*version.split("."), "0"][:2]
    return int(major), int(minor)


def _preprocess(arguments: list[str], has_optimization_level: bool) -> list[str]:
    """FlexibleArgumentParser's rewriting: underscores to dashes in names, -O levels, dotted JSON keys.
    -O3 is --optimization-level 3 where that flag exists; before it (0.10) -O was the compilation config's
    short name and -O3 set its level (`-O.level=3`)."""
    out: list[str] = []
    dotted: dict[str, dict[str, Any]] = {}
    index = 0
    while index < len(arguments):
        arg = arguments[index]
        index += 1
        if arg.startswith("--") or _SHORT_DOTTED.match(arg):
            index = _long_or_dotted(arg, arguments, index, dotted, out)
        elif arg.startswith("-O") and arg != "-O" and arg[2] != ".":
            level = arg[3:] if arg[2] == "=" else arg[2:]
            out += ["--optimization-level", level] if has_optimization_level else ["-O", json.dumps({"level": level})]
        elif arg == "-O" and index < len(arguments) and arguments[index] in ("0", "1", "2", "3"):
            if has_optimization_level:
                out.append("--optimization-level")
            else:
                out += ["-O", json.dumps({"level": arguments[index]})]
                index += 1
        else:
            out.append(arg)
    for flag_name, keys in dotted.items():
        out += [flag_name, json.dumps(keys)]
    return out


_SHORT_DOTTED = re.compile(r"^-(?!O\.)[A-Za-z][\w-]*\.")  # -cc.key=value: one key of a short-named JSON flag


def flag_of(dest: str) -> str:
    """The long option of an engine argument (argparse's dest, dashed): max_num_seqs -> --max-num-seqs."""
    return "--" + dest.replace("_", "-")


def _long_or_dotted(
    arg: str, arguments: list[str], index: int, dotted: dict[str, dict[str, Any]], out: list[str]
) -> int:
    """A --long-name (underscores to dashes) into out, or one key of a JSON flag (--json-flag.key value,
    -cc.key=value) into dotted; the index of the next argument (a dotted key's value may be the next one)."""
    name, sep, value = arg.partition("=")
    prefix = "--" if arg.startswith("--") else "-"
    base, dot, rest = name[len(prefix) :].partition(".")
    flag = prefix + (base.replace("_", "-") if prefix == "--" else base)
    if not dot:
        out.append(flag + sep + value)
        return index
    if not sep and index < len(arguments):
        value, index = arguments[index], index + 1
    _set_dotted(dotted.setdefault(flag, {}), rest, value)
    return index


def _set_dotted(target: dict[str, Any], path: str, raw: str) -> None:
    keys = path.rstrip("+").split(".")
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    if path.endswith("+"):
        value = raw.split(",")
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


class _Parser:
    """argparse's walk over the tokens, with the flags of one vLLM version."""

    def __init__(self, chosen: ChosenList, tokens: list[str]) -> None:
        self.args = chosen.args
        self.tokens = tokens
        self.index = 0
        self.given: list[GivenFlag] = []
        self.refusals: list[Refusal] = []
        self.unrecognized: list[str] = []

    def run(self, positional_model: bool) -> str | None:
        model: str | None = None
        options_end = False  # after a bare "--", argparse reads every word as a positional
        while self.index < len(self.tokens):
            token = self.tokens[self.index]
            self.index += 1
            if token == "--" and not options_end:
                options_end = True
                continue
            if options_end or not _is_option(token):
                if positional_model and model is None:
                    model = token
                else:
                    self.unrecognized.append(token)
                continue
            self._option(token)
        if self.unrecognized:
            message = "unrecognized arguments: " + " ".join(self.unrecognized)
            self.refusals.append(Refusal("unknown", self.unrecognized[0], message))
        flag_model = next((g.value for g in reversed(self.given) if g.flag.dest == "model"), None)
        return model if model is not None else (str(flag_model) if flag_model is not None else None)

    def model_flag_given(self) -> bool:
        return any(g.flag.dest == "model" for g in self.given)

    def _option(self, token: str) -> None:
        written, sep, explicit = token.partition("=")
        matches = self._matches(written)
        if len(matches) > 1:  # argparse stops here
            message = f"ambiguous option: {written} could match {', '.join(matches)}"
            self.refusals.append(Refusal("unknown", written, message))
            return
        if not matches:
            self.unrecognized.append(token)
            while self.index < len(self.tokens) and not _is_option(self.tokens[self.index]):
                self.unrecognized.append(self.tokens[self.index])  # argparse leaves its values unparsed too
                self.index += 1
            return
        option = matches[0]
        flag = self.args.flags[option]
        values = self._values(option, flag, explicit if sep else None)
        if values is None:
            return
        value = self._convert(option, flag, values)
        if value is not None:
            self.given.append(GivenFlag(written, option, flag, value))

    def _matches(self, written: str) -> list[str]:
        """The option strings a written name means: itself, or (long names) every option it is a prefix of."""
        if written in self.args.flags:
            return [written]
        if not (written.startswith("--") and self.args.allow_abbrev):
            return []
        return [option for option in self.args.long_options() if option.startswith(written)]

    def _values(self, option: str, flag: VllmFlag, explicit: str | None) -> list[str] | None:
        """The strings the flag consumes (argparse's nargs), or None after a refusal."""
        if flag.nargs == 0:
            if explicit is not None:
                self._bad_value(option, f"ignored explicit argument {excerpt(explicit)}", flag)
                return None
            return []
        if explicit is not None:
            return [explicit]
        following = []
        while self.index < len(self.tokens) and not _is_option(self.tokens[self.index]):
            following.append(self.tokens[self.index])
            self.index += 1
            if flag.nargs in (None, "?"):
                break
        if not following and flag.nargs in (None, "+"):
            needs = "one argument" if flag.nargs is None else "at least one argument"
            self._bad_value(option, f"expected {needs}", flag)
            return None
        return following

    def _convert(self, option: str, flag: VllmFlag, values: list[str]) -> Any:
        if flag.nargs == 0:
            return flag.stores(option)
        if not values:  # nargs "?" with nothing after it: the flag's const
            return True
        try:
            converted = [_typed(flag, v) for v in values]
        except ValueError as exc:
            self._bad_value(option, str(exc), flag)
            return None
        if flag.choices is not None:
            bad = [v for v in values if v not in flag.choices]
            if bad:
                self._bad_value(
                    option, f"invalid choice: {excerpt(bad[0])} (choose from {', '.join(flag.choices)})", flag
                )
                return None
        return converted if flag.nargs == "+" else converted[0]

    def _bad_value(self, option: str, message: str, flag: VllmFlag) -> None:
        self.refusals.append(Refusal("value", option, message, flag.dest))


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def _typed(flag: VllmFlag, text: str) -> Any:
    """The value as the flag's type function would convert it; ValueError in argparse's words."""
    if flag.value == "int" or flag.dest in HUMAN_READABLE_INTS:
        if flag.dest in HUMAN_READABLE_INTS:
            return _human_int(text, allow_auto=flag.dest == "max_model_len")
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"invalid int value: {excerpt(text)}") from None
    if flag.value == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"invalid float value: {excerpt(text)}") from None
    if flag.value == "json" and text.strip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"not valid JSON: {excerpt(text)}") from None
    return text


def _human_int(text: str, allow_auto: bool) -> int:
    """vllm/utils/argparse_utils.py human_readable_int (and _or_auto: -1 or auto is -1)."""
    text = text.strip()
    if allow_auto and (text == "-1" or text.lower() == "auto"):
        return -1
    match = _HUMAN.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." not in number:
            return int(number) * _BINARY[suffix]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"invalid int value: {excerpt(text)}") from None
