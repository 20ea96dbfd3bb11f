"""Acceptance of the derived role on the real control plane with RBAC on (issue 15).

The generated manifests are applied as they are; the operator runs in-process as its Deployment
would (leader election on, Leases in its namespace) with the ServiceAccount's own token, reached
through the in-cluster configuration (token and CA files, ``KUBERNETES_SERVICE_HOST``/``_PORT``).
The manifests' CRD is applied as ``kubectl apply`` would, so the operator's ``install`` finds it
equal and only reads it (its role has no ``create`` on CRDs). The demo's steps (converge, a CRD
that appears later, drift repair, component off and on, parent delete) run with zero 403
responses; then, for each rule of the generated roles, the same script
with only that rule removed meets a 403.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import kubernetes
import pytest
import yaml

from examples.thanos.crds import API_VERSION, KIND, SERVICE_MONITOR_CRD
from examples.thanos.demo import kubelet
from examples.thanos.operator import make_operator, samples
from reconciler import AlreadyExistsError, ForbiddenError, KubernetesClient, NotFoundError, Serving
from reconciler._client.incluster import InClusterConfig, incluster_api_client
from reconciler._client.reviews import MetricsAuthorizer
from reconciler._commands.manifests import ManifestOptions, manifests
from reconciler._commands.rbac import operator_facts
from reconciler._driver.deployed import deployed_operator
from reconciler.envtest import ControlPlane
from reconciler.testing import VirtualClock
from tests.examples.test_acceptance import apply_samples

pytestmark = pytest.mark.timeout(600)

_OPERATOR = "thanos-operator"
_CHILD_LABEL = f"app.kubernetes.io/managed-by={_OPERATOR}"
_STEP_TIMEOUT = 40.0


class ForbiddenCounter:
    """A ``ClusterClient`` delegate that counts the 403 answers the operator receives."""

    def __init__(self, inner: KubernetesClient) -> None:
        self._inner = inner
        self.forbidden: list[str] = []

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._inner, name)(*args, **kwargs)
        except ForbiddenError as error:
            self.forbidden.append(f"{name}: {error}")
            raise

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("get", *args, **kwargs)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("list", *args, **kwargs)

    def create(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("create", *args, **kwargs)

    def patch(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("patch", *args, **kwargs)

    def replace(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("replace", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("delete", *args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        stream = self._call("watch", *args, **kwargs)

        def events() -> Iterator[Any]:
            try:
                yield from stream
            except ForbiddenError as error:
                self.forbidden.append(f"watch: {error}")
                raise

        return events()

    def is_served(self, api_version: str, kind: str) -> bool:
        return self._inner.is_served(api_version, kind)

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        return self._inner.is_namespaced(api_version, kind)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@attrs.frozen
class Outcome:
    """How far the script got and the 403s the operator met."""

    failed_step: str | None
    forbidden: tuple[str, ...]


@pytest.fixture(scope="module")
def plane(kube_assets: Path) -> Iterator[ControlPlane]:
    with ControlPlane(kube_assets) as cp:
        yield cp


def _token_reviews(plane: ControlPlane, user: str) -> int:
    """TokenReviews ``user`` created so far, read from the audit log (each request once)."""
    plane.request_counts(user=user)  # flushes the audit log up to now
    seen: set[str] = set()
    for line in plane.audit_log_path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (event.get("verb") == "create"
                and (event.get("objectRef") or {}).get("resource") == "tokenreviews"
                and (event.get("user") or {}).get("username") == user):
            seen.add(str(event.get("auditID")))
    return len(seen)


def _documents(namespace: str) -> list[tuple[dict[str, Any], list[str]]]:
    facts = operator_facts(make_operator())
    options = ManifestOptions(target="examples.thanos.operator:operator", namespace=namespace,
                              image="optk-thanos:test")
    with open(samples, encoding="utf-8") as stream:
        parents = [d for d in yaml.safe_load_all(stream) if d]
    return manifests(facts, options, parents=parents)


def _rule_ids() -> list[tuple[str, int]]:
    """(role kind, index) of every rule of the operator's generated roles (not the
    metrics reader's: scrapers are bound to that one)."""
    return [(obj["kind"], i) for obj, _ in _documents("x") if _operators_role(obj)
            for i in range(len(obj["rules"]))]


def _operators_role(obj: dict[str, Any]) -> bool:
    return obj["kind"] in ("ClusterRole", "Role") and obj["metadata"]["name"] == _OPERATOR


