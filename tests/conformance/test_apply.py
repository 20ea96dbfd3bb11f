"""Differential conformance of server-side apply: the same apply requests to the embedded server
and the real control plane, the answers compared field by field, ``managedFields`` included
(entries compared without their ``time``).

Create by apply, the same apply again, a conflict with another manager, ``force``, removal of a
field a manager stops applying, a list-map merged item by item (a Deployment's containers and
their ports), and an update's ownership (``Update`` entries). Every difference left is in
``KNOWN`` with its reason, mirrored in docs/embedded-apiserver.md.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conformance.helpers import Answer, Pair, compare, differences

CM = "/api/v1/namespaces/{ns}/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/{ns}/deployments"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"

_YAML_ERROR = ("the text of a YAML syntax error comes from each server's YAML parser (Go's "
               "yaml.v2 and PyYAML); same status, code and reason")
_POINTER_STRUCT = ("a struct behind a Go pointer (a Deployment's strategy.rollingUpdate) that a "
                   "write creates is a member of the writer's set ('.'); the OpenAPI schemas "
                   "the embedded server reads do not say which structs are pointers")
KNOWN: dict[str, dict[str, str]] = {
    "create deployment ownership": {
        "managedFields[0].fieldsV1.f:spec.f:strategy.f:rollingUpdate..": _POINTER_STRUCT},
    "apply bad configuration 'not: [valid'": {".message": _YAML_ERROR},
}
"""Request kind -> {path of a difference: why it stays}. Mirrors docs/embedded-apiserver.md."""


def _managed(answer: Answer) -> list[dict[str, Any]]:
    """The entries without ``time``, by operation and manager: a real server orders entries
    of one operation by their time to the second, so two managers within one second and across
    two seconds come in different orders (the embedded server orders them the same way)."""
    body = answer.body if isinstance(answer.body, dict) else {}
    entries = (body.get("metadata") or {}).get("managedFields") or []
    return sorted(({k: v for k, v in entry.items() if k != "time"} for entry in entries),
                  key=lambda e: (str(e.get("operation")), str(e.get("manager"))))


def check(kind: str, answers: dict[str, Answer]) -> None:
    """Assert the answers (body and managedFields) differ exactly where ``KNOWN[kind]`` says."""
    found = {path: (left, right) for path, left, right in compare(answers)}
    found |= {f"managedFields{path}": (left, right) for path, left, right in differences(
        _managed(answers["embedded"]), _managed(answers["real"]))}
    expected = KNOWN.get(kind, {})
    assert set(found) == set(expected), (
        f"{kind}: differences changed\n" + "\n".join(
            f"  {path}: embedded={left!r} real={right!r}" for path, (left, right) in found.items()
        ) + f"\nexpected: {sorted(expected)}")


def _apply(pair: Pair, path: str, body: dict[str, Any], *, manager: str,
           force: bool = False) -> dict[str, Answer]:
    query = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return pair.both("PATCH", path, body=yaml.safe_dump(body), content_type=APPLY, query=query)


def _configmap(data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "ssa"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_apply_create_again_conflict_force_removal(pair: Pair) -> None:
    one = f"{CM}/ssa"
    created = _apply(pair, one, _configmap({"a": "1", "b": "1"}, {"app": "x"}), manager="op-a")
    check("apply create", created)
    again = _apply(pair, one, _configmap({"a": "1", "b": "1"}, {"app": "x"}), manager="op-a")
    check("apply unchanged", again)
    for answer in again.values():  # a no-op: the same resourceVersion
        rv = answer.body["metadata"]["resourceVersion"]
        assert rv == created["embedded" if answer is again["embedded"] else "real"].body[
            "metadata"]["resourceVersion"]
    check("apply conflict", _apply(pair, one, _configmap({"a": "2"}), manager="op-b"))
    check("apply shared same value", _apply(pair, one, _configmap({"b": "1"}), manager="op-b"))
    check("apply force", _apply(pair, one, _configmap({"a": "2"}), manager="op-b", force=True))
    check("apply removal", _apply(pair, one, _configmap({"c": "3"}), manager="op-a"))


def test_update_takes_ownership_and_conflicts(pair: Pair) -> None:
    one = f"{CM}/ssa"
    _apply(pair, one, _configmap({"a": "1", "b": "1"}), manager="op-a")
    edited = pair.both("PATCH", one, body={"data": {"a": "hand"}}, content_type=MERGE,
                       query={"fieldManager": "editor"})
    check("update after apply", edited)
    check("apply conflict with an updater",
          _apply(pair, one, _configmap({"a": "1", "b": "1"}), manager="op-a"))
    check("apply force over an updater",
          _apply(pair, one, _configmap({"a": "1", "b": "1"}), manager="op-a", force=True))


def _deployment(containers: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {"app": "ssa"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ssa"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": containers}}}}


def test_apply_list_map_merge(pair: Pair) -> None:
    one = f"{DEPLOY}/ssa"
    web = {"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}
    check("apply create deployment", _apply(pair, one, _deployment([web]), manager="op-a"))
    side = {"name": "side", "image": "busybox:1.36", "args": ["sleep", "1d"]}
    check("apply list-map other manager",
          _apply(pair, one, _deployment([side]), manager="op-b"))
    changed = {**web, "ports": [{"containerPort": 80}, {"containerPort": 81, "name": "alt"}]}
    check("apply list-map item changed", _apply(pair, one, _deployment([changed]),
                                                manager="op-a"))
    check("apply list-map item removed", _apply(pair, one, _deployment([web]), manager="op-a"))


@pytest.mark.parametrize("body", ["not: [valid", "- a list"])
def test_apply_bad_configuration(pair: Pair, body: str) -> None:
    answers = pair.both("PATCH", f"{CM}/bad", body=body, content_type=APPLY,
                        query={"fieldManager": "op-a"})
    check(f"apply bad configuration {body!r}", answers)


def test_create_records_the_creator(pair: Pair) -> None:
    created = pair.both("POST", CM, body=_configmap({"a": "1"}, {"app": "x"}),
                        query={"fieldManager": "creator"})
    check("create configmap ownership", created)
    web = {"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}
    check("create deployment ownership",
          pair.both("POST", DEPLOY, body=_deployment([web]), query={"fieldManager": "creator"}))
