"""``optk trace`` on a running operator (issue 29): a parent waiting on an unready dependency, a
contested field, a child under a policy and a paused parent, each read back from the trace's
JSON (``reconciler._commands.trace_tree.trace_json``) and once through the command itself.

The operator's children: component ``db`` (a Deployment, ready when Available: no kubelet runs,
so it never is) and component ``app`` (a ConfigMap depending on ``db``), so the ConfigMap waits.
The contested field comes from the real contention path: a second writer (``test-scaler``,
server-side apply with force) resets the Deployment's replicas until the operator reports
``Contested``.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from builders import (
    Component,
    DesiredState,
    ResourceBuilder,
    child_name,
    compose,
    resource_builder,
)
from reconciler import KubernetesClient, Policies, Reporting
from reconciler._commands.trace_tree import trace_json
from reconciler._commands.traces import trace_command, trace_parent
from reconciler.testing import wait_idle
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.test_contention import QUIET, SCALED, Scaler, condition


@resource_builder
def db(parent: Any) -> dict[str, Any]:
    labels = {"app": parent["metadata"]["name"]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": child_name(parent["metadata"]["name"], "db")},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "db", "image": "pg"}]}}}}


@resource_builder
def app(parent: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": child_name(parent["metadata"]["name"], "app")},
            "data": {"value": parent["spec"]["value"]}}


def build(parent: Any) -> list[ResourceBuilder]:
    return compose(Component(name="db", builders=[db(parent)]),
                   Component(name="app", depends_on="db", builders=[app(parent)]))


def _child(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in doc["children"] if c["kind"] == kind)


def test_trace_shows_waits_contention_policies_and_pauses(
    client: KubernetesClient, kube_api: Any, ns: str
) -> None:
    operator = make_operator(ns, build=build, resync=QUIET,
                             policies=Policies(contention=SCALED),
                             reporting=Reporting(events=False))
    with running(operator, client) as runtime:
        client.create(thing(ns, "p"))
        assert wait_until(lambda: condition(client, ns, "p", "Ready").get("reason")
                          == "DependencyNotReady")
        assert wait_idle(runtime, 10)

        doc = trace_json(trace_parent(client, operator, name="p", namespace=ns))
        assert doc["parent"]["name"] == "p"
        assert doc["parent"]["paused"] == ""
        assert doc["waiting"] == 1
        deployment, config = _child(doc, "Deployment"), _child(doc, "ConfigMap")
        assert deployment["name"] == "p-db"
        assert deployment["exists"]
        assert deployment["health"] == "InProgress"
        assert deployment["next"] == "none"
        assert deployment["lastWrite"]["operation"] in ("Update", "Apply")
        assert config["name"] == "p-app"
        assert not config["exists"]
        assert config["health"] == "Missing"
        assert config["next"] == "wait"
        assert config["waitReason"] == "DependencyNotReady"
        assert "waits for component 'db'" in config["why"]
        assert [(r["kind"], r["name"]) for r in config["waitsFor"]] == [("Deployment", "p-db")]

        # another writer resets spec.replicas until the operator reports the contest
        scaler = Scaler(kube_api.api_client(), ns, "p-db", period=0.04)
        with scaler.running(20.0):
            assert wait_until(lambda: condition(client, ns, "p", "Contested").get("status")
                              == "True", timeout=20)
            doc = trace_json(trace_parent(client, operator, name="p", namespace=ns))
        contested = _child(doc, "Deployment")["contested"]
        assert "/spec/replicas" in contested, contested
        assert "test-scaler" in contested, contested

        # a policy on the child: its drift is reported, not repaired
        client.patch("apps/v1", "Deployment", "p-db",
                     {"metadata": {"annotations": {"optk.dev/policy": "observe"}}},
                     patch_type="application/merge-patch+json", namespace=ns)
        doc = trace_json(trace_parent(client, operator, name="p", namespace=ns))
        deployment = _child(doc, "Deployment")
        assert deployment["policy"] == "observe"
        assert deployment["next"] == "held"
        assert "/spec/replicas" in deployment["drift"]

        # a paused parent: the trace says so, and nothing would be written
        client.patch(thing(ns, "p")["apiVersion"],
                     "Thing", "p", {"metadata": {"annotations": {"optk.dev/paused": "true"}}},
                     patch_type="application/merge-patch+json", namespace=ns)
        doc = trace_json(trace_parent(client, operator, name="p", namespace=ns))
        assert "optk.dev/paused" in doc["parent"]["paused"], doc["parent"]


@resource_builder
def reader(parent: Any) -> dict[str, Any]:
    """A cluster-scoped child (named after the namespace too: ClusterRoles are shared)."""
    meta = parent["metadata"]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{meta['namespace']}-{meta['name']}-reader"}, "rules": []}


@resource_builder
def legacy(parent: Any) -> tuple[dict[str, Any], DesiredState]:
    """A cluster-scoped child declared ABSENT."""
    meta = parent["metadata"]
    return ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": f"{meta['namespace']}-{meta['name']}-legacy"}},
            DesiredState.ABSENT)


def scoped_build(parent: Any) -> list[ResourceBuilder]:
    return compose(Component(name="rbac", builders=[reader(parent), legacy(parent)]),
                   Component(name="app", builders=[app(parent)]))


@pytest.mark.both_servers
def test_a_cluster_scoped_child_of_a_namespaced_parent_is_traced_as_the_reconcile_sees_it(
    client: KubernetesClient, ns: str
) -> None:
    """Issue 35 (item 3): the trace's declared state and component of each child come from the
    reconcile's own evaluation (``reconciler._reconcile.declared``), so a cluster-scoped child
    of a namespaced parent has no namespace, its component's name (not its
    ``app.kubernetes.io/component`` label, ``<ns>-p-reader`` here) and its declared state, as a
    namespaced child does. Nothing runs: the trace's dry-run reconcile plans the creates."""
    operator = make_operator(ns, build=scoped_build)
    client.create(thing(ns, "p"))
    trace = trace_parent(client, operator, name="p", namespace=ns)
    children = {(c.ref.kind, c.ref.name): c for c in trace.children}
    assert set(children) == {("ClusterRole", f"{ns}-p-reader"),
                             ("ClusterRole", f"{ns}-p-legacy"), ("ConfigMap", "p-app")}
    role = children["ClusterRole", f"{ns}-p-reader"]
    assert (role.ref.namespace, role.component, role.state) == (None, "rbac", "present"), role
    assert role.next == "create", role
    gone = children["ClusterRole", f"{ns}-p-legacy"]
    assert (gone.ref.namespace, gone.component, gone.state, gone.health) == (
        None, "rbac", "absent", "Absent"), gone
    config = children["ConfigMap", "p-app"]
    assert (config.ref.namespace, config.component, config.state) == (ns, "app", "present")
    doc = trace_json(trace)
    assert {c["name"]: c["component"] for c in doc["children"]} == {
        f"{ns}-p-reader": "rbac", f"{ns}-p-legacy": "rbac", "p-app": "app"}, doc