def _wait(check: Callable[[], bool], counting: ForbiddenCounter) -> bool:
    deadline = time.monotonic() + _STEP_TIMEOUT
    while time.monotonic() < deadline:
        if counting.forbidden:
            return False
        try:
            if check():
                return True
        except NotFoundError:
            pass
        time.sleep(0.2)
    return False


def _install(cp: ControlPlane, index: int, without: tuple[str, int] | None,
             tmp_path: Path) -> tuple[KubernetesClient, str, Callable[[], ForbiddenCounter]]:
    """Apply the generated manifests (less rule ``without``) for operator namespace
    ``optk-op-INDEX``; the admin client, that namespace, and a factory of clients with the
    ServiceAccount's token reached as in a pod."""
    admin = KubernetesClient(cp.api_client())
    op_ns = f"optk-op-{index}"
    for obj, _ in _documents(op_ns):
        obj = copy.deepcopy(obj)
        if without is not None and _operators_role(obj) and obj["kind"] == without[0]:
            del obj["rules"][without[1]]
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            with contextlib.suppress(NotFoundError):
                admin.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
        if obj["kind"] == "CustomResourceDefinition":
            with contextlib.suppress(AlreadyExistsError):  # one CRD for every run
                admin.create(obj)  # applied as the manifests are: the operator only reads it
            continue
        admin.create(obj)
    _wait_for_service_account(cp, op_ns)
    token = _token(cp, op_ns, _OPERATOR)
    secrets = tmp_path / f"sa-{index}"
    secrets.mkdir()
    (secrets / "token").write_text(token)
    (secrets / "ca.crt").write_bytes(Path(cp.ca_cert_path).read_bytes())
    (secrets / "namespace").write_text(op_ns)
    host, port = cp.url.removeprefix("https://").rsplit(":", 1)
    config = InClusterConfig.from_environment(
        {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}, directory=secrets)
    return admin, op_ns, lambda: ForbiddenCounter(KubernetesClient(incluster_api_client(config)))


def _run_script(cp: ControlPlane, index: int, without: tuple[str, int] | None,
                tmp_path: Path) -> Outcome:
    admin, op_ns, make_client = _install(cp, index, without, tmp_path)
    demo_ns = f"demo-{index}"
    scraper = _scraper(cp, admin, op_ns, "prometheus", reader=True)
    counting = make_client()
    operator = deployed_operator(make_operator(), leader_elect=True,
                                 lease_namespace=op_ns, watch_namespace=None)
    try:  # as deployed: --metrics-auth
        runtime = operator.start(counting, serving=Serving(metrics_port=0, auth=True))
    except ForbiddenError:
        return Outcome(failed_step="start", forbidden=tuple(counting.forbidden))
    try:
        assert runtime.health is not None
        url = f"{runtime.health.url}/metrics"
        return _steps(admin, counting, demo_ns, scraped=lambda: _scrape(url, scraper)[0] == 200)
    finally:
        runtime.stop(timeout=10.0)


def _wait_for_service_account(cp: ControlPlane, namespace: str, name: str = _OPERATOR) -> None:
    core = kubernetes.client.CoreV1Api(cp.api_client())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account(name, namespace)
            return
        except kubernetes.client.ApiException:
            time.sleep(0.1)


def _token(cp: ControlPlane, namespace: str, service_account: str) -> str:
    """A token of the ServiceAccount from a TokenRequest, as the kubelet projects one."""
    return str(kubernetes.client.CoreV1Api(cp.api_client()).create_namespaced_service_account_token(
        service_account, namespace, {"spec": {"expirationSeconds": 3600}}).status.token)


def _scraper(cp: ControlPlane, admin: KubernetesClient, namespace: str, name: str, *,
             reader: bool) -> str:
    """A ServiceAccount's token, the account bound to the metrics reader role when ``reader``
    (as a Prometheus would be)."""
    admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": name, "namespace": namespace}})
    if reader:
        admin.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                      "metadata": {"name": f"{namespace}-{name}"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": f"{_OPERATOR}-metrics-reader"},
                      "subjects": [{"kind": "ServiceAccount", "name": name,
                                    "namespace": namespace}]})
    _wait_for_service_account(cp, namespace, name)
    return _token(cp, namespace, name)


