"""The Thanos example's builders: the toolkit's invariants over generated parents, and examples.

Parents are drawn from the ``Thanos`` CRD's own structural schema (names that start with a
letter, as Services need), with and without served ServiceMonitors; the example tests pin what a
user of the operator relies on: which children a spec yields, their defaults, and that switching
a component off turns exactly its children into ABSENT stubs of the same identity.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import builders as b
from builders import names, schemas
from builders.specs import SpecFieldError, to_spec_dict
from builders.testing import (
    check_builders,
    dns_labels,
    from_schema,
    object_metas,
    spec_instances,
    with_inputs,
)
from examples.thanos import builders as thanos
from examples.thanos.crds import (
    API_VERSION,
    KIND,
    SERVICE_MONITOR_API_VERSION,
    SERVICE_MONITOR_CRD,
    SERVICE_MONITOR_KIND,
    STORAGE_IMMUTABLE,
    THANOS_CRD,
    ThanosSpec,
)
from examples.thanos.operator import crd_established, make_operator
from reconciler import AlreadyExistsError, InvalidError, KubernetesClient, NotFoundError
from tests.test_public_api import FACADES

PARENTS = from_schema(
    THANOS_CRD, metadata=object_metas(names=dns_labels(max_size=40, rfc1035=True))
)
SCHEMAS = {f"{SERVICE_MONITOR_API_VERSION}/{SERVICE_MONITOR_KIND}": SERVICE_MONITOR_CRD}


def parent(spec: dict[str, Any], name: str = "obs") -> dict[str, Any]:
    """A live-looking Thanos parent (with a uid, as the server gives it)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": "monitoring", "uid": "0b5e7d1c-0001"},
        "spec": spec,
    }


def built(
    obj: dict[str, Any], *, service_monitors: bool = False
) -> list[tuple[dict[str, Any], b.DesiredState]]:
    return b.run_builders(thanos.build(obj, service_monitors=service_monitors), parent=obj)


def states(obj: dict[str, Any], *, service_monitors: bool = False) -> dict[tuple[str, str], str]:
    return {
        (o["kind"], o["metadata"]["name"]): state.kind.name
        for o, state in built(obj, service_monitors=service_monitors)
    }


