"""A property test of the server against a dictionary model: any sequence of creates, updates,
patches and deletes leaves the same objects, the same answers, and a watch whose replay folds
to the same state, with strictly increasing resourceVersions."""

from __future__ import annotations

import json
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.embedded import EmbeddedApiServer
from tests.embedded.helpers import RawClient, configmap

NAMES = st.sampled_from(["a", "b", "c"])
VALUES = st.sampled_from(["1", "2", "3"])
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["create", "update", "patch", "delete"]), NAMES, VALUES),
    min_size=1, max_size=12,
)


@settings(max_examples=15)
@given(operations=OPERATIONS)
def test_server_agrees_with_a_dictionary(
    kube_api: EmbeddedApiServer, operations: list[tuple[str, str, str]]
) -> None:
    raw = RawClient(kube_api)
    namespace = f"model-{uuid.uuid4().hex[:8]}"
    code, _ = raw.json("POST", "/api/v1/namespaces",
                       body={"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": namespace}})
    assert code == 201
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    start = kube_api.resource_version
    model: dict[str, str] = {}
    writes = 0  # the events a watch must replay: no-op updates write nothing
    for verb, name, value in operations:
        if verb == "create":
            code, _ = raw.json("POST", path, body=configmap(name, v=value))
            assert code == (409 if name in model else 201)
            writes += name not in model
            model.setdefault(name, value)
        elif verb == "update":
            code, _ = raw.json("PUT", f"{path}/{name}", body=configmap(name, v=value))
            assert code == (200 if name in model else 404)
            writes += name in model and model[name] != value
            if name in model:
                model[name] = value
        elif verb == "patch":
            code, _ = raw.json("PATCH", f"{path}/{name}",
                               content_type="application/merge-patch+json",
                               body={"data": {"v": value}})
            assert code == (200 if name in model else 404)
            writes += name in model and model[name] != value
            if name in model:
                model[name] = value
        else:
            code, _ = raw.json("DELETE", f"{path}/{name}")
            assert code == (200 if name in model else 404)
            writes += name in model
            model.pop(name, None)
    code, listed = raw.json("GET", path)
    assert {i["metadata"]["name"]: i["data"]["v"] for i in listed["items"]} == model
    # a client of its own: the stream is closed unfinished, its connection must not be reused
    stream = RawClient(kube_api).request(
        "GET", f"{path}?watch=1&resourceVersion={start}&timeoutSeconds=5", preload=False
    )
    replayed: dict[str, str] = {}
    versions: list[int] = []
    lines = iter(stream)
    for _ in range(writes):
        event = json.loads(next(lines))
        obj = event["object"]
        versions.append(int(obj["metadata"]["resourceVersion"]))
        if event["type"] == "DELETED":
            replayed.pop(obj["metadata"]["name"])
        else:
            replayed[obj["metadata"]["name"]] = obj["data"]["v"]
    stream.close()
    assert replayed == model
    assert versions == sorted(set(versions))
    raw.json("DELETE", f"/api/v1/namespaces/{namespace}")
