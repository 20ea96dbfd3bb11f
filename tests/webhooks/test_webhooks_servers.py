"""The Thanos example's webhooks, called by both servers on 127.0.0.1 over TLS.

For each server (a real control plane, kube-apiserver 1.25; an embedded API server of the
module's own) one webhook server: the versioned Thanos CRD is installed with the conversion
webhook and the CA injected, and the validating and mutating configurations point at the same
webhook server. Objects created at v1alpha1 read back at v1alpha2 and the reverse (the webhook
server's call counts show the conversions: a real API server's audit log does not record
conversion calls); an invalid object is refused with the webhook's message; defaulting writes
the Ingress class; the CEL rule refuses a storage change; the operator (watching v1alpha1)
reconciles parents of both versions and then writes nothing. The embedded server calls the
conversion and admission webhooks too and evaluates the CEL rules (cel-python); kube-apiserver's
audit log and its RBAC (the operator's own rights) are checked on the real server only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import kubernetes
import pytest
import yaml

from examples.thanos.builders import OPERATOR_NAME
from examples.thanos.builders import build as thanos_build
from examples.thanos.crds import (
    API_VERSION,
    API_VERSION_2,
    DEFAULT_INGRESS_CLASS,
    KIND,
    THANOS_VERSIONED_CRD,
    THANOS_VERSIONS,
)
from examples.thanos.operator import (
    PRUNE,
    WEBHOOKS,
    samples,
    versioned_operator,
)
from reconciler import (
    ApiError,
    InvalidError,
    KubernetesClient,
    NotFoundError,
    Operator,
    Policies,
)
from reconciler._commands.manifests import ManifestOptions, manifests
from reconciler._commands.rbac import operator_facts
from reconciler.clocks import RealClock
from reconciler.embedded import EmbeddedApiServer
from reconciler.envtest import ControlPlane
from reconciler.testing import wait_idle
from reconciler.webhooks import (
    WebhookCertificates,
    WebhookEndpoint,
    WebhookServer,
    inject,
    webhook_configurations,
    with_conversion_webhook,
)

_NS = "webhooks"
_OPERATOR_NS = "thanos-system"
_CRD_NAME = "thanoses.monitoring.optk.dev"
_WRITES = ("create", "update", "patch", "delete", "deletecollection")


@attrs.frozen(kw_only=True)
class Installed:
    real: bool
    api_client: Callable[[], Any]
    writes: Callable[[], dict[str, int]]  # write requests since the last reset
    reset: Callable[[], None]
    server: WebhookServer
    client: KubernetesClient
    plane: ControlPlane | None = None


def _until(what: str, check: Callable[[], bool], *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


def _served(client: KubernetesClient) -> bool:
    try:
        for api_version in (API_VERSION, API_VERSION_2):
            client.list(api_version, KIND, namespace=_NS)
    except (ApiError, LookupError):
        return False
    return True


def _install(api_client: Callable[[], Any], server: WebhookServer,
             certificates: WebhookCertificates) -> KubernetesClient:
    endpoint = WebhookEndpoint(ca_pem=certificates.ca_pem, url=server.url)
    client = KubernetesClient(api_client())
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _NS}})
    client.create(with_conversion_webhook(THANOS_VERSIONED_CRD, endpoint))
    for config in webhook_configurations(
            [THANOS_VERSIONS], name="thanos-webhooks", endpoint=endpoint,
            plurals={(THANOS_VERSIONS.group, KIND): "thanoses"}):
        client.create(config)
    _until("both versions served", lambda: _served(KubernetesClient(api_client())))
    return KubernetesClient(api_client())


def _writes(counts: Mapping[str, int], since: Mapping[str, int]) -> dict[str, int]:
    return {verb: counts.get(verb, 0) - since.get(verb, 0) for verb in _WRITES}


@pytest.fixture(scope="module", params=["embedded", "real"])
def installed(request: pytest.FixtureRequest) -> Iterator[Installed]:
    certificates = WebhookCertificates.generate(["127.0.0.1"])
    with contextlib.ExitStack() as stack:
        if request.param == "real":
            plane: ControlPlane = stack.enter_context(
                ControlPlane(request.getfixturevalue("kube_assets")))
            api_client = plane.api_client
            reset = plane.reset_request_counts

            def writes() -> dict[str, int]:
                return _writes(plane.request_counts(), {})
        else:
            embedded = stack.enter_context(EmbeddedApiServer())
            api_client = embedded.api_client
            marks: list[dict[str, int]] = [embedded.request_counts()]

            def reset() -> None:
                marks.append(embedded.request_counts())

            def writes() -> dict[str, int]:
                return _writes(embedded.request_counts(), marks[-1])
        server = stack.enter_context(WebhookServer([THANOS_VERSIONS], certificates=certificates))
        client = _install(api_client, server, certificates)
        yield Installed(real=request.param == "real", api_client=api_client, writes=writes,
                        reset=reset, server=server, client=client,
                        plane=plane if request.param == "real" else None)


def _thanos(api_version: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": KIND,
            "metadata": {"name": name, "namespace": _NS}, "spec": spec}


def _create(client: KubernetesClient, obj: dict[str, Any]) -> dict[str, Any]:
    """Create, retrying while the admission webhooks' configuration is not loaded yet."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return client.create(obj)
        except ApiError as err:
            if "no endpoints" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_objects_read_back_at_the_other_version_through_the_conversion_webhook(
    installed: Installed,
) -> None:
    client = installed.client
    before = installed.server.counts().get("convert", 0)
    old = _create(client, _thanos(API_VERSION, "made-v1", {
        "objectStorageSecret": "objstore", "rule": {"replicas": 2},
        "query": {"replicas": 1}}))
    at_v2 = client.get(API_VERSION_2, KIND, "made-v1", namespace=_NS)
    assert at_v2["apiVersion"] == API_VERSION_2
    assert at_v2["spec"]["objectStorage"] == {"secretName": "objstore"}
    assert at_v2["spec"]["ruler"] == {"replicas": 2}
    assert "rule" not in at_v2["spec"]
    assert "objectStorageSecret" not in at_v2["spec"]
    assert at_v2["metadata"]["uid"] == old["metadata"]["uid"]

    _create(client, _thanos(API_VERSION_2, "made-v2", {
        "objectStorage": {"secretName": "blocks"}, "storeGateway": {"storage": "20Gi"}}))
    at_v1 = client.get(API_VERSION, KIND, "made-v2", namespace=_NS)
    assert at_v1["spec"] == {"objectStorageSecret": "blocks", "storeGateway": {"storage": "20Gi"}}
    assert at_v1["apiVersion"] == API_VERSION
    # Stored at the hub (v1alpha2), so a v1alpha1 create and a v1alpha1 read are conversions.
    assert installed.server.counts().get("convert", 0) - before >= 2


