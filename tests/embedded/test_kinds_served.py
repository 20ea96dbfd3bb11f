"""Every built-in type: a minimal valid object, defaulted by its strategy, is a valid 1.25 object;
and through the running server with the official client it is created, read back with its
defaults, listed, patched and deleted."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import dynamic

from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._defaulting import initial_status
from reconciler.embedded._kinds import Invalid, ServerContext
from reconciler.embedded._registry import BUILTIN_TYPES, make_registry
from reconciler.embedded._statuses import ApiStatusError
from tests.conftest import load_fixture

_TEMPLATE = {
    "metadata": {"labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
}
_SELECTOR = {"matchLabels": {"app": "x"}}

MINIMAL: dict[str, dict[str, Any]] = {
    "ConfigMap": {"data": {"a": "1"}},
    "Event": {"involvedObject": {"kind": "ConfigMap", "name": "c"}, "reason": "Tested",
              "message": "m", "type": "Normal"},
    "Namespace": {},
    "PersistentVolumeClaim": {"spec": {"accessModes": ["ReadWriteOnce"],
                                       "resources": {"requests": {"storage": "1Gi"}}}},
    "Pod": {"spec": copy.deepcopy(_TEMPLATE["spec"])},
    "ResourceQuota": {"spec": {"hard": {"pods": "10", "requests.cpu": "2"}}},
    "Secret": {"stringData": {"k": "v"}},
    "ServiceAccount": {},
    "Service": {"spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}},
    "DaemonSet": {"spec": {"selector": _SELECTOR, "template": _TEMPLATE}},
    "Deployment": {"spec": {"selector": _SELECTOR, "template": _TEMPLATE}},
    "ReplicaSet": {"spec": {"selector": _SELECTOR, "template": _TEMPLATE}},
    "StatefulSet": {"spec": {"selector": _SELECTOR, "template": _TEMPLATE,
                             "serviceName": "s"}},
    "HorizontalPodAutoscaler": {"spec": {"maxReplicas": 3, "scaleTargetRef": {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}},
    "Job": {"spec": {"template": {"spec": {**_TEMPLATE["spec"], "restartPolicy": "Never"}}}},
    "Lease": {"spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}},
    "Ingress": {"spec": {"rules": [{"http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}},
    "PodDisruptionBudget": {"spec": {"minAvailable": 1, "selector": _SELECTOR}},
    "ClusterRoleBinding": {"roleRef": {"kind": "ClusterRole", "name": "r"},
                           "subjects": [{"kind": "User", "name": "alice"}]},
    "ClusterRole": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "RoleBinding": {"roleRef": {"kind": "Role", "name": "r"},
                    "subjects": [{"kind": "Group", "name": "devs"}]},
    "Role": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "CustomResourceDefinition": {},  # built per test: its name must be <plural>.<group>
    "MutatingWebhookConfiguration": {"webhooks": []},
    "ValidatingWebhookConfiguration": {"webhooks": []},
}
EVENTS_EVENT = {
    "eventTime": "2026-11-22T01:00:00.000000Z", "type": "Normal", "reason": "Tested",
    "action": "Test", "reportingController": "optk.dev/tests", "reportingInstance": "t-1",
    "regarding": {"kind": "ConfigMap", "name": "c"}, "note": "n",
}


def minimal(rt: Any, suffix: str) -> dict[str, Any]:
    """A minimal valid body of ``rt`` (the two Event APIs differ)."""
    if rt.kind == "CustomResourceDefinition":
        return _crd(suffix)
    if rt.group == "events.k8s.io":
        return copy.deepcopy(EVENTS_EVENT)
    return copy.deepcopy(MINIMAL[rt.kind])


def _crd(suffix: str) -> dict[str, Any]:
    return {"spec": {
        "group": f"g{suffix}.example.com", "scope": "Namespaced",
        "names": {"kind": "Thing", "plural": "things"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object"}}}],
    }}


@pytest.fixture(scope="module")
def client() -> Iterator[dynamic.DynamicClient]:
    with EmbeddedApiServer() as server, server.api_client() as api_client:
        yield dynamic.DynamicClient(api_client)


def test_every_builtin_kind_has_a_minimal_object() -> None:
    assert {rt.kind for rt in BUILTIN_TYPES} == set(MINIMAL)


@pytest.mark.parametrize("rt", BUILTIN_TYPES, ids=lambda rt: rt.api_version + "/" + rt.kind)
def test_builtin_kind_round_trip(client: dynamic.DynamicClient, rt: Any) -> None:
    suffix = uuid.uuid4().hex[:8]
    is_crd = rt.kind == "CustomResourceDefinition"
    name = f"things.g{suffix}.example.com" if is_crd else f"x{suffix}"
    body = minimal(rt, suffix)
    body.update({"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": name},
                 "status": {"sent": "by the client"}})
    resource = client.resources.get(api_version=rt.api_version, kind=rt.kind)
    scope: dict[str, str] = {}
    if rt.namespaced:
        namespace = f"ns-{suffix}"
        client.resources.get(api_version="v1", kind="Namespace").create(
            body={"metadata": {"name": namespace}})
        scope = {"namespace": namespace}
        if "involvedObject" in body:  # a v1 Event's object is in the Event's namespace
            body["involvedObject"]["namespace"] = namespace

    created = resource.create(body=body, **scope).to_dict()
    assert created["metadata"]["name"] == name
    assert ("generation" in created["metadata"]) is rt.has_generation
    initial = initial_status(rt.group, rt.kind)
    if initial is not None:  # what was sent is replaced by the kind's initial status
        assert created.get("status", {}) == initial

    fetched = resource.get(name=name, **scope).to_dict()
    assert fetched == created
    listed = resource.get(**scope).to_dict()
    assert name in [item["metadata"]["name"] for item in listed["items"]]

    patched = resource.patch(
        name=name, body={"metadata": {"labels": {"touched": "yes"}}},
        content_type="application/merge-patch+json", **scope,
    ).to_dict()
    assert patched["metadata"]["labels"]["touched"] == "yes"
    assert patched.get("metadata", {}).get("generation") == created["metadata"].get("generation")

    resource.delete(name=name, **scope)


@pytest.mark.parametrize("rt", BUILTIN_TYPES, ids=lambda rt: rt.api_version + "/" + rt.kind)
def test_defaulted_minimal_objects_are_valid_1_25_objects(rt: Any) -> None:
    # Everything the strategies add has the type and shape the 1.25 schema prescribes, and
    # nothing of the minimal bodies is an unknown field.
    registry = make_registry()
    strategy = registry.strategy(rt)
    is_crd = rt.kind == "CustomResourceDefinition"
    body = minimal(rt, "x")
    body.update({"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {
        "name": "things.gx.example.com" if is_crd else "n", "uid": "u"}})
    if rt.namespaced:
        body["metadata"]["namespace"] = "ns"
        if "involvedObject" in body:
            body["involvedObject"]["namespace"] = "ns"
    assert strategy.unknown_fields(body) == []
    strategy.prepare_create(body, ServerContext())
    strategy.validate_create(body)
    kubernetes_validate.validate(body, "1.25", strict=True)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70000) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(
        ["spec", "metadata", "status", "name", "ports", "containers", "selector", "template",
         "replicas", "type", "data", "clusterIP", "labels", "port", "nodePort", "roleRef"]),
        children, max_size=4),
    max_leaves=15,
)


def _widget_type() -> Any:
    registry = make_registry()
    registry.crd_applied(load_fixture("customresourcedefinition.json")["sent"])
    return registry, registry.lookup("example.com", "v1alpha1", "widgets")


WIDGETS, WIDGET = _widget_type()


@given(rt=st.sampled_from([*BUILTIN_TYPES, WIDGET]), garbage=st.dictionaries(
    st.sampled_from(["spec", "metadata", "status", "data", "roleRef", "subjects", "rules"]),
    _json_values, max_size=3))
@settings(max_examples=150)
def test_strategies_refuse_garbage_with_invalid_and_never_crash(
    rt: Any, garbage: dict[str, Any]
) -> None:
    # Whatever the body, a strategy answers with an object or Invalid (a 422), never a 500.
    strategy = WIDGETS.strategy(rt)
    base = {"spec": {"color": "red"}} if rt is WIDGET else minimal(rt, "x")
    body = {**base, **garbage, "apiVersion": rt.api_version, "kind": rt.kind}
    ctx = ServerContext()
    try:
        strategy.prepare_create(body, ctx)
        strategy.validate_create(body)
    except Invalid:
        return
    update = {**copy.deepcopy(body), **garbage}
    try:
        strategy.prepare_update(body, update, ctx)
        strategy.validate_update(body, update)
        strategy.spec_changed(body, update)
    except Invalid:
        pass
    strategy.prepare_status_update(body, copy.deepcopy(update))


@given(rt=st.sampled_from([WIDGET, *BUILTIN_TYPES[:3]]), metadata=st.dictionaries(
    st.sampled_from(["name", "labels", "annotations", "finalizers", "ownerReferences", "uid",
                     "generateName", "junk"]),
    _json_values, max_size=4) | _json_values)
@settings(max_examples=150)
def test_any_metadata_is_refused_with_invalid_or_accepted(rt: Any, metadata: Any) -> None:
    strategy = WIDGETS.strategy(rt)
    base = {"spec": {"color": "red"}} if rt is WIDGET else minimal(rt, "x")
    body = {**base, "metadata": metadata, "apiVersion": rt.api_version, "kind": rt.kind}
    try:
        strategy.prepare_create(body, ServerContext())
        strategy.validate_create(body)
    except Invalid:
        return
    assert "junk" not in body["metadata"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[Any, dict[str, Any]]:
    rt = draw(st.sampled_from([*BUILTIN_TYPES, WIDGET]))
    body = {"spec": {"color": "red"}} if rt is WIDGET else minimal(rt, "x")
    body = {**body, "metadata": {"name": "things.gx.example.com"
                                 if rt.kind == "CustomResourceDefinition" else "n"}}
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(body)
        if not paths:
            break
        *parent_path, last = draw(st.sampled_from(paths))
        parent: Any = body
        for step in parent_path:
            parent = parent[step]
        parent[last] = draw(_mutation(parent[last]))
    return rt, body


def _mutation(value: Any) -> st.SearchStrategy[Any]:
    """Mostly values of the same JSON type (which get past decoding), sometimes anything."""
    same: st.SearchStrategy[Any]
    if isinstance(value, bool):
        same = st.booleans()
    elif isinstance(value, int):
        same = st.integers(-2, 70000)
    elif isinstance(value, str):
        same = st.sampled_from(["", "-", "A_b", "x" * 70, "None", "/", "10.0.0.2", value])
    elif isinstance(value, list):
        same = st.just([]) | st.just(value * 2) | st.just(value[:-1])
    elif isinstance(value, dict):
        same = st.just({}) | st.sampled_from(list(value) or [""]).map(
            lambda key: {k: v for k, v in value.items() if k != key})
    else:
        same = st.none()
    return st.one_of(same, same, same, st.none(), _json_values)


@given(case=_mutated())
@settings(max_examples=200)
def test_mutated_valid_objects_give_an_object_or_invalid(case: tuple[Any, dict[str, Any]]) -> None:
    rt, body = case
    strategy = WIDGETS.strategy(rt)
    body = {**body, "apiVersion": rt.api_version, "kind": rt.kind}
    ctx = ServerContext()
    try:
        strategy.prepare_create(body, ctx)
        strategy.validate_create(body)
        update = copy.deepcopy(body)
        strategy.prepare_update(body, update, ctx)
        strategy.validate_update(body, update)
        assert update == body  # an identical update changes nothing: a no-op for the core
        assert not strategy.spec_changed(body, update)
    except Invalid:
        return
    except ApiStatusError as exc:  # what the Go types cannot decode (a malformed quantity)
        if exc.code != 400:
            raise
        return
