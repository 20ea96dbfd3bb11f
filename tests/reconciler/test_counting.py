"""Request accounting by ``CountingClient``/``CountingReader`` against the embedded API server.

The recorded calls are checked against the server's own request counts, so the accounting the
reconcilers report is the truth, not a second opinion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from builders import ObjectRef
from reconciler import KubernetesClient
from reconciler._client.counting import (
    CountingClient,
    counting,
    counting_reader,
    recording,
    uncounted,
)
from reconciler.informers import PassThroughCache
from tests.reconciler.conftest import Requests


def _cm(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": {"a": "1"}}


class _MemoryReader:
    """A ``ReadCache`` over a dict: reads cost no request (as informers' do)."""

    from_memory = True

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, api_version: str, kind: str, name: str, *,
            namespace: str | None = None) -> dict[str, Any] | None:
        return self.objects.get(name)

    def list(self, api_version: str, kind: str, *, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        return list(self.objects.values())


def test_each_request_is_recorded_once_as_the_server_counts_it(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    counted = counting(client)
    assert counting(counted) is counted
    assert uncounted(counted) is client
    with requests() as r, recording() as calls:
        counted.create(_cm("c", ns))
        counted.get("v1", "ConfigMap", "c", namespace=ns)
        counted.list("v1", "ConfigMap", namespace=ns, label_selector="x=y")
        counted.patch("v1", "ConfigMap", "c", {"data": {"a": "2"}},
                      patch_type="application/merge-patch+json", namespace=ns)
        counted.delete("v1", "ConfigMap", "c", namespace=ns)
        assert counted.is_namespaced("v1", "ConfigMap")
    verbs = [c.verb for c in calls]
    assert verbs == ["create", "get", "list", "patch", "delete"]
    assert {v: verbs.count(v) for v in verbs} == {v: r.count(v) for v in verbs}
    assert calls[0].ref == ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace=ns)
    assert calls[2].ref == ObjectRef(api_version="v1", kind="ConfigMap", name="", namespace=ns)


@pytest.mark.both_servers
def test_recordings_nest_and_nothing_is_recorded_outside_one(
    client: KubernetesClient, ns: str
) -> None:
    counted = CountingClient(client)
    counted.create(_cm("outside", ns))  # no recording open: nothing to record into
    with recording() as outer:
        counted.get("v1", "ConfigMap", "outside", namespace=ns)
        with recording() as inner:
            counted.list("v1", "ConfigMap", namespace=ns)
        counted.delete("v1", "ConfigMap", "outside", namespace=ns)
    assert [c.verb for c in inner] == ["list"]
    assert [c.verb for c in outer] == ["get", "list", "delete"]


@pytest.mark.both_servers
def test_reads_count_once_per_read_and_never_from_memory(
    client: KubernetesClient, ns: str, requests: Callable[[], Requests]
) -> None:
    client.create(_cm("r", ns))
    reader = counting_reader(PassThroughCache(client, page_size=1))
    assert counting_reader(reader) is reader
    client.create(_cm("s", ns))
    with requests() as r, recording() as calls:
        assert reader.get("v1", "ConfigMap", "r", namespace=ns) is not None
        assert len(reader.list("v1", "ConfigMap", namespace=ns)) >= 2
    assert [c.verb for c in calls] == ["get", "list"]
    assert r.count("list") >= 2  # pages are the reader's business: one read, one call
    memory = counting_reader(_MemoryReader({"r": _cm("r", ns)}))
    assert memory.from_memory
    with requests() as r, recording() as calls:
        assert memory.get("v1", "ConfigMap", "r", namespace=ns) is not None
        assert memory.list("v1", "ConfigMap", namespace=ns)
    assert calls == []
    assert r.count("get") == r.count("list") == 0
