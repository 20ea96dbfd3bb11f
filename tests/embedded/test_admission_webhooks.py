"""The embedded server's admission webhooks, beyond what tests/webhooks/test_webhooks_servers.py
checks: the review sent, a JSON patch applied, warnings returned, a denial's status, rules and
selectors that do not match, ``matchPolicy``, dry run, and the bounds of a call (a hanging or
dripping webhook fails the request under ``failurePolicy: Fail`` and is skipped under
``Ignore``, within its ``timeoutSeconds``; an oversized answer is refused). Every test but the
size caps (the embedded server's own) runs on the real control plane too, with the same
assertions: the embedded server answers as kube-apiserver 1.25 does, word for word. One
embedded server per module (the real tier: the session's control plane) and one local HTTPS
webhook server (``WebhookCertificates``, 127.0.0.1); each test installs its own configuration
and selects its own objects by label.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client import ApiException

from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._admission import matching_version
from reconciler.embedded._calling import MAX_ANSWER_BYTES, WebhookCallError, post_review
from reconciler.embedded._registry import make_registry
from reconciler.webhooks import WebhookCertificates

_NS = "admitted"
_HANG_SECONDS = 15.0  # how long the hanging webhook waits at most (released at teardown)
_MARGIN = 6.0  # room for a loaded machine above a webhook's timeout
_ADMISSION = "admissionregistration.k8s.io/v1"


class _Hooks(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, certificates: WebhookCertificates) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as folder:
            certificates.write(Path(folder))
            context.load_cert_chain(Path(folder) / "tls.crt", Path(folder) / "tls.key")
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.reviews: list[tuple[str, dict[str, Any]]] = []
        self.release = threading.Event()
        self.ca_bundle = base64.b64encode(certificates.ca_pem).decode()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the API server closed a connection it gave up on (the point of some tests)

    def calls(self, path: str) -> list[dict[str, Any]]:
        return [review["request"] for at, review in list(self.reviews) if at == path]


class _Handler(BaseHTTPRequestHandler):
    server: _Hooks
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        path, _, query = self.path.partition("?")
        self.server.reviews.append((path, {**review, "query": query}))
        uid = review["request"]["uid"]
        if path == "/hang":
            self.server.release.wait(_HANG_SECONDS)
        if path == "/drip":  # headers, then a byte every 0.2 s: no socket op is slow
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(50):
                if self.server.release.wait(0.2):
                    return
                self.wfile.write(b" ")
                self.wfile.flush()
            return
        if path == "/big":
            self._send(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": uid, "allowed": True},
                                   "pad": "x" * MAX_ANSWER_BYTES}).encode())
            return
        response: dict[str, Any] = {"uid": uid, "allowed": True}
        if path == "/deny":
            response = {"uid": uid, "allowed": False, "warnings": ["denied, with a warning"],
                        "status": {"message": "data.mode must be safe"}}
        if path == "/patch":
            patch = [{"op": "add", "path": "/metadata/labels/admitted", "value": "yes"}]
            response.update(patchType="JSONPatch", warnings=["mode defaulted"],
                            patch=base64.b64encode(json.dumps(patch).encode()).decode())
        self._send(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": response}).encode())

    def _send(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the API server may have given up
            self.wfile.write(data)


@pytest.fixture(scope="module")
def hooks() -> Iterator[_Hooks]:
    server = _Hooks(WebhookCertificates.generate(["127.0.0.1"]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module", params=["embedded", "real"])
def api(request: pytest.FixtureRequest) -> Iterator[kubernetes.client.ApiClient]:
    """A module's own embedded server, or the session's real control plane (the same
    assertions hold on both: the embedded server answers as kube-apiserver does)."""
    with contextlib.ExitStack() as stack:
        if request.param == "real":
            if request.config.getoption("--kube-api") == "embedded":
                pytest.skip("real control plane: not selected (--kube-api=embedded)")
            client = stack.enter_context(request.getfixturevalue("real_kube_api").api_client())
            client.optk_real = True  # see _installed
        else:
            server = stack.enter_context(EmbeddedApiServer())
            client = stack.enter_context(server.api_client())
        kubernetes.client.CoreV1Api(client).create_namespace(
            {"metadata": {"name": _NS, "labels": {"team": "a"}}})
        try:
            yield client
        finally:
            kubernetes.client.CoreV1Api(client).delete_namespace(_NS)


EMBEDDED_ONLY = pytest.mark.parametrize("api", ["embedded"], indirect=True)
"""For the embedded server's own limits (kube-apiserver reads a webhook's answer of any size)."""


def _webhook(hooks: _Hooks, path: str, *, name: str, selected: str,
             **fields: Any) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"url": hooks.url + path, "caBundle": hooks.ca_bundle},
        "objectSelector": {"matchLabels": {"test": selected}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                   "operations": ["CREATE", "UPDATE", "DELETE"]}],
    }
    hook.update(fields)
    return hook


_REAL_LOAD_SECONDS = 1.5


@contextlib.contextmanager
def _installed(api: kubernetes.client.ApiClient, kind: str,
               *webhooks: dict[str, Any]) -> Iterator[None]:
    custom = kubernetes.client.CustomObjectsApi(api)
    plural = f"{kind.lower()}s"
    name = webhooks[0]["name"].split(".")[0]
    custom.create_cluster_custom_object(
        "admissionregistration.k8s.io", "v1", plural,
        {"apiVersion": _ADMISSION, "kind": kind, "metadata": {"name": name},
         "webhooks": list(webhooks)})
    if getattr(api, "optk_real", False):
        # kube-apiserver's admission plugins load a new configuration from an informer, after
        # the create has answered: on a loaded machine a request sent at once was admitted
        # without the webhook (two clean-clone runs, "DID NOT RAISE"). The embedded server
        # uses a configuration from the moment it is stored.
        time.sleep(_REAL_LOAD_SECONDS)
    try:
        yield
    finally:
        custom.delete_cluster_custom_object("admissionregistration.k8s.io", "v1", plural, name)


def _until_served(custom: kubernetes.client.CustomObjectsApi, plural: str) -> None:
    """A new CRD's kind is served at once by the embedded server, soon by a real one."""
    deadline = time.monotonic() + 30
    while True:
        try:
            custom.list_namespaced_custom_object("optk.test", "v2", _NS, plural)
            return
        except ApiException as err:
            if err.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _configmap(name: str, selected: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"test": selected}}, "data": {"mode": "x"}}


