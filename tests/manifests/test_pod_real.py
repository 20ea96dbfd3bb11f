"""The pod as the kubelet runs it (issue 23, 5), on the real control plane.

The generated manifests are applied (RBAC on); the Deployment's container is then run as a
kubelet would run it, with no kubelet: its ``command`` with ``$(VAR)`` references expanded, its
``env`` with the downward-API values filled in, ``KUBERNETES_SERVICE_HOST``/``_PORT``, the
ServiceAccount token from a TokenRequest (with the CA and namespace) bind-mounted at
``/var/run/secrets/kubernetes.io/serviceaccount`` in a mount namespace of its own, the pod's
``runAsUser``/``runAsGroup`` (``setpriv``), in a network namespace of its own
(``tests.podnet``: a veth pair, the pod address). The pod reaches the API server through the
``kubernetes`` Service address, here ``127.0.0.1`` inside the pod forwarded to the API server
(the serving certificate names 127.0.0.1; nothing is bound on the host). From the host, the
test probes ``/healthz`` and ``/readyz`` at the pod address and the port the probes name,
scrapes ``/metrics`` with a ServiceAccount token (200) and without one (401), and checks that
the operator reconciles the samples with no 403 (its log, its ``/readyz``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import kubernetes
import pytest
import yaml

from examples.thanos.operator import make_operator, samples
from reconciler import AlreadyExistsError, KubernetesClient, Serving
from reconciler._commands.manifests import ManifestOptions, manifests
from reconciler._commands.rbac import operator_facts
from reconciler._driver.runtime import OperatorRuntime
from reconciler._leadership.election import LeaderElection
from reconciler.envtest import ControlPlane
from tests.manifests.test_rbac_real import (
    _CHILD_LABEL,
    _OPERATOR,
    _scrape,
    _scraper,
    _steps_converge,
    _token,
    _wait_for_service_account,
    _wait_plain,
)
from tests.podnet import Forwarder, PodNetwork, pod_network, terminate

pytestmark = pytest.mark.timeout(400)

ROOT = Path(__file__).resolve().parents[2]
_SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_OP_NS = "optk-pod-op"
_IMAGES = ("optk-thanos:1.0", "optk-thanos:1.1")
_LEASE = f"{_OPERATOR}-leader"
_WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


@pytest.fixture(scope="module")
def plane(kube_assets: Path) -> Iterator[ControlPlane]:
    with ControlPlane(kube_assets) as cp:
        yield cp


def _expand(value: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion (an unknown reference stays as written)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: env.get(m.group(1), m.group(0)), value)


def _container_env(container: Mapping[str, Any], pod: Mapping[str, str]) -> dict[str, str]:
    """The container's ``env``, downward-API ``fieldRef`` values filled in from ``pod``."""
    env: dict[str, str] = {}
    for item in container.get("env") or ():
        if "value" in item:
            env[item["name"]] = _expand(str(item["value"]), env)
        else:
            env[item["name"]] = pod[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def _status(url: str) -> int | None:
    """The answer's status; None while nothing listens (the pod is starting)."""
    try:
        return _scrape(url, None)[0]
    except OSError:
        return None


def _pod_argv(net: PodNetwork, command: list[str], user: int, group: int,
              secrets: Path) -> list[str]:
    """``command`` in the pod's network namespace and a mount namespace of its own, where the
    ServiceAccount's files are mounted where the kubelet mounts them, as ``user:group``."""
    script = ("set -e; mount -t tmpfs -o mode=755 pod-run /run; "
              f"mkdir -p {_SA_DIR}; mount --bind -o ro \"$0\" {_SA_DIR}; "
              f"exec setpriv --reuid {user} --regid {group} --clear-groups \"$@\"")
    return net.argv(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                     str(secrets), *command])


@attrs.frozen
class Installed:
    """The stream applied (all but the Deployment), the pod's ServiceAccount files, a reader's
    token."""

    admin: KubernetesClient
    documents: list[dict[str, Any]]
    secrets: Path
    reader: str

    @property
    def deployment(self) -> dict[str, Any]:
        return next(o for o in self.documents if o["kind"] == "Deployment")


