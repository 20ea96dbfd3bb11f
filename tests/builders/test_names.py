"""Names, labels and identity (DESIGN.md section 5)."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import builders as b
from builders import names, objects
from tests.builders.helpers import make_parent


def test_short_safe_names_are_kept_verbatim() -> None:
    assert b.child_name("web", "query") == "web-query"
    assert b.child_name("web", "query", "grpc") == "web-query-grpc"
    assert b.child_name("a--a", "query") == "a--a-query"  # '--' is DNS-safe: no rewrite, no hash


@given(name=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True),
       part=st.from_regex(r"[a-z0-9]{1,10}", fullmatch=True))
def test_every_safe_name_within_the_limit_is_kept_verbatim(name: str, part: str) -> None:
    assert b.child_name(name, part) == f"{name}-{part}"


def test_long_names_truncate_with_a_stable_hash_suffix() -> None:
    long_parent = "a" * 70
    name = b.child_name(long_parent, "query")
    assert len(name) == 63
    assert names.is_dns1123_label(name)
    assert name == b.child_name(long_parent, "query")  # stable
    assert name != b.child_name(long_parent, "store")  # distinct inputs stay distinct
    # a fixed value: names must never change between releases for the same input
    assert b.child_name("x" * 60, "component") == (
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-" + name_hash("x" * 60)
    )


def name_hash(parent: str) -> str:
    return hashlib.sha256(f"{parent}-component".encode()).hexdigest()[:8]


def test_unsafe_characters_are_replaced_without_collisions() -> None:
    dotted = b.child_name("my.app", "web")
    dashed = b.child_name("my-app", "web")
    assert names.is_dns1123_label(dotted)
    assert dashed == "my-app-web"
    assert dotted != dashed


@given(
    parent=st.text(min_size=1, max_size=300),
    parts=st.lists(st.text(max_size=80), max_size=3),
    max_length=st.integers(min_value=16, max_value=253),
)
def test_child_name_is_always_dns_safe_or_rejected(
    parent: str, parts: list[str], max_length: int
) -> None:
    if not re.sub(r"[^a-z0-9]", "", "-".join([parent, *parts]).lower()):
        with pytest.raises(b.InvalidSpecError, match="no DNS-safe characters"):
            b.child_name(parent, *parts, max_length=max_length)
        return
    name = b.child_name(parent, *parts, max_length=max_length)
    assert len(name) <= max_length
    assert names.is_dns1123_subdomain(name)
    assert "." not in name
    assert name == b.child_name(parent, *parts, max_length=max_length)


def test_invalid_names_and_labels_name_field_and_value() -> None:
    with pytest.raises(b.InvalidSpecError) as caught:
        objects.object_meta(name="Bad_Name")
    assert caught.value.field == "metadata.name"
    assert caught.value.value == "Bad_Name"
    assert isinstance(caught.value, ValueError)
    with pytest.raises(b.InvalidSpecError, match="team") as caught:
        objects.object_meta(name="ok", labels={"team": "a b"})
    assert caught.value.field == "metadata.labels['team']"
    with pytest.raises(b.InvalidSpecError) as caught:
        names.validate_labels({"bad key!": "x"})
    assert caught.value.value == "bad key!"
    with pytest.raises(b.InvalidSpecError):
        objects.service(metadata={"name": "1st"}, selector=None, ports={"http": 80})


def test_standard_labels_and_owner_reference_follow_the_design() -> None:
    parent = make_parent()
    labels = b.standard_labels(parent, component="server", managed_by="demo-operator")
    assert labels == {
        "app.kubernetes.io/name": "site",
        "app.kubernetes.io/instance": "web",
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/managed-by": "demo-operator",
        "optk.dev/owner-uid": "0b9c-11",
    }
    assert names.owner_reference(parent) == {
        "apiVersion": "demo.optk.dev/v1alpha1",
        "kind": "Site",
        "name": "web",
        "uid": "0b9c-11",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    with pytest.raises(b.InvalidSpecError, match="uid"):
        names.owner_reference({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}})


def test_long_parent_names_still_give_valid_label_values() -> None:
    parent = make_parent(name="p" + "q" * 200)
    labels = b.standard_labels(parent, component="server", managed_by="op")
    assert all(names.is_label_value(v) for v in labels.values())
    assert labels[names.INSTANCE_LABEL] == names.label_value(parent["metadata"]["name"])


def test_child_meta_of_cluster_scoped_child_keeps_owner_uid_only() -> None:
    parent = make_parent()
    meta = b.child_meta(parent, component="reader", managed_by="op", cluster_scoped=True)
    assert "namespace" not in meta
    assert "ownerReferences" not in meta
    assert meta["labels"][names.OWNER_UID_LABEL] == "0b9c-11"
    namespaced = b.child_meta(parent, component="reader", managed_by="op")
    assert namespaced["namespace"] == "team-a"
    assert namespaced["ownerReferences"][0]["controller"] is True


def test_child_meta_of_a_cluster_scoped_parent_owns_namespaced_children() -> None:
    parent = {"apiVersion": "x.dev/v1", "kind": "Tenant", "metadata": {"name": "t", "uid": "u1"}}
    meta = b.child_meta(parent, component="quota", managed_by="op", namespace="team-b")
    assert meta["namespace"] == "team-b"
    assert meta["ownerReferences"][0]["uid"] == "u1"
    elsewhere = b.child_meta(make_parent(), component="x", managed_by="op", namespace="other")
    assert "ownerReferences" not in elsewhere
    assert elsewhere["labels"][names.OWNER_UID_LABEL] == "0b9c-11"


# -- identity: one type, one key function, one stamping ------------------------------------------


def test_object_ref_is_the_one_key_of_any_object() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}
    ref = b.ObjectRef.of(obj)
    assert ref == b.ObjectRef(api_version="v1", kind="ConfigMap", name="c", namespace="n")
    assert hash(ref) == hash(b.ObjectRef.of(dict(obj)))
    assert str(ref) == "ConfigMap.v1 n/c"
    assert ref.type_key == ("v1", "ConfigMap")
    cluster = b.ObjectRef.of({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": "n", "namespace": ""}})
    assert cluster.namespace is None
    assert str(cluster) == "Namespace.v1 n"
    assert b.ObjectRef.of({}) == b.ObjectRef(api_version="", kind="", name="")
    assert names.identity_of(obj) == ref


def test_identity_of_names_the_missing_field() -> None:
    with pytest.raises(b.InvalidSpecError, match=r"metadata\.name"):
        names.identity_of({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    with pytest.raises(b.InvalidSpecError, match=r"metadata\.namespace"):
        names.identity_of({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "namespace": 3}})


def test_reconciler_uses_the_same_identity_type() -> None:
    import reconciler

    assert reconciler.ObjectRef is b.ObjectRef


def test_stamp_identity_marks_a_namespaced_child() -> None:
    parent = make_parent()
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "web-config", "labels": {"keep": "me"},
        "ownerReferences": [{"uid": "other", "controller": True},
                            {"uid": "friend", "controller": False}]}}
    stamped = names.stamp_identity(parent, child, operator_name="op", namespaced=True)
    meta = stamped["metadata"]
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "keep": "me", names.MANAGED_BY_LABEL: "op", names.INSTANCE_LABEL: "web",
        names.COMPONENT_LABEL: "config", names.OWNER_UID_LABEL: "0b9c-11",
    }
    assert [r["uid"] for r in meta["ownerReferences"]] == ["friend", "0b9c-11"]
    assert meta["ownerReferences"][-1] == names.owner_reference(parent)
    assert "namespace" not in child["metadata"]  # the input is untouched


def test_stamp_identity_keeps_a_given_component_and_defaults_to_the_kind() -> None:
    parent = make_parent()
    given_component = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "web-x", "labels": {names.COMPONENT_LABEL: "mine"}}}
    assert names.stamp_identity(parent, given_component, operator_name="op", namespaced=True)[
        "metadata"]["labels"][names.COMPONENT_LABEL] == "mine"
    unrelated = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-"}}
    assert names.stamp_identity(parent, unrelated, operator_name="op", namespaced=True)[
        "metadata"]["labels"][names.COMPONENT_LABEL] == "secret"


def test_stamp_identity_of_cluster_scoped_and_other_namespace_children() -> None:
    parent = make_parent()
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "web-reader", "namespace": "stray"}}
    meta = names.stamp_identity(parent, role, operator_name="op", namespaced=False)["metadata"]
    assert "namespace" not in meta
    assert "ownerReferences" not in meta  # a namespaced parent cannot own it
    assert meta["labels"][names.OWNER_UID_LABEL] == "0b9c-11"
    elsewhere = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "web-c", "namespace": "other"}}
    meta = names.stamp_identity(parent, elsewhere, operator_name="op", namespaced=True)["metadata"]
    assert meta["namespace"] == "other"
    assert "ownerReferences" not in meta
    tenant = {"apiVersion": "x.dev/v1", "kind": "Tenant", "metadata": {"name": "t", "uid": "u1"}}
    meta = names.stamp_identity(tenant, elsewhere, operator_name="op", namespaced=True)["metadata"]
    assert meta["ownerReferences"][0]["uid"] == "u1"


def test_stamp_identity_of_an_absent_child_sets_only_its_namespace() -> None:
    stub = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-old"}}
    stamped = names.stamp_identity(make_parent(), stub, operator_name="op", namespaced=True,
                               absent=True)
    assert stamped == {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "web-old", "namespace": "team-a"}}


def test_a_subdomain_part_may_exceed_63_characters_as_kubernetes_allows() -> None:
    # IsDNS1123Subdomain limits the whole name to 253 characters, not each dot-separated part.
    assert names.is_dns1123_subdomain("a" * 64)
    assert names.is_dns1123_subdomain("a" * 100 + "." + "b" * 100)
    assert not names.is_dns1123_subdomain("a" * 254)
    assert not names.is_dns1123_subdomain("a..b")
    long = names.child_name("0", "00000000000000000", "00000000000000000", "000000000000000:0",
                            max_length=64)
    assert len(long) <= 64
    assert names.is_dns1123_subdomain(long)
