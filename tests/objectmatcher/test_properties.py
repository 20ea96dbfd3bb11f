"""Hypothesis properties of calculate_patch, the applier and the annotation.

For generated Deployments and custom resources, and generated server defaults and other actors'
fields added to the live copy: the patch is empty; after a generated change of desired, applying
the patch converges (a second comparison is empty), agrees with desired on every field desired
sets, keeps every field only others set, and loses every field we dropped; the annotation
round-trips; inputs are never mutated.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from objectmatcher import (
    apply_patch,
    calculate_patch,
    get_last_applied,
    quantities_equal,
    set_last_applied,
)

_NAMES = st.text("abcdefgh", min_size=1, max_size=4)
_VALUES = st.text("abcxyz0123", min_size=0, max_size=6)
# Quantities as users write them, and as the server canonicalizes them.
_QUANTITIES = {"1000m": "1", "500m": "500m", "0.5": "500m", "1024Mi": "1Gi", "2Gi": "2Gi",
               "1.5": "1500m", "250m": "250m", "64Mi": "64Mi"}
_OTHER_LABEL = "other.example.com/owner"
_INJECTED_ENV = "INJECTED"
_INJECTED_CONTAINER = "injected-sidecar"
_OTHER_FINALIZER = "other.example.com/cleanup"


def _unique_by(key: str, items: st.SearchStrategy[dict[str, Any]]) -> Any:
    return st.lists(items, max_size=3, unique_by=lambda item: item[key])


@st.composite
def containers(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """One container with optional args, env, ports and resources."""
    container: dict[str, Any] = {"name": name, "image": draw(st.sampled_from(
        ["nginx:1.25", "nginx:1.27", "busybox", "redis:7"]))}
    if draw(st.booleans()):
        container["args"] = draw(st.lists(_VALUES, max_size=3))
    env = draw(_unique_by("name", st.builds(
        lambda n, v: {"name": n.upper(), "value": v}, _NAMES, _VALUES)))
    if env:
        container["env"] = env
    ports = draw(_unique_by("containerPort", st.builds(
        lambda p: {"containerPort": p}, st.integers(1, 9000))))
    if ports:
        container["ports"] = ports
    if draw(st.booleans()):
        quantity = st.sampled_from(sorted(_QUANTITIES))
        container["resources"] = {"limits": draw(st.fixed_dictionaries(
            {}, optional={"cpu": quantity, "memory": quantity}))}
    return container


@st.composite
def deployments(draw: st.DrawFn) -> dict[str, Any]:
    """A Deployment ``web`` as a builder would produce it."""
    names = draw(st.lists(_NAMES, min_size=1, max_size=3, unique=True))
    labels = draw(st.dictionaries(_NAMES, _VALUES, max_size=3))
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web", **labels}},
                     "spec": {"containers": [draw(containers(name)) for name in names]}},
    }
    if draw(st.booleans()):
        spec["replicas"] = draw(st.integers(0, 5))
    if draw(st.booleans()):
        spec["strategy"] = {"type": "Recreate"}
    volumes = draw(_unique_by("name", st.builds(
        lambda name, source: {"name": name, **source}, _NAMES,
        st.sampled_from([{"emptyDir": {}}, {"configMap": {"name": "cm"}},
                         {"secret": {"secretName": "s"}}]))))
    if volumes:
        spec["template"]["spec"]["volumes"] = volumes
    metadata: dict[str, Any] = {"name": "web", "namespace": "ns", "labels": labels}
    finalizers = draw(st.lists(st.sampled_from(["a.io/x", "b.io/y", "c.io/z"]), unique=True))
    if finalizers:
        metadata["finalizers"] = finalizers
    annotations = draw(st.dictionaries(_NAMES, _VALUES, max_size=2))
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


def server_defaults(obj: dict[str, Any], *, others: bool) -> dict[str, Any]:
    """``obj`` as a server stores it, plus (with ``others``) fields other actors added."""
    live = copy.deepcopy(obj)
    meta = live["metadata"]
    meta.update({"uid": "u-1", "resourceVersion": "42", "generation": 3,
                 "creationTimestamp": "2026-01-01T00:00:00Z",
                 "managedFields": [{"manager": "x", "operation": "Update"}]})
    spec = live["spec"]
    spec.setdefault("replicas", 1)
    spec.setdefault("strategy", {}).setdefault("type", "RollingUpdate")
    if spec["strategy"]["type"] == "RollingUpdate":
        spec["strategy"].setdefault("rollingUpdate", {"maxSurge": "25%", "maxUnavailable": "25%"})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    template = spec["template"]
    template["metadata"]["creationTimestamp"] = None
    pod = template["spec"]
    for key, value in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                       ("terminationGracePeriodSeconds", 30), ("securityContext", {})):
        pod.setdefault(key, value)
    for container in pod["containers"]:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("imagePullPolicy", "IfNotPresent")
        resources = container.setdefault("resources", {})
        for group in resources.values():
            for name, quantity in group.items():
                group[name] = _QUANTITIES.get(quantity, quantity)
        for port in container.get("ports", ()):
            port.setdefault("protocol", "TCP")
    live["status"] = {"observedGeneration": 3, "replicas": spec["replicas"]}
    for volume in pod.get("volumes", ()):
        for source in ("configMap", "secret"):
            if source in volume:
                volume[source].setdefault("defaultMode", 420)
    if others:
        meta.setdefault("labels", {})[_OTHER_LABEL] = "yes"
        if _OTHER_FINALIZER not in meta.setdefault("finalizers", []):
            meta["finalizers"].append(_OTHER_FINALIZER)
        pod["containers"][0].setdefault("env", []).append({"name": _INJECTED_ENV, "value": "1"})
        if not any(c["name"] == _INJECTED_CONTAINER for c in pod["containers"]):
            pod["containers"].append({"name": _INJECTED_CONTAINER, "image": "mesh:1"})
    return live


def _created(desired: dict[str, Any], others: bool) -> dict[str, Any]:
    return server_defaults(set_last_applied(desired), others=others)


def _sets(live: Any, want: Any) -> bool:
    """Whether ``live`` agrees with ``want`` on every field ``want`` sets."""
    if isinstance(want, dict):
        if live is None:  # a server drops empty maps
            return all(_sets(None, value) for value in want.values() if value is not None)
        return isinstance(live, dict) and all(
            _sets(live.get(key), value) for key, value in want.items() if value is not None)
    if isinstance(want, list):
        if want and all(isinstance(item, dict) and "name" in item for item in want):
            by_name = {item.get("name"): item for item in live or ()}
            return all(_sets(by_name.get(item["name"]), item) for item in want)
        if want and all(isinstance(item, dict) and "containerPort" in item for item in want):
            by_port = {item.get("containerPort"): item for item in live or ()}
            return all(_sets(by_port.get(item["containerPort"]), item) for item in want)
        if live is None:
            return not want
        return isinstance(live, list) and len(live) == len(want) and all(
            _sets(a, b) for a, b in zip(live, want, strict=True))
    return bool(live == want or quantities_equal(live, want))


@given(desired=deployments(), others=st.booleans())
def test_server_defaults_and_others_fields_are_never_diffs(
    desired: dict[str, Any], others: bool
) -> None:
    live = _created(desired, others)
    result = calculate_patch(live, desired)
    assert result.is_empty, (result.patch, [str(d) for d in result.diff])


@given(desired=deployments(), changed=deployments(), others=st.booleans())
def test_a_changed_desired_converges_and_keeps_others_fields(
    desired: dict[str, Any], changed: dict[str, Any], others: bool
) -> None:
    live = _created(desired, others)
    frozen = json.dumps([live, changed], sort_keys=True)
    result = calculate_patch(live, changed)
    assert json.dumps([live, changed], sort_keys=True) == frozen, "an input was mutated"
    patched = apply_patch(live, result.patch, patch_type=result.patch_type)
    after = server_defaults(patched, others=False)
    again = calculate_patch(after, changed)
    assert again.is_empty, (result.patch, again.patch)
    assert _sets(after, {k: v for k, v in changed.items() if k != "metadata"})
    assert _sets(after["metadata"]["labels"], changed["metadata"]["labels"])
    labels = after["metadata"].get("labels", {})
    for dropped in set(desired["metadata"]["labels"]) - set(changed["metadata"]["labels"]):
        assert dropped not in labels
    names = [c["name"] for c in after["spec"]["template"]["spec"]["containers"]]
    wanted = [c["name"] for c in changed["spec"]["template"]["spec"]["containers"]]
    assert names[: len(wanted)] == wanted
    finalizers = after["metadata"].get("finalizers", [])
    assert set(changed["metadata"].get("finalizers", [])) <= set(finalizers)
    for dropped in set(desired["metadata"].get("finalizers", [])) - set(
            changed["metadata"].get("finalizers", [])):
        assert dropped not in finalizers
    volumes = {v["name"]: v for v in after["spec"]["template"]["spec"].get("volumes", [])}
    for volume in changed["spec"]["template"]["spec"].get("volumes", []):
        sources = set(volumes[volume["name"]]) - {"name"}
        assert sources == set(volume) - {"name"}, "retainKeys left another volume source"
    if others:
        assert labels[_OTHER_LABEL] == "yes"
        assert _OTHER_FINALIZER in finalizers
        assert names[len(wanted):] == [_INJECTED_CONTAINER]
        first = after["spec"]["template"]["spec"]["containers"][0]
        if first["name"] == desired["spec"]["template"]["spec"]["containers"][0]["name"]:
            assert _INJECTED_ENV in [env["name"] for env in first.get("env", [])]
    else:
        assert names == wanted


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=8,
)


def _custom(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "ns"}, "spec": spec}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _without_blanks(value: Any) -> Any:
    """``value`` as compared: ``null``, empty lists and maps of blanks dropped from maps."""
    if isinstance(value, dict):
        kept = {k: _without_blanks(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_without_blanks(item) for item in value]
    return value


@given(before=st.dictionaries(_NAMES, _JSON, max_size=4),
       after=st.dictionaries(_NAMES, _JSON, max_size=4),
       extra=st.dictionaries(st.text("XYZ", min_size=1, max_size=3), _JSON, max_size=2))
def test_custom_resources_converge_with_merge_patches(
    before: dict[str, Any], after: dict[str, Any], extra: dict[str, Any]
) -> None:
    desired, changed = _custom(before), _custom(after)
    live = set_last_applied(_custom(_without_nulls(before)))
    live["spec"].update(extra)  # fields only others set (their keys never clash with ours)
    assert calculate_patch(live, desired).is_empty
    result = calculate_patch(live, changed)
    patched = apply_patch(live, result.patch, patch_type=result.patch_type)
    assert calculate_patch(patched, changed).is_empty, (result.patch, patched)
    assert _without_blanks(patched["spec"]) == _without_blanks({**after, **extra})


@given(spec=st.dictionaries(_NAMES, _JSON, max_size=4), labels=st.dictionaries(_NAMES, _VALUES))
def test_the_annotation_round_trips(spec: dict[str, Any], labels: dict[str, str]) -> None:
    obj = _custom(spec)
    obj["metadata"]["labels"] = labels
    frozen = json.dumps(obj, sort_keys=True)
    annotated = set_last_applied(obj)
    assert json.dumps(obj, sort_keys=True) == frozen
    assert get_last_applied(annotated) == _without_nulls(obj)
    assert get_last_applied(set_last_applied(annotated)) == _without_nulls(obj)


_MAPS = st.recursive(
    st.booleans() | st.integers(-5, 5) | _VALUES,
    lambda inner: st.dictionaries(_NAMES, inner | st.none(), max_size=3),
    max_leaves=8,
)


@given(spec=st.dictionaries(_NAMES, _MAPS, max_size=3),
       patch=st.dictionaries(_NAMES, _MAPS | st.none(), max_size=3))
def test_strategic_merge_without_lists_is_a_json_merge(
    spec: dict[str, Any], patch: dict[str, Any]
) -> None:
    """Fields without patch metadata (a ConfigMap's ``data`` here) merge as in RFC 7386."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": spec}
    body = {"data": patch}
    assert apply_patch(obj, body, patch_type="application/strategic-merge-patch+json") == (
        apply_patch(obj, body, patch_type="application/merge-patch+json"))


@given(before=st.dictionaries(_NAMES, _JSON, max_size=4),
       after=st.dictionaries(_NAMES, _JSON, max_size=4))
def test_json_patches_made_by_jsonpatch_apply(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    import jsonpatch

    operations = jsonpatch.make_patch(before, after).patch
    assert apply_patch(before, operations, patch_type="application/json-patch+json") == after


_ODD_KEYS = st.sampled_from(["image", "ports", "env", "value", "args", "emptyDir", "configMap",
                             "resources", "limits", "cpu", "protocol"])
_ODD_LEAVES = st.none() | st.booleans() | st.integers(0, 3) | st.sampled_from(["a", "1000m", "1"])
_ODD_JSON = st.recursive(
    _ODD_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ODD_KEYS, inner, max_size=4),
    max_leaves=10,
)
_ODD_ITEMS = st.dictionaries(_ODD_KEYS, _ODD_JSON, max_size=3) | st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "c"])},
    optional={"image": _ODD_LEAVES, "env": st.lists(st.fixed_dictionaries(
        {"name": st.sampled_from(["X", "Y"])}, optional={"value": _ODD_LEAVES}),
        max_size=2, unique_by=lambda env: env["name"])},
)


