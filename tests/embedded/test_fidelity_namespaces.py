"""Namespace deletion over time, as 1.25's namespace controller runs it, watched over HTTP with
the official client: the namespace is Terminating at once, its content goes one resource type
after another, creates meanwhile get 403 with the ``NamespaceTerminating`` cause, content held
by finalizers shows in the namespace's conditions, and the namespace goes when it is empty."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._collecting import NAMESPACE_STEP_SECONDS
from tests.embedded.helpers import wait_until


@pytest.fixture
def core(kube_api: EmbeddedApiServer) -> Iterator[kubernetes.client.CoreV1Api]:
    with kube_api.api_client() as api_client:
        yield kubernetes.client.CoreV1Api(api_client)


def _namespace(core: kubernetes.client.CoreV1Api) -> str:
    name = f"doomed-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def _gone(core: kubernetes.client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except kubernetes.client.ApiException as exc:
        return exc.status == 404
    return False


def test_content_goes_type_by_type_over_time_and_creates_are_refused(
    core: kubernetes.client.CoreV1Api,
) -> None:
    name = _namespace(core)
    core.create_namespaced_config_map(name, {"metadata": {
        "name": "held", "finalizers": ["example.com/hold"]}})  # keeps it Terminating
    for index in range(3):
        core.create_namespaced_config_map(name, {"metadata": {"name": f"cm-{index}"}})
        core.create_namespaced_secret(name, {"metadata": {"name": f"s-{index}"}})
        core.create_namespaced_service_account(name, {"metadata": {"name": f"sa-{index}"}})

    started = time.monotonic()
    answer = core.delete_namespace(name, _preload_content=False)
    namespace = json.loads(answer.data)
    assert namespace["status"] == {"phase": "Terminating"}
    assert namespace["spec"] == {"finalizers": ["kubernetes"]}
    assert namespace["metadata"]["deletionTimestamp"]

    with pytest.raises(kubernetes.client.ApiException) as caught:
        core.create_namespaced_config_map(name, {"metadata": {"name": "late"}})
    assert caught.value.status == 403
    assert caught.value.body is not None
    status: dict[str, Any] = json.loads(caught.value.body)
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {name} '
        "because it is being terminated")
    assert status["details"]["causes"] == [{
        "reason": "NamespaceTerminating", "message": f"namespace {name} is being terminated",
        "field": "metadata.namespace"}]

    # Each type is emptied at once, the types one after another, a step apart (the first
    # step comes a step after the DELETE): at least three steps for three types.
    seen: list[tuple[int, int, int]] = []

    def emptied() -> bool:
        counts = (len(core.list_namespaced_config_map(name).items),
                  len(core.list_namespaced_secret(name).items),
                  len(core.list_namespaced_service_account(name).items))
        seen.append(counts)
        return counts == (1, 0, 0)

    wait_until(emptied)
    assert time.monotonic() - started >= 3 * NAMESPACE_STEP_SECONDS
    assert all(c in (4, 1) and s in (3, 0) and a in (3, 0) for c, s, a in seen)
    held = core.read_namespaced_config_map("held", name)
    assert held.metadata.deletion_timestamp is not None
    assert core.read_namespace(name).status.phase == "Terminating"

    core.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}})
    wait_until(lambda: _gone(core, name))


def test_content_held_by_finalizers_shows_in_the_conditions(
    core: kubernetes.client.CoreV1Api,
) -> None:
    name = _namespace(core)
    core.create_namespaced_config_map(name, {"metadata": {
        "name": "held", "finalizers": ["example.com/hold"]}})
    core.delete_namespace(name)

    def conditions() -> dict[str, Any]:
        raw = json.loads(core.read_namespace(name, _preload_content=False).data)
        return {c["type"]: c for c in raw["status"].get("conditions") or ()}

    wait_until(lambda: bool(conditions()))
    found = conditions()
    assert list(found) == [
        "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure", "NamespaceContentRemaining",
        "NamespaceFinalizersRemaining"]
    assert {k: (c["status"], c["reason"]) for k, c in found.items()} == {
        "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered"),
        "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions"),
        "NamespaceDeletionContentFailure": ("False", "ContentDeleted"),
        "NamespaceContentRemaining": ("True", "SomeResourcesRemain"),
        "NamespaceFinalizersRemaining": ("True", "SomeFinalizersRemain"),
    }
    assert found["NamespaceContentRemaining"]["message"] == (
        "Some resources are remaining: configmaps has 1 resource instances")
    assert found["NamespaceFinalizersRemaining"]["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 "
        "resource instances")
    held = core.read_namespaced_config_map("held", name)
    assert held.metadata.deletion_timestamp is not None

    core.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}})
    wait_until(lambda: _gone(core, name))
