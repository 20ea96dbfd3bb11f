"""Defaulting, status handling and generation of the built-in kinds, through their strategies."""

from __future__ import annotations

import base64
import copy
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from objectmatcher import MERGE_PATCH, apply_patch
from reconciler.embedded._kinds import Invalid, KindStrategy, ServerContext
from reconciler.embedded._registry import make_registry
from tests.conftest import load_fixture

REGISTRY = make_registry()


def merge_patch(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch applied as the server applies it (a new dict)."""
    return apply_patch(obj, patch, patch_type=MERGE_PATCH)


def strategy_for(api_version: str, kind: str) -> KindStrategy:
    rt = REGISTRY.by_kind(api_version, kind)
    assert rt is not None
    return REGISTRY.strategy(rt)


def created(obj: dict[str, Any], ctx: ServerContext | None = None) -> dict[str, Any]:
    """``obj`` as the server stores it on create (defaults applied, validated)."""
    stored = copy.deepcopy(obj)
    strategy = strategy_for(obj["apiVersion"], obj["kind"])
    stored.setdefault("metadata", {}).setdefault("uid", "11111111-2222-3333-4444-555555555555")
    strategy.prepare_create(stored, ctx or ServerContext())
    strategy.validate_create(stored)
    return stored


def template(image: str = "busybox:1.36", **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": image, **container}]},
    }


def workload(kind: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template(), **spec},
    }


# --- pod templates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("registry:5000/team/nginx", "Always"),
        ("registry:5000/team/nginx:1.25", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    stored = created(workload("Deployment") | {"spec": workload("Deployment")["spec"] | {
        "template": template(image)}})
    container = stored["spec"]["template"]["spec"]["containers"][0]
    assert container["imagePullPolicy"] == policy


def test_pod_template_defaults_reach_probes_ports_env_and_volumes() -> None:
    tmpl = template(
        ports=[{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 80}],
        env=[{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        livenessProbe={"httpGet": {"port": 8080}},
        readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 3},
    )
    tmpl["spec"]["volumes"] = [
        {"name": "scratch"},
        {"name": "conf", "configMap": {"name": "cm"}},
        {"name": "creds", "secret": {"secretName": "s", "defaultMode": 256}},
    ]
    obj = workload("DaemonSet")
    obj["spec"]["template"] = tmpl
    spec = created(obj)["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert [p["protocol"] for p in container["ports"]] == ["UDP", "TCP"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert container["livenessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3,
    }
    assert container["readinessProbe"]["periodSeconds"] == 3
    assert spec["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "conf", "configMap": {"name": "cm", "defaultMode": 420}},
        {"name": "creds", "secret": {"secretName": "s", "defaultMode": 256}},
    ]


def test_daemonset_replicaset_and_job_defaults() -> None:
    ds = created(workload("DaemonSet"))
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert ds["spec"]["revisionHistoryLimit"] == 10
    assert ds["status"]["desiredNumberScheduled"] == 0

    rs = created(workload("ReplicaSet"))
    assert rs["spec"]["replicas"] == 1
    assert rs["status"] == {"replicas": 0}

    job = created({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once", "namespace": "ns", "uid": "u-1"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}},
    })
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["selector"] == {"matchLabels": {"controller-uid": "u-1"}}
    assert spec["template"]["metadata"]["labels"] == {"controller-uid": "u-1", "job-name": "once"}
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_recreate_deployment_gets_no_rolling_update() -> None:
    stored = created(workload("Deployment", strategy={"type": "Recreate"}))
    assert stored["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "100m"}}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
    ],
)
def test_pod_starts_pending_with_its_qos_class(resources: dict[str, Any], qos: str) -> None:
    pod = created({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]},
        "status": {"phase": "Running"},
    })
    assert pod["status"] == {"phase": "Pending", "qosClass": qos}
    spec = pod["spec"]
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
    assert spec["enableServiceLinks"] is True
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
    }
    if "limits" in resources:  # requests default to limits
        assert spec["containers"][0]["resources"]["requests"] == resources["limits"]


def test_namespace_defaults() -> None:
    ns = created({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["status"] == {"phase": "Active"}


# --- services --------------------------------------------------------------------------------


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns"},
        "spec": {"ports": [{"port": 80}], **spec},
    }


def test_cluster_ips_are_unique_and_released_on_delete() -> None:
    ctx = ServerContext()
    first = created(service("a"), ctx)
    second = created(service("b"), ctx)
    assert first["spec"]["clusterIP"] != second["spec"]["clusterIP"]
    assert first["spec"]["clusterIP"].startswith("10.0.0.")
    strategy_for("v1", "Service").on_delete(first, ctx)
    assert ctx.allocated_cluster_ips == {second["spec"]["clusterIP"]}
    again = created(service("c", clusterIP=first["spec"]["clusterIP"]), ctx)
    assert again["spec"]["clusterIPs"] == [first["spec"]["clusterIP"]]


@pytest.mark.parametrize(
    ("ip", "problem"),
    [
        ("10.0.0.2", "provided IP is already allocated"),
        ("10.1.0.5", "the provided IP (10.1.0.5) is not in the valid range. The range of valid "
                     "IPs is 10.0.0.0/16"),
    ],
)
def test_requested_cluster_ip_must_be_free_and_in_range(ip: str, problem: str) -> None:
    ctx = ServerContext()
    created(service("a", clusterIP="10.0.0.2"), ctx)
    with pytest.raises(Invalid) as raised:
        created(service("b", clusterIP=ip), ctx)
    assert raised.value.causes == [{
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: {problem}',
        "field": "spec.clusterIPs",
    }]
    assert created(service("c"), ctx)["spec"]["clusterIP"] != "10.0.0.2"


def test_node_ports_are_allocated_kept_and_released() -> None:
    ctx = ServerContext()
    strategy = strategy_for("v1", "Service")
    ports = [{"name": "http", "port": 80}, {"name": "https", "port": 443, "nodePort": 30443}]
    svc = created(service("np", type="NodePort", ports=ports), ctx)
    node_ports = [p["nodePort"] for p in svc["spec"]["ports"]]
    assert node_ports[1] == 30443
    assert 30000 <= node_ports[0] <= 32767
    assert svc["spec"]["externalTrafficPolicy"] == "Cluster"
    with pytest.raises(Invalid) as raised:
        created(service("clash", type="NodePort", ports=[{"port": 1, "nodePort": 30443}]), ctx)
    assert raised.value.causes[0]["field"] == "spec.ports[0].nodePort"
    put = copy.deepcopy(svc)
    put["spec"] = {"type": "NodePort", "ports": [{"name": "http", "port": 80},
                                                 {"name": "https", "port": 443}]}
    strategy.prepare_update(svc, put, ctx)
    assert [p["nodePort"] for p in put["spec"]["ports"]] == node_ports
    assert put["spec"]["clusterIP"] == svc["spec"]["clusterIP"]
    strategy.on_delete(svc, ctx)
    assert ctx.allocated_node_ports == set()
    assert ctx.allocated_cluster_ips == set()


def test_external_name_service_gets_no_cluster_ip() -> None:
    stored = created(service("ext", type="ExternalName", externalName="example.com"))
    assert "clusterIP" not in stored["spec"]


def test_put_of_a_service_without_cluster_ip_keeps_the_allocated_one() -> None:
    # immutable-fields.json: "PUT of a desired Service without clusterIP/resourceVersion"
    step = next(s for s in load_fixture("immutable-fields.json")["steps"]
                if s["request"]["method"] == "PUT")
    ctx = ServerContext()
    old = created(service("imm-svc", selector={"app": "x"}), ctx)
    new = copy.deepcopy(step["request"]["body"])
    strategy = strategy_for("v1", "Service")
    strategy.prepare_update(old, new, ctx)
    strategy.validate_update(old, new)
    expected = copy.deepcopy(step["response"]["spec"])
    expected["clusterIP"] = old["spec"]["clusterIP"]
    expected["clusterIPs"] = [old["spec"]["clusterIP"]]
    assert new["spec"] == expected


# --- secrets ---------------------------------------------------------------------------------


def test_string_data_wins_over_data_and_is_not_stored() -> None:
    stored = created({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
        "data": {"user": base64.b64encode(b"old").decode()},
        "stringData": {"user": "new", "pass": "pw"},
    })
    assert "stringData" not in stored
    assert {k: base64.b64decode(v).decode() for k, v in stored["data"].items()} == {
        "user": "new", "pass": "pw",
    }
    assert stored["type"] == "Opaque"


# --- status subresources and generation -----------------------------------------------------


def replay(
    steps: list[dict[str, Any]], obj: dict[str, Any], api_version: str, kind: str
) -> list[tuple[str, int, int]]:
    """Apply recorded merge patches to ``obj``; (action, recorded, computed) generations."""
    strategy = strategy_for(api_version, kind)
    ctx = ServerContext()
    results = []
    for step in steps:
        request = step.get("request")
        if request is None or step.get("httpStatus") != 200:
            continue
        body = request["body"]
        new = copy.deepcopy(body) if request["method"] == "PUT" else merge_patch(obj, body)
        if request["path"].endswith("/status"):
            strategy.prepare_status_update(obj, new)
        else:
            strategy.prepare_update(obj, new, ctx)
            strategy.validate_update(obj, new)
        generation = obj["metadata"]["generation"]
        if strategy.spec_changed(obj, new):
            generation += 1
        new["metadata"]["generation"] = generation
        if "status" in step:
            assert new.get("status") == step["status"], step["action"]
        if "spec.replicas" in step:
            assert new["spec"]["replicas"] == step["spec.replicas"], step["action"]
        results.append((step["action"], step["generation"], generation))
        obj = new
    return results


def test_deployment_generation_and_status_follow_the_recording() -> None:
    steps = load_fixture("generation.json")["deployment"]
    put = next(s for s in steps if s.get("request", {}).get("method") == "PUT")
    sent = copy.deepcopy(put["request"]["body"])
    sent["metadata"] = {"name": "gen-demo", "namespace": "fixtures", "labels": {"app": "gen"},
                        "uid": put["request"]["body"]["metadata"]["uid"]}
    sent["spec"]["replicas"] = 1
    del sent["spec"]["template"]["metadata"]["annotations"]
    obj = created(sent)
    obj["metadata"]["generation"] = 1
    assert obj["status"] == {}
    results = replay(steps, obj, "apps/v1", "Deployment")
    assert len(results) == len([s for s in steps if s.get("request")])
    for action, recorded, computed in results:
        assert computed == recorded, action


def test_statefulset_annotations_do_not_bump_generation() -> None:
    strategy = strategy_for("apps/v1", "StatefulSet")
    old = created(load_fixture("statefulset.json")["sent"])
    annotated = copy.deepcopy(old)
    annotated["metadata"]["annotations"] = {"a": "b"}
    assert not strategy.spec_changed(old, annotated)
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 2
    assert strategy.spec_changed(old, scaled)


def test_kinds_without_generation_never_bump() -> None:
    strategy = strategy_for("v1", "ConfigMap")
    old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    assert not strategy.spec_changed(old, {**old, "data": {"a": "2"}})


def test_status_update_changes_only_status() -> None:
    strategy = strategy_for("apps/v1", "Deployment")
    old = created(workload("Deployment"))
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 9
    new["metadata"]["labels"] = {"sneaky": "yes"}
    new["status"] = {"replicas": 3}
    strategy.prepare_status_update(old, new)
    assert new == {**old, "status": {"replicas": 3}}


# --- properties ------------------------------------------------------------------------------

_names = st.text(alphabet="abcdefghij-", min_size=1, max_size=8).map(lambda s: f"c{s}x")
_containers = st.lists(
    st.fixed_dictionaries(
        {"name": _names, "image": st.sampled_from(["nginx", "nginx:1.25", "a/b:latest"])},
        optional={
            "ports": st.lists(st.fixed_dictionaries({"containerPort": st.integers(1, 65535)},
                                                    optional={"protocol": st.just("UDP")}),
                              max_size=2),
            "imagePullPolicy": st.just("Never"),
            "livenessProbe": st.just({"tcpSocket": {"port": 1}}),
        },
    ),
    min_size=1, max_size=3, unique_by=lambda c: c["name"],
)


@given(containers=_containers, kind=st.sampled_from(
    ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"]))
def test_defaulting_is_idempotent_and_keeps_what_was_set(
    containers: list[dict[str, Any]], kind: str
) -> None:
    obj = workload(kind)
    obj["spec"]["template"]["spec"]["containers"] = containers
    if kind == "StatefulSet":  # required by the schema, not by the 1.25 server
        obj["spec"]["serviceName"] = "headless"
    once = created(obj)
    twice = created(once)
    assert twice == once
    kubernetes_validate.validate(once, "1.25", strict=True)  # defaults have the right shapes
    for sent, stored in zip(containers, once["spec"]["template"]["spec"]["containers"],
                            strict=True):
        scalars = {k: v for k, v in sent.items() if isinstance(v, str)}
        assert {k: stored[k] for k in scalars} == scalars


def test_hpa_defaults_metrics_and_completes_behavior() -> None:
    hpa = created({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h", "namespace": "ns"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                 "maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
    })
    spec = hpa["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert spec["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 60, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    }
    assert spec["behavior"]["scaleUp"]["policies"][0] == {
        "type": "Pods", "value": 4, "periodSeconds": 15}
    assert hpa["status"] == {"currentMetrics": None, "desiredReplicas": 0}


def test_unknown_fields_are_reported_and_dropped() -> None:
    strategy = strategy_for("apps/v1", "Deployment")
    sent = workload("Deployment", replica=3)
    sent["spec"]["template"]["spec"]["containers"][0]["imagePolicy"] = "Always"
    sent["status"] = {"replicas": 1}  # reset anyway: status subresource
    sent["extra"] = True
    assert strategy.unknown_fields(sent) == [
        "extra", "spec.replica", "spec.template.spec.containers[0].imagePolicy"]
    assert "replica" in sent["spec"]  # reporting does not change the object
    stored = created(sent)
    assert strategy.unknown_fields(stored) == []
    assert "extra" not in stored
    assert "replica" not in stored["spec"]
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                 "data": {"any-key": "kept"}, "status": {"phase": "none"}}
    assert created(configmap)["data"] == {"any-key": "kept"}
    assert "status" not in created(configmap)


def test_every_recorded_object_has_only_known_fields() -> None:
    # The 1.25 schemas the pruning uses know every field a real 1.25 server returned.
    for name in ("deployment.json", "statefulset.json", "service-clusterip.json",
                 "secret.json", "persistentvolumeclaim.json", "customresourcedefinition.json"):
        returned = load_fixture(name)["returned"]
        strategy = strategy_for(returned["apiVersion"], returned["kind"])
        assert strategy.unknown_fields(returned) == [], name


def test_unknown_fields_are_dropped_even_without_kind_in_the_body() -> None:
    strategy = strategy_for("v1", "ConfigMap")
    body: dict[str, Any] = {"metadata": {"name": "c"}, "data": {"a": "1"}, "junk": 1}
    assert strategy.unknown_fields(body) == ["junk"]
    strategy.prepare_create(body, ServerContext())
    assert body == {"metadata": {"name": "c"}, "data": {"a": "1"}}


def test_type_changes_clear_what_the_new_type_does_not_use() -> None:
    ctx = ServerContext()
    strategy = strategy_for("v1", "Service")
    node_port = created(service("np", type="NodePort"), ctx)
    to_cluster_ip = merge_patch(node_port, {"spec": {"type": "ClusterIP"}})
    strategy.prepare_update(node_port, to_cluster_ip, ctx)
    strategy.validate_update(node_port, to_cluster_ip)
    assert "nodePort" not in to_cluster_ip["spec"]["ports"][0]
    assert to_cluster_ip["spec"]["clusterIP"] == node_port["spec"]["clusterIP"]

    to_external = merge_patch(node_port, {"spec": {"type": "ExternalName",
                                                   "externalName": "example.com"}})
    strategy.prepare_update(node_port, to_external, ctx)
    strategy.validate_update(node_port, to_external)
    assert not {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"} & set(
        to_external["spec"])

    back = merge_patch(to_external, {"spec": {"type": "ClusterIP", "externalName": None}})
    strategy.prepare_update(to_external, back, ctx)
    assert back["spec"]["clusterIP"] not in (None, node_port["spec"]["clusterIP"])


def test_the_service_range_holds_thousands_of_services_and_reuses_released_addresses() -> None:
    # 1,000 parents with two Services each must fit (a /24 held 253); allocation stays O(1).
    ctx = ServerContext()
    ips = [created(service(f"s{i}"), ctx)["spec"]["clusterIP"] for i in range(3000)]
    assert len(set(ips)) == 3000
    assert all(ip.startswith("10.0.") for ip in ips)
    assert "10.0.0.0" not in ips
    assert "10.0.0.1" not in ips
    ctx.release_cluster_ip(ips[0])
    ctx.allocated_cluster_ips.update(
        f"10.0.{host // 256}.{host % 256}" for host in range(2, 65535)
    )
    ctx.allocated_cluster_ips.discard(ips[0])
    assert created(service("again"), ctx)["spec"]["clusterIP"] == ips[0]