OPERATOR_MODULE = '''
from reconciler import Operator, Reporting
from tests.driver.sample_operator import API_VERSION
from tests.driver.test_trace import build

operator = Operator(api_version=API_VERSION, kind="Thing", name={name!r}, namespace={ns!r},
                    build=build, reporting=Reporting(events=False))
'''


def test_the_command_prints_the_tree_and_json(
    client: KubernetesClient, kube_api: Any, ns: str, tmp_path: Path
) -> None:
    operator = make_operator(ns, build=build, resync=QUIET)
    module = tmp_path / "traced_operator.py"
    module.write_text(OPERATOR_MODULE.format(name=operator.name, ns=ns))
    with running(operator, client) as runtime:
        client.create(thing(ns, "q"))
        assert wait_until(lambda: condition(client, ns, "q", "Ready").get("reason")
                          == "DependencyNotReady")
        assert wait_idle(runtime, 10)
        text, data = io.StringIO(), io.StringIO()
        assert trace_command(f"{module}:operator", "thing/q", namespace=ns,
                             kubeconfig=str(kube_api.kubeconfig_path), out=text) == 0
        assert trace_command(f"{module}:operator", "q", namespace=ns, output="json",
                             kubeconfig=str(kube_api.kubeconfig_path), out=data) == 0
        assert trace_command(f"{module}:operator", "missing", namespace=ns,
                             kubeconfig=str(kube_api.kubeconfig_path), out=text) == 1
        with pytest.raises(ValueError, match="parents are Thing"):
            trace_command(f"{module}:operator", "pod/q", namespace=ns,
                          kubeconfig=str(kube_api.kubeconfig_path), out=text)
        with pytest.raises(ValueError, match="parents are Thing"):  # said before connecting
            trace_command(f"{module}:operator", "pod/q", namespace=ns,
                          kubeconfig="/nonexistent/kubeconfig", out=text)
    tree = text.getvalue()
    assert tree.startswith("Thing/q  "), tree
    assert "├─ Deployment/q-db [db]" in tree, tree
    assert "└─ ConfigMap/q-app [app]  Missing" in tree, tree
    assert "next: wait (" in tree, tree
    assert "waits for component 'db'" in tree, tree
    doc = json.loads(data.getvalue())
    assert [c["name"] for c in doc["children"]] == ["q-db", "q-app"]
    assert doc["waiting"] == 1
    watched = io.StringIO()
    start = time.monotonic()
    assert trace_command(f"{module}:operator", "q", namespace=ns, watch=True, interval=0.05,
                         count=2, kubeconfig=str(kube_api.kubeconfig_path), out=watched) == 0
    assert watched.getvalue().count("Thing/q  ") == 2
    assert time.monotonic() - start < 30
