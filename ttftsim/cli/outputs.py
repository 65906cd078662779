"""What the program writes for people: input schemas and generated docs, the advice report, the dashboard and
the HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ttftsim.cli.app import app, console
from ttftsim.data_paths import data_folder
from ttftsim.errors import InputError


@app.command()
def schema(
    out: Annotated[Path | None, typer.Option(help="Write <input>.schema.json files here (for editors)")] = None,
    check: Annotated[
        bool, typer.Option(help="Exit 1 if the docs folder's config.md or cli.md are out of date")
    ] = False,
    docs: Annotated[
        Path | None,
        typer.Option(help="Folder of config.md and cli.md: write them there (with --check: compare; default docs)"),
    ] = None,
) -> None:
    """JSON Schemas of every input file (--out), and the reference docs config.md and cli.md generated from them
    (--docs: ttftsim's own docs folder; nothing is written where neither is given)."""
    from ttftsim.docs import drift, write

    if check:
        folder = docs or Path("docs")
        if not folder.is_dir():
            raise InputError(str(folder), "--docs", "no docs folder here to check (give --docs DIR)")
        stale = drift(folder, app)
        for path in stale:
            console.print(f"[red]out of date:[/] {path} (run `ttftsim schema --docs {folder}`)")
        if stale:
            raise typer.Exit(1)
        console.print("docs match the schemas and the CLI")
        return
    if out is None and docs is None:
        raise InputError(
            "schema", "", "nothing to write: --out DIR for the JSON Schemas, --docs DIR for config.md and cli.md"
        )
    for written in write(out, docs, app):
        console.print(f"wrote {written}")


@app.command()
def advice(
    claims: Annotated[
        Path,
        typer.Option(help="The claims and their scenario pairs (the default: in a checkout of ttftsim, from its root)"),
    ] = Path("examples/advice/claims.yaml"),
    out: Annotated[Path, typer.Option(help="The report to write (the default: the checkout's own)")] = Path(
        "docs/advice.md"
    ),
    pairs: Annotated[
        Path, typer.Option(help="Where each run's before/after scenarios go (the default: the checkout's own)")
    ] = Path("examples/advice/pairs"),
    quick: Annotated[bool, typer.Option(help="Shortened traffic (for CI): indicative numbers only")] = False,
    only: Annotated[str | None, typer.Option(help="Comma-separated claim numbers")] = None,
) -> None:
    """Run every claim of the common TTFT advice as before/after pairs and write the verdicts."""
    from ttftsim.advice import write_advice

    wanted = None
    if only:
        try:
            wanted = {int(part) for part in only.split(",")}
        except ValueError:
            raise InputError("--only", "", f"expects claim numbers like 1,15,17, got {only!r}") from None
    if not claims.is_file():  # the claims ship with the repository, not the package
        raise InputError(
            str(claims),
            "--claims",
            "file not found: the claims are examples/advice/claims.yaml of a checkout of ttftsim's repository; run "
            "from its root or give --claims (and --out, --pairs: their defaults are the checkout's own files)",
        )
    results = write_advice(claims, out, pairs, quick, wanted)
    for item in results:
        claim = item["claim"]
        verdicts = "; ".join(run["verdict"] for run in item["runs"]) or "not modelled"
        console.print(f"{claim.id:>2}. {claim.title}: {verdicts}", highlight=False)
    console.print(f"wrote {out} and {pairs}/")


@app.command()
def dashboard(
    results: Annotated[
        Path, typer.Argument(help="Folder of results (simulate --out, plan --out, accuracy JSON)")
    ] = Path("."),
    host: Annotated[str, typer.Option(help="Interface to bind (default: this machine only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port")] = 8050,
) -> None:
    """The dashboard: scenario explorer, plan, compare and accuracy views over a results folder."""
    if not results.is_dir():
        raise InputError(str(results), "", "results folder not found")
    app_module = web_app()
    app_module.create_app(results.resolve()).run(host=host, port=port, debug=False)


@app.command()
def report(
    results: Annotated[Path, typer.Argument(help="Folder of results")],
    output: Annotated[Path, typer.Option("-o", "--output", "--out", help="HTML file to write")] = Path("report.html"),
) -> None:
    """Every result in the folder as figures in one self-contained HTML file (plotly.js embedded)."""
    from ttftsim.render.summary import summary_text
    from ttftsim.results import check_report_target, discover, write_report

    if not results.is_dir():
        raise InputError(str(results), "", "results folder not found")
    check_report_target(output)
    found = discover(results)
    if not (found.simulations or found.plans or found.accuracy or found.incomplete):
        raise InputError(
            str(results), "", "no results in this folder (simulate --out, plan --out and accuracy --json write them)"
        )
    problems = write_report(results, output, summary_text)
    for problem in problems:
        console.print(f"[yellow]not shown:[/] {problem}", highlight=False)
    console.print(f"wrote {output}")


def web_app() -> Any:
    """web/app.py, the Dash app (the repository's web/ folder, or a wheel's copy)."""
    import importlib.util

    path = data_folder("web") / "app.py"
    try:
        import dash  # noqa: F401
    except ImportError:
        raise InputError("dashboard", "", "Dash is not installed (pip install 'ttftsim[web]')") from None
    spec = importlib.util.spec_from_file_location("ttftsim_web_app", path)
    if spec is None or spec.loader is None or not path.exists():
        raise InputError(str(path), "", "the dashboard's web/app.py is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