def test_an_invalid_object_is_refused_with_the_webhooks_message(installed: Installed) -> None:
    with pytest.raises(ApiError) as caught:
        _create(installed.client, _thanos(API_VERSION, "orphan-frontend", {
            "queryFrontend": {"replicas": 1}}))
    message = str(caught.value)
    assert 'admission webhook "validate.thanoses.monitoring.optk.dev" denied' in message
    assert "Thanos webhooks/orphan-frontend: invalid spec.queryFrontend" in message
    assert "needs spec.query" in message
    with pytest.raises(NotFoundError):
        installed.client.get(API_VERSION, KIND, "orphan-frontend", namespace=_NS)
    assert installed.server.counts().get("validate", 0) >= 1


def test_defaulting_writes_the_ingress_class_at_either_version(installed: Installed) -> None:
    made = _create(installed.client, _thanos(API_VERSION, "exposed", {
        "query": {"ingress": {"host": "query.example"}}}))
    assert made["spec"]["query"]["ingress"] == {
        "host": "query.example", "ingressClassName": DEFAULT_INGRESS_CLASS}
    assert "replicas" not in made["spec"]["query"]  # the operator's defaults stay its own
    assert installed.server.counts().get("mutate", 0) >= 1
    made_v2 = _create(installed.client, _thanos(API_VERSION_2, "exposed-v2", {
        "query": {"ingress": {"host": "query.example"}}}))
    assert made_v2["spec"]["query"]["ingress"]["ingressClassName"] == DEFAULT_INGRESS_CLASS
    if installed.plane is None:
        return  # kube-apiserver's audit log is the real server's
    # kube-apiserver's audit log records the admission calls of the create (not conversions).
    installed.plane.request_counts()  # flushes the audit log up to now
    creates = [json.loads(line) for line in installed.plane.audit_log_path.read_text().splitlines()
               if '"exposed"' in line or "/thanoses" in line]
    annotations = [e.get("annotations") or {} for e in creates if e.get("verb") == "create"
                   and (e.get("responseStatus") or {}).get("code") == 201]
    mutated = [json.loads(a["mutation.webhook.admission.k8s.io/round_0_index_0"])
               for a in annotations if "mutation.webhook.admission.k8s.io/round_0_index_0" in a]
    assert {"configuration": "thanos-webhooks", "webhook": "mutate.thanoses.monitoring.optk.dev",
            "mutated": True} in mutated
    assert any("apiserver.latency.k8s.io/validating-webhook" in a for a in annotations)


def test_the_cel_rule_refuses_a_storage_change(installed: Installed) -> None:
    client = installed.client
    _create(client, _thanos(API_VERSION, "stateful", {"storeGateway": {"replicas": 1}}))
    with pytest.raises(InvalidError) as caught:
        client.patch(API_VERSION, KIND, "stateful", {"spec": {"storeGateway": {"storage": "20Gi"}}},
                     patch_type="application/merge-patch+json", namespace=_NS)
    assert "storage cannot change once the component runs" in str(caught.value)
    causes = caught.value.status["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [("spec.storeGateway",
                                                            "FieldValueInvalid")]
    assert causes[0]["message"].startswith('Invalid value: "object": storage cannot change')
    # Other fields of the block still change; the default written out is no change.
    client.patch(API_VERSION, KIND, "stateful",
                 {"spec": {"storeGateway": {"replicas": 2, "storage": "10Gi"}}},
                 patch_type="application/merge-patch+json", namespace=_NS)


