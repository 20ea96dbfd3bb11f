"""``optk``: the command line. Each subcommand parses its arguments here and runs elsewhere."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """The ``optk`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="optk", description="operator-toolkit command line")
    subparsers = parser.add_subparsers(dest="command", required=True)
    apiserver = subparsers.add_parser(
        "apiserver", help="run the embedded Kubernetes API server in the foreground"
    )
    apiserver.add_argument("--host", default="127.0.0.1", help="address to bind (loopback)")
    apiserver.add_argument("--port", type=int, default=0, help="port (0: pick a free one)")
    apiserver.add_argument("--kubeconfig", default=None, help="where to write the kubeconfig")
    apiserver.add_argument("--allow-non-loopback", action="store_true",
                           help="allow binding a non-loopback address")
    apiserver.set_defaults(handler=_run_apiserver)
    return parser


def _run_apiserver(args: argparse.Namespace) -> int:
    from reconciler.embedded._command import run_apiserver

    return run_apiserver(host=args.host, port=args.port, kubeconfig=args.kubeconfig,
                         allow_non_loopback=args.allow_non_loopback)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``optk`` console script and ``python -m reconciler``."""
    args = build_parser().parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is not None:
        return int(handler(args))
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse guards this


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