def _scrape(url: str, token: str | None) -> tuple[int, str]:
    """GET ``url`` (with the bearer token, if any): status and body."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=10) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _parents(demo_ns: str) -> list[dict[str, Any]]:
    with open(samples, encoding="utf-8") as stream:
        out = [d for d in yaml.safe_load_all(stream) if d]
    for parent in out:
        parent["metadata"]["namespace"] = demo_ns
    return out


def _steps(admin: KubernetesClient, counting: ForbiddenCounter, demo_ns: str, *,
           scraped: Callable[[], bool]) -> Outcome:
    def children(kind: str, api_version: str) -> list[dict[str, Any]]:
        return list(admin.list(api_version, kind, namespace=demo_ns,
                               label_selector=_CHILD_LABEL)["items"])

    def reconciled(name: str) -> bool:
        kubelet(admin, name, namespace=demo_ns)  # the query frontend waits for the query
        parent = admin.get(API_VERSION, KIND, name, namespace=demo_ns)
        status = parent.get("status") or {}
        return status.get("observedGeneration") == parent["metadata"].get("generation") and any(
            c.get("type") == "Reconciled" and c.get("status") == "True"
            for c in status.get("conditions") or ())

    def step(name: str, check: Callable[[], bool]) -> Outcome | None:
        if _wait(check, counting):
            return None
        return Outcome(failed_step=name, forbidden=tuple(counting.forbidden))

    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": demo_ns}})
    if failed := step("CRD installed", lambda: admin.is_served(API_VERSION, KIND) or bool(
            admin.invalidate_discovery())):
        return failed
    apply_samples(admin, demo_ns)
    if failed := step("converge", lambda: reconciled("observatory") and reconciled("edge")
                      and len(children("Ingress", "networking.k8s.io/v1")) == 2):
        return failed
    if failed := step("metrics scraped", scraped):
        return failed
    with contextlib.suppress(AlreadyExistsError):  # installed by an earlier run
        admin.create(SERVICE_MONITOR_CRD)
    if failed := step("ServiceMonitors", lambda: len(
            children("ServiceMonitor", "monitoring.coreos.com/v1")) >= 1):
        return failed
    deployment = children("Deployment", "apps/v1")[0]
    name, replicas = deployment["metadata"]["name"], deployment["spec"]["replicas"]
    admin.patch("apps/v1", "Deployment", name, {"spec": {"replicas": replicas + 3}},
                patch_type="application/merge-patch+json", namespace=demo_ns)
    service = children("Service", "v1")[0]
    admin.delete("v1", "Service", service["metadata"]["name"], namespace=demo_ns)
    if failed := step("drift repaired", lambda: admin.get(
            "apps/v1", "Deployment", name, namespace=demo_ns)["spec"]["replicas"] == replicas
            and admin.get("v1", "Service", service["metadata"]["name"], namespace=demo_ns)[
                "metadata"]["uid"] != service["metadata"]["uid"]):
        return failed
    rule_children = [o["metadata"]["name"] for o in children("StatefulSet", "apps/v1")
                     if o["metadata"]["name"].endswith("-rule")]
    admin.patch(API_VERSION, KIND, "observatory", {"spec": {"rule": None}},
                patch_type="application/merge-patch+json", namespace=demo_ns)
    if failed := step("component off", lambda: not any(
            o["metadata"]["name"] in rule_children for o in children("StatefulSet", "apps/v1"))):
        return failed
    admin.patch(API_VERSION, KIND, "observatory", {"spec": {"rule": {"logLevel": "debug"}}},
                patch_type="application/merge-patch+json", namespace=demo_ns)
    if failed := step("component on", lambda: all(
            any(o["metadata"]["name"] == n for o in children("StatefulSet", "apps/v1"))
            for n in rule_children)):
        return failed
    admin.delete(API_VERSION, KIND, "edge", namespace=demo_ns)
    if failed := step("parent deleted", lambda: all(
            p["metadata"]["name"] != "edge"
            for p in admin.list(API_VERSION, KIND, namespace=demo_ns)["items"])):
        return failed
    return Outcome(failed_step=None, forbidden=tuple(counting.forbidden))


def test_the_demo_runs_with_the_generated_role_and_no_403(
    plane: ControlPlane, tmp_path: Path
) -> None:
    outcome = _run_script(plane, 0, None, tmp_path)
    assert outcome == Outcome(failed_step=None, forbidden=()), outcome
    crd = KubernetesClient(plane.api_client()).get(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "thanoses.monitoring.optk.dev")
    managers = {entry.get("manager") for entry in crd["metadata"].get("managedFields") or ()}
    assert "thanos-operator" not in managers, managers  # found equal: read, never written


@pytest.mark.parametrize("without", _rule_ids(), ids=lambda r: f"{r[0]}-rule{r[1]}")
def test_every_rule_is_needed(
    plane: ControlPlane, tmp_path: Path, without: tuple[str, int]
) -> None:
    index = 1 + _rule_ids().index(without)
    outcome = _run_script(plane, index, without, tmp_path)
    assert outcome.forbidden, f"without {without} the script passed: {outcome}"
    assert outcome.failed_step is not None


def _without_ingresses(admin: KubernetesClient, op_ns: str, *, restore: bool) -> None:
    """Take ``ingresses`` out of the generated role's rules (or put the rules back), as an
    administrator tightening the role would."""
    for obj, _ in _documents(op_ns):
        if obj["kind"] not in ("ClusterRole", "Role") or not any(
                "ingresses" in rule.get("resources", ()) for rule in obj["rules"]):
            continue
        rules = copy.deepcopy(obj["rules"])
        if not restore:
            for rule in rules:
                rule["resources"] = [r for r in rule.get("resources", ()) if r != "ingresses"]
            rules = [rule for rule in rules if rule["resources"]]
        admin.patch(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], {"rules": rules},
                    patch_type="application/merge-patch+json",
                    namespace=obj["metadata"].get("namespace"))


def test_a_kind_the_role_no_longer_grants_blocks_only_its_children(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """Issue 21, 2 and 3, on the real control plane: the operator restarted under its role
    without ``ingresses`` repairs a hand-scaled Deployment at once, serves ``/readyz`` as
    degraded, reports the parent whose Ingress was deleted as not reconciled (naming the
    kind), and re-creates that Ingress once the rule is restored, without a manual trigger."""
    admin, op_ns, make_client = _install(plane, 90, None, tmp_path)
    demo_ns = "demo-90"
    operator = deployed_operator(make_operator(), leader_elect=True,
                                 lease_namespace=op_ns, watch_namespace=None)
    first = operator.start(make_client())
    try:
        outcome = _steps_converge(admin, demo_ns)
    finally:
        first.stop(timeout=10.0)
    assert outcome is None, outcome

    def children(kind: str, api_version: str) -> list[dict[str, Any]]:
        return list(admin.list(api_version, kind, namespace=demo_ns,
                               label_selector=_CHILD_LABEL)["items"])

    def condition(name: str) -> dict[str, Any]:
        parent = admin.get(API_VERSION, KIND, name, namespace=demo_ns)
        return next((dict(c) for c in (parent.get("status") or {}).get("conditions") or ()
                     if c.get("type") == "Reconciled"), {})

    ingress = next(i for i in children("Ingress", "networking.k8s.io/v1")
                   if i["metadata"]["labels"].get("app.kubernetes.io/instance") == "observatory")
    _without_ingresses(admin, op_ns, restore=False)
    restarted = operator.start(make_client(), serving=Serving(metrics_port=0))
    try:
        assert restarted.health is not None
        deadline = time.monotonic() + _STEP_TIMEOUT
        body = ""
        while time.monotonic() < deadline and "degraded" not in body:
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"{restarted.health.url}/readyz", timeout=5) as reply:
                body = reply.read().decode() if reply.status == 200 else ""
            time.sleep(0.2)
        assert "Ingress" in body, body
        admin.delete("networking.k8s.io/v1", "Ingress", ingress["metadata"]["name"],
                     namespace=demo_ns)
        deployment = children("Deployment", "apps/v1")[0]
        name, replicas = deployment["metadata"]["name"], deployment["spec"]["replicas"]
        admin.patch("apps/v1", "Deployment", name, {"spec": {"replicas": replicas + 3}},
                    patch_type="application/merge-patch+json", namespace=demo_ns)
        scaled = time.monotonic()
        assert _wait_plain(lambda: admin.get("apps/v1", "Deployment", name, namespace=demo_ns)[
            "spec"]["replicas"] == replicas)
        repair = time.monotonic() - scaled
        assert repair < 10.0, f"the Deployment waited {repair:.1f}s for the Ingress informer"
        assert _wait_plain(lambda: condition("observatory").get("status") == "False"), \
            condition("observatory")
        assert "Ingress" in str(condition("observatory").get("message"))
        _without_ingresses(admin, op_ns, restore=True)
        assert _wait_plain(lambda: any(
            i["metadata"]["name"] == ingress["metadata"]["name"]
            for i in children("Ingress", "networking.k8s.io/v1")), 90), restarted.triggers()
        assert _wait_plain(lambda: all(condition(n).get("status") == "True"
                                       for n in ("observatory", "edge")), 30)
        assert restarted.triggers().get("manual", 0) == 0
    finally:
        restarted.stop(timeout=10.0)
        _without_ingresses(admin, op_ns, restore=True)


def _wait_plain(check: Callable[[], bool], timeout: float = _STEP_TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(NotFoundError):
            if check():
                return True
        time.sleep(0.2)
    return False


def _steps_converge(admin: KubernetesClient, demo_ns: str) -> str | None:
    """Create the samples in ``demo_ns`` and wait until both are reconciled with their
    Ingresses; None, or what did not happen."""
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": demo_ns}})
    if not _wait_plain(lambda: admin.is_served(API_VERSION, KIND) or bool(
            admin.invalidate_discovery())):
        return "CRD installed"
    apply_samples(admin, demo_ns)

    def reconciled(name: str) -> bool:
        kubelet(admin, name, namespace=demo_ns)  # the query frontend waits for the query
        parent = admin.get(API_VERSION, KIND, name, namespace=demo_ns)
        status = parent.get("status") or {}
        return status.get("observedGeneration") == parent["metadata"].get("generation") and any(
            c.get("type") == "Reconciled" and c.get("status") == "True"
            for c in status.get("conditions") or ())

    if not _wait_plain(lambda: reconciled("observatory") and reconciled("edge") and len(
            admin.list("networking.k8s.io/v1", "Ingress", namespace=demo_ns,
                       label_selector=_CHILD_LABEL)["items"]) == 2):
        return "converge"
    return None


def test_metrics_answer_only_a_token_the_api_server_accepts_and_allows(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """Issue 23, 4: the operator as deployed (``--metrics-auth``, its generated role) answers
    /metrics with 200 to a ServiceAccount bound to ``<name>-metrics-reader``, 401 without a
    token or with one the API server rejects, 403 to a valid token lacking the role; the
    probes stay open; a verdict is cached (a repeated scrape sends no review)."""
    admin, op_ns, make_client = _install(plane, 80, None, tmp_path)
    reader = _scraper(plane, admin, op_ns, "prometheus", reader=True)
    stranger = _scraper(plane, admin, op_ns, "stranger", reader=False)
    counting = make_client()
    operator = deployed_operator(make_operator(), leader_elect=True,
                                 lease_namespace=op_ns, watch_namespace=None)
    runtime = operator.start(counting, serving=Serving(metrics_port=0, auth=True))
    try:
        assert runtime.health is not None
        base = runtime.health.url
        status, body = _scrape(f"{base}/metrics", reader)
        assert status == 200, body
        assert "controller_runtime_reconcile_total" in body
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/metrics", timeout=10)
        assert refused.value.code == 401
        assert refused.value.headers["WWW-Authenticate"].startswith("Bearer")
        assert _scrape(f"{base}/metrics", "not-a-token")[0] == 401
        status, body = _scrape(f"{base}/metrics", stranger)
        assert status == 403, body
        assert f"system:serviceaccount:{op_ns}:stranger" in body
        assert _scrape(f"{base}/healthz", None) == (200, "ok")
        assert _wait_plain(lambda: _scrape(f"{base}/readyz", None)[0] == 200)
        user = f"system:serviceaccount:{op_ns}:{_OPERATOR}"
        # the operator's TokenReviews only: its Events and status writes are creates too
        before = _token_reviews(plane, user)
        assert [_scrape(f"{base}/metrics", t)[0] for t in (reader, stranger) * 3] == [200, 403] * 3
        assert _token_reviews(plane, user) == before  # cached verdicts
        assert _scrape(f"{base}/metrics", "another-token")[0] == 401
        assert _token_reviews(plane, user) == before + 1  # its TokenReview
        assert counting.forbidden == []
    finally:
        runtime.stop(timeout=10.0)


def test_the_verdict_cache_expires_and_stays_bounded(plane: ControlPlane) -> None:
    clock = VirtualClock()
    authorizer = MetricsAuthorizer(KubernetesClient(plane.api_client()), ttl=10.0,
                                   max_entries=2, clock=clock)
    assert [authorizer(t)[0] for t in ("a", "b", "c", "c")] == [401] * 4
    assert (authorizer.reviews, len(authorizer)) == (3, 2)  # "a", the oldest, went
    authorizer("a")
    assert authorizer.reviews == 4
    clock.advance(11.0)
    authorizer("a")
    assert authorizer.reviews == 5  # expired: asked again
    assert authorizer(None) == (401, "Unauthorized: a bearer token is required")
    assert authorizer.reviews == 5