def test_the_configurations_are_served_with_their_defaults(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/allow", name="defaults.optk.test", selected="none")):
        read = kubernetes.client.AdmissionregistrationV1Api(
            api).read_validating_webhook_configuration("defaults")
    hook = read.webhooks[0]
    assert (hook.failure_policy, hook.match_policy, hook.timeout_seconds) == (
        "Fail", "Equivalent", 10)
    assert hook.rules[0].scope == "*"


def test_a_json_patch_is_applied_and_warnings_are_returned(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    core = kubernetes.client.CoreV1Api(api)
    with _installed(api, "MutatingWebhookConfiguration",
                    _webhook(hooks, "/patch", name="patch.optk.test", selected="patch")):
        made, code, headers = core.create_namespaced_config_map_with_http_info(
            _NS, _configmap("patched", "patch"), field_manager="tester")
        assert code == 201
        assert made.metadata.labels == {"test": "patch", "admitted": "yes"}
        assert headers["Warning"] == '299 - "mode defaulted"'
        core.patch_namespaced_config_map("patched", _NS, {"data": {"mode": "y"}})
        with pytest.raises(ApiException) as caught:  # a patch of nothing: the real answer
            core.delete_namespaced_config_map("patched", _NS)
    assert caught.value.status == 500
    assert json.loads(caught.value.body)["message"] == (
        'Internal error occurred: admission webhook "patch.optk.test" attempted to modify the '
        "object, which is not supported for this operation")
    core.delete_namespaced_config_map("patched", _NS)
    assert [r["query"] for at, r in hooks.reviews if at == "/patch"][-3:] == ["timeout=10s"] * 3
    create, update, delete = hooks.calls("/patch")[-3:]
    assert create["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert create["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert create["requestKind"] == create["kind"]
    assert (create["operation"], create["name"], create["namespace"]) == (
        "CREATE", "patched", _NS)
    assert create["object"]["data"] == {"mode": "x"}
    assert create["oldObject"] is None
    assert create["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                                 "fieldManager": "tester"}
    assert create["userInfo"]["username"]
    assert create["dryRun"] is False
    assert update["operation"] == "UPDATE"
    assert (update["oldObject"]["data"], update["object"]["data"]) == ({"mode": "x"},
                                                                       {"mode": "y"})
    assert (delete["operation"], delete["object"]) == ("DELETE", None)
    assert delete["oldObject"]["metadata"]["labels"]["admitted"] == "yes"


def test_a_denial_answers_the_status_kube_apiserver_does(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    core = kubernetes.client.CoreV1Api(api)
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/deny", name="deny.optk.test", selected="deny")), \
            pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(_NS, _configmap("denied", "deny"))
    assert caught.value.status == 400  # the webhook gave no code
    body = json.loads(caught.value.body)
    assert body["message"] == ('admission webhook "deny.optk.test" denied the request: '
                               "data.mode must be safe")
    assert (body["status"], body["code"]) == ("Failure", 400)
    assert caught.value.headers["Warning"] == '299 - "denied, with a warning"'
    assert core.list_namespaced_config_map(_NS, label_selector="test=deny").items == []


def test_a_webhook_whose_rules_or_selectors_do_not_match_is_not_called(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    core = kubernetes.client.CoreV1Api(api)
    secrets = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"],
               "operations": ["*"]}
    updates = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
               "operations": ["UPDATE"]}
    other_version = {"apiGroups": [""], "apiVersions": ["v2"], "resources": ["configmaps"],
                     "operations": ["CREATE"]}
    cluster = {**other_version, "apiVersions": ["v1"], "scope": "Cluster"}
    before = len(hooks.calls("/allow"))
    with _installed(
        api, "ValidatingWebhookConfiguration",
        _webhook(hooks, "/allow", name="secrets.optk.test", selected="miss", rules=[secrets]),
        _webhook(hooks, "/allow", name="updates.optk.test", selected="miss", rules=[updates]),
        _webhook(hooks, "/allow", name="v2.optk.test", selected="miss", rules=[other_version]),
        _webhook(hooks, "/allow", name="cluster.optk.test", selected="miss", rules=[cluster]),
        _webhook(hooks, "/allow", name="team.optk.test", selected="miss",
                 namespaceSelector={"matchLabels": {"team": "b"}}),
        _webhook(hooks, "/allow", name="label.optk.test", selected="other"),
    ):
        core.create_namespaced_config_map(_NS, _configmap("missed", "miss"))
        assert len(hooks.calls("/allow")) == before
        core.create_namespaced_secret(_NS, {"metadata": {"name": "hit", "labels": {
            "test": "miss"}}})
    called = hooks.calls("/allow")[before:]
    assert [(c["kind"]["kind"], c["name"]) for c in called] == [("Secret", "hit")]


@pytest.mark.parametrize("path", ["/hang", "/drip"])
def test_a_hanging_webhook_fails_the_request_within_its_timeout_or_is_ignored(
    api: kubernetes.client.ApiClient, hooks: _Hooks, path: str,
) -> None:
    core = kubernetes.client.CoreV1Api(api)
    label = path.strip("/")
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, path, name=f"{label}.optk.test", selected=label,
                             timeoutSeconds=1)):
        started = time.monotonic()
        with pytest.raises(ApiException) as caught:
            core.create_namespaced_config_map(_NS, _configmap(f"{label}-fail", label))
        failed_after = time.monotonic() - started
    assert caught.value.status == 500
    message = json.loads(caught.value.body)["message"]
    prefix = f'Internal error occurred: failed calling webhook "{label}.optk.test": '
    if path == "/hang":  # no answer
        assert message == (f'{prefix}failed to call webhook: Post "{hooks.url}/hang?'
                           'timeout=1s": context deadline exceeded')
    else:  # the headers came, the body never ended
        assert message == (f"{prefix}failed to call webhook: unexpected error when reading "
                           "response body. Please retry. Original error: context deadline "
                           "exceeded")
    assert 0.9 <= failed_after < 1 + _MARGIN
    if path == "/drip":
        return  # Ignore once is enough (a second on the clock)
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, path, name=f"{label}.optk.test", selected=label,
                             timeoutSeconds=1, failurePolicy="Ignore")):
        started = time.monotonic()
        core.create_namespaced_config_map(_NS, _configmap(f"{label}-ignored", label))
        assert time.monotonic() - started < 1 + _MARGIN
    assert core.read_namespaced_config_map(f"{label}-ignored", _NS).metadata.labels == {
        "test": label}


