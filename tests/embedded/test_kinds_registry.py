"""The registry's type table agrees with the discovery documents of a real kube-apiserver."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reconciler.embedded._registry import make_registry
from tests.conftest import load_fixture

DISCOVERY = load_fixture("discovery.json")
UNRECORDED = frozenset({"events", "resourcequotas"})
"""Core kinds served that the trimmed /api/v1 recording leaves out."""
RECORDED_GROUP_VERSIONS = [
    "/api/v1",
    "/apis/apps/v1",
    "/apis/rbac.authorization.k8s.io/v1",
    "/apis/apiextensions.k8s.io/v1",
]


def _recorded_resources(path: str) -> dict[str, dict[str, Any]]:
    body = DISCOVERY[path]["body"]
    return {r["name"]: r for r in body["resources"]}


@pytest.mark.parametrize("path", RECORDED_GROUP_VERSIONS)
def test_builtin_types_match_recorded_discovery(path: str) -> None:
    registry = make_registry()
    recorded = _recorded_resources(path)
    group_version = path.removeprefix("/api/").removeprefix("/apis/")
    group, _, version = group_version.rpartition("/")
    served = [t for t in registry.all_types() if t.group == group and t.version == version]
    assert served, f"nothing served for {group_version}"
    checked = 0
    for rt in served:
        entry = recorded.get(rt.plural)
        if entry is None:  # /api/v1 is trimmed in the recording
            assert rt.plural in UNRECORDED, f"{rt.plural} is served but not recorded"
            continue
        checked += 1
        assert entry["kind"] == rt.kind
        assert entry["namespaced"] == rt.namespaced
        assert entry["verbs"] == list(rt.verbs)
        assert entry.get("shortNames", []) == list(rt.short_names)
        assert entry.get("categories", []) == list(rt.categories)
        recorded_subresources = {
            name.split("/", 1)[1] for name in recorded if name.startswith(f"{rt.plural}/")
        }
        assert rt.subresources <= recorded_subresources
    assert checked >= len(served) - len(UNRECORDED)


def test_lookup_and_by_kind_agree() -> None:
    registry = make_registry()
    for rt in registry.all_types():
        assert registry.lookup(rt.group, rt.version, rt.plural) is rt
        assert registry.by_kind(rt.api_version, rt.kind) is rt
    assert registry.lookup("apps", "v1", "widgets") is None
    assert registry.by_kind("v1", "Deployment") is None


def test_both_event_apis_are_served() -> None:
    registry = make_registry()
    assert registry.by_kind("v1", "Event") is not None
    assert registry.by_kind("events.k8s.io/v1", "Event") is not None


def test_crd_registers_and_removes_its_served_versions() -> None:
    registry = make_registry()
    crd = load_fixture("customresourcedefinition.json")["sent"]
    registry.crd_applied(crd)
    widget = registry.lookup("example.com", "v1alpha1", "widgets")
    assert widget is not None
    assert widget.is_custom
    assert widget.has_generation
    assert widget.namespaced
    assert (widget.kind, widget.singular) == ("Widget", "widget")
    assert widget.subresources == frozenset({"status"})
    assert registry.by_kind("example.com/v1alpha1", "Widget") is widget
    assert registry.strategy(widget).resource_type is widget

    registry.crd_removed(crd)
    assert registry.lookup("example.com", "v1alpha1", "widgets") is None
    assert registry.by_kind("example.com/v1alpha1", "Widget") is None


def test_crd_update_replaces_its_versions() -> None:
    registry = make_registry()
    crd = load_fixture("customresourcedefinition.json")["sent"]
    registry.crd_applied(crd)
    v1 = {**crd["spec"]["versions"][0], "name": "v1", "storage": False}
    unserved = {**crd["spec"]["versions"][0], "served": False}
    registry.crd_applied({**crd, "spec": {**crd["spec"], "versions": [unserved, v1]}})
    assert registry.lookup("example.com", "v1alpha1", "widgets") is None
    assert registry.lookup("example.com", "v1", "widgets") is not None


def test_concurrent_crd_changes_never_show_a_half_built_registry() -> None:
    registry = make_registry()
    crd = load_fixture("customresourcedefinition.json")["sent"]
    stop = threading.Event()
    problems: list[str] = []

    def churn() -> None:
        while not stop.is_set():
            registry.crd_applied(crd)
            registry.crd_removed(crd)

    def read() -> None:
        for _ in range(3000):
            widget = registry.lookup("example.com", "v1alpha1", "widgets")
            if widget is not None and registry.by_kind("v1", "ConfigMap") is None:
                problems.append("built-in type missing while a CRD type is served")
            types = registry.all_types()
            if len({(t.group, t.version, t.plural) for t in types}) != len(types):
                problems.append("duplicate types")

    writer = threading.Thread(target=churn)
    writer.start()
    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    stop.set()
    writer.join()
    assert problems == []