def _odd_lists() -> Any:
    named = st.lists(_ODD_ITEMS, max_size=3).filter(
        lambda items: len([i["name"] for i in items if "name" in i])
        == len({i["name"] for i in items if "name" in i}))
    return st.none() | named


@st.composite
def odd_deployments(draw: st.DrawFn) -> dict[str, Any]:
    """Deployments with odd but well-keyed shapes at merge-keyed paths (items without keys too)."""
    pod: dict[str, Any] = {}
    for field in ("containers", "volumes"):
        items = draw(_odd_lists())
        if items is not None:
            pod[field] = items
    metadata: dict[str, Any] = {"name": "n"}
    finalizers = draw(st.none() | st.lists(st.sampled_from(["f1", "f2", "f3"]), max_size=3))
    if finalizers is not None:
        metadata["finalizers"] = finalizers
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"template": {"spec": pod}}}


@given(current=odd_deployments(), desired=odd_deployments(), original=odd_deployments())
def test_odd_shapes_never_raise_and_converge(
    current: dict[str, Any], desired: dict[str, Any], original: dict[str, Any]
) -> None:
    annotations = set_last_applied(original)["metadata"]["annotations"]
    current = {**current, "metadata": {**current["metadata"], "annotations": annotations}}
    result = calculate_patch(current, desired)
    after = apply_patch(current, result.patch, patch_type=result.patch_type)
    assert calculate_patch(after, desired).is_empty, (result.patch, after)
