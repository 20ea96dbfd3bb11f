"""``optk``: the command line. Each subcommand parses its arguments here and runs elsewhere."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """The ``optk`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="optk", description="operator-toolkit command line")
    parser.add_subparsers(dest="command", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``optk`` console script and ``python -m reconciler``."""
    args = build_parser().parse_args(argv)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse guards this


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
