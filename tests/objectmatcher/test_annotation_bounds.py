"""Issue 12, defect 2: a poisoned last-applied annotation is read as absent, cheaply, never raising.

A deeply nested record made decoding raise ``RecursionError``; a 258 KB annotation that inflates
to 190 MiB cost 400 MiB. Both must read as "no original" (status ``unreadable``), with time and
memory bounded, and the comparison then patches from desired (two-way, never deleting).
"""

from __future__ import annotations

import base64
import json
import time
import tracemalloc
import zlib
from typing import Any

import pytest

from objectmatcher import (
    LAST_APPLIED_ANNOTATION,
    MAX_RECORD_BYTES,
    MAX_RECORD_DEPTH,
    calculate_patch,
    get_last_applied,
    set_last_applied,
)
from objectmatcher._annotations import clear_annotation_cache, decode_annotation
from tests.objectmatcher.helpers import apply_result, live_from_fixture

_MIB = 1024 * 1024


def _annotation_of(payload: bytes) -> str:
    return "optk1:" + base64.b64encode(zlib.compress(payload, 9)).decode("ascii")


def _nested_bomb() -> str:
    """A record nested 200,000 levels deep, in a few hundred characters."""
    depth = 200_000
    return _annotation_of(b'{"a":' + b"[" * depth + b"]" * depth + b"}")


def _inflation_bomb(inflated: int = 190 * _MIB) -> str:
    """An annotation that inflates to ``inflated`` bytes of valid-looking JSON, built in chunks."""
    deflater = zlib.compressobj(9)
    parts = [deflater.compress(b'{"apiVersion":"v1","kind":"ConfigMap","data":{"x":"')]
    chunk = b"a" * _MIB
    for _ in range(inflated // _MIB):
        parts.append(deflater.compress(chunk))
    parts.append(deflater.compress(b'"}}'))
    parts.append(deflater.flush())
    return "optk1:" + base64.b64encode(b"".join(parts)).decode("ascii")


def _deployment_with(annotation: str) -> tuple[dict[str, Any], dict[str, Any]]:
    desired, live = live_from_fixture("deployment.json")
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = annotation
    return desired, live


def _measured(text: str) -> tuple[Any, float, int]:
    clear_annotation_cache()
    tracemalloc.start()
    started = time.process_time()
    try:
        result = decode_annotation(text)
        elapsed = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, elapsed, peak


def test_the_bombs_are_what_the_issue_describes() -> None:
    assert len(_nested_bomb()) < 1000
    bomb = _inflation_bomb()
    assert 180_000 < len(bomb) < 300_000  # about 258 KB of annotation for 190 MiB inflated


def test_a_deeply_nested_annotation_reads_as_unreadable_without_recursion() -> None:
    (original, reason), _elapsed, peak = _measured(_nested_bomb())
    assert original is None
    assert reason is not None
    assert f"nested over {MAX_RECORD_DEPTH} levels" in reason
    assert peak < 16 * _MIB


def test_an_inflation_bomb_stops_at_the_size_bound() -> None:
    (original, reason), _elapsed, peak = _measured(_inflation_bomb())
    assert original is None
    assert reason is not None
    assert f"over {MAX_RECORD_BYTES} bytes" in reason
    # decompression stops at the bound: peak memory is a few times MAX_RECORD_BYTES, not 190 MiB
    assert peak < 4 * MAX_RECORD_BYTES


@pytest.mark.parametrize("bomb", [_nested_bomb, _inflation_bomb], ids=["nested", "inflated"])
def test_a_poisoned_annotation_means_two_way_and_says_so(bomb: Any) -> None:
    desired, live = _deployment_with(bomb())
    live["metadata"]["labels"]["tier"] = "front"
    desired["spec"]["replicas"] = 5
    result = calculate_patch(live, desired)
    assert result.original_status == "unreadable"
    assert result.fallback_reason is not None
    assert get_last_applied(live) is None
    after = apply_result(live, result)
    assert after["spec"]["replicas"] == 5
    assert after["metadata"]["labels"]["tier"] == "front"  # two-way never deletes
    # the write replaced the poisoned annotation with a good record
    again = calculate_patch(after, desired)
    assert again.is_empty
    assert again.original_status == "recorded"


def test_just_below_the_bounds_is_still_read() -> None:
    record: Any = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}}
    inner: Any = record
    for _ in range(MAX_RECORD_DEPTH - 2):
        inner["x"] = {}
        inner = inner["x"]
    text = set_last_applied(record)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    clear_annotation_cache()
    original, reason = decode_annotation(text)
    assert reason is None
    assert original == json.loads(json.dumps(record))
    too_deep = {**record, "y": [[[]]]}
    inner["x"] = {"z": [[1]]}
    text = set_last_applied(too_deep)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    original, reason = decode_annotation(text)
    assert original is None
    assert reason is not None
    assert "nested" in reason


@pytest.mark.parametrize(
    "payload",
    [
        b'{"a": "[[[[[[[[" , "b": "\\"[[[[[[[[[["}',  # brackets in strings and escapes
        b'{"a": "\\\\", "b": [1, 2, {"c": "}}}}"}]}',
    ],
)
def test_brackets_inside_strings_do_not_count(payload: bytes) -> None:
    original, reason = decode_annotation(_annotation_of(payload))
    assert reason is None
    assert original == json.loads(payload)


@pytest.mark.parametrize(
    "payload",
    [b"[" * 5000, b"]" * 5000 + b"{}", b'{"a": ' + b"[" * 50, b"{" * 150 + b'"a"'],
)
def test_unbalanced_records_are_unreadable(payload: bytes) -> None:
    original, reason = decode_annotation(_annotation_of(payload))
    assert original is None
    assert reason is not None


def test_a_truncated_stream_is_unreadable() -> None:
    whole = zlib.compress(json.dumps({"kind": "ConfigMap", "data": {"x": "y" * 500}}).encode())
    text = "optk1:" + base64.b64encode(whole[: len(whole) // 2]).decode("ascii")
    original, reason = decode_annotation(text)
    assert original is None
    assert reason is not None
    assert "compressed" in reason


def test_absent_and_foreign_are_told_apart() -> None:
    desired, live = live_from_fixture("deployment.json")
    assert calculate_patch(live, desired).original_status == "recorded"
    del live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    assert calculate_patch(live, desired).original_status == "absent"
    other = set_last_applied({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "other"}})
    live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = other["metadata"]["annotations"][
        LAST_APPLIED_ANNOTATION]
    result = calculate_patch(live, desired)
    assert result.original_status == "foreign"
    assert "original_status='foreign'" in repr(result)
