"""The one error type that user input raises, and the warning a calibration's range raises.

Anything a user typed (a YAML file, a config.json, a CLI option) that is wrong becomes an `InputError`
naming where it came from and which field; the CLI prints it on one line and exits with code 2.
"""

from __future__ import annotations

MAX_SOURCE, MAX_FIELD, MAX_MESSAGE = 300, 160, 400  # characters of each part of the one line


class InputError(Exception):
    """Bad user input: names the source (file or option), the field, and what is wrong."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        # its arguments the three parts: `type(error)(*error.args)` makes it again, as SimPy does to re-raise what
        # a process raised (a closed-loop client reaching the request limit), and pickling (a plan's workers)
        super().__init__(source, field, message)

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        """Source, field and message on one line, each cut short: an error never echoes a whole input."""
        where = (
            f"{_cut(self.source, MAX_SOURCE)}: {_cut(self.field, MAX_FIELD)}"
            if self.field
            else _cut(self.source, MAX_SOURCE)
        )
        return _printable(f"{where}: {_cut(self.message, MAX_MESSAGE)}".replace("\n", " ").replace("\r", " "))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _printable(text: str) -> str:
    """Control characters and other line breaks (form feed, U+2028...) escaped: the line stays one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ArgumentError(ValueError):
    """An engine argument that cannot run with the model or hardware (max_model_len beyond the model's positions, a
    TP size that does not divide its heads): a ValueError naming the argument, so that the file's error names it
    (`engine.tensor_parallel_size`, where the scenario writes it)."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(message)


class CalibrationRangeWarning(UserWarning):
    """A kernel shape outside the range a calibration was fitted on: its time extrapolates the fitted curve
    (calibration/costs.py). A plan gathers these per candidate (plan/runner.py)."""
