"""The reconciler's error tree is built from Status bodies as a real API server sends them."""

from __future__ import annotations

import json

import pytest

from reconciler import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    ServerError,
    TooManyRequestsError,
)
from reconciler._errors import api_error_from_status
from tests.conftest import FIXTURES


def _statuses() -> list[dict[str, object]]:
    """Every Status body recorded in the fixtures, wherever it sits."""
    found: list[dict[str, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("kind") == "Status" and isinstance(node.get("code"), int):
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for name in ("errors.json", "conflict.json", "immutable-fields.json"):
        walk(json.loads((FIXTURES / name).read_text()))
    return found


def test_recorded_statuses_map_to_their_classes() -> None:
    statuses = [s for s in _statuses() if s.get("status") == "Failure"]
    assert statuses, "fixtures hold failure Status bodies"
    seen: set[type[ApiError]] = set()
    for status in statuses:
        code = int(status["code"])  # type: ignore[call-overload]
        error = api_error_from_status(code, status)
        seen.add(type(error))
        assert error.code == code
        assert error.reason == status.get("reason", "")
        if status.get("reason") == "AlreadyExists":
            assert isinstance(error, AlreadyExistsError)
        if code == 404:
            assert isinstance(error, NotFoundError)
        if code == 409:
            assert isinstance(error, ConflictError)
    assert {NotFoundError, AlreadyExistsError, ConflictError, InvalidError} <= seen


def test_invalid_error_names_immutable_fields_from_causes() -> None:
    invalid = [
        s for s in _statuses() if s.get("reason") == "Invalid" and "immutable" in str(s)
    ]
    assert invalid
    error = api_error_from_status(422, invalid[0])
    assert isinstance(error, InvalidError)
    assert error.immutable_fields
    assert all(field for field in error.immutable_fields)


def test_server_and_throttle_errors_keep_retry_after() -> None:
    error = api_error_from_status(429, None, retry_after=3.0, text="slow down")
    assert isinstance(error, TooManyRequestsError)
    assert error.retry_after == 3.0
    assert "slow down" in str(error)
    assert isinstance(api_error_from_status(503, {}), ServerError)


def test_error_message_names_the_object() -> None:
    ref = ObjectRef.of({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "ns"}})
    error = api_error_from_status(404, {"reason": "NotFound", "message": "gone"}, ref=ref)
    assert "ConfigMap.v1 ns/a" in str(error)
    with pytest.raises(NotFoundError):
        raise error
