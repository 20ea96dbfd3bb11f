"""Watches that go quiet, and informers that stop (issue 31).

- A silently dead watch: the operator runs behind a proxy (``_proxy.WriteLog``) that, on
  ``stall()``, keeps every open watch connection open but relays no byte more (no FIN, no RST),
  as a NAT or load balancer that forgot the connection. A child is edited during the stall; the
  operator must notice the silence within its bound (two of the server's bookmark intervals and
  a margin; here 1 s bookmarks and a 4 s bound, set through ``EmbeddedApiServer(
  bookmark_interval=...)`` and ``Operator.watching.inactivity_timeout``), log one line naming the
  kind and the silence, resume its watches and repair the drift.
- Stopped informers: ``Informer.stop()`` closes the open stream, so each informer's thread and
  socket are gone within 5 s, not at the server's 300 s watch timeout.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from objectmatcher import MERGE_PATCH
from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from reconciler.informers import Informer
from tests.reliability import _counts
from tests.reliability._harness import Fleet, OperatorProcess, eventually
from tests.reliability._proxy import WriteLog

TARGET = "tests.reliability.stall_operator:operator"
BOOKMARK_INTERVAL = 1.0
SILENCE = 2 * BOOKMARK_INTERVAL + 2.0
"""The operator's watch inactivity timeout: two bookmark intervals and a margin."""
NAMESPACE = "stall"


@pytest.fixture
def bookmarked() -> Iterator[EmbeddedApiServer]:
    """A private embedded server sending a bookmark every ``BOOKMARK_INTERVAL`` seconds."""
    api = EmbeddedApiServer(bookmark_interval=BOOKMARK_INTERVAL)
    api.start()
    try:
        yield api
    finally:
        api.stop()


def test_drift_made_while_every_watch_is_silently_dead_is_repaired_within_the_bound(
    bookmarked: EmbeddedApiServer, tmp_path: Path,
    operators: Callable[..., OperatorProcess],
) -> None:
    client = KubernetesClient(bookmarked.api_client())
    proxy = WriteLog(who="op", upstream=bookmarked.url, ca_path=bookmarked.ca_cert_path,
                     token=bookmarked.token).start()
    try:
        replica = operators(proxy.kubeconfig(tmp_path / "op.kubeconfig"), target=TARGET,
                            environ={"OPTK_TEST_WATCH_SILENCE": str(SILENCE)}).start()
        eventually(lambda: client.is_served("monitoring.optk.dev/v1alpha1", "Thanos"),
                   "the Thanos CRD", 60)
        fleet = Fleet(client, NAMESPACE)
        fleet.create_namespace()
        fleet.create_parents(2)
        fleet.wait_converged(60)
        eventually(replica.ready, "the operator's caches", 60)
        time.sleep(2 * BOOKMARK_INTERVAL)  # the watches opened by the first reconciles settle
        proxy.stall()
        client.patch("apps/v1", "Deployment", "p0-query", {"spec": {"replicas": 9}},
                     patch_type=MERGE_PATCH, namespace=NAMESPACE)
        repaired = fleet.wait_converged(SILENCE * 4 + 10)
        assert proxy.stalled >= 1, "the drift's event was never held back"
        assert repaired <= SILENCE + 3.0, f"repaired {repaired:.1f} s after the drift"
        output = replica.output()
        lines = [line for line in output.splitlines()
                 if "watch of Deployment sent nothing for" in line]
        assert len(lines) == 1, output[-3000:]
        _counts.add("watch_stall", {"watch_stall.drifts_repaired": 1})
        _counts.figure("watch_stall.repair_seconds", round(repaired, 2))
    finally:
        proxy.stop()


def _sockets() -> int:
    """Open sockets of this process (the embedded server's included)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


KINDS = (("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
         ("apps/v1", "Deployment"))


def test_stopped_informers_free_their_threads_and_sockets_at_once(
    server: EmbeddedApiServer,
) -> None:
    threads, sockets = threading.active_count(), _sockets()
    api = server.api_client()
    client = KubernetesClient(api)
    for _ in range(3):  # as a CRD deleted and created again stops and starts its informers
        informers = [Informer(client, version, kind, namespace="default").start()
                     for version, kind in KINDS]
        assert all(informer.wait_synced(10) for informer in informers)
        eventually(lambda started=informers: all(i.stats.watches for i in started),  # type: ignore[misc]
                   "the watches", 10)
        for informer in informers:
            informer.stop()
    api.close()  # the idle pooled connections; a stream still open is not pooled
    took = eventually(lambda: threading.active_count() <= threads and _sockets() <= sockets,
                      "threads and sockets back to where they were", 5)
    _counts.add("informer_stop", {"informer_stop.informers_stopped": 3 * len(KINDS)})
    _counts.figure("informer_stop.release_seconds", round(took, 2))
    _counts.figure("informer_stop.threads_left", max(0, threading.active_count() - threads))
    _counts.figure("informer_stop.sockets_left", max(0, _sockets() - sockets))
