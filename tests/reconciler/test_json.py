"""``reconciler._base.decoding.loads``: the same result whichever decoder runs (orjson or json)."""

from __future__ import annotations

import json

import pytest

from reconciler._base import decoding as _json

OBJECT = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "a", "namespace": "n", "labels": {"k": "v"},
                       "resourceVersion": "12", "annotations": {"x": "é ☃"}},
          "data": {"n": "1"}, "list": [1, 2.5, True, None, {"a": []}]}


@pytest.mark.parametrize("data", [json.dumps(OBJECT).encode(), json.dumps(OBJECT),
                                  json.dumps({"type": "ADDED", "object": OBJECT}).encode()])
def test_decodes_like_the_standard_library(data: bytes | str) -> None:
    assert _json.loads(data) == json.loads(data)


def test_an_integer_beyond_64_bits_is_still_decoded() -> None:
    assert _json.loads(b'{"n": 1180591620717411303424}') == {"n": 2**70}


def test_not_json_is_a_decode_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        _json.loads(b"{not json")
