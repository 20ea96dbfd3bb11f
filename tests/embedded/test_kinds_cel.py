"""CEL rules of CRD schemas as the embedded server evaluates them (``_cel``): pure, no server.

The whole path (a custom resource refused with the real server's cause) is checked on both
servers in ``tests/webhooks/test_webhooks_servers.py``.
"""

from __future__ import annotations

from typing import Any

from reconciler.embedded._cel import rule_causes

SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min above max"}],
    "properties": {
        "min": {"type": "integer"},
        "max": {"type": "integer"},
        "name": {"type": "string",
                 "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
        "ports": {"type": "array", "items": {
            "type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]}},
        "labels": {"type": "object", "additionalProperties": {
            "type": "string", "x-kubernetes-validations": [
                {"rule": "self.size() <= 3", "message": "at most 3 characters"}]}},
        "broken": {"type": "string", "x-kubernetes-validations": [{"rule": "self.nope()"}]},
    },
}


def _fields(causes: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in causes]


def test_rules_of_objects_items_and_map_values() -> None:
    good = {"min": 1, "max": 2, "name": "a", "ports": [80], "labels": {"a": "abc"}}
    assert rule_causes(SCHEMA, good, path="spec") == []
    bad = {"min": 3, "max": 2, "ports": [80, 0], "labels": {"a": "abcd"}}
    assert _fields(rule_causes(SCHEMA, bad, path="spec")) == [
        ("spec", 'Invalid value: "object": min above max'),
        ("spec.ports[1]", 'Invalid value: "integer": failed rule: self > 0'),
        ("spec.labels.a", 'Invalid value: "string": at most 3 characters'),
    ]


def test_transition_rules_need_an_old_value() -> None:
    new = {"min": 1, "max": 1, "name": "b"}
    assert rule_causes(SCHEMA, new, path="spec") == []  # a create: no oldSelf
    assert rule_causes(SCHEMA, new, {"min": 1, "max": 1}, path="spec") == []  # none before
    assert _fields(rule_causes(SCHEMA, new, {"name": "a"}, path="spec")) == [
        ("spec.name", 'Invalid value: "string": failed rule: self == oldSelf')]


def test_a_rule_that_cannot_be_evaluated_refuses_naming_it() -> None:
    causes = rule_causes(SCHEMA, {"min": 0, "max": 0, "broken": "x"}, path="spec")
    assert [c["field"] for c in causes] == ["spec.broken"]
    assert causes[0]["message"].startswith('Invalid value: "string": failed rule: self.nope()')
