"""Every ``sent`` object of the recordings, stored by the embedded server, equals ``returned``.

Compared whole, ignoring only uid, timestamps, resourceVersion and managedFields (and the
allocated ClusterIP's value, which depends on allocation order). Two paths: through the kind
strategies directly (always), and through the running server over HTTPS with the official
client (when ``reconciler.embedded.EmbeddedApiServer`` is available).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._kinds import ServerContext
from reconciler.embedded._registry import Registry, make_registry
from tests.conftest import load_fixture, object_fixture_names

OBJECT_FIXTURES = object_fixture_names()
RECORDED_NAMESPACE = "fixtures"
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_IGNORED_KEYS = {"uid", "resourceVersion", "managedFields", "creationTimestamp"}
# Labels whose value is the object's own uid (a Job's generated selector and labels).
_UID_VALUED = {"controller-uid"}


def comparable(obj: Any, *, namespace: str = RECORDED_NAMESPACE) -> Any:
    """``obj`` without the fields that differ between any two servers."""
    if isinstance(obj, dict):
        result = {k: "<uid>" if k in _UID_VALUED else comparable(v, namespace=namespace)
                  for k, v in obj.items() if k not in _IGNORED_KEYS}
        meta = result.get("metadata")
        if isinstance(meta, dict) and meta.get("namespace") == namespace:
            meta["namespace"] = "<namespace>"
        spec = result.get("spec")
        if result.get("kind") == "Service" and isinstance(spec, dict):
            ips = spec.get("clusterIPs") or []
            if spec.get("clusterIP") not in (None, "None") and ips == [spec.get("clusterIP")]:
                spec["clusterIP"] = spec["clusterIPs"] = "<allocated>"
        return result
    if isinstance(obj, list):
        return [comparable(item, namespace=namespace) for item in obj]
    if isinstance(obj, str) and _TIMESTAMP.match(obj):
        return "<time>"
    return obj


def test_comparable_ignores_only_server_identity() -> None:
    returned = load_fixture("service-clusterip.json")["returned"]
    changed = copy.deepcopy(returned)
    changed["spec"]["sessionAffinity"] = "ClientIP"
    assert comparable(returned) != comparable(changed)
    renumbered = copy.deepcopy(returned)
    renumbered["metadata"]["resourceVersion"] = "1"
    renumbered["spec"]["clusterIP"] = renumbered["spec"]["clusterIPs"][0] = "10.0.0.9"
    assert comparable(returned) == comparable(renumbered)


class StrategyServer:
    """What the server core does around the strategies on create, reduced to the essentials."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.ctx = ServerContext()

    def create(self, sent: dict[str, Any], namespace: str) -> dict[str, Any]:
        obj = copy.deepcopy(sent)
        rt = self.registry.by_kind(obj["apiVersion"], obj["kind"])
        assert rt is not None, f"{obj['apiVersion']} {obj['kind']} is not served"
        strategy = self.registry.strategy(rt)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            meta["namespace"] = namespace
        meta["uid"] = str(uuid.uuid4())
        strategy.prepare_create(obj, self.ctx)
        strategy.validate_create(obj)
        if rt.has_generation:
            obj["metadata"]["generation"] = 1
        if rt.kind == "CustomResourceDefinition":
            self.registry.crd_applied(obj)
        return obj


@pytest.fixture(scope="module")
def strategy_server() -> StrategyServer:
    return StrategyServer(make_registry())


@pytest.mark.parametrize("name", OBJECT_FIXTURES)
def test_strategies_store_what_a_real_server_returns(
    strategy_server: StrategyServer, name: str
) -> None:
    recording = load_fixture(name)
    stored = strategy_server.create(recording["sent"], RECORDED_NAMESPACE)
    assert comparable(stored) == comparable(recording["returned"])


