"""Official client models returned by builders become plain dicts (without importing kubernetes
in ``builders``); the tests use the real ``kubernetes.client`` models."""

from __future__ import annotations

import datetime

import pytest
from kubernetes import client

import builders as b
from builders import convert, schemas


def _model_deployment() -> client.V1Deployment:
    return client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name="web", namespace="ns", labels={"app": "web"}),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(
                    containers=[
                        client.V1Container(
                            name="nginx",
                            image="nginx",
                            ports=[client.V1ContainerPort(container_port=80)],
                        )
                    ]
                ),
            ),
        ),
    )


def test_models_convert_like_the_clients_serializer() -> None:
    model = _model_deployment()
    plain = convert.to_plain_object(model)
    assert plain == client.ApiClient().sanitize_for_serialization(model)
    assert plain["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    schemas.validate_object(plain)


def test_dates_and_tuples_become_json() -> None:
    meta = client.V1ObjectMeta(
        name="x", creation_timestamp=datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    )
    assert convert.to_plain(meta) == {"name": "x", "creationTimestamp": "2024-01-02T03:04:05+00:00"}
    assert convert.to_plain({"a": (1, 2)}) == {"a": [1, 2]}
    with pytest.raises(TypeError, match="object"):
        convert.to_plain({"a": object()})


def test_builders_may_return_models() -> None:
    @b.resource_builder
    def from_model(parent: b.KubeObject) -> client.V1Deployment:
        return _model_deployment()

    obj, state = from_model({"kind": "P", "metadata": {"name": "p"}})()
    assert isinstance(obj, dict)
    assert obj["metadata"] == {"name": "web", "namespace": "ns", "labels": {"app": "web"}}
    assert state.is_present