def test_the_operator_reconciles_parents_of_both_versions_then_writes_nothing(
    installed: Installed,
) -> None:
    client = installed.client
    _create(client, _thanos(API_VERSION, "op-v1", {"query": {"replicas": 1}}))
    _create(client, _thanos(API_VERSION_2, "op-v2", {
        "query": {"replicas": 1}, "ruler": {"replicas": 1}}))
    operator = Operator(
        api_version=API_VERSION, kind=KIND, build=thanos_build, name=OPERATOR_NAME, namespace=_NS,
        policies=Policies(prune=PRUNE),
    )
    runtime = operator.start(KubernetesClient(installed.api_client()))
    try:
        def children_of_both() -> bool:
            names = {d["metadata"]["name"] for d in client.list(
                "apps/v1", "Deployment", namespace=_NS)["items"]}
            sets = {s["metadata"]["name"] for s in client.list(
                "apps/v1", "StatefulSet", namespace=_NS)["items"]}
            return {"op-v1-query", "op-v2-query"} <= names and "op-v2-rule" in sets

        _until("children of both parents", children_of_both)
        assert wait_idle(runtime, timeout=60, settle=2.0)
        installed.reset()
        time.sleep(5)
        assert wait_idle(runtime, timeout=30)
        assert installed.writes() == dict.fromkeys(_WRITES, 0)
        v2 = client.get(API_VERSION_2, KIND, "op-v2", namespace=_NS)
        ready = {c["type"]: c["status"] for c in v2["status"]["conditions"]}
        assert ready["Reconciled"] == "True"
        assert "ruler" in v2["spec"]
    finally:
        runtime.stop()


def test_the_manifests_applied_serve_the_webhooks_with_the_ca_the_operator_injects(
    installed: Installed,
) -> None:
    """``optk manifests`` for ``versioned_operator``, applied; then the operator's Webhooks hook
    runs with the ServiceAccount's rights alone on the real server (a client certificate for its
    user name; the embedded server has no authorization: its admin's client there). The
    manifests point the API server at the Service (no CA: the operator injects it); with no
    kube-proxy on this control plane, the hook runs the server on 127.0.0.1 and ``local`` points
    the stanzas there, as a developer's local operator would (docs/webhooks.md)."""
    plane = installed.plane
    admin = installed.client
    facts = operator_facts(versioned_operator)
    options = ManifestOptions(target="examples.thanos.operator:versioned_operator",
                              namespace=_OPERATOR_NS, image="optk-thanos:test")
    parents = [d for d in yaml.safe_load_all(samples.read_text()) if d]
    documents = [obj for obj, _ in manifests(facts, options, parents=parents)
                 if obj["kind"] not in ("Deployment", "PodDisruptionBudget")]
    inject(admin, documents)
    crd = admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", _CRD_NAME)
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"] == {"service": {
        "name": "thanos-webhooks", "namespace": _OPERATOR_NS, "port": 443, "path": "/convert"}}

    as_operator = admin  # the embedded server authorizes no one: its admin's client
    if plane is not None:
        user = f"system:serviceaccount:{_OPERATOR_NS}:{OPERATOR_NAME}"
        as_operator = KubernetesClient(kubernetes.config.new_client_from_config(
            config_file=str(plane.kubeconfig_for(user, ["system:serviceaccounts"]))))
    hook = attrs.evolve(WEBHOOKS, namespace=_OPERATOR_NS, host="127.0.0.1", port=0, local=True)
    stop = hook.start(as_operator, clock=RealClock())
    try:
        secret = admin.get("v1", "Secret", "thanos-webhooks-tls", namespace=_OPERATOR_NS)
        ca = WebhookCertificates.from_secret(secret).ca_pem
        crd = admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", _CRD_NAME)
        config = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert base64.b64decode(config["caBundle"]) == ca
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            hooks = admin.get("admissionregistration.k8s.io/v1", kind, "thanos-webhooks")
            assert base64.b64decode(hooks["webhooks"][0]["clientConfig"]["caBundle"]) == ca
        _create(admin, _thanos(API_VERSION, "from-manifests", {"objectStorageSecret": "s"}))
        read = admin.get(API_VERSION_2, KIND, "from-manifests", namespace=_NS)
        assert read["spec"] == {"objectStorage": {"secretName": "s"}}
        with pytest.raises(ApiError, match=r"needs spec\.query"):
            _create(admin, _thanos(API_VERSION, "orphan-2", {"queryFrontend": {}}))
    finally:
        stop()