def test_a_job_without_labels_gets_its_templates_labels_as_recorded(
    strategy_server: StrategyServer,
) -> None:
    """The held-back recording (issue 31): a real server copies the template's labels, with the
    generated ``controller-uid`` and ``job-name``, to a Job created without labels."""
    recording = load_fixture("job.json")
    assert "labels" not in recording["sent"]["metadata"]
    stored = strategy_server.create(recording["sent"], RECORDED_NAMESPACE)
    for obj in (stored, recording["returned"]):
        meta = obj["metadata"]
        assert meta["labels"] == {"app": "once", "controller-uid": meta["uid"], "job-name": "once"}
        assert obj["spec"]["template"]["metadata"]["labels"] == meta["labels"]
        assert obj["spec"]["selector"] == {"matchLabels": {"controller-uid": meta["uid"]}}


# --- through the running server --------------------------------------------------------------


@pytest.fixture(scope="module")
def live_api() -> Iterator[Any]:
    with EmbeddedApiServer() as server:
        yield server


class Raw:
    """Requests exactly as the recordings were made (path, method, content type, JSON body)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.pool = urllib3.PoolManager(ca_certs=str(server.ca_cert_path))

    def send(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.server.token}", "Content-Type": content_type}
        data = None if body is None else json.dumps(body).encode()
        response = self.pool.request(method, self.server.url + path, body=data, headers=headers)
        try:
            return response.status, json.loads(response.data)
        except ValueError:  # the plain-text 404 of an unknown path
            return response.status, response.data.decode()


def _create_namespace(api_client: Any) -> str:
    from kubernetes import client

    name = f"conformance-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": name}})
    return name


def test_server_stores_what_a_real_server_returns(live_api: Any) -> None:
    from kubernetes import dynamic

    api_client = live_api.api_client()
    dyn = dynamic.DynamicClient(api_client)
    namespace = _create_namespace(api_client)
    mismatches = {}
    for name in OBJECT_FIXTURES:
        recording = load_fixture(name)
        sent = recording["sent"]
        if name == "customresource.json":
            dyn.resources.invalidate_cache()
        resource = dyn.resources.get(api_version=sent["apiVersion"], kind=sent["kind"])
        body = copy.deepcopy(sent)
        kwargs = {"namespace": namespace} if resource.namespaced else {}
        resource.create(body=body, **kwargs)
        stored = resource.get(name=sent["metadata"]["name"], **kwargs).to_dict()
        if comparable(stored, namespace=namespace) != comparable(recording["returned"]):
            mismatches[name] = (stored, recording["returned"])
    assert not mismatches, f"differ from the recordings: {sorted(mismatches)}"


# --- behaviour recordings replayed through the server -----------------------------------------


@pytest.fixture(scope="module")
def recorded_namespace(live_api: Any) -> Raw:
    """The recordings' namespace ``fixtures`` on the module's own server, for verbatim paths."""
    raw = Raw(live_api)
    status, _ = raw.send("POST", "/api/v1/namespaces", {"metadata": {"name": RECORDED_NAMESPACE}})
    assert status == 201
    return raw


def _bare(obj: dict[str, Any]) -> dict[str, Any]:
    """A recorded object as a client would send it: no server metadata, no status."""
    body = copy.deepcopy(obj)
    body.pop("status", None)
    body["metadata"] = {k: v for k, v in body["metadata"].items()
                        if k in ("name", "labels", "annotations")}
    return body


def _create(raw: Raw, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, created = raw.send("POST", path, body)
    assert status == 201, created
    assert isinstance(created, dict)
    return created


def test_server_replays_generation_json(recorded_namespace: Raw) -> None:
    raw = recorded_namespace
    steps = load_fixture("generation.json")["deployment"]
    put = next(s for s in steps if s.get("request", {}).get("method") == "PUT")
    body = _bare(put["request"]["body"])
    body["metadata"] = {"name": "gen-demo", "labels": {"app": "gen"}}
    body["spec"]["replicas"] = 1
    del body["spec"]["template"]["metadata"]["annotations"]
    current = _create(raw, "/apis/apps/v1/namespaces/fixtures/deployments", body)
    assert current["metadata"]["generation"] == steps[0]["generation"]
    assert current["status"] == steps[0]["status"]
    recorded_rv = steps[0]["resourceVersion"]
    for step in steps[1:]:
        request = step["request"]
        sent = copy.deepcopy(request["body"])
        if request["method"] == "PUT":  # the recorded identity is not ours
            sent["metadata"]["uid"] = current["metadata"]["uid"]
            sent["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            sent["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"]
        status, got = raw.send(request["method"], request["path"], sent, request["contentType"])
        assert status == step["httpStatus"], (step["action"], got)
        observed = {
            "generation": got["metadata"]["generation"],
            "status": got.get("status"),
            "spec.replicas": got["spec"]["replicas"],
            "labels": got["metadata"].get("labels"),
            "annotations": got["metadata"].get("annotations"),
            "new resourceVersion": (
                got["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]),
        }
        expected = {key: step[key] for key in observed if key in step}
        expected["new resourceVersion"] = step["resourceVersion"] != recorded_rv
        assert observed == expected, step["action"]
        current, recorded_rv = got, step["resourceVersion"]


def _immutable_setup(raw: Raw) -> dict[str, dict[str, Any]]:
    steps = load_fixture("immutable-fields.json")["steps"]
    sts = _bare(next(s for s in steps if s["note"] == "allowed StatefulSet change")["response"])
    sts["spec"]["replicas"] = 1
    del sts["spec"]["template"]["metadata"]["annotations"]
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "imm-dep"},
        "spec": {
            "selector": {"matchLabels": {"app": "imm"}},
            "template": {"metadata": {"labels": {"app": "imm", "v": "1"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
        },
    }
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "imm-svc"},
               "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "imm-cm"},
                 "immutable": True, "data": {"a": "1"}}
    return {
        "deployment": _create(raw, "/apis/apps/v1/namespaces/fixtures/deployments", deployment),
        "statefulset": _create(raw, "/apis/apps/v1/namespaces/fixtures/statefulsets", sts),
        "service": _create(raw, "/api/v1/namespaces/fixtures/services", service),
        "configmap": _create(raw, "/api/v1/namespaces/fixtures/configmaps", configmap),
    }


def test_server_replays_immutable_fields_json(recorded_namespace: Raw) -> None:
    raw = recorded_namespace
    created = _immutable_setup(raw)
    cluster_ip = created["service"]["spec"]["clusterIP"]
    for step in load_fixture("immutable-fields.json")["steps"]:
        request = step["request"]
        status, got = raw.send(request["method"], request["path"], request["body"],
                               request["contentType"])
        assert status == step["status"], (step["note"], got)
        recorded = step["response"]
        if status >= 400:
            keys = ("reason", "message", "details")
            assert {k: got.get(k) for k in keys} == {k: recorded.get(k) for k in keys}, step["note"]
        elif "clusterIPBefore" in recorded:  # the PUT without clusterIP keeps ours
            expected = copy.deepcopy(recorded["spec"])
            expected["clusterIP"], expected["clusterIPs"] = cluster_ip, [cluster_ip]
            assert got["spec"] == expected
        else:
            assert comparable(got) == comparable(recorded), step["note"]


@pytest.mark.parametrize(
    "note",
    ["422 Invalid: details.causes", "no name and no generateName", "invalid DNS-1123 name"],
)
def test_server_answers_invalid_creates_as_recorded(recorded_namespace: Raw, note: str) -> None:
    step = next(s for s in load_fixture("errors.json")["steps"] if s["note"].startswith(note))
    request = step["request"]
    status, got = recorded_namespace.send("POST", request["path"], request["body"])
    assert (status, got) == (step["status"], step["response"])


_CR_REQUESTS: dict[str, tuple[str, str, Any]] = {
    # generation.json records the outcomes of these actions; the requests follow their names.
    "merge-patch spec.size=5": ("PATCH", "widgets/w1", {"spec": {"size": 5}}),
    "merge-patch metadata.labels": ("PATCH", "widgets/w1", {"metadata": {"labels": {"a": "b"}}}),
    "merge-patch status on main resource (ignored, status subresource enabled)":
        ("PATCH", "widgets/w1", {"status": {"ready": True}}),
    "merge-patch /status": ("PATCH", "widgets/w1/status", {"status": {"ready": True}}),
    "Gadget (no status subresource) create":
        ("POST", "gadgets", {"apiVersion": "example.com/v1", "kind": "Gadget",
                             "metadata": {"name": "g1"}, "spec": {"x": 0}}),
    "merge-patch status.phase (no status subresource => bumps)":
        ("PATCH", "gadgets/g1", {"status": {"phase": "Ready"}}),
    "merge-patch spec.x": ("PATCH", "gadgets/g1", {"spec": {"x": 1}}),
    "merge-patch metadata.annotations":
        ("PATCH", "gadgets/g1", {"metadata": {"annotations": {"a": "b"}}}),
    "merge-patch top-level unknown field": ("PATCH", "gadgets/g1", {"extra": 1}),
    "GET gadgets/g1/status (no status subresource)": ("GET", "gadgets/g1/status", None),
}


def _gadget_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Gadget", "plural": "gadgets"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def test_server_replays_custom_resource_generation(recorded_namespace: Raw) -> None:
    raw = recorded_namespace
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in (load_fixture("customresourcedefinition.json")["sent"], _gadget_crd()):
        status, body = raw.send("POST", crds, crd)
        assert status in (201, 409), body  # the widgets CRD may be there from another test
    widget = load_fixture("customresource.json")["sent"]
    current = _create(raw, "/apis/example.com/v1alpha1/namespaces/fixtures/widgets", widget)
    steps = load_fixture("generation.json")["customResources"]
    assert current["metadata"]["generation"] == steps[0]["generation"]
    recorded_rv = None
    for step in steps[1:]:
        method, where, body = _CR_REQUESTS[step["action"]]
        version = "v1alpha1" if where.startswith("widgets") else "v1"
        path = f"/apis/example.com/{version}/namespaces/fixtures/{where}"
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        status, got = raw.send(method, path, body, content_type)
        assert status == step["httpStatus"], (step["action"], got)
        if "response" in step:
            assert got == step["response"]
            continue
        assert got["metadata"]["generation"] == step["generation"], step["action"]
        for key in ("spec", "status"):
            if key in step:
                assert got.get(key) == step[key], step["action"]
        if method == "PATCH" and recorded_rv is not None:
            changed = got["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]
            assert changed == (step["resourceVersion"] != recorded_rv), step["action"]
        current, recorded_rv = got, step.get("resourceVersion")


def test_server_refuses_a_patch_with_a_wrong_type(recorded_namespace: Raw) -> None:
    # patch-types.json "type error in a patch": 422 Invalid (the real message quotes the whole
    # patched object; ours names the field).
    raw = recorded_namespace
    step = next(s for s in load_fixture("patch-types.json")["steps"]
                if s["note"] == "type error in a patch")
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "patch-demo"},
        "spec": {"selector": {"matchLabels": {"app": "p"}},
                 "template": {"metadata": {"labels": {"app": "p"}},
                              "spec": {"containers": [{"name": "b", "image": "busybox:1.36"}]}}},
    }
    before = _create(raw, "/apis/apps/v1/namespaces/fixtures/deployments", deployment)
    request = step["request"]
    status, got = raw.send("PATCH", request["path"], request["body"], request["contentType"])
    assert (status, got["reason"]) == (step["status"], step["response"]["reason"])
    assert got["details"]["causes"][0]["field"] == "spec.replicas"
    after = raw.send("GET", request["path"])[1]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