def child(obj: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    for o, _ in built(obj, service_monitors=True):
        if (o["kind"], o["metadata"]["name"]) == (kind, name):
            return o
    raise AssertionError(f"no {kind} {name}")


def identities(obj: dict[str, Any], *, service_monitors: bool) -> list[b.ObjectRef]:
    return [names.identity_of(o) for o, _ in built(obj, service_monitors=service_monitors)]


@pytest.mark.parametrize("service_monitors", [False, True])
def test_builders_keep_every_invariant(service_monitors: bool) -> None:
    check_builders(
        lambda p: thanos.build(p, service_monitors=service_monitors),
        PARENTS,
        managed_by=thanos.OPERATOR_NAME,
        crd_schemas=SCHEMAS,
        require_schemas=True,
        max_examples=40,
    )


@given(PARENTS, st.sampled_from(thanos.COMPONENTS), st.booleans())
def test_switching_a_component_keeps_every_identity(
    obj: dict[str, Any], kind: thanos.ComponentKind, service_monitors: bool
) -> None:
    on, off = copy.deepcopy(obj), copy.deepcopy(obj)
    on["spec"] = {**on.get("spec", {}), kind.key: on.get("spec", {}).get(kind.key) or {}}
    off["spec"] = {k: v for k, v in off.get("spec", {}).items() if k != kind.key}
    assert identities(on, service_monitors=service_monitors) == identities(
        off, service_monitors=service_monitors
    )
    switched = {
        names.identity_of(o)
        for (o, s_on), (_, s_off) in zip(
            built(on, service_monitors=service_monitors),
            built(off, service_monitors=service_monitors),
            strict=True,
        )
        if s_on != s_off
    }
    labels = {o["metadata"]["name"] for o, _ in built(on, service_monitors=service_monitors)}
    assert switched, f"switching {kind.key} changed nothing among {sorted(labels)}"
    assert {ref.name for ref in switched} == {
        b.child_name(obj["metadata"]["name"], kind.component)}


def test_every_block_yields_its_children() -> None:
    obj = parent({
        "query": {"ingress": {"host": "query.example.com"}},
        "queryFrontend": {},
        "storeGateway": {},
        "rule": {},
    })
    assert states(obj) == {
        ("Deployment", "obs-query"): "PRESENT",
        ("Service", "obs-query"): "PRESENT",
        ("Ingress", "obs-query"): "PRESENT",
        ("Deployment", "obs-query-frontend"): "PRESENT",
        ("Service", "obs-query-frontend"): "PRESENT",
        ("Ingress", "obs-query-frontend"): "ABSENT",
        ("StatefulSet", "obs-store-gateway"): "PRESENT",
        ("Service", "obs-store-gateway"): "PRESENT",
        ("StatefulSet", "obs-rule"): "PRESENT",
        ("Service", "obs-rule"): "PRESENT",
    }


def test_a_missing_block_means_absent_stubs() -> None:
    children = built(parent({"query": {}}), service_monitors=True)
    absent = [(o, s) for o, s in children if s.is_absent]
    assert {o["metadata"]["name"] for o, _ in absent} == {
        "obs-query-frontend", "obs-store-gateway", "obs-rule", "obs-query",
    }
    assert ("Ingress", "obs-query") in {(o["kind"], o["metadata"]["name"]) for o, _ in absent}
    for obj, _ in absent:  # identity only: nothing else is sent for a delete
        assert set(obj) == {"apiVersion", "kind", "metadata"}
        assert obj["metadata"] == {"name": obj["metadata"]["name"], "namespace": "monitoring"}


def test_defaults_fill_what_the_block_leaves_out() -> None:
    obj = parent({"query": {}, "storeGateway": {}})
    query = child(obj, "Deployment", "obs-query")
    container = query["spec"]["template"]["spec"]["containers"][0]
    assert query["spec"]["replicas"] == 1
    assert container["image"] == thanos.DEFAULT_IMAGE
    assert "--log.level=info" in container["args"]
    store = child(obj, "StatefulSet", "obs-store-gateway")
    claim = store["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert store["spec"]["serviceName"] == "obs-store-gateway"
    assert child(obj, "Service", "obs-store-gateway")["spec"]["clusterIP"] == "None"


def test_the_block_overrides_the_defaults() -> None:
    obj = parent({
        "image": "example.org/thanos:v0.35.0",
        "query": {"replicas": 3, "logLevel": "debug"},
        "rule": {"storage": "5Gi"},
    })
    query = child(obj, "Deployment", "obs-query")
    container = query["spec"]["template"]["spec"]["containers"][0]
    assert (query["spec"]["replicas"], container["image"]) == (3, "example.org/thanos:v0.35.0")
    assert "--log.level=debug" in container["args"]
    rule = child(obj, "StatefulSet", "obs-rule")
    assert rule["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "5Gi"
    }


def test_query_reaches_every_store_api_of_the_parent() -> None:
    args = child(parent({"query": {}, "storeGateway": {}}), "Deployment", "obs-query")[
        "spec"]["template"]["spec"]["containers"][0]["args"]
    endpoints = [a for a in args if a.startswith("--endpoint=")]
    assert endpoints == ["--endpoint=dnssrv+_grpc._tcp.obs-store-gateway.monitoring.svc"]
    frontend = child(parent({"query": {}, "queryFrontend": {}}), "Deployment",
                     "obs-query-frontend")["spec"]["template"]["spec"]["containers"][0]
    assert ("--query-frontend.downstream-url=http://obs-query.monitoring.svc:10902"
            in frontend["args"])


def test_the_ingress_routes_to_the_components_service() -> None:
    obj = parent({"queryFrontend": {"ingress": {"host": "thanos.example.com",
                                                "ingressClassName": "nginx"}}})
    ingress = child(obj, "Ingress", "obs-query-frontend")
    rule = ingress["spec"]["rules"][0]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert rule["host"] == "thanos.example.com"
    assert rule["http"]["paths"][0]["backend"]["service"] == {
        "name": "obs-query-frontend", "port": {"name": "http"}
    }


def test_object_storage_secret_is_mounted_into_the_stateful_components() -> None:
    obj = parent({"objectStorageSecret": "objstore", "storeGateway": {}, "query": {}})
    pod = child(obj, "StatefulSet", "obs-store-gateway")["spec"]["template"]["spec"]
    assert {"name": "objstore", "secret": {"secretName": "objstore"}} in pod["volumes"]
    assert f"--objstore.config-file={thanos.OBJSTORE_PATH}/objstore.yml" in (
        pod["containers"][0]["args"]
    )
    query_pod = child(obj, "Deployment", "obs-query")["spec"]["template"]["spec"]
    assert "volumes" not in query_pod


def test_service_monitors_only_when_served_and_wanted() -> None:
    obj = parent({"query": {}})
    assert not any(k == "ServiceMonitor" for k, _ in states(obj, service_monitors=False))
    served = states(obj, service_monitors=True)
    assert served[("ServiceMonitor", "obs-query")] == "PRESENT"
    assert served[("ServiceMonitor", "obs-rule")] == "ABSENT"
    opted_out = parent({"query": {}, "serviceMonitors": False})
    assert states(opted_out, service_monitors=True)[("ServiceMonitor", "obs-query")] == "ABSENT"
    monitor = child(obj, "ServiceMonitor", "obs-query")
    assert monitor["spec"]["selector"]["matchLabels"] == b.selector_labels(
        obj, component="query"
    )
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "30s"}
    ]


