"""Validation of the built-in kinds: the 422 causes of a real server, field for field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from objectmatcher import MERGE_PATCH, apply_patch
from objectmatcher._validation import go_selector, selector_matches
from reconciler.embedded._kinds import Invalid, KindStrategy, ServerContext
from reconciler.embedded._names import dns1035_label, dns1123_label, dns1123_subdomain
from reconciler.embedded._registry import make_registry
from tests.conftest import load_fixture

REGISTRY = make_registry()
ERRORS = load_fixture("errors.json")["steps"]
IMMUTABLE = load_fixture("immutable-fields.json")["steps"]


def merge_patch(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch applied as the server applies it (a new dict)."""
    return apply_patch(obj, patch, patch_type=MERGE_PATCH)


def strategy_for(api_version: str, kind: str) -> KindStrategy:
    rt = REGISTRY.by_kind(api_version, kind)
    assert rt is not None
    return REGISTRY.strategy(rt)


def create_causes(obj: dict[str, Any]) -> list[dict[str, str]]:
    obj = copy.deepcopy(obj)
    strategy = strategy_for(obj["apiVersion"], obj["kind"])
    try:  # as the server does: both steps may refuse the object
        strategy.prepare_create(obj, ServerContext())
        strategy.validate_create(obj)
    except Invalid as error:
        return error.causes
    return []


def created(obj: dict[str, Any], ctx: ServerContext | None = None) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {}).setdefault("uid", "4c2b3a96-da6c-42e4-b9df-19476e211914")
    strategy = strategy_for(obj["apiVersion"], obj["kind"])
    strategy.prepare_create(obj, ctx or ServerContext())
    strategy.validate_create(obj)
    return obj


def update_causes(
    old: dict[str, Any], patch: dict[str, Any], ctx: ServerContext | None = None
) -> list[dict[str, str]]:
    """Causes of a merge patch of ``old`` (only the shallow merges the recordings use)."""
    new = merge_patch(old, patch)
    strategy = strategy_for(old["apiVersion"], old["kind"])
    try:
        strategy.prepare_update(old, new, ctx or ServerContext())
        strategy.validate_update(old, new)
    except Invalid as error:
        return error.causes
    return []


def recorded(steps: list[dict[str, Any]], note_start: str) -> dict[str, Any]:
    return next(s for s in steps if s["note"].startswith(note_start))


def recorded_causes(step: dict[str, Any]) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = step["response"]["details"]["causes"]
    return causes


# --- create ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "note",
    ["422 Invalid: details.causes", "no name and no generateName", "invalid DNS-1123 name"],
)
def test_create_causes_match_errors_json(note: str) -> None:
    step = recorded(ERRORS, note)
    assert create_causes(step["request"]["body"]) == recorded_causes(step)


def test_generate_name_alone_is_valid_and_its_prefix_is_checked() -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    assert create_causes(configmap) == []
    bad = {**configmap, "metadata": {"generateName": "Gen_"}}
    assert [c["field"] for c in create_causes(bad)] == ["metadata.generateName"]


@pytest.mark.parametrize(
    ("api_version", "kind", "name", "valid"),
    [
        ("v1", "Namespace", "team-a", True),
        ("v1", "Namespace", "team.a", False),  # a label, not a subdomain
        ("v1", "ConfigMap", "team.a", True),
        ("v1", "Service", "web-1", True),
        ("v1", "Service", "1web", False),  # DNS-1035: starts with a letter
        ("v1", "ConfigMap", "1web", True),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "system:controller:x", True),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "a/b", False),
        ("v1", "ConfigMap", "a" * 253, True),
        ("v1", "ConfigMap", "a" * 254, False),
        ("v1", "Namespace", "a" * 64, False),
    ],
)
def test_name_rule_per_kind(api_version: str, kind: str, name: str, valid: bool) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
    if kind == "Service":
        obj["spec"] = {"ports": [{"port": 80}]}
    causes = [c for c in create_causes(obj) if c["field"] == "metadata.name"]
    assert (causes == []) is valid, causes


