"""A parent deleted while its reconcile is in flight is never brought back (issue 21, 1).

The operator talks to the server through a proxy that holds back the answer to the first status
PATCH of one parent for longer than the own-echo wait (the server has applied it; the answer
arrives late, as over a congested link), and the parent is deleted meanwhile. Before the fix the
late answer was written through to the parent cache after its DELETED event, the revived parent
was reconciled for ever: its children created, collected by the garbage collector, and their
DELETE events queued it again (about 20 writes a second, without end).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from reconciler import KubernetesClient
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION
from tests.reliability._proxy import WriteLog

HOLD = 7.0
"""Seconds the answer is held back: longer than the own-echo wait (5 s), so the informer has
handled the parent's DELETED event before the answer arrives."""


@pytest.fixture
def late_proxy(kube_api: Any, ns: str) -> Iterator[tuple[WriteLog, list[str]]]:
    """A proxy in front of the test's server; names added to the returned list get their first
    status PATCH answered ``HOLD`` seconds late."""
    doomed: list[str] = []
    held: set[str] = set()

    def hold(method: str, path: str) -> float:
        for name in doomed:
            if (method == "PATCH" and path.endswith(f"/namespaces/{ns}/things/{name}/status")
                    and name not in held):
                held.add(name)
                return HOLD
        return 0.0

    proxy = WriteLog(who="operator", upstream=kube_api.url, ca_path=kube_api.ca_cert_path,
                     token=kube_api.token, hold=hold).start()
    try:
        yield proxy, doomed
    finally:
        proxy.stop()


def _writes_for(proxy: WriteLog, ns: str, name: str, since: float) -> list[str]:
    """The operator's writes since ``since`` that concern parent ``name`` or its children."""
    return [f"{w.method} {w.path} {w.name} -> {w.status}" for w in proxy.writes
            if w.at >= since and f"/namespaces/{ns}/" in w.path
            and (w.name == name or w.name.startswith(f"{name}-")
                 or w.name.startswith(f"{name}.")) and "/leases/" not in w.path]


@pytest.mark.both_servers
def test_a_parent_deleted_while_its_status_answer_is_late_is_never_revived(
    client: KubernetesClient, ns: str, late_proxy: tuple[WriteLog, list[str]],
    tmp_path: Path,
) -> None:
    proxy, doomed = late_proxy
    api_client = kubernetes.config.new_client_from_config(
        config_file=str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    operator = make_operator(ns)
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    doomed.append(name)
    with running(operator, KubernetesClient(api_client)) as runtime:
        client.create(thing(ns, "kept"))
        assert wait_until(lambda: child_data(client, ns, "kept") is not None, 15)
        client.create(thing(ns, name))
        # The server applied the status PATCH (the proxy logs it when the server answered);
        # its answer now waits in the proxy: delete the parent meanwhile.
        assert wait_until(lambda: any(
            w.path.endswith(f"/things/{name}/status") for w in proxy.writes), 15)
        client.delete(API_VERSION, "Thing", name, namespace=ns)
        deleted_at = time.monotonic()
        assert wait_until(lambda: runtime.parents.cache.get(ns, name) is None, 10)
        # The late answer arrives HOLD s after the PATCH; then give a loop time to show.
        time.sleep(HOLD + 3.0)
        window = time.monotonic()
        time.sleep(5.0)
        looping = _writes_for(proxy, ns, name, window)
        assert looping == [], (len(looping), looping[:10], runtime.triggers())
        assert runtime.parents.cache.get(ns, name) is None  # never revived
        # The rest of the operator is unharmed: a change of another parent is still applied.
        client.patch(API_VERSION, "Thing", "kept", {"spec": {"value": "2"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: child_data(client, ns, "kept") == {"value": "2"}, 15)
        assert wait_idle(runtime, 10, settle=0.3)
        after = _writes_for(proxy, ns, name, deleted_at + HOLD + 1.0)
        assert after == [], after[:10]