@EMBEDDED_ONLY
def test_an_oversized_answer_is_refused(api: kubernetes.client.ApiClient, hooks: _Hooks) -> None:
    core = kubernetes.client.CoreV1Api(api)
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/big", name="big.optk.test", selected="big")), \
            pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(_NS, _configmap("big", "big"))
    assert caught.value.status == 500
    assert f"over the limit of {MAX_ANSWER_BYTES} bytes" in json.loads(caught.value.body)[
        "message"]
    with pytest.raises(WebhookCallError, match="over the limit of 100 bytes"):
        post_review(hooks.url + "/patch", {"request": {"uid": "u"}}, ca_bundle=hooks.ca_bundle,
                    timeout=5, max_bytes=100)


def test_a_service_reference_is_unreachable_and_its_failure_policy_decides(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    core = kubernetes.client.CoreV1Api(api)
    service = {"service": {"name": "hooks", "namespace": _NS, "path": "/allow"},
               "caBundle": hooks.ca_bundle}
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/allow", name="svc.optk.test", selected="svc",
                             clientConfig=service)), pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(_NS, _configmap("svc", "svc"))
    assert caught.value.status == 500
    assert json.loads(caught.value.body)["message"].startswith(
        'Internal error occurred: failed calling webhook "svc.optk.test": failed to call '
        'webhook: Post "https://hooks.admitted.svc:443/allow?timeout=10s": service "hooks" not '
        "found")
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/allow", name="svc.optk.test", selected="svc",
                             clientConfig=service, failurePolicy="Ignore")):
        core.create_namespaced_config_map(_NS, _configmap("svc", "svc"))


