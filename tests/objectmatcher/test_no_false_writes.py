"""Issue 11, "objectmatcher: no false writes": what differs only in how the server stores it.

Go's ``omitempty`` drops zero values (``{name: X, value: ""}`` comes back ``{name: X}``), and a
deletion of a field already gone from live is a no-op: neither may be a patch. The properties
model the server (``omitempty`` on the non-pointer fields generated, canonical quantities,
defaults) and apply our patches with the server's own semantics (``apply_patch``).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from objectmatcher import (
    apply_patch,
    calculate_patch,
    canonical_quantity,
    set_last_applied,
)
from tests.objectmatcher.helpers import apply_result, with_annotation
from tests.objectmatcher.test_properties import deployments, server_defaults

_NAMES = st.text("abcdefgh", min_size=1, max_size=4)
_VALUES = st.text("abcxyz0123", min_size=0, max_size=6)


def _deployment(**container: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx",
                                                           **container}]}}}}


# Non-pointer fields of the Go types with ``omitempty``: the server drops their zero values.
_OMITEMPTY = {
    "container": ("workingDir", "stdin", "tty", "args"),
    "env": ("value",),
    "port": ("name", "hostPort", "hostIP"),
    "pod": ("hostNetwork", "hostPID", "serviceAccountName", "nodeName"),
    "deployment": ("paused", "minReadySeconds"),
}


def _drop_zeros(obj: dict[str, Any], fields: tuple[str, ...]) -> None:
    for field in fields:
        if field in obj and obj[field] in ("", False, 0, [], {}) and obj[field] is not None:
            del obj[field]


def server_normalised(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a real server stores it: zero values of omitempty fields dropped, quantities
    in canonical form, defaults filled (``server_defaults``)."""
    live = copy.deepcopy(obj)
    spec = live["spec"]
    _drop_zeros(spec, _OMITEMPTY["deployment"])
    pod = spec["template"]["spec"]
    _drop_zeros(pod, _OMITEMPTY["pod"])
    for container in pod["containers"]:
        _drop_zeros(container, _OMITEMPTY["container"])
        for env in container.get("env", ()):
            _drop_zeros(env, _OMITEMPTY["env"])
        for port in container.get("ports", ()):
            _drop_zeros(port, _OMITEMPTY["port"])
        for group in container.get("resources", {}).values():
            for name, quantity in group.items():
                group[name] = canonical_quantity(quantity)
    return server_defaults(live, others=False)


@st.composite
def zeroed_deployments(draw: st.DrawFn) -> dict[str, Any]:
    """Deployments whose optional fields are often spelled out with their zero values."""
    desired: dict[str, Any] = draw(deployments())
    spec = desired["spec"]
    pod = spec["template"]["spec"]
    zeros: tuple[tuple[str, Any], ...] = (("paused", False), ("minReadySeconds", 0))
    for field, zero in zeros:
        if draw(st.booleans()):
            spec[field] = zero
    zeros = (("hostNetwork", False), ("serviceAccountName", ""), ("hostPID", False))
    for field, zero in zeros:
        if draw(st.booleans()):
            pod[field] = zero
    for container in pod["containers"]:
        zeros = (("workingDir", ""), ("stdin", False), ("tty", False), ("args", []))
        for field, zero in zeros:
            if draw(st.booleans()):
                container[field] = zero
        for port in container.get("ports", ()):
            if draw(st.booleans()):
                port["hostPort"] = 0
            if draw(st.booleans()):
                port["name"] = ""
        if draw(st.booleans()):
            container.setdefault("env", []).append({"name": "EMPTY_VALUE", "value": ""})
    return desired


# --- omitempty ----------------------------------------------------------------------------------


