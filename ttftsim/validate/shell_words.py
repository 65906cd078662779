"""A shell wrapper's script read as the shell reads it: its words, and the variables it sets before vLLM runs.

In the script, a backslash before a newline joins the lines, an unquoted newline ends a command as `;` does, `#`
starts a comment, `$NAME` and `${NAME}` are the environment's literal values (container_env.py) or the script's
own literal assignments (`NAME=value;`, `export NAME=value &&`), `$0`, `$@`, `$1`... the words after the script, and
redirections (`2>&1`, `> log`, `&>/dev/null`) are the shell's, not the command's. A value the script computes
(`$(( ... ))`, `$(cmd)`) is not known here, nor one set inside a compound command (if, case, a loop), whose branch
is not followed.
"""

from __future__ import annotations

import re
import shlex

REDIRECTIONS = (">", ">>", "<", ">&", "<&", "&>", "&>>", ">|", "<>")
_SHELL_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_FD_BEFORE_REDIRECTION = re.compile(r"\d+(?=[<>])")


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
