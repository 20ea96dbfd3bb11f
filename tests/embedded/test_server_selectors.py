"""Label and field selector parsing and matching, against the Kubernetes semantics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.embedded._selectors import parse_field_selector, parse_label_selector
from reconciler.embedded._statuses import ApiStatusError

KEYS = st.sampled_from(["app", "tier", "example.com/role", "x"])
VALUES = st.sampled_from(["a", "b", "c-1", "web"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=4)


def _obj(labels: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"name": "n", "namespace": "ns", "labels": labels}}


@given(labels=LABELS, key=KEYS, value=VALUES)
def test_equality_and_inequality(labels: dict[str, str], key: str, value: str) -> None:
    assert parse_label_selector(f"{key}={value}").matches(_obj(labels)) == (
        labels.get(key) == value
    )
    assert parse_label_selector(f"{key}=={value}").matches(_obj(labels)) == (
        labels.get(key) == value
    )
    # != also matches objects without the key, as in Kubernetes
    assert parse_label_selector(f"{key}!={value}").matches(_obj(labels)) == (
        labels.get(key) != value
    )


@given(labels=LABELS, key=KEYS, values=st.sets(VALUES, min_size=1, max_size=3))
def test_set_based(labels: dict[str, str], key: str, values: set[str]) -> None:
    listed = ",".join(sorted(values))
    assert parse_label_selector(f"{key} in ({listed})").matches(_obj(labels)) == (
        key in labels and labels[key] in values
    )
    assert parse_label_selector(f"{key} notin ({listed})").matches(_obj(labels)) == (
        key not in labels or labels[key] not in values
    )


@given(labels=LABELS, first=KEYS, second=KEYS)
def test_exists_and_conjunction(labels: dict[str, str], first: str, second: str) -> None:
    assert parse_label_selector(f"{first},!{second}").matches(_obj(labels)) == (
        first in labels and second not in labels
    )


def test_empty_selector_matches_everything() -> None:
    assert parse_label_selector("").matches(_obj({}))
    assert parse_label_selector(None).empty


@pytest.mark.parametrize("text", ["==", "a b", "bad key!=x", "-x=y"])
def test_malformed_label_selectors_are_bad_requests(text: str) -> None:
    with pytest.raises(ApiStatusError) as caught:
        parse_label_selector(text)
    assert caught.value.code == 400


def test_field_selectors() -> None:
    selector = parse_field_selector("metadata.name=n,metadata.namespace!=other", "ConfigMap")
    assert selector.matches(_obj({}))
    assert selector.name() == "n"
    assert not parse_field_selector("metadata.name==m", "ConfigMap").matches(_obj({}))
    pod = {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
    assert parse_field_selector("status.phase=Running", "Pod").matches(pod)
    with pytest.raises(ApiStatusError) as caught:
        parse_field_selector("status.phase=Running", "ConfigMap")
    assert caught.value.code == 400
