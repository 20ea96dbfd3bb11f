"""``optk apiserver``: run the embedded API server in the foreground until SIGINT or SIGTERM.

The argument parsing lives in ``reconciler._commands.cli``; this module starts the server, writes
the kubeconfig, prints where it is and waits for a signal, then stops cleanly. An existing
``--kubeconfig`` file is added to (one cluster, user and context named
``optk-embedded-<port>``, made the current context as ``kind`` does) and restored at shutdown;
a file that is not a kubeconfig is refused with one line and exit code 2.
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType
from typing import TextIO

from reconciler.embedded._server import EmbeddedApiServer
from reconciler.embedded._storage import DEFAULT_HISTORY_BYTES
from reconciler.embedded._watching import (
    DEFAULT_WATCH_BUFFER_BYTES,
    DEFAULT_WATCH_BUFFER_TOTAL_BYTES,
)

__all__ = ["run_apiserver"]


def run_apiserver(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    kubeconfig: str | None = None,
    allow_non_loopback: bool = False,
    out: TextIO | None = None,
    history_bytes: int = DEFAULT_HISTORY_BYTES,
    watch_buffer_bytes: int = DEFAULT_WATCH_BUFFER_BYTES,
    watch_buffer_total_bytes: int = DEFAULT_WATCH_BUFFER_TOTAL_BYTES,
) -> int:
    """Serve until SIGINT/SIGTERM; returns the process exit code. The limits are
    ``EmbeddedApiServer``'s."""
    stream = out or sys.stdout
    # The handler only flips a flag: taking a lock there (threading.Event.set) can deadlock
    # when the signal lands while the main thread holds that same lock, or on a second signal.
    stopping = [False]

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping[0] = True

    try:
        server = EmbeddedApiServer(
            host=host, port=port, kubeconfig_path=kubeconfig,
            allow_non_loopback=allow_non_loopback, history_bytes=history_bytes,
            watch_buffer_bytes=watch_buffer_bytes,
            watch_buffer_total_bytes=watch_buffer_total_bytes,
        )
    except ValueError as exc:
        print(f"optk apiserver: error: {exc}", file=sys.stderr)
        return 2
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except ValueError as exc:  # the kubeconfig became invalid since it was checked
            print(f"optk apiserver: error: {exc}", file=sys.stderr)
            return 2
        with server:
            print(f"embedded Kubernetes API server listening on {server.url}", file=stream)
            print(f"kubeconfig: {server.kubeconfig_path}", file=stream)
            print(f"try: kubectl --kubeconfig {server.kubeconfig_path} get namespaces",
                  file=stream, flush=True)
            while not stopping[0]:
                time.sleep(0.1)
        print("embedded Kubernetes API server stopped", file=stream, flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
