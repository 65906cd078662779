"""Command line: parse, load config, one library call, render. Exit 0 ok, 1 SLO/plan failure, 2 bad input.

Each command imports the library it calls inside its function: `ttftsim models` or `--help` should not pay
for importing the simulator, the planner or plotly (no command-local import here avoids a cycle: the import
contracts in .importlinter keep the layers acyclic).

The commands live in modules by what they do, each registering on the one typer app (cli/app.py); importing
them here registers them. A new command goes in its own module, imported below, and in HELP_ORDER."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

import typer

from ttftsim.cli import catalog, fit, measure, outputs, run
from ttftsim.cli.app import app, console
from ttftsim.cli.entry import main

__all__ = ["app", "console", "main"]
COMMAND_MODULES = (run, catalog, measure, fit, outputs)
HELP_ORDER = (
    "simulate",
    "plan",
    "validate",
    "compare",
    "accuracy",
    "fit",
    "calibrate",
    "advice",
    "dashboard",
    "report",
    "models",
    "hardware",
    "step",
    "memory",
    "schema",
)


def _help_rank(command: typer.models.CommandInfo) -> int:
    name = command.name or getattr(command.callback, "__name__", "")
    return HELP_ORDER.index(name) if name in HELP_ORDER else len(HELP_ORDER)


def _first_sentence(doc: str | None) -> str:
    """A command's line in `ttftsim --help`: the first sentence of its docstring, on one line (the rest, with its
    line breaks, is the command's own --help)."""
    text = " ".join((doc or "").split())
    end = re.search(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z`(-])", text)
    return text if end is None else text[: end.start() + 1]


def _print_version(wanted: bool) -> None:
    if wanted:
        try:
            typer.echo(f"ttftsim {version('ttftsim')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("ttftsim (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(
        False, "--version", help="Print ttftsim's version and exit", callback=_print_version, is_eager=True
    ),
) -> None:
    """The options before the command."""


app.registered_commands.sort(key=_help_rank)  # sorted() is stable: commands not named above keep their order
for _command in app.registered_commands:
    _command.short_help = _command.short_help or _first_sentence(_command.callback.__doc__ if _command.callback else "")