def test_the_demo_samples_validate_against_the_crd() -> None:
    from examples.thanos.demo import SAMPLES

    for sample in SAMPLES:
        schemas.validate_object(sample, crd_schema=THANOS_CRD)
    with pytest.raises(schemas.SchemaValidationError):
        schemas.validate_object(parent({"query": {"replicas": "two"}}), crd_schema=THANOS_CRD)


def test_the_operator_builds_with_its_declared_inputs() -> None:
    operator = make_operator()
    assert (operator.api_version, operator.kind) == (API_VERSION, KIND)
    assert operator.install == [THANOS_CRD]
    assert not operator.on_start  # the ServiceMonitor switch is an input, not a hook
    obj = parent({"query": {}, "storeGateway": {}, "objectStorageSecret": "blocks"})
    secret = b.ObjectRef(api_version="v1", kind="Secret", name="blocks",
                         namespace=obj["metadata"]["namespace"])
    assert operator.inputs is not None
    assert operator.inputs(obj) == [thanos.SERVICE_MONITORS_SERVED, secret]
    crd = {"metadata": {"name": "servicemonitors.monitoring.coreos.com"},
           "status": {"conditions": [{"type": "Established", "status": "True"}]}}

    def kinds(inputs: b.Inputs) -> dict[tuple[str, str], dict[str, Any]]:
        built = with_inputs(operator.build, inputs)(obj)  # a builder missing its input left out
        return {(o["kind"], o["metadata"]["name"]): o
                for o, state in b.run_builders(built, parent=obj) if not state.is_absent}

    missing = kinds(b.Inputs(missing=[thanos.SERVICE_MONITORS_SERVED, secret]))
    assert not any(o["kind"] == "ServiceMonitor" for o in missing.values())
    assert ("StatefulSet", "obs-store-gateway") not in missing  # only it waits for the Secret
    assert ("Service", "obs-store-gateway") in missing
    assert ("Deployment", "obs-query") in missing
    present = kinds(b.Inputs({thanos.SERVICE_MONITORS_SERVED: crd,
                              secret: {"data": {"objstore.yml": "YQ=="}}}))
    assert any(o["kind"] == "ServiceMonitor" for o in present.values())
    store = ("StatefulSet", "obs-store-gateway")

    def digest_of(children: dict[tuple[str, str], dict[str, Any]]) -> str:
        return str(children[store]["spec"]["template"]["metadata"]["annotations"][
            "optk.dev/inputs-digest"])

    digest = digest_of(present)
    rotated = kinds(b.Inputs({thanos.SERVICE_MONITORS_SERVED: crd,
                              secret: {"data": {"objstore.yml": "Yg=="}}}))
    assert digest_of(rotated) != digest
    kind = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}
    established = {**kind, "metadata": {"name": "x"}, "status": {"conditions": [
        {"type": "Established", "status": "True"}]}}
    assert crd_established(established)
    deleting = {**established,
                "metadata": {"name": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert not crd_established(deleting)
    assert not crd_established({**kind, "metadata": {"name": "x"}})
    assert not crd_established(None)


# the public modules tests/test_public_api.py checks, and the real control plane harness
PUBLIC_FACADES = set(FACADES) | {"reconciler.envtest"}


def test_the_example_imports_only_public_facades() -> None:
    """DESIGN.md section 1: the example is a user's code; it never reaches a private module."""
    import ast
    from pathlib import Path

    import examples.thanos

    toolkit = ("builders", "objectmatcher", "reconciler")
    for path in sorted(Path(examples.thanos.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            modules = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
            for name in modules:
                if name.split(".")[0] in toolkit:
                    assert name in PUBLIC_FACADES, f"{path.name} imports {name}"


HANDWRITTEN = Path(__file__).with_name("thanos_spec_schema_handwritten.json")


def test_the_generated_schema_is_the_handwritten_one_plus_a_description() -> None:
    """THANOS_CRD was hand-written until ThanosSpec generated it; the spec schema is the same
    (same fields, types, patterns, ranges, enums, descriptions, no server defaults) but for the
    spec's own description, from ThanosSpec's docstring. The CRD also gained printer columns."""
    version = THANOS_CRD["spec"]["versions"][0]
    generated = copy.deepcopy(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    assert generated.pop("description") == (
        "A Thanos deployment: each component block present switches that component on.")
    # Added since (issue 31): the stateful blocks' storage is immutable, by a CEL rule.
    for block in ("storeGateway", "rule"):
        schema = generated["properties"][block]
        assert schema.pop("x-kubernetes-validations") == [STORAGE_IMMUTABLE.to_dict()]
        assert schema["properties"]["storage"].pop("maxLength") == 8
    assert generated == json.loads(HANDWRITTEN.read_text())
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Query", "Ready", "Age"]
    assert version["subresources"] == {"status": {}}


def test_a_spec_the_class_rejects_fails_naming_the_parent_and_field() -> None:
    with pytest.raises(SpecFieldError) as caught:
        thanos.build(parent({"query": {"replicas": 21}}))
    assert caught.value.field == "spec.query.replicas"
    assert str(caught.value).startswith("Thanos monitoring/obs: invalid spec.query.replicas: 21")


@given(spec_instances(ThanosSpec))
def test_typed_specs_convert_both_ways(spec: ThanosSpec) -> None:
    obj = parent(to_spec_dict(spec))
    assert thanos.spec(obj) == spec
    schemas.validate_object(obj, crd_schema=THANOS_CRD)


@pytest.mark.both_servers
def test_the_servers_accept_the_generated_crd_and_the_samples(
    kube_api: Any, kube_namespace: str
) -> None:
    from examples.thanos.demo import SAMPLES

    client = KubernetesClient(kube_api.api_client())
    deadline = time.monotonic() + 60
    established = False
    while not established and time.monotonic() < deadline:
        # installed by another test of the session, or being deleted by one (an Observer's
        # teardown: its CRD goes once its custom resources are cleaned up), or not there
        try:
            crd: dict[str, Any] | None = client.get(
                "apiextensions.k8s.io/v1", "CustomResourceDefinition",
                THANOS_CRD["metadata"]["name"])
        except NotFoundError:
            crd = None
            with contextlib.suppress(AlreadyExistsError):
                client.create(THANOS_CRD)
        # a real server serves the kind once it is Established (and its discovery says so a
        # moment later)
        established = crd is not None and crd_established(crd) and client.is_served(
            THANOS_CRD["spec"]["group"] + "/" + THANOS_CRD["spec"]["versions"][0]["name"],
            THANOS_CRD["spec"]["names"]["kind"])
        if not established:
            time.sleep(0.05)
    assert established, "the Thanos CRD was not Established within 60 s"
    for sample in SAMPLES:
        sent = {**sample, "metadata": {**sample["metadata"], "namespace": kube_namespace}}
        stored = client.create(sent, dry_run=True)
        assert stored["spec"] == sample["spec"]  # no server defaults: the operator's own
        assert thanos.spec(stored) == thanos.spec(sample)
    bad = parent({"query": {"replicas": 21}})
    bad["metadata"] = {"name": "bad", "namespace": kube_namespace}
    with pytest.raises(InvalidError):
        client.create(bad, dry_run=True)
