"""``python -m examples.thanos``: run the Thanos operator.

The same as ``optk run examples.thanos.operator:operator``, written out as a user's own entry
point would be: ``start_operator`` (the operator, whose declared inputs turn ServiceMonitors on
when their CRD appears and roll the store gateway when its Secret changes) against
``--kubeconfig PATH`` (default: the usual kubeconfig, else in-cluster) or a fresh ``--embedded``
API server, until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from examples.thanos.operator import start_operator
from reconciler import KubernetesClient, load_api_client
from reconciler.embedded import EmbeddedApiServer

_log = logging.getLogger("thanos-operator")


def serve(api_client: Any, stop: threading.Event) -> int:
    """Run the operator and its watch on ``api_client`` until ``stop``; the exit code."""
    client = KubernetesClient(api_client)
    runtime = start_operator(client)
    _log.info("thanos-operator running (identity %s)", runtime.identity)
    try:
        while not stop.is_set() and not runtime.finished:
            stop.wait(0.2)
    finally:
        clean = runtime.stop()
    _log.info("thanos-operator stopped")
    return 0 if clean else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run until a signal; 0 after a clean shutdown."""
    parser = argparse.ArgumentParser(prog="python -m examples.thanos",
                                     description="run the Thanos example operator")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster")
    where.add_argument("--embedded", action="store_true", help="run a fresh embedded API server")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.embedded:
        with EmbeddedApiServer() as server:
            _log.info("embedded API server at %s (kubeconfig %s)", server.url,
                      server.kubeconfig_path)
            return serve(server.api_client(), stop)
    return serve(load_api_client(args.kubeconfig), stop)


if __name__ == "__main__":
    sys.exit(main())