_SUBDOMAIN_CHARS = st.text(alphabet="abcz09-.A_", min_size=1, max_size=70)


@given(name=_SUBDOMAIN_CHARS)
def test_name_rules_nest(name: str) -> None:
    # Every DNS-1035 label is a DNS-1123 label, and every DNS-1123 label a subdomain.
    if not dns1035_label(name):
        assert not dns1123_label(name)
    if not dns1123_label(name):
        assert not dns1123_subdomain(name)
    if any(c.isupper() or c == "_" for c in name):
        assert dns1123_subdomain(name)


def test_workload_rules() -> None:
    base = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    assert create_causes(base) == []
    duplicate = copy.deepcopy(base)
    duplicate["spec"]["template"]["spec"]["containers"] *= 2
    assert create_causes(duplicate) == [{
        "reason": "FieldValueDuplicate", "message": 'Duplicate value: "c"',
        "field": "spec.template.spec.containers[1].name",
    }]
    never = copy.deepcopy(base)
    never["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert [c["reason"] for c in create_causes(never)] == ["FieldValueNotSupported"]
    empty = copy.deepcopy(base)
    empty["spec"]["selector"] = {}
    assert create_causes(empty)[0]["message"].endswith("empty selector is invalid for statefulset")


def test_job_needs_a_restart_policy_other_than_always() -> None:
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    assert create_causes(job) == [{
        "reason": "FieldValueNotSupported",
        "message": 'Unsupported value: "Always": supported values: "OnFailure", "Never"',
        "field": "spec.template.spec.restartPolicy",
    }]


def test_service_pvc_and_binding_required_fields() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}}
    assert [c["field"] for c in create_causes(svc)] == ["spec.ports"]
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p"},
           "spec": {}}
    assert [c["field"] for c in create_causes(pvc)] == [
        "spec.accessModes", "spec.resources[storage]"]
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"}}
    assert [c["field"] for c in create_causes(binding)] == ["roleRef.kind"]


# --- immutable fields ------------------------------------------------------------------------


def _deployment() -> dict[str, Any]:
    # The recording's selector patch yields only the immutable cause, so its template carries
    # both labels.
    return created({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "imm-dep", "namespace": "fixtures"},
        "spec": {
            "selector": {"matchLabels": {"app": "imm"}},
            "template": {"metadata": {"labels": {"app": "imm", "v": "1"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
        },
    })


def _statefulset() -> dict[str, Any]:
    sent = copy.deepcopy(load_fixture("statefulset.json")["sent"])
    sent["metadata"] = {"name": "imm-sts", "namespace": "fixtures"}
    return created(sent)


def _service(ctx: ServerContext) -> dict[str, Any]:
    return created({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "imm-svc", "namespace": "fixtures"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]},
    }, ctx)


def _configmap() -> dict[str, Any]:
    return created({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "imm-cm", "namespace": "fixtures"},
        "immutable": True, "data": {"a": "1"},
    })


@pytest.mark.parametrize(
    ("note", "make"),
    [
        ("Deployment spec.selector is immutable", _deployment),
        ("StatefulSet: only replicas", _statefulset),
        ("StatefulSet volumeClaimTemplates are immutable", _statefulset),
        ("allowed StatefulSet change", _statefulset),
        ("immutable: true ConfigMap data change", _configmap),
        ("immutable cannot be unset", _configmap),
        ("metadata of an immutable ConfigMap can still change", _configmap),
        ("metadata.uid change", _configmap),
    ],
)
def test_update_causes_match_immutable_fields_json(note: str, make: Any) -> None:
    step = recorded(IMMUTABLE, note)
    causes = update_causes(make(), step["request"]["body"])
    expected = recorded_causes(step) if step["status"] == 422 else []
    assert causes == expected


@pytest.mark.parametrize("note", ["Service spec.clusterIP is immutable", "ClusterIP service ->"])
def test_cluster_ip_may_not_change(note: str) -> None:
    step = recorded(IMMUTABLE, note)
    ctx = ServerContext()
    assert update_causes(_service(ctx), step["request"]["body"], ctx) == recorded_causes(step)


