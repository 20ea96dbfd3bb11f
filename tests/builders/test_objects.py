"""Object helpers: each returns a fresh dict that validates against the default version's schema."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

import builders as b
from builders import objects, schemas
from tests.builders.helpers import make_parent

PARENT = make_parent()
SELECTOR = b.selector_labels(PARENT, component="server")


def _meta(component: str, **kw: Any) -> dict[str, Any]:
    return b.child_meta(PARENT, component=component, managed_by="op", **kw)


def _container() -> dict[str, Any]:
    return objects.container(
        name="app",
        image="example/app:1",
        ports={"http": 8080, "metrics": 9090},
        args=["--v=2"],
        env={"MODE": "prod"},
        resources=objects.resources(requests={"cpu": "100m", "memory": "64Mi"}, limits={"cpu": 1}),
        liveness_probe=objects.probe(port="http", path="/healthz", period_seconds=10),
        readiness_probe=objects.probe(port=8080),
        volume_mounts=[objects.volume_mount(name="config", mount_path="/etc/app", read_only=True)],
    )


HELPERS: dict[str, Callable[[], dict[str, Any]]] = {
    "deployment": lambda: objects.deployment(
        metadata=_meta("server"),
        selector_labels=SELECTOR,
        containers=[_container()],
        replicas=3,
        volumes=[objects.volume(name="config", config_map="web-config")],
        service_account_name="web-server",
    ),
    "statefulset": lambda: objects.statefulset(
        metadata=_meta("store"),
        selector_labels=SELECTOR,
        containers=[objects.container(name="db", image="db:1", command=["db", "serve"])],
        service_name="web-store",
        volumes=[
            objects.volume(name="data", empty_dir=True),
            objects.volume(name="tls", secret="web-tls"),
        ],
    ),
    "daemonset": lambda: objects.daemonset(
        metadata=_meta("agent"),
        selector_labels=SELECTOR,
        containers=[objects.container(name="agent", image="agent:1", ports=[9100])],
        volumes=[objects.volume(name="claim", persistent_volume_claim="data")],
    ),
    "service": lambda: objects.service(
        metadata=_meta("server"), selector=SELECTOR, ports={"http": 80}, type="NodePort"
    ),
    "headless_service": lambda: objects.headless_service(
        metadata=_meta("store"),
        selector=SELECTOR,
        ports=[objects.service_port(name="grpc", port=10901, target_port="grpc")],
    ),
    "service_account": lambda: objects.service_account(metadata=_meta("server")),
    "config_map": lambda: objects.config_map(
        metadata=_meta("config"), data={"a.yaml": "x: 1"}, binary_data={"b": b"\x00\x01"}
    ),
    "secret": lambda: objects.secret(
        metadata=_meta("creds"), data={"password": "s3cret", "k": b"\x01"}
    ),
    "role": lambda: objects.role(
        metadata=_meta("reader"),
        rules=[objects.policy_rule(api_groups=[""], resources=["pods"], verbs=["get", "list"])],
    ),
    "cluster_role": lambda: objects.cluster_role(
        metadata=_meta("reader", cluster_scoped=True),
        rules=[
            objects.policy_rule(
                api_groups=["apps"], resources=["deployments"], verbs=["get"], resource_names=["x"]
            )
        ],
    ),
    "role_binding": lambda: objects.role_binding(
        metadata=_meta("reader"),
        role_name="web-reader",
        subjects=[objects.subject(name="web-server", namespace="team-a")],
    ),
    "cluster_role_binding": lambda: objects.cluster_role_binding(
        metadata=_meta("reader", cluster_scoped=True),
        role_name="web-reader",
        subjects=[objects.subject(name="admins", kind="Group")],
    ),
    "ingress": lambda: objects.ingress(
        metadata=_meta("server"),
        host="web.example.com",
        service_name="web-server",
        service_port="http",
        ingress_class_name="nginx",
        tls_secret_name="web-tls",
    ),
    "pod_disruption_budget": lambda: objects.pod_disruption_budget(
        metadata=_meta("server"), selector_labels=SELECTOR, max_unavailable="25%"
    ),
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_helper_output_validates_against_the_schema(helper: str) -> None:
    obj = HELPERS[helper]()
    schemas.validate_object(obj)
    assert obj == HELPERS[helper]()  # deterministic
    assert obj is not HELPERS[helper]()


@pytest.mark.parametrize("helper", ["deployment", "statefulset", "daemonset"])
def test_workload_selectors_match_their_pod_labels(helper: str) -> None:
    obj = HELPERS[helper]()
    selector = obj["spec"]["selector"]["matchLabels"]
    pod_labels = obj["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()


def test_secret_values_are_base64_encoded() -> None:
    obj = HELPERS["secret"]()
    assert base64.b64decode(obj["data"]["password"]) == b"s3cret"
    assert "s3cret" not in repr(obj)


def test_helpers_do_not_share_their_arguments() -> None:
    labels = {"tier": "web"}
    containers = [objects.container(name="a", image="a")]
    obj = objects.deployment(
        metadata=_meta("server", labels=labels), selector_labels=SELECTOR, containers=containers
    )
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
    assert containers[0]["image"] == "a"


def test_schema_validation_names_the_field() -> None:
    obj = HELPERS["deployment"]()
    obj["spec"]["replicas"] = "three"
    with pytest.raises(schemas.SchemaValidationError) as caught:
        schemas.validate_object(obj)
    assert caught.value.field == "spec.replicas"
    with pytest.raises(schemas.UnknownKindError):
        schemas.validate_object(
            {"apiVersion": "x.dev/v1", "kind": "Thing", "metadata": {"name": "t"}}
        )


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: objects.resources(requests={"cpu": "lots"}), "resources.requests.cpu"),
        (lambda: objects.container(name="a", image="a", ports={"much-too-long-name": 1}), "ports"),
        (lambda: objects.probe(), "probe.port"),
        (lambda: objects.volume(name="v"), "volumes[v]"),
        (lambda: objects.volume(name="v", secret="s", empty_dir=True), "volumes[v]"),
        (
            lambda: objects.pod_disruption_budget(metadata={}, selector_labels=SELECTOR),
            "minAvailable",
        ),
        (lambda: objects.subject(name="sa"), "subjects[].namespace"),
        (lambda: objects.policy_rule(api_groups=[""], resources=["x"], verbs=[]), "verbs"),
        (
            lambda: objects.ingress(
                metadata={}, host="Bad Host", service_name="s", service_port=80
            ),
            "host",
        ),
        (
            lambda: objects.deployment(metadata={"name": "x"}, selector_labels={}, containers=[{}]),
            "spec.selector",
        ),
    ],
)
def test_invalid_input_is_rejected_naming_the_field(make: Callable[[], Any], field: str) -> None:
    with pytest.raises(b.InvalidSpecError) as caught:
        make()
    assert field in caught.value.field


def test_nested_arguments_are_copied_at_every_depth() -> None:
    probe = {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10}
    mounts = [{"name": "data", "mountPath": "/data"}]
    env_tuple = ({"name": "A", "value": "1"},)  # not JSON-shaped: copied by copy.deepcopy
    built = objects.container(name="a", image="a", liveness_probe=probe, volume_mounts=mounts)
    built["livenessProbe"]["httpGet"]["path"] = "/changed"
    built["volumeMounts"][0]["mountPath"] = "/changed"
    assert probe["httpGet"]["path"] == "/"
    assert mounts[0]["mountPath"] == "/data"
    obj = objects.deployment(
        metadata=_meta("server", labels={"tier": "web"}), selector_labels=SELECTOR,
        containers=[{"name": "a", "image": "a", "env": env_tuple}],
    )
    copied = obj["spec"]["template"]["spec"]["containers"][0]["env"]
    assert copied == env_tuple
    assert copied[0] is not env_tuple[0]
