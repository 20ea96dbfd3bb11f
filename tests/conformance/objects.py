"""The objects the conformance suite creates: one of every kind the ``builders`` helpers produce,
with the cluster-scoped ones named per namespace so that parallel tests never collide."""

from __future__ import annotations

from typing import Any

from builders import objects as b

_LABELS = {"app.kubernetes.io/name": "web"}


def _container() -> dict[str, Any]:
    return b.container(
        name="web", image="nginx:1.25", ports={"http": 8080}, env={"MODE": "test"},
        resources=b.resources(requests={"cpu": "100m", "memory": "64Mi"},
                              limits={"memory": "128Mi"}),
        readiness_probe=b.probe(port="http", path="/ready"),
        volume_mounts=[b.volume_mount(name="config", mount_path="/etc/web")],
    )


def builder_objects(namespace: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Request kind id -> (collection path, object) for every builders helper."""
    meta = b.object_meta(name="web", namespace=namespace, labels=_LABELS)
    cluster_meta = b.object_meta(name=f"web-{namespace}", labels=_LABELS)
    volumes = [b.volume(name="config", config_map="web")]
    ns_path = f"/api/v1/namespaces/{namespace}"
    apps = f"/apis/apps/v1/namespaces/{namespace}"
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    rules = [b.policy_rule(api_groups=[""], resources=["configmaps"], verbs=["get", "list"])]
    subjects = [b.subject(name="web", namespace=namespace)]
    return {
        "deployment": (f"{apps}/deployments", b.deployment(
            metadata=meta, selector_labels=_LABELS, containers=[_container()], replicas=2,
            volumes=volumes)),
        "statefulset": (f"{apps}/statefulsets", b.statefulset(
            metadata=meta, selector_labels=_LABELS, containers=[_container()],
            service_name="web", replicas=1, volumes=volumes)),
        "daemonset": (f"{apps}/daemonsets", b.daemonset(
            metadata=meta, selector_labels=_LABELS, containers=[_container()], volumes=volumes)),
        "service": (f"{ns_path}/services", b.service(
            metadata=meta, selector=_LABELS, ports={"http": 80})),
        "headless-service": (f"{ns_path}/services", b.headless_service(
            metadata=b.object_meta(name="web-headless", namespace=namespace), selector=_LABELS,
            ports={"http": 80})),
        "serviceaccount": (f"{ns_path}/serviceaccounts", b.service_account(metadata=meta)),
        "configmap": (f"{ns_path}/configmaps", b.config_map(
            metadata=meta, data={"a": "1"}, binary_data={"b": b"\x00\x01"})),
        "secret": (f"{ns_path}/secrets", b.secret(metadata=meta, data={"password": "s3cret"})),
        "role": (f"{rbac}/namespaces/{namespace}/roles", b.role(metadata=meta, rules=rules)),
        "clusterrole": (f"{rbac}/clusterroles", b.cluster_role(
            metadata=cluster_meta, rules=rules)),
        "rolebinding": (f"{rbac}/namespaces/{namespace}/rolebindings", b.role_binding(
            metadata=meta, role_name="web", subjects=subjects)),
        "clusterrolebinding": (f"{rbac}/clusterrolebindings", b.cluster_role_binding(
            metadata=cluster_meta, role_name=f"web-{namespace}", subjects=subjects)),
        "ingress": (f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses", b.ingress(
            metadata=meta, host="web.example.com", service_name="web", service_port="http",
            tls_secret_name="web-tls")),
        "poddisruptionbudget": (f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
                                b.pod_disruption_budget(metadata=meta, selector_labels=_LABELS,
                                                        min_available=1)),
    }


def plural_path(kind: str, namespace: str) -> str:
    """The collection path of a Kubernetes kind the Thanos example builds."""
    return {
        "Deployment": f"/apis/apps/v1/namespaces/{namespace}/deployments",
        "StatefulSet": f"/apis/apps/v1/namespaces/{namespace}/statefulsets",
        "Service": f"/api/v1/namespaces/{namespace}/services",
        "Ingress": f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses",
    }[kind]