@EMBEDDED_ONLY
def test_a_conversion_webhook_answer_is_capped_too(api: kubernetes.client.ApiClient,
                                                   hooks: _Hooks) -> None:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.optk.test"},
           "spec": {"group": "optk.test", "scope": "Namespaced",
                    "names": {"kind": "Gadget", "plural": "gadgets"},
                    "versions": [{"name": v, "served": True, "storage": v == "v1",
                                  "schema": schema} for v in ("v1", "v2")],
                    "conversion": {"strategy": "Webhook", "webhook": {
                        "conversionReviewVersions": ["v1"], "clientConfig": {
                            "url": hooks.url + "/big", "caBundle": hooks.ca_bundle}}}}}
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    custom = kubernetes.client.CustomObjectsApi(api)
    _until_served(custom, "gadgets")
    custom.create_namespaced_custom_object("optk.test", "v1", _NS, "gadgets", {
        "apiVersion": "optk.test/v1", "kind": "Gadget", "metadata": {"name": "g"}})
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object("optk.test", "v2", _NS, "gadgets", "g")
    assert caught.value.status == 500
    assert f"over the limit of {MAX_ANSWER_BYTES} bytes" in json.loads(caught.value.body)[
        "message"]


def test_match_policy_equivalent_calls_at_the_rules_version_and_converts_back(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.optk.test"},
        "spec": {"group": "optk.test", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": v, "served": True, "storage": v == "v1",
                               "schema": schema} for v in ("v1", "v2")]}})
    at_v2 = [{"apiGroups": ["optk.test"], "apiVersions": ["v2"], "resources": ["widgets"],
              "operations": ["CREATE"]}]
    custom = kubernetes.client.CustomObjectsApi(api)
    _until_served(custom, "widgets")
    with _installed(api, "MutatingWebhookConfiguration",
                    _webhook(hooks, "/patch", name="equivalent.optk.test", selected="eq",
                             rules=at_v2),
                    _webhook(hooks, "/patch", name="exact.optk.test", selected="eq",
                             rules=at_v2, matchPolicy="Exact")):
        before = len(hooks.calls("/patch"))
        made = custom.create_namespaced_custom_object("optk.test", "v1", _NS, "widgets", {
            "apiVersion": "optk.test/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"test": "eq"}}})
    called = hooks.calls("/patch")[before:]
    assert len(called) == 1  # the Exact webhook is not called
    assert called[0]["kind"] == {"group": "optk.test", "version": "v2", "kind": "Widget"}
    assert called[0]["requestKind"] == {"group": "optk.test", "version": "v1", "kind": "Widget"}
    assert called[0]["object"]["apiVersion"] == "optk.test/v2"
    assert made["apiVersion"] == "optk.test/v1"
    assert made["metadata"]["labels"] == {"test": "eq", "admitted": "yes"}


def test_a_dry_run_calls_only_webhooks_without_side_effects(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    core = kubernetes.client.CoreV1Api(api)
    team = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/allow", name="dry.optk.test", selected="dry",
                             namespaceSelector=team)):
        core.create_namespaced_config_map(_NS, _configmap("dry", "dry"), dry_run="All")
    assert hooks.calls("/allow")[-1]["dryRun"] is True
    assert hooks.calls("/allow")[-1]["options"]["dryRun"] == ["All"]
    assert core.list_namespaced_config_map(_NS, label_selector="test=dry").items == []
    # v1 knows only webhooks without side effects (so a dry run may call every one)
    with pytest.raises(ApiException) as caught, _installed(
            api, "ValidatingWebhookConfiguration",
            _webhook(hooks, "/allow", name="effects.optk.test", selected="dry",
                     sideEffects="Some")):
        pass
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["details"]["causes"] == [{
        "reason": "FieldValueNotSupported", "field": "webhooks[0].sideEffects",
        "message": 'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'}]


def _rule(**fields: Any) -> dict[str, Any]:
    return {"rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                       "operations": ["*"], **fields}]}


@pytest.mark.parametrize(("hook", "plural", "namespace", "called"), [
    (_rule(), "configmaps", "ns", True),
    (_rule(resources=["*/*"]), "configmaps", "ns", True),
    (_rule(resources=["configmaps/status"]), "configmaps", "ns", False),  # a subresource
    (_rule(resources=["configmaps/*"]), "configmaps", "ns", True),
    (_rule(operations=["DELETE"]), "configmaps", "ns", False),
    (_rule(apiGroups=["apps"]), "configmaps", "ns", False),
    (_rule(scope="Namespaced"), "configmaps", "ns", True),
    (_rule(scope="Cluster"), "configmaps", "ns", False),
    (_rule(scope="Namespaced"), "namespaces", "", False),  # a Namespace is cluster-scoped
    (_rule(scope="Cluster"), "namespaces", "", True),
], ids=str)
def test_rules_match_as_kube_apiserver_matches_them(
    hook: dict[str, Any], plural: str, namespace: str, called: bool,
) -> None:
    rt = make_registry().lookup("", "v1", plural)
    assert rt is not None
    found = matching_version(hook, rt, operation="CREATE", namespace=namespace, equivalents=[])
    assert (found is not None) is called


def test_only_an_equivalent_match_calls_at_another_version() -> None:
    registry = make_registry()
    registry.crd_applied({"metadata": {"name": "widgets.optk.test"}, "spec": {
        "group": "optk.test", "scope": "Namespaced", "names": {"kind": "Widget",
                                                               "plural": "widgets"},
        "versions": [{"name": v, "served": True, "storage": v == "v1", "schema": {
            "openAPIV3Schema": {"type": "object"}}} for v in ("v1", "v2")]}})
    v1, v2 = (registry.lookup("optk.test", v, "widgets") for v in ("v1", "v2"))
    assert v1 is not None
    assert v2 is not None
    hook = _rule(apiVersions=["v2"])
    assert matching_version(hook, v1, operation="CREATE", namespace="ns",
                            equivalents=[v2]) == v2
    assert matching_version({**hook, "matchPolicy": "Exact"}, v1, operation="CREATE",
                            namespace="ns", equivalents=[v2]) is None
    assert matching_version(hook, v2, operation="CREATE", namespace="ns",
                            equivalents=[v1]) == v2