@pytest.fixture(scope="module")
def installed(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    if shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("setpriv and unshare are needed to run the pod's process")
    admin = KubernetesClient(plane.api_client())
    documents = _stream(_IMAGES[0])
    for obj in documents:
        if obj["kind"] == "Deployment":
            continue  # no kubelet: the tests run its container
        with contextlib.suppress(AlreadyExistsError):
            admin.create(obj)
    _wait_for_service_account(plane, _OP_NS)
    pod_spec = next(o for o in documents if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    secrets = tmp_path_factory.mktemp("pod") / "serviceaccount"
    secrets.mkdir(mode=0o755)
    secrets.chmod(0o755)
    secrets.parent.chmod(0o755)
    for name, text in (("token", _token(plane, _OP_NS, pod_spec["serviceAccountName"])),
                       ("ca.crt", Path(plane.ca_cert_path).read_text()),
                       ("namespace", _OP_NS)):
        (secrets / name).write_text(text)
        (secrets / name).chmod(0o644)  # the kubelet's default mode for projected files
    reader = _scraper(plane, admin, _OP_NS, "prometheus", reader=True)
    return Installed(admin=admin, documents=documents, secrets=secrets, reader=reader)


def _stream(image: str) -> list[dict[str, Any]]:
    """The generated stream for ``image`` (the Deployment's template names it)."""
    facts = operator_facts(make_operator())
    options = ManifestOptions(target="examples.thanos.operator:operator", namespace=_OP_NS,
                              image=image)
    with open(samples, encoding="utf-8") as stream:
        parents = [d for d in yaml.safe_load_all(stream) if d]
    return [obj for obj, _ in manifests(facts, options, parents=parents)]


def _through_service(admin: KubernetesClient, documents: list[dict[str, Any]],
                     pod_ip: str) -> str:
    """Where kube-proxy would send a scrape of the generated metrics Service: the Service as the
    API server holds it, selecting the pod's labels, its port's ``targetPort`` (a name or a
    number) resolved against the pod's container ports, at the pod's address."""
    template = next(o for o in documents if o["kind"] == "Deployment")["spec"]["template"]
    labels = template["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
    for doc in (o for o in documents if o["kind"] == "Service"):
        live = admin.get("v1", "Service", doc["metadata"]["name"],
                         namespace=doc["metadata"]["namespace"])
        selector = live["spec"].get("selector") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            continue
        for port in live["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            number = ports.get(target) if isinstance(target, str) else target
            if number is not None and number == ports.get("metrics"):
                return f"http://{pod_ip}:{number}"
    raise AssertionError("no generated Service routes to the pod's metrics port")


def _probe_port(container: Mapping[str, Any]) -> int:
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[container["livenessProbe"]["httpGet"]["port"]] == ports[
        container["readinessProbe"]["httpGet"]["port"]]
    return int(ports[container["readinessProbe"]["httpGet"]["port"]])


class Pod:
    """One pod of ``deployment`` run as the kubelet would (see the module docstring), in
    ``net``; its stderr lines in ``lines``."""

    def __init__(self, net: PodNetwork, deployment: Mapping[str, Any], secrets: Path,
                 name: str, api_port: str) -> None:
        pod_spec = deployment["spec"]["template"]["spec"]
        container = pod_spec["containers"][0]
        self.name = name
        self.grace = float(pod_spec["terminationGracePeriodSeconds"])
        self.base = f"http://{net.pod_ip}:{_probe_port(container)}"
        env = {"PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin", "HOME": "/tmp",
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": api_port,
               **_container_env(container, {"metadata.namespace": _OP_NS,
                                            "metadata.name": name})}
        command = [_expand(part, env) for part in container["command"]]
        security = pod_spec["securityContext"]
        self.process = subprocess.Popen(
            _pod_argv(net, command, security["runAsUser"], security["runAsGroup"], secrets),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(self.process.stderr or ()), daemon=True)
        self._reader.start()

    def ready(self) -> bool:
        return _status(f"{self.base}/readyz") == 200

    def terminate(self) -> tuple[int, float]:
        """SIGTERM as the kubelet sends it (SIGKILL after the grace period): the exit code and
        the seconds it took."""
        started = time.monotonic()
        code = terminate(self.process, grace=self.grace)
        self._reader.join(timeout=10)
        return code, time.monotonic() - started


def test_the_generated_pod_serves_its_probes_and_metrics_and_reconciles(
    plane: ControlPlane, installed: Installed
) -> None:
    admin, reader = installed.admin, installed.reader
    host, api_port = plane.url.removeprefix("https://").rsplit(":", 1)
    with pod_network() as net, net.forward("127.0.0.1", int(api_port), (host, int(api_port))):
        pod = Pod(net, installed.deployment, installed.secrets, "operator-0", api_port)
        base, lines, process = pod.base, pod.lines, pod.process
        try:
            assert _wait_plain(pod.ready, 90), lines[-20:]
            assert _scrape(f"{base}/healthz", None) == (200, "ok")
            # Scraped as Prometheus would, through the metrics Service: its port's targetPort
            # resolved against the pod's container ports (no kube-proxy runs here).
            via = _through_service(admin, installed.documents, net.pod_ip)
            status, body = _scrape(f"{via}/metrics", reader)
            assert status == 200, body
            assert "leader_election_master_status" in body
            assert _scrape(f"{via}/metrics", None)[0] == 401
            assert _steps_converge(admin, "demo-pod") is None, lines[-20:]
            assert _scrape(f"{base}/readyz", None) == (200, "ok")  # not degraded
        finally:
            pod.terminate()
    probe_port = _probe_port(installed.deployment["spec"]["template"]["spec"]["containers"][0])
    assert process.returncode == 0, lines[-20:]
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert logged, lines[-20:]
    assert all(set(line) >= {"ts", "level", "logger", "msg"} for line in logged)
    forbidden = [line for line in lines if "403" in line or "orbidden" in line]
    assert forbidden == []
    serving = [line["msg"] for line in logged if line["msg"].startswith("metrics and health")]
    assert serving in ([f"metrics and health on http://[::]:{probe_port} (/metrics authorized "
                        "by the API server)"],
                       [f"metrics and health on http://0.0.0.0:{probe_port} (/metrics "
                        "authorized by the API server)"]), serving


@attrs.frozen
class Write:
    """One write the API server's audit log records from a pod (told apart by the address its
    connections come from)."""

    pod: str
    at: datetime
    verb: str
    resource: str
    name: str
    code: int


def _writes(audit: Path, pods: Mapping[str, str]) -> list[Write]:
    """Every write from the addresses of ``pods`` (address -> pod name), reviews left out (a
    scrape's TokenReview and SubjectAccessReview change nothing)."""
    found: list[Write] = []
    for line in audit.read_text().splitlines():
        event = json.loads(line)
        source = (event.get("sourceIPs") or [""])[0]
        ref = event.get("objectRef") or {}
        if (event.get("stage") != "ResponseComplete" or event.get("verb") not in _WRITE_VERBS
                or source not in pods
                or ref.get("resource") in ("tokenreviews", "subjectaccessreviews")):
            continue
        found.append(Write(pod=pods[source], at=datetime.fromisoformat(
            event["requestReceivedTimestamp"]), verb=event["verb"],
            resource=str(ref.get("resource")), name=str(ref.get("name") or ""),
            code=int((event.get("responseStatus") or {}).get("code") or 0)))
    return found


def _leading_spans(writes: list[Write]) -> dict[str, tuple[datetime, datetime]]:
    """Each pod's span as leader: its first to its last successful write of the leader Lease
    (the acquisition to the release)."""
    spans: dict[str, tuple[datetime, datetime]] = {}
    for write in writes:
        if write.resource == "leases" and write.name == _LEASE and write.code < 300:
            first, _ = spans.get(write.pod, (write.at, write.at))
            spans[write.pod] = (first, write.at)
    return spans


def _leads(pod: Pod, reader: str) -> bool:
    status, body = _scrape(f"{pod.base}/metrics", reader)
    return status == 200 and re.search(
        rf'^leader_election_master_status\{{name="{re.escape(_LEASE)}"\}} 1\.0$', body,
        re.MULTILINE) is not None


def _without_image(deployment: Mapping[str, Any]) -> dict[str, Any]:
    copied = json.loads(json.dumps(deployment))
    for container in copied["spec"]["template"]["spec"]["containers"]:
        container.pop("image")
    return copied


def test_a_rolling_update_hands_the_lease_over_at_once_with_never_two_writers(
    plane: ControlPlane, installed: Installed
) -> None:
    """Two pods of the generated Deployment (each in its own network namespace), the first
    leading; then the rolling update to the next image tag, in the ReplicaSet's order (a new
    pod starts and is Ready, the youngest old pod gets SIGTERM; again): the leader exits 0
    within the grace period, releasing its Lease, and a new pod leads at once. The audit log
    (each pod's connections come from an address of its own) shows no write by any pod
    outside its span as leader, and the spans never overlap."""
    admin, reader = installed.admin, installed.reader
    old = installed.deployment
    new = next(o for o in _stream(_IMAGES[1]) if o["kind"] == "Deployment")
    assert old["spec"]["replicas"] == 2
    assert _without_image(old) == _without_image(new)  # the rollout changes the image alone
    grace = float(new["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])
    host, api_port = plane.url.removeprefix("https://").rsplit(":", 1)
    sources: dict[str, str] = {}
    with contextlib.ExitStack() as stack:

        def start(deployment: Mapping[str, Any], name: str) -> Pod:
            net = stack.enter_context(pod_network())
            source = f"127.0.0.{11 + len(sources)}"
            stack.enter_context(net.forward("127.0.0.1", int(api_port),
                                            (host, int(api_port)), source=source))
            pod = Pod(net, deployment, installed.secrets, name, api_port)
            stack.callback(lambda: pod.process.poll() is None and pod.terminate())
            sources[source] = name
            assert _wait_plain(pod.ready, 60), pod.lines[-20:]
            return pod

        old_a = start(old, "operator-1-a")
        assert _wait_plain(lambda: _leads(old_a, reader), 30), old_a.lines[-20:]
        old_b = start(old, "operator-1-b")
        assert _steps_converge(admin, "demo-roll") is None, old_a.lines[-20:]
        deployment = admin.list("apps/v1", "Deployment", namespace="demo-roll",
                                label_selector=_CHILD_LABEL)["items"][0]
        child, replicas = deployment["metadata"]["name"], deployment["spec"]["replicas"]
        drifting = threading.Event()

        def drift() -> None:  # a hand keeps scaling a child: the leader keeps repairing it
            for step in range(300):
                if drifting.wait(0.3):
                    return
                admin.patch("apps/v1", "Deployment", child,
                            {"spec": {"replicas": replicas + 1 + step % 3}},
                            patch_type="application/merge-patch+json", namespace="demo-roll")

        hand = threading.Thread(target=drift, daemon=True)
        hand.start()
        stack.callback(hand.join, 10)
        stack.callback(drifting.set)
        new_a = start(new, "operator-2-a")
        code_b, took_b = old_b.terminate()
        new_b = start(new, "operator-2-b")
        time.sleep(1.0)  # the leader repairs the drift meanwhile
        sigterm = datetime.now().astimezone()
        code_a, took_a = old_a.terminate()
        assert _wait_plain(lambda: _leads(new_a, reader) or _leads(new_b, reader), 30)
        time.sleep(1.0)
        drifting.set()
        hand.join(10)
        assert _wait_plain(lambda: admin.get("apps/v1", "Deployment", child,
                                             namespace="demo-roll")["spec"]["replicas"]
                           == replicas, 30)
        ends = {pod.name: pod.terminate() for pod in (new_a, new_b)}
    writes = _writes(plane.audit_log_path, sources)
    spans = _leading_spans(writes)
    print(f"old pods: standby exit {code_b} in {took_b:.2f}s, leader exit {code_a} in "
          f"{took_a:.2f}s; spans {spans}")
    assert (code_a, code_b) == (0, 0), old_a.lines[-20:]
    assert max(took_a, took_b) < grace
    assert all(code == 0 and took < grace for code, took in ends.values()), ends
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    assert [name for name, _ in ordered][:1] == ["operator-1-a"]
    overlaps = [(a, b) for (a, (_, a_end)), (b, (b_start, _)) in itertools.pairwise(ordered)
                if b_start <= a_end]
    assert overlaps == []
    outside = [w for w in writes if not (w.resource == "leases" and w.name == _LEASE)
               and not (w.pod in spans and spans[w.pod][0] <= w.at <= spans[w.pod][1])]
    assert outside == []
    repairs = {pod: sum(1 for w in writes if w.resource == "deployments" and w.name == child)
               for pod in spans}
    released = spans["operator-1-a"][1]
    successor, (acquired, _) = ordered[1]
    handover, after_sigterm = (acquired - released).total_seconds(), (
        acquired - sigterm).total_seconds()
    print(f"hand-over to {successor}: {handover:.2f}s after the release, {after_sigterm:.2f}s "
          f"after SIGTERM; repairs by leader {repairs}")
    assert released >= sigterm  # the release came on SIGTERM
    assert after_sigterm < LeaderElection().lease_duration
    assert repairs["operator-1-a"] > 0
    assert repairs[successor] > 0


def _healthz(url: str) -> tuple[int, str]:
    try:
        return _scrape(f"{url}/healthz", None)
    except OSError as error:
        return 0, str(error)


def test_healthz_fails_when_the_informers_stall_and_never_while_they_progress(
    plane: ControlPlane, installed: Installed
) -> None:
    """The operator reaches the API server through a forwarder that stops relaying (a link
    gone dead without a reset: nothing fails, nothing arrives); watch timeout 2 s, liveness
    bound 6 s. While it relays, ``/healthz`` answers 200 for longer than the bound (quiet
    watches end every 2 s: progress); once it stalls, 503 within the bound (plus two seconds
    of polling); once it relays again, 200."""
    host, api_port = plane.url.removeprefix("https://").rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    forwarder = Forwarder(listener, (host, int(api_port)))
    config = plane.configuration()
    config.host = f"https://127.0.0.1:{listener.getsockname()[1]}"
    bound = 6.0
    runtime = OperatorRuntime(make_operator(),
                              KubernetesClient(kubernetes.client.ApiClient(config)),
                              environ={}, serving=Serving(metrics_port=0), watch_timeout=2,
                              liveness_bound=bound)
    try:
        runtime.start()
        assert runtime.health is not None
        url = runtime.health.url
        assert _wait_plain(lambda: runtime.ready, 30)
        answers = []
        healthy_until = time.monotonic() + bound + 3
        while time.monotonic() < healthy_until:
            answers.append(_healthz(url))
            time.sleep(0.5)
        assert set(answers) == {(200, "ok")}, answers
        forwarder.stall()
        stalled = time.monotonic()
        assert _wait_plain(lambda: _healthz(url)[0] == 503, bound + 10)
        took = time.monotonic() - stalled
        status, body = _healthz(url)
        print(f"/healthz 503 {took:.1f}s after the stall (bound {bound:g}s): {body}")
        assert status == 503
        assert body.startswith("no progress of the informers of ")
        assert took <= bound + 2.0
        forwarder.resume()
        resumed = time.monotonic()
        assert _wait_plain(lambda: _healthz(url) == (200, "ok"), 20)
        print(f"/healthz 200 again {time.monotonic() - resumed:.1f}s after relaying resumed")
    finally:
        forwarder.resume()
        runtime.stop(timeout=5)
        forwarder.close()
