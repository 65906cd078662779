"""The one error type that user input raises.

Anything a user typed (a YAML file, a config.json, a CLI option) that is wrong becomes an `InputError`
naming where it came from and which field; the CLI prints it on one line and exits with code 2.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: names the source (file or option), the field, and what is wrong."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str]]:
        """Picklable with its three parts, so an error raised in a plan's worker process reaches the CLI."""
        return (InputError, (self.source, self.field, self.message))

    def one_line(self) -> str:
        where = f"{self.source}: {self.field}" if self.field else self.source
        return f"{where}: {self.message}".replace("\n", " ")
