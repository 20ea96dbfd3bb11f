"""Object helpers: each returns a fresh dict that validates against the default version's schema."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

import builders as b
from tests.builders.helpers import make_parent

PARENT = make_parent()
SELECTOR = b.selector_labels(PARENT, component="server")


def _meta(component: str, **kw: Any) -> dict[str, Any]:
    return b.child_meta(PARENT, component=component, managed_by="op", **kw)


def _container() -> dict[str, Any]:
    return b.container(
        name="app",
        image="example/app:1",
        ports={"http": 8080, "metrics": 9090},
        args=["--v=2"],
        env={"MODE": "prod"},
        resources=b.resources(requests={"cpu": "100m", "memory": "64Mi"}, limits={"cpu": 1}),
        liveness_probe=b.probe(port="http", path="/healthz", period_seconds=10),
        readiness_probe=b.probe(port=8080),
        volume_mounts=[b.volume_mount(name="config", mount_path="/etc/app", read_only=True)],
    )


HELPERS: dict[str, Callable[[], dict[str, Any]]] = {
    "deployment": lambda: b.deployment(
        metadata=_meta("server"),
        selector_labels=SELECTOR,
        containers=[_container()],
        replicas=3,
        volumes=[b.volume(name="config", config_map="web-config")],
        service_account_name="web-server",
    ),
    "statefulset": lambda: b.statefulset(
        metadata=_meta("store"),
        selector_labels=SELECTOR,
        containers=[b.container(name="db", image="db:1", command=["db", "serve"])],
        service_name="web-store",
        volumes=[b.volume(name="data", empty_dir=True), b.volume(name="tls", secret="web-tls")],
    ),
    "daemonset": lambda: b.daemonset(
        metadata=_meta("agent"),
        selector_labels=SELECTOR,
        containers=[b.container(name="agent", image="agent:1", ports=[9100])],
        volumes=[b.volume(name="claim", persistent_volume_claim="data")],
    ),
    "service": lambda: b.service(
        metadata=_meta("server"), selector=SELECTOR, ports={"http": 80}, type="NodePort"
    ),
    "headless_service": lambda: b.headless_service(
        metadata=_meta("store"),
        selector=SELECTOR,
        ports=[b.service_port(name="grpc", port=10901, target_port="grpc")],
    ),
    "service_account": lambda: b.service_account(metadata=_meta("server")),
    "config_map": lambda: b.config_map(
        metadata=_meta("config"), data={"a.yaml": "x: 1"}, binary_data={"b": b"\x00\x01"}
    ),
    "secret": lambda: b.secret(metadata=_meta("creds"), data={"password": "s3cret", "k": b"\x01"}),
    "role": lambda: b.role(
        metadata=_meta("reader"),
        rules=[b.policy_rule(api_groups=[""], resources=["pods"], verbs=["get", "list"])],
    ),
    "cluster_role": lambda: b.cluster_role(
        metadata=_meta("reader", cluster_scoped=True),
        rules=[
            b.policy_rule(
                api_groups=["apps"], resources=["deployments"], verbs=["get"], resource_names=["x"]
            )
        ],
    ),
    "role_binding": lambda: b.role_binding(
        metadata=_meta("reader"),
        role_name="web-reader",
        subjects=[b.subject(name="web-server", namespace="team-a")],
    ),
    "cluster_role_binding": lambda: b.cluster_role_binding(
        metadata=_meta("reader", cluster_scoped=True),
        role_name="web-reader",
        subjects=[b.subject(name="admins", kind="Group")],
    ),
    "ingress": lambda: b.ingress(
        metadata=_meta("server"),
        host="web.example.com",
        service_name="web-server",
        service_port="http",
        ingress_class_name="nginx",
        tls_secret_name="web-tls",
    ),
    "pod_disruption_budget": lambda: b.pod_disruption_budget(
        metadata=_meta("server"), selector_labels=SELECTOR, max_unavailable="25%"
    ),
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_helper_output_validates_against_the_schema(helper: str) -> None:
    obj = HELPERS[helper]()
    b.validate_object(obj)
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
    containers = [b.container(name="a", image="a")]
    obj = b.deployment(
        metadata=_meta("server", labels=labels), selector_labels=SELECTOR, containers=containers
    )
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
    assert containers[0]["image"] == "a"


def test_schema_validation_names_the_field() -> None:
    obj = HELPERS["deployment"]()
    obj["spec"]["replicas"] = "three"
    with pytest.raises(b.SchemaValidationError) as caught:
        b.validate_object(obj)
    assert caught.value.field == "spec.replicas"
    with pytest.raises(b.UnknownKindError):
        b.validate_object({"apiVersion": "x.dev/v1", "kind": "Thing", "metadata": {"name": "t"}})


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: b.resources(requests={"cpu": "lots"}), "resources.requests.cpu"),
        (lambda: b.container(name="a", image="a", ports={"much-too-long-name": 1}), "ports"),
        (lambda: b.probe(), "probe.port"),
        (lambda: b.volume(name="v"), "volumes[v]"),
        (lambda: b.volume(name="v", secret="s", empty_dir=True), "volumes[v]"),
        (lambda: b.pod_disruption_budget(metadata={}, selector_labels=SELECTOR), "minAvailable"),
        (lambda: b.subject(name="sa"), "subjects[].namespace"),
        (lambda: b.policy_rule(api_groups=[""], resources=["x"], verbs=[]), "verbs"),
        (
            lambda: b.ingress(metadata={}, host="Bad Host", service_name="s", service_port=80),
            "host",
        ),
        (
            lambda: b.deployment(metadata={"name": "x"}, selector_labels={}, containers=[{}]),
            "spec.selector",
        ),
    ],
)
def test_invalid_input_is_rejected_naming_the_field(make: Callable[[], Any], field: str) -> None:
    with pytest.raises(b.InvalidSpecError) as caught:
        make()
    assert field in caught.value.field