def test_secret_type_and_immutable_data() -> None:
    secret = created({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                      "immutable": True, "data": {"k": "dg=="}})
    causes = update_causes(secret, {"type": "kubernetes.io/tls", "data": {"k": "dw=="}})
    assert [(c["reason"], c["field"]) for c in causes] == [
        ("FieldValueInvalid", "type"), ("FieldValueForbidden", "data"),
        ("FieldValueRequired", "data[tls.crt]"), ("FieldValueRequired", "data[tls.key]")]
    assert update_causes(secret, {"metadata": {"labels": {"a": "b"}}}) == []


def test_job_template_is_immutable() -> None:
    job = created({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "i"}]}}},
    })
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "j"}]}}}}
    assert [c["field"] for c in update_causes(job, patch)] == ["spec.template"]
    assert update_causes(job, {"spec": {"suspend": True}}) == []


def test_go_selector_repr_matches_the_recording() -> None:
    step = recorded(IMMUTABLE, "Deployment spec.selector is immutable")
    selector = step["request"]["body"]["spec"]["selector"]
    assert go_selector(selector) in step["response"]["message"]


@pytest.mark.parametrize(
    ("expressions", "labels", "matches"),
    [
        ([{"key": "a", "operator": "In", "values": ["1", "2"]}], {"a": "2"}, True),
        ([{"key": "a", "operator": "In", "values": ["1"]}], {}, False),
        ([{"key": "a", "operator": "NotIn", "values": ["1"]}], {}, True),
        ([{"key": "a", "operator": "NotIn", "values": ["1"]}], {"a": "1"}, False),
        ([{"key": "a", "operator": "Exists"}], {"a": ""}, True),
        ([{"key": "a", "operator": "DoesNotExist"}], {"a": ""}, False),
    ],
)
def test_selector_expressions(
    expressions: list[dict[str, Any]], labels: dict[str, str], matches: bool
) -> None:
    assert selector_matches({"matchExpressions": expressions}, labels) is matches
    assert selector_matches(None, labels) is False


# --- metadata of every kind ------------------------------------------------------------------


def _configmap_with(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", **meta}}


def test_label_keys_and_values_are_checked() -> None:
    causes = create_causes(_configmap_with(labels={
        "app.kubernetes.io/name": "ok", "bad key!": "x", "k": "-bad", "long": "v" * 64,
    }))
    assert [(c["field"], c["message"].split(":", 2)[1].strip()) for c in causes] == [
        ("metadata.labels", '"bad key!"'),
        ("metadata.labels", '"-bad"'),
        ("metadata.labels", '"' + "v" * 64 + '"'),
    ]
    assert causes[0]["message"].startswith('Invalid value: "bad key!": name part must consist')
    assert causes[2]["message"].endswith("must be no more than 63 characters")


def test_annotations_finalizers_and_owner_references_are_checked() -> None:
    assert create_causes(_configmap_with(annotations={"a" * 64: "v"}))[0]["message"].endswith(
        "name part must be no more than 63 characters")
    huge = create_causes(_configmap_with(annotations={"big": "x" * (256 * 1024)}))
    assert huge == [{"reason": "FieldValueTooLong",
                     "message": "Too long: must have at most 262144 bytes",
                     "field": "metadata.annotations"}]
    assert create_causes(_configmap_with(finalizers=["example.com/cleanup", "orphan"])) == []
    assert create_causes(_configmap_with(finalizers=["cleanup"])) == [{
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "cleanup": name is neither a standard finalizer name nor is '
                   "it fully qualified",
        "field": "metadata.finalizers",
    }]
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u",
             "controller": True}
    assert create_causes(_configmap_with(ownerReferences=[owner])) == []
    causes = create_causes(_configmap_with(ownerReferences=[
        owner, {**owner, "name": "e"}, {"apiVersion": "v1", "kind": "Pod", "name": "p"}]))
    assert [c["field"] for c in causes] == [
        "metadata.ownerReferences.uid", "metadata.ownerReferences"]


