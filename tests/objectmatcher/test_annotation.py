"""The last-applied annotation: compact, free of secrets, readable back, robust to corruption."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    REDACTED,
    REDACTED_VALUE,
    InvalidObjectError,
    calculate_patch,
    get_last_applied,
    set_last_applied,
)
from tests.objectmatcher.helpers import apply_result, live_from_fixture, with_annotation

_KIB = 1024


def _annotation(obj: dict[str, Any]) -> str:
    return obj["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]  # type: ignore[no-any-return]


def _big_configmap() -> dict[str, Any]:
    """A ConfigMap of about 900 KiB: 30 values of 30 KiB each, each different."""
    data = {f"file-{i}.conf": (f"line {i}: " + "x" * 40 + "\n") * (30 * _KIB // 48)
            for i in range(30)}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "big", "namespace": "ns", "labels": {"app": "big"}},
            "data": data}


def _secret() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "ns"},
            "type": "Opaque",
            "data": {"token": base64.b64encode(b"tok-very-secret-42").decode()},
            "stringData": {"password": "hunter2-secret", "username": "admin-secret"}}


def test_a_900_kib_configmap_gets_an_annotation_under_16_kib() -> None:
    configmap = _big_configmap()
    assert len(json.dumps(configmap)) > 900 * _KIB
    annotation = _annotation(set_last_applied(configmap))
    assert len(annotation) < 16 * _KIB
    original = get_last_applied(set_last_applied(configmap))
    assert original is not None
    assert set(original["data"]) == set(configmap["data"])
    assert all(value.startswith("optk:sha256:") for value in original["data"].values())
    assert original["metadata"] == configmap["metadata"]


def test_a_secret_annotation_holds_no_secret_value() -> None:
    secret = _secret()
    annotation = _annotation(set_last_applied(secret))
    assert len(annotation) < 16 * _KIB
    original = get_last_applied(set_last_applied(secret))
    assert original == {**secret, "data": {"token": REDACTED},
                        "stringData": {"password": REDACTED, "username": REDACTED}}
    decoded = json.dumps(original) + annotation
    for value in ("hunter2-secret", "admin-secret", "tok-very-secret-42", secret["data"]["token"]):
        assert value not in decoded


def _full_annotation(obj: dict[str, Any]) -> str:
    """What a naive annotation would hold: the whole object, verbatim (as kubectl does)."""
    import zlib

    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return "optk1:" + base64.b64encode(zlib.compress(text.encode())).decode()


def _server_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a server stores it: a Secret's stringData folded into data (base64)."""
    stored = copy.deepcopy(obj)
    for key, value in stored.pop("stringData", {}).items():
        stored.setdefault("data", {})[key] = base64.b64encode(value.encode()).decode()
    return stored


@pytest.mark.parametrize(
    ("make", "dropped", "changed"),
    [(_big_configmap, "file-0.conf", "file-9.conf"), (_secret, "username", "token")],
)
def test_merge_decisions_are_the_same_as_with_a_full_annotation(
    make: Any, dropped: str, changed: str
) -> None:
    original = make()
    desired = copy.deepcopy(original)
    for field in ("data", "stringData"):
        desired.get(field, {}).pop(dropped, None)
    desired["data"][changed] = base64.b64encode(b"changed").decode()
    live = with_annotation(_server_copy(original), original)
    live["data"]["added-by-someone-else"] = "eA=="
    compact = calculate_patch(live, desired)
    naive_live = copy.deepcopy(live)
    naive_live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = _full_annotation(original)
    full = calculate_patch(naive_live, desired)

    def content(patch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in patch.items() if k != "metadata"}

    assert content(compact.patch) == content(full.patch)
    assert compact.patch["data"][dropped] is None
    assert compact.patch["data"][changed] == desired["data"][changed]
    after = apply_result(live, compact)
    assert dropped not in after["data"]
    assert after["data"]["added-by-someone-else"] == "eA=="
    assert calculate_patch(after, desired).is_empty


def test_secret_diffs_and_reprs_are_redacted() -> None:
    desired, live = live_from_fixture("secret.json")
    desired = copy.deepcopy(desired)
    desired["stringData"]["password"] = "n3w-s3cret-value"
    result = calculate_patch(live, desired)
    assert not result.is_empty
    shown = " ".join([str(result), repr(result), result.explain(),
                      *(f"{item.old} {item.new} {item}" for item in result.diff)])
    for value in ("n3w-s3cret-value", "s3cret", "czNjcmV0",
                  base64.b64encode(b"n3w-s3cret-value").decode()):
        assert value not in shown
    assert [(item.op, item.path, item.old, item.new) for item in result.diff
            if item.path[0] == "data"] == [("change", ("data", "password"), REDACTED_VALUE,
                                             REDACTED_VALUE)]
    after = apply_result(live, result)
    assert base64.b64decode(after["data"]["password"]) == b"n3w-s3cret-value"
    assert calculate_patch(after, desired).is_empty


def test_secret_key_dropped_from_string_data_is_deleted() -> None:
    desired, live = live_from_fixture("secret.json")
    desired = copy.deepcopy(desired)
    del desired["stringData"]["username"]
    result = calculate_patch(live, desired)
    assert result.patch["data"] == {"username": None}
    assert [str(item) for item in result.diff if item.path[0] == "data"] == [
        f'- data.username: "{REDACTED_VALUE}"']


def test_round_trip_of_an_ordinary_object_is_exact() -> None:
    desired, _live = live_from_fixture("statefulset.json")
    annotated = set_last_applied(desired)
    assert get_last_applied(annotated) == desired
    again = set_last_applied(annotated)
    assert _annotation(again) == _annotation(annotated)
    assert desired["metadata"].get("annotations") is None  # input untouched


@pytest.mark.parametrize(
    "value",
    ["", "garbage", "optk1:", "optk1:!!!", "optk1:" + base64.b64encode(b"zz").decode(), 17, None],
)
def test_unreadable_annotations_read_as_none(value: Any) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "annotations": {LAST_APPLIED_ANNOTATION: value}}}
    assert get_last_applied(obj) is None
    assert get_last_applied({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "c"}}) is None
    assert get_last_applied("not an object") is None  # type: ignore[arg-type]


def test_annotation_recording_a_list_is_unreadable() -> None:
    import zlib

    text = "optk1:" + base64.b64encode(zlib.compress(b"[1, 2]")).decode()
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "annotations": {LAST_APPLIED_ANNOTATION: text}}}
    assert get_last_applied(obj) is None
    result = calculate_patch(obj, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "c"}})
    assert result.fallback_reason == "the last-applied annotation does not record an object"


@pytest.mark.parametrize("bad", [[], {"kind": "ConfigMap"}, {"apiVersion": "v1", "kind": "X"}])
def test_set_last_applied_rejects_non_objects(bad: Any) -> None:
    with pytest.raises(InvalidObjectError):
        set_last_applied(bad)
