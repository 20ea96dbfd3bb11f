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

from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer, _offloading
from reconciler.embedded._admission import matching_version
from reconciler.embedded._calling import MAX_ANSWER_BYTES, WebhookCallError, post_review
from reconciler.embedded._registry import make_registry
from reconciler.leadership import LeaderElection, LeaderElector
from reconciler.webhooks import WebhookCertificates

_NS = "admitted"
_HANG_SECONDS = 15.0  # how long the hanging webhook waits at most (released at teardown)
_SLOW_SECONDS = 2.0  # how long the slow conversion webhook takes to answer
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
        if path == "/slow":  # allowed, after 2 s
            self.server.release.wait(_SLOW_SECONDS)
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
        if path == "/convert-slow":  # a conversion webhook answering after 2 s
            self.server.release.wait(_SLOW_SECONDS)
            wanted = review["request"]["desiredAPIVersion"]
            self._send(json.dumps({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": [
                    {**o, "apiVersion": wanted} for o in review["request"]["objects"]]},
            }).encode())
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


def _two_versions(api: kubernetes.client.ApiClient, kind: str, *, hooks: _Hooks,
                  converted_at: str | None = None) -> kubernetes.client.CustomObjectsApi:
    """A CRD of ``optk.test`` serving v1 (stored) and v2, converted by the webhook at
    ``converted_at`` (else by the server, ``None``), once served."""
    plural = f"{kind.lower()}s"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    spec: dict[str, Any] = {
        "group": "optk.test", "scope": "Namespaced", "names": {"kind": kind, "plural": plural},
        "versions": [{"name": v, "served": True, "storage": v == "v1", "schema": schema}
                     for v in ("v1", "v2")]}
    if converted_at is not None:
        spec["conversion"] = {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"], "clientConfig": {
                "url": hooks.url + converted_at, "caBundle": hooks.ca_bundle}}}
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.optk.test"}, "spec": spec})
    custom = kubernetes.client.CustomObjectsApi(api)
    _until_served(custom, plural)
    return custom


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


def test_a_hanging_webhook_blocks_no_other_client_and_calls_run_in_parallel(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    """Issue 35, item 4: four creates at once through a webhook that hangs for its 10 s
    timeout. kube-apiserver calls the four in parallel and answers other clients meanwhile;
    the embedded server called them one after another on its event loop (40 s in all, the
    other clients' GETs waiting as long, a leader's Lease renewals refused)."""
    label = "parallel"
    other = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.configuration))
    election = LeaderElection(namespace=_NS, name="beside", lease_duration=4.0,
                              renew_deadline=3.0, retry_period=0.5)
    stopped: list[bool] = []
    elector = LeaderElector(KubernetesClient(kubernetes.client.ApiClient(api.configuration)),
                            election, identity="beside-1",
                            on_stopped=lambda: stopped.append(True))
    leading = threading.Thread(target=elector.run, daemon=True)
    leading.start()
    try:
        deadline = time.monotonic() + 10
        while not elector.is_leader and time.monotonic() < deadline:
            time.sleep(0.05)
        assert elector.is_leader
        answers: list[int] = []

        def create(index: int) -> None:
            with contextlib.suppress(ApiException):
                kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(
                    api.configuration)).create_namespaced_config_map(
                        _NS, _configmap(f"{label}-{index}", label))
                answers.append(201)
                return
            answers.append(500)

        with _installed(api, "ValidatingWebhookConfiguration",
                        _webhook(hooks, "/hang", name=f"{label}.optk.test", selected=label,
                                 timeoutSeconds=10)):
            writers = [threading.Thread(target=create, args=(i,), daemon=True)
                       for i in range(4)]
            started = time.monotonic()
            for writer in writers:
                writer.start()
            slowest, fenced = 0.0, []
            while any(w.is_alive() for w in writers) and time.monotonic() - started < 60:
                sent = time.monotonic()
                other.read_namespace(_NS)
                slowest = max(slowest, time.monotonic() - sent)
                fenced.append(elector.fence.valid())
                time.sleep(0.1)
            for writer in writers:
                writer.join(timeout=30)
            took = time.monotonic() - started
        assert answers == [500] * 4  # each failed at its timeout (failurePolicy: Fail)
        assert took < 15.0
        assert slowest < 0.5
        assert all(fenced)  # its renewals kept succeeding: its writes were never fenced
        assert len(fenced) > 10
        assert elector.is_leader
        assert not stopped
        lease = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease("beside", _NS)
        assert lease.spec.holder_identity == "beside-1"
        assert lease.spec.renew_time.timestamp() > time.time() - 2.0
    finally:
        elector.stop()
        leading.join(timeout=10)


def test_writes_waiting_on_a_webhook_at_once_lose_no_update(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    """Two patches of one object, each waiting 2 s on a validating webhook at the same time:
    the second to commit read the object before the first committed, so it is run again
    (webhook included) on the new object, as kube-apiserver's GuaranteedUpdate retries; both
    changes stay."""
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_config_map(_NS, _configmap("both", "slow"))
    done: list[str] = []

    def patch(key: str) -> None:
        kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(
            api.configuration)).patch_namespaced_config_map("both", _NS, {"data": {key: "set"}})
        done.append(key)

    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/slow", name="slow.optk.test", selected="slow")):
        writers = [threading.Thread(target=patch, args=(key,), daemon=True)
                   for key in ("one", "two")]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(timeout=30)
    assert sorted(done) == ["one", "two"]
    assert core.read_namespaced_config_map("both", _NS).data == {
        "mode": "x", "one": "set", "two": "set"}