def test_an_update_without_uid_keeps_it() -> None:
    old = _configmap()
    new = copy.deepcopy(old)
    del new["metadata"]["uid"]
    strategy_for("v1", "ConfigMap").prepare_update(old, new, ServerContext())
    assert new["metadata"]["uid"] == old["metadata"]["uid"]


def test_ingress_paths_need_a_type_and_absolute_paths() -> None:
    def ingress(*paths: dict[str, Any]) -> dict[str, Any]:
        backend = {"service": {"name": "s", "port": {"number": 80}}}
        return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"},
                "spec": {"rules": [{"http": {"paths": [{**p, "backend": backend}
                                                       for p in paths]}}]}}

    assert create_causes(ingress({"path": "/", "pathType": "Prefix"})) == []
    causes = create_causes(ingress({"path": "/"}, {"path": "api", "pathType": "Exact"},
                                    {"path": "/", "pathType": "Regex"}))
    at = "spec.rules[0].http.paths"
    assert causes == [
        {"reason": "FieldValueRequired", "message": "Required value: pathType must be specified",
         "field": f"{at}[0].pathType"},
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "api": must be an absolute path',
         "field": f"{at}[1].path"},
        {"reason": "FieldValueNotSupported",
         "message": 'Unsupported value: "Regex": supported values: "Exact", '
                    '"ImplementationSpecific", "Prefix"',
         "field": f"{at}[2].pathType"},
    ]


def test_hpa_replica_bounds() -> None:
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "h"},
           "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"},
                    "minReplicas": 5, "maxReplicas": 3}}
    assert create_causes(hpa) == [{
        "reason": "FieldValueInvalid",
        "message": "Invalid value: 5: must be less than or equal to maxReplicas",
        "field": "spec.minReplicas",
    }]
    del hpa["spec"]["scaleTargetRef"]
    hpa["spec"]["maxReplicas"] = 0
    assert [c["field"] for c in create_causes(hpa)] == [
        "spec.scaleTargetRef.kind", "spec.scaleTargetRef.name", "spec.maxReplicas"]


def test_role_ref_cannot_change() -> None:
    binding = created({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "ns"},
        "roleRef": {"kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "alice"}],
    })
    assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert update_causes(binding, {"subjects": [{"kind": "Group", "name": "devs"}]}) == []
    assert update_causes(binding, {"roleRef": {"name": "writer"}}) == [{
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
                   'Kind:"Role", Name:"writer"}: cannot change roleRef',
        "field": "roleRef",
    }]


def test_pod_spec_changes_are_limited_to_images_and_deadlines() -> None:
    pod = created({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}})
    patch = {"spec": {"containers": [{**pod["spec"]["containers"][0], "image": "busybox:1.36"}],
                      "activeDeadlineSeconds": 30}}
    assert update_causes(pod, patch) == []
    causes = update_causes(pod, {"spec": {"dnsPolicy": "Default"}})
    assert [(c["reason"], c["field"]) for c in causes] == [("FieldValueForbidden", "spec")]
    assert causes[0]["message"].startswith("Forbidden: pod updates may not change fields")
    assert [c["field"] for c in update_causes(pod, {"spec": {"tolerations": []}})] == [
        "spec.tolerations"]


def test_unbound_claim_spec_is_immutable() -> None:
    claim = created({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": "c"},
                     "spec": {"accessModes": ["ReadWriteOnce"],
                              "resources": {"requests": {"storage": "1Gi"}}}})
    grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    assert [c["field"] for c in update_causes(claim, grow)] == ["spec"]
    bound = {**claim, "status": {"phase": "Bound"}}
    assert update_causes(bound, grow) == []
    assert update_causes(claim, {"metadata": {"labels": {"a": "b"}}}) == []


