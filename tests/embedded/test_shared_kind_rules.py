"""The builders' testing kit and the embedded server refuse the same objects, with the same words.

Issue 31: ``check_builders`` validated against the OpenAPI schema only, so ``replicas: -2`` and
a Service port 0 passed the kit while the embedded server refused them. Both now read the one
table of ``objectmatcher._validation`` (the kit through ``objectmatcher.field_causes``): the kit's
``server rules`` invariant names the child, the field and the server's message, and the server's
422 carries that field and message.
"""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from builders import objects
from builders import testing as bt
from objectmatcher import FieldCause, field_causes
from tests.builders.helpers import MANAGED_BY, SITE_CRD, meta, site_deployment
from tests.embedded.helpers import RawClient


def _negative_replicas(parent: b.KubeObject) -> dict[str, Any]:
    obj, _ = site_deployment(parent)()
    return {**obj, "spec": {**obj["spec"], "replicas": -2}}


def _port_zero(parent: b.KubeObject) -> dict[str, Any]:
    return objects.service(metadata=meta(parent, "web"),
                           selector=b.selector_labels(parent, component="server"),
                           ports={"http": 0})


CASES = [
    ("Deployment", _negative_replicas, "deployments", "/apis/apps/v1",
     FieldCause(field="spec.replicas", reason="FieldValueInvalid",
                message="Invalid value: -2: must be greater than or equal to 0")),
    ("Service", _port_zero, "services", "/api/v1",
     FieldCause(field="spec.ports[0].port", reason="FieldValueInvalid",
                message="Invalid value: 0: must be between 1 and 65535, inclusive")),
]


def _parent(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "demo.optk.dev/v1alpha1", "kind": "Site",
            "metadata": {"name": "site", "namespace": namespace, "uid": "uid-1"},
            "spec": {"image": "nginx:1.25", "replicas": 1}}


@pytest.mark.parametrize(("kind", "make", "plural", "prefix", "cause"), CASES,
                         ids=[c[0] for c in CASES])
def test_the_kit_refuses_what_the_server_refuses_naming_object_and_field(
    raw: RawClient, kube_namespace: str, kind: str, make: Any, plural: str, prefix: str,
    cause: FieldCause,
) -> None:
    parent = _parent(kube_namespace)
    obj = make(parent)
    name = obj["metadata"]["name"]
    assert cause in field_causes(obj)

    # the kit: one example, and the property test over generated parents
    with pytest.raises(AssertionError) as caught:
        bt.assert_server_rules([(obj, b.DesiredState.PRESENT)], parent=parent)
    message = str(caught.value)
    assert message.startswith("invariant 'server rules' violated"), message
    assert f"{kind} {kube_namespace}/{name}: {cause.field}: {cause.message}" in message, message
    with pytest.raises(AssertionError) as caught:
        bt.check_builders(lambda p: [b.resource_builder(make)(p)],
                          bt.from_schema(SITE_CRD), managed_by=MANAGED_BY, max_examples=5,
                          skip=("owned", "selectors"))
    assert "invariant 'server rules' violated" in str(caught.value)
    assert cause.field in str(caught.value)

    # the server: a 422 with the same field and words
    code, body = raw.json("POST", f"{prefix}/namespaces/{kube_namespace}/{plural}", body=obj)
    assert code == 422, body
    causes = body["details"]["causes"]
    assert {"reason": cause.reason, "message": cause.message, "field": cause.field} in causes


def test_a_secrets_string_data_counts_as_its_data() -> None:
    """The server merges ``stringData`` into ``data`` before it validates; so does the kit."""
    tls = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": "tls", "namespace": "ns"},
           "stringData": {"tls.crt": "cert", "tls.key": "key"}}
    assert field_causes(tls) == ()
    missing = {**tls, "stringData": {"tls.crt": "cert"}}
    assert [c.field for c in field_causes(missing)] == ["data[tls.key]"]