@EMBEDDED_ONLY
def test_the_garbage_collectors_delete_waits_on_a_webhook_without_blocking_the_server(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    """The embedded server's own garbage collector deletes a dependent through a validating
    webhook that answers after 2 s; other clients are answered meanwhile, and the dependent
    goes (kube-controller-manager's requests are another client's on a real server)."""
    core = kubernetes.client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(_NS, _configmap("gc-owner", "gc"))
    dependent = _configmap("gc-dependent", "gc")
    dependent["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                                 "name": "gc-owner", "uid": owner.metadata.uid}]
    core.create_namespaced_config_map(_NS, dependent)
    other = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.configuration))
    with _installed(api, "ValidatingWebhookConfiguration",
                    _webhook(hooks, "/slow", name="gc.optk.test", selected="gc",
                             timeoutSeconds=10)):
        before = len(hooks.calls("/slow"))
        core.delete_namespaced_config_map("gc-owner", _NS)  # its own DELETE waits 2 s here
        started, slowest, gone = time.monotonic(), 0.0, False
        while not gone and time.monotonic() - started < 30:
            sent = time.monotonic()
            other.read_namespace(_NS)
            slowest = max(slowest, time.monotonic() - sent)
            try:
                core.read_namespaced_config_map("gc-dependent", _NS)
            except ApiException as err:
                gone = err.status == 404
            time.sleep(0.05)
    assert gone
    assert [c["operation"] for c in hooks.calls("/slow")[before:]] == ["DELETE", "DELETE"]
    assert slowest < 0.5


def test_requests_beyond_the_workers_and_their_line_are_answered_429(
    hooks: _Hooks, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedded server's bound on requests waiting on webhooks (``_offloading``: 16
    workers and 400 in line), made 1 and 1 here: of three creates through a webhook that hangs
    (2 s, then ignored), one is called, one waits for the worker, one is answered 429 at once."""
    monkeypatch.setattr(_offloading, "WORKERS", 1)
    monkeypatch.setattr(_offloading, "WAITING", 1)
    with EmbeddedApiServer() as server, server.api_client() as api:
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": _NS}})
        statuses: list[tuple[int, str | None]] = []

        def create(index: int) -> None:
            try:
                kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(
                    api.configuration)).create_namespaced_config_map(
                        _NS, _configmap(f"bounded-{index}", "bounded"))
                statuses.append((201, None))
            except ApiException as err:
                statuses.append((err.status, err.headers.get("Retry-After")))

        with _installed(api, "ValidatingWebhookConfiguration",
                        _webhook(hooks, "/hang", name="bounded.optk.test", selected="bounded",
                                 timeoutSeconds=2, failurePolicy="Ignore")):
            writers = [threading.Thread(target=create, args=(i,), daemon=True)
                       for i in range(3)]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join(timeout=30)
    assert sorted(statuses, key=str) == [(201, None), (201, None), (429, "1")]


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
    custom = _two_versions(api, "Gadget", hooks=hooks, converted_at="/big")
    custom.create_namespaced_custom_object("optk.test", "v1", _NS, "gadgets", {
        "apiVersion": "optk.test/v1", "kind": "Gadget", "metadata": {"name": "g"}})
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object("optk.test", "v2", _NS, "gadgets", "g")
    assert caught.value.status == 500
    assert f"over the limit of {MAX_ANSWER_BYTES} bytes" in json.loads(caught.value.body)[
        "message"]


def test_slow_conversion_calls_block_no_other_client_and_run_in_parallel(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    """Issue 35, item 4, for conversion webhooks: four reads at another version, each
    converted by a webhook that answers after 2 s, and another client's GETs meanwhile."""
    custom = _two_versions(api, "Sprocket", hooks=hooks, converted_at="/convert-slow")
    custom.create_namespaced_custom_object("optk.test", "v1", _NS, "sprockets", {
        "apiVersion": "optk.test/v1", "kind": "Sprocket", "metadata": {"name": "s"}})
    other = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.configuration))
    versions: list[str] = []

    def read() -> None:
        client = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(api.configuration))
        got = client.get_namespaced_custom_object("optk.test", "v2", _NS, "sprockets", "s")
        versions.append(got["apiVersion"])

    readers = [threading.Thread(target=read, daemon=True) for _ in range(4)]
    started = time.monotonic()
    for reader in readers:
        reader.start()
    slowest = 0.0
    while any(r.is_alive() for r in readers) and time.monotonic() - started < 30:
        sent = time.monotonic()
        other.read_namespace(_NS)
        slowest = max(slowest, time.monotonic() - sent)
        time.sleep(0.05)
    for reader in readers:
        reader.join(timeout=30)
    took = time.monotonic() - started
    assert versions == ["optk.test/v2"] * 4
    assert _SLOW_SECONDS * 0.9 <= took < 3 * _SLOW_SECONDS  # one after another: 4 x 2 s
    assert slowest < 0.5


def test_match_policy_equivalent_calls_at_the_rules_version_and_converts_back(
    api: kubernetes.client.ApiClient, hooks: _Hooks,
) -> None:
    custom = _two_versions(api, "Widget", hooks=hooks)
    at_v2 = [{"apiGroups": ["optk.test"], "apiVersions": ["v2"], "resources": ["widgets"],
              "operations": ["CREATE"]}]
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