def test_event_rules_of_both_apis() -> None:
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "a"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "b"}}
    assert create_causes(core) == [{
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "b": does not match event.namespace',
        "field": "involvedObject.namespace",
    }]
    core["involvedObject"]["namespace"] = "a"
    assert create_causes(core) == []
    cluster_scoped = {**core, "metadata": {"name": "e", "namespace": "default"},
                      "involvedObject": {"kind": "Node", "name": "n"}}
    assert create_causes(cluster_scoped) == []

    events = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
              "metadata": {"name": "e", "namespace": "a"}, "type": "Info"}
    assert [(c["field"], c["reason"]) for c in create_causes(events)] == [
        ("eventTime", "FieldValueRequired"),
        ("type", "FieldValueInvalid"),
        ("reportingController", "FieldValueRequired"),
        ("reportingInstance", "FieldValueRequired"),
        ("action", "FieldValueRequired"),
        ("reason", "FieldValueRequired"),
    ]


def test_config_keys_sizes_and_typed_secrets() -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                 "data": {"ok.key_1": "v", "bad key": "v", "both": "v"},
                 "binaryData": {"both": "dg=="}}
    assert [(c["field"], c["message"]) for c in create_causes(configmap)] == [
        ("data[bad key]", 'Invalid value: "bad key": a valid config key must consist of '
                          "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
                          "'KEY_NAME',  or 'key-name', regex used for validation is "
                          "'[-._a-zA-Z0-9]+')"),
        ("data[both]", 'Invalid value: "both": duplicate of key present in binaryData'),
    ]
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
           "data": {"k": "x" * (1024 * 1024)}}
    assert [c["reason"] for c in create_causes(big)] == ["FieldValueTooLong"]

    tls = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
           "type": "kubernetes.io/tls", "stringData": {"tls.crt": "cert"}}
    assert create_causes(tls) == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "data[tls.key]"}]
    tls["stringData"]["tls.key"] = "key"
    assert create_causes(tls) == []
    basic = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
             "type": "kubernetes.io/basic-auth"}
    assert [c["field"] for c in create_causes(basic)] == ["data[username]", "data[password]"]


def test_values_of_the_wrong_type_are_refused_before_defaulting() -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": "three", "selector": {"matchLabels": {"app": "x"}},
                 "template": {"metadata": {"labels": {"app": "x"}},
                              "spec": {"containers": [{"name": "c", "image": "i",
                                                       "ports": [{"containerPort": "80"}]}]}}},
    }
    assert create_causes(deployment) == [
        {"reason": "FieldValueTypeInvalid",
         "message": 'Invalid value: "string": spec.replicas in body must be of type integer: '
                    '"string"',
         "field": "spec.replicas"},
        {"reason": "FieldValueTypeInvalid",
         "message": 'Invalid value: "string": spec.template.spec.containers[0].ports[0]'
                    '.containerPort in body must be of type integer: "string"',
         "field": "spec.template.spec.containers[0].ports[0].containerPort"},
    ]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"ports": [{"port": 80, "targetPort": "http", "nodePort": None}]}}
    assert create_causes(service) == []  # int-or-string, and null decodes to zero
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                 "data": {"n": 1}}
    assert [c["field"] for c in create_causes(configmap)] == ["data.n"]
    old = created({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    assert [c["field"] for c in update_causes(old, {"data": ["a"]})] == ["data"]


def test_pdb_sets_one_bound() -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
           "spec": {"minAvailable": 1, "maxUnavailable": "50%",
                    "selector": {"matchLabels": {"app": "x"}}}}
    causes = create_causes(pdb)
    assert [(c["field"], c["message"].rsplit(": ", 1)[1]) for c in causes] == [
        ("spec", "minAvailable and maxUnavailable cannot be both set")]
    del pdb["spec"]["maxUnavailable"]
    assert create_causes(pdb) == []


def test_nulls_decode_to_zero_values() -> None:
    configmap = created({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "c", "labels": {"a": None}, "annotations": None},
                         "data": {"k": None}})
    assert configmap["metadata"] == {"name": "c", "labels": {"a": ""},
                                     "uid": "4c2b3a96-da6c-42e4-b9df-19476e211914"}
    assert configmap["data"] == {"k": ""}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "r"},
               "subjects": [None]}
    assert [c["field"] for c in create_causes(binding)] == ["subjects[0].kind",
                                                            "subjects[0].name"]