def test_an_env_var_with_an_empty_value_comes_back_without_it_and_is_no_diff() -> None:
    desired = _deployment(env=[{"name": "X", "value": ""}], stdin=False, workingDir="")
    live = server_normalised(set_last_applied(desired))
    assert live["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "X"}]
    result = calculate_patch(live, desired)
    assert result.is_empty, result.explain()


def test_a_value_desired_drops_is_still_deleted() -> None:
    before = _deployment(env=[{"name": "X", "value": "set"}], workingDir="/srv")
    live = server_normalised(set_last_applied(before))
    desired = _deployment(env=[{"name": "X"}])
    result = calculate_patch(live, desired)
    after = apply_result(live, result)
    container = after["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "X"}]
    assert "workingDir" not in container


def test_a_zero_value_not_yet_written_is_written_once() -> None:
    # A pointer field (``*bool``): the server keeps ``false``, which means something else than
    # absent (privilege escalation is allowed when unset). Without a record of it, it is written.
    before = _deployment()
    live = server_normalised(set_last_applied(before))
    desired = _deployment(securityContext={"allowPrivilegeEscalation": False})
    result = calculate_patch(live, desired)
    assert not result.is_empty
    after = server_normalised(apply_result(live, result))
    assert after["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False}
    assert calculate_patch(after, desired).is_empty
    # and a zero value of a non-pointer field the server dropped: one write, then no more
    desired = _deployment(workingDir="")
    result = calculate_patch(after, desired)
    assert not result.is_empty
    settled = server_normalised(apply_result(after, result))
    assert "workingDir" not in settled["spec"]["template"]["spec"]["containers"][0]
    assert calculate_patch(settled, desired).is_empty


def test_custom_resources_keep_zero_values_so_an_absent_one_is_a_difference() -> None:
    # A custom resource is stored as sent (no Go struct, no omitempty): "" that is gone from live
    # was removed by someone, and is put back. Its metadata is Go-typed ObjectMeta, though.
    desired: dict[str, Any] = {
               "apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns", "generateName": ""},
               "spec": {"title": "", "enabled": False, "count": 0}}
    live = set_last_applied(desired)
    del live["metadata"]["generateName"]  # ObjectMeta.generateName is omitempty
    assert calculate_patch(live, desired).is_empty
    for field in ("title", "enabled", "count"):
        edited = copy.deepcopy(live)
        del edited["spec"][field]
        result = calculate_patch(edited, desired)
        assert result.patch == {"spec": {field: desired["spec"][field]}}


@given(desired=zeroed_deployments())
def test_normalising_desired_as_the_server_does_never_creates_a_patch(
    desired: dict[str, Any],
) -> None:
    live = server_normalised(set_last_applied(desired))
    result = calculate_patch(live, desired)
    assert result.is_empty, (result.patch, [str(item) for item in result.diff])


@given(desired=zeroed_deployments(), changed=zeroed_deployments())
def test_applying_the_patch_with_server_semantics_leaves_nothing_to_patch(
    desired: dict[str, Any], changed: dict[str, Any]
) -> None:
    live = server_normalised(set_last_applied(desired))
    result = calculate_patch(live, changed)
    patched = apply_patch(live, result.patch, patch_type=result.patch_type)
    after = server_normalised(patched)
    again = calculate_patch(after, changed)
    assert again.is_empty, (result.patch, again.patch)


# --- deletions that are no-ops ------------------------------------------------------------------


@st.composite
def _extras(draw: st.DrawFn) -> dict[str, Any]:
    """Fields an earlier desired set and the current one dropped."""
    return {
        "labels": draw(st.dictionaries(_NAMES.map(lambda n: f"old-{n}"), _VALUES, max_size=2)),
        "annotations": draw(st.dictionaries(_NAMES.map(lambda n: f"old-{n}"), _VALUES,
                                            max_size=2)),
        "env": draw(st.lists(_NAMES.map(lambda n: f"OLD_{n.upper()}"), max_size=2, unique=True)),
        "finalizers": draw(st.lists(st.sampled_from(["old.io/a", "old.io/b"]), unique=True)),
        "workingDir": draw(st.sampled_from([None, "/old"])),
        "minReadySeconds": draw(st.sampled_from([None, 5])),
    }


def _with_extras(desired: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    original = copy.deepcopy(desired)
    meta = original["metadata"]
    if extras["labels"]:
        meta["labels"] = {**meta.get("labels", {}), **extras["labels"]}
    if extras["annotations"]:
        meta["annotations"] = {**meta.get("annotations", {}), **extras["annotations"]}
    if extras["finalizers"]:
        meta["finalizers"] = [*meta.get("finalizers", []), *extras["finalizers"]]
    container = original["spec"]["template"]["spec"]["containers"][0]
    env = [{"name": name, "value": "v"} for name in extras["env"]]
    if env:
        container["env"] = [*container.get("env", []), *env]
    # only fields desired does not set (a zero value desired sets is a value, see above)
    if extras["workingDir"] is not None and "workingDir" not in container:
        container["workingDir"] = extras["workingDir"]
    if extras["minReadySeconds"] is not None and "minReadySeconds" not in original["spec"]:
        original["spec"]["minReadySeconds"] = extras["minReadySeconds"]
    return original


@given(desired=zeroed_deployments(), extras=_extras())
def test_dropping_what_someone_already_removed_is_no_patch(
    desired: dict[str, Any], extras: dict[str, Any]
) -> None:
    original = _with_extras(desired, extras)
    live = with_annotation(server_normalised(set_last_applied(desired)), original)
    result = calculate_patch(live, desired)
    assert result.is_empty, (result.patch, [str(item) for item in result.diff])
    assert result.original_status == "recorded"


_SPECS = st.recursive(
    st.one_of(st.integers(-3, 3), _VALUES, st.booleans()),
    lambda inner: st.dictionaries(_NAMES, inner, min_size=1, max_size=3),
    max_leaves=8,
)


@given(spec=st.dictionaries(_NAMES, _SPECS, max_size=4),
       dropped=st.dictionaries(_NAMES.map(lambda n: f"old{n}"), _SPECS, min_size=1, max_size=3))
def test_custom_resources_dropping_what_is_already_gone_is_no_merge_patch(
    spec: dict[str, Any], dropped: dict[str, Any]
) -> None:
    desired = {"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns"}, "spec": spec}
    original = {**desired, "spec": {**spec, **dropped}}
    live = with_annotation(desired, original)
    result = calculate_patch(live, desired)
    assert result.is_empty, result.patch
