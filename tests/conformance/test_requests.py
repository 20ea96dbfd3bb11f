"""Differential conformance: each request kind sent to the embedded server and to the real
control plane, the answers compared field by field after ``helpers.normalize``.

Every difference found either was fixed in the embedded server or is listed in ``KNOWN`` with the
reason it stays (and in docs/embedded-apiserver.md, "Differences from a real API server"); each
test asserts the exact set of differences, so a change on either side is noticed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builders import DesiredState, run_builders
from tests.conformance.helpers import Answer, Pair, compare
from tests.conformance.objects import builder_objects, plural_path

CM = "/api/v1/namespaces/{ns}/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/{ns}/deployments"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

_SMP_ORDER = ("new list items of a strategic merge patch without $setElementOrder: the real "
              "server puts the patch's items first, the embedded one appends them "
              "(kubectl always sends $setElementOrder)")
_NOT_FOUND_PAGE = ("an unknown resource: the real server answers a NotFound Status, the "
                   "embedded one a plain-text 404 page")
_KIND_MISMATCH = ("the message of a body whose kind does not match the URL differs "
                  "(same code and reason)")
_WATCH_410 = ("the real server serves old resourceVersions from its watch cache and etcd until "
              "an etcd compaction (every 5 min); the embedded one answers 410 Expired after "
              "compact(), which the real one cannot be made to do on demand")
_DEFAULT_SA = ("the real serviceaccount controller creates the 'default' ServiceAccount in each "
               "namespace; the embedded server runs no such controller")
_ENV = ".spec.template.spec.containers[0].env"
_STATUS_FIELDS = (".apiVersion", ".code", ".details", ".kind", ".message", ".metadata",
                  ".reason", ".status", ".text")

KNOWN: dict[str, dict[str, str]] = {
    "patch strategic": {f"{_ENV}[{i}].{f}": _SMP_ORDER
                        for i in (0, 1) for f in ("name", "value")},
    "patch merge on deployment": {f"{_ENV}[{i}].{f}": _SMP_ORDER
                                  for i in (0, 1) for f in ("name", "value")},
    "get 404 unknown resource": dict.fromkeys(_STATUS_FIELDS, _NOT_FOUND_PAGE),
    "create 400 kind mismatch": {".message": _KIND_MISMATCH},
    "watch 410 gone": {".": _WATCH_410},
    "list serviceaccounts": {".items": _DEFAULT_SA},
}
"""Request kind -> {path of a difference: why it stays}. Mirrors docs/embedded-apiserver.md."""

COVERED: set[str] = set()


def check(kind: str, answers: dict[str, Answer]) -> None:
    """Assert that the answers differ exactly where ``KNOWN[kind]`` says."""
    COVERED.add(kind)
    found = {path: (left, right) for path, left, right in compare(answers)}
    expected = KNOWN.get(kind, {})
    assert set(found) == set(expected), (
        f"{kind}: differences changed\n" + "\n".join(
            f"  {path}: embedded={left!r} real={right!r}" for path, (left, right) in found.items()
        ) + f"\nexpected: {sorted(expected)}")


def _configmap(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app": "conf"}}, "data": {"a": "1"}, **extra}


def _deployment(name: str = "web") -> dict[str, Any]:
    return builder_objects("x")["deployment"][1] | {
        "metadata": {"name": name, "labels": {"app": "conf"}}}


def _create(pair: Pair, path: str, body: dict[str, Any]) -> dict[str, Answer]:
    answers = pair.both("POST", path, body=body)
    for answer in answers.values():
        assert answer.status == 201, answer
    return answers


# -- create of every builders kind ---------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(builder_objects("x")))
def test_create_builders_kind(pair: Pair, kind: str) -> None:
    path, body = builder_objects(pair.namespace)[kind]
    answers = pair.both("POST", path, body=body)
    check(f"create {kind}", answers)
    name = body["metadata"]["name"]
    check(f"get {kind}", pair.both("GET", f"{path}/{name}"))
    if "namespaces/" not in path:  # cluster-scoped: remove it, the session is shared
        pair.both("DELETE", f"{path}/{name}")


# -- reads ---------------------------------------------------------------------------------------

def test_list_with_label_selector(pair: Pair) -> None:
    _create(pair, CM, _configmap("one"))
    _create(pair, CM, _configmap("two") | {"metadata": {"name": "two", "labels": {"app": "x"}}})
    check("list labelSelector", pair.both("GET", CM, query={"labelSelector": "app=conf"}))
    check("list fieldSelector", pair.both("GET", CM, query={"fieldSelector": "metadata.name=two"}))
    check("list limit", pair.both("GET", CM, query={"limit": "1", "labelSelector": "app"}))


def test_generate_name(pair: Pair) -> None:
    body = _configmap("")
    body["metadata"] = {"generateName": "gen-"}
    check("create generateName", pair.both("POST", CM, body=body))


# -- writes --------------------------------------------------------------------------------------

def test_update_and_conflict(pair: Pair) -> None:
    created = _create(pair, CM, _configmap("cm"))
    for name, answer in created.items():
        answer.body["data"] = {"a": "2"}
        pair.on(name, "PUT", f"{CM}/cm", body=answer.body)
    stale = {name: a.body for name, a in created.items()}
    # the second PUT with the same (now stale) resourceVersion conflicts
    check("update conflict 409", {name: pair.on(name, "PUT", f"{CM}/cm", body=body)
                                  for name, body in stale.items()})
    fresh = pair.both("GET", f"{CM}/cm")
    for answer in fresh.values():
        answer.body["data"]["b"] = "3"
    check("update", {name: pair.on(name, "PUT", f"{CM}/cm", body=a.body)
                     for name, a in fresh.items()})


def test_patch_types(pair: Pair) -> None:
    _create(pair, CM, _configmap("cm"))
    _create(pair, DEPLOY, _deployment())
    check("patch json", pair.both("PATCH", f"{CM}/cm", content_type=JSON_PATCH, body=[
        {"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}]))
    check("patch json test failed", pair.both("PATCH", f"{CM}/cm", content_type=JSON_PATCH,
                                              body=[{"op": "test", "path": "/data/b",
                                                     "value": "nope"}]))
    check("patch merge", pair.both("PATCH", f"{CM}/cm", content_type=MERGE,
                                   body={"data": {"c": "3", "b": None}}))
    check("patch strategic", pair.both("PATCH", f"{DEPLOY}/web", content_type=STRATEGIC, body={
        "spec": {"template": {"spec": {"containers": [
            {"name": "web", "env": [{"name": "EXTRA", "value": "1"}]},
            {"name": "sidecar", "image": "busybox:1.36"}]}}}}))
    check("patch merge on deployment", pair.both("PATCH", f"{DEPLOY}/web", content_type=MERGE,
                                                 body={"spec": {"replicas": 3}}))


def test_server_side_apply(pair: Pair) -> None:
    apply = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "applied", "labels": {"app": "conf"}}, "data": {"a": "1"}}
    check("apply create", pair.both("PATCH", f"{CM}/applied", content_type=APPLY, body=apply,
                                    query={"fieldManager": "one"}))
    other = {**apply, "data": {"a": "2"}}
    check("apply conflict 409", pair.both("PATCH", f"{CM}/applied", content_type=APPLY,
                                          body=other, query={"fieldManager": "two"}))
    check("apply force", pair.both("PATCH", f"{CM}/applied", content_type=APPLY, body=other,
                                   query={"fieldManager": "two", "force": "true"}))
    check("apply no-op", pair.both("PATCH", f"{CM}/applied", content_type=APPLY, body=other,
                                   query={"fieldManager": "two"}))


# -- subresources --------------------------------------------------------------------------------

def test_status_subresource(pair: Pair) -> None:
    created = _create(pair, DEPLOY, _deployment())
    check("get status", pair.both("GET", f"{DEPLOY}/web/status"))
    for answer in created.values():
        answer.body["status"] = {"replicas": 2, "readyReplicas": 1, "observedGeneration": 1}
        answer.body["spec"]["replicas"] = 5  # ignored by /status
    check("update status", {name: pair.on(name, "PUT", f"{DEPLOY}/web/status", body=a.body)
                            for name, a in created.items()})
    check("patch status", pair.both("PATCH", f"{DEPLOY}/web/status", content_type=MERGE,
                                    body={"status": {"availableReplicas": 1}}))


def test_scale_subresource(pair: Pair) -> None:
    _create(pair, DEPLOY, _deployment())
    check("get scale", pair.both("GET", f"{DEPLOY}/web/scale"))
    check("patch scale", pair.both("PATCH", f"{DEPLOY}/web/scale", content_type=MERGE,
                                   body={"spec": {"replicas": 4}}))
    current = pair.both("GET", f"{DEPLOY}/web/scale")
    for answer in current.values():
        answer.body["spec"]["replicas"] = 1
    check("update scale", {name: pair.on(name, "PUT", f"{DEPLOY}/web/scale", body=a.body)
                           for name, a in current.items()})


# -- dry run -------------------------------------------------------------------------------------

def test_dry_run(pair: Pair) -> None:
    dry = {"dryRun": "All"}
    check("create dryRun", pair.both("POST", CM, body=_configmap("dry"), query=dry))
    check("get after dryRun 404", pair.both("GET", f"{CM}/dry"))
    _create(pair, CM, _configmap("cm"))
    check("patch dryRun", pair.both("PATCH", f"{CM}/cm", content_type=MERGE,
                                    body={"data": {"a": "9"}}, query=dry))
    check("delete dryRun", pair.both("DELETE", f"{CM}/cm", query=dry))
    check("get after dryRun delete", pair.both("GET", f"{CM}/cm"))


# -- watch ---------------------------------------------------------------------------------------

def test_watch_event_sequence(pair: Pair) -> None:
    start = {name: pair.on(name, "GET", CM).body["metadata"]["resourceVersion"]
             for name in pair.servers}
    _create(pair, CM, _configmap("w"))
    pair.both("PATCH", f"{CM}/w", content_type=MERGE, body={"data": {"a": "2"}})
    pair.both("PATCH", f"{CM}/w", content_type=MERGE, body={"metadata": {"labels": {"x": "y"}}})
    pair.both("DELETE", f"{CM}/w")
    events = {name: list(pair.watch_events(name, CM, resource_version=start[name]))
              for name in pair.servers}
    check("watch sequence", {name: Answer(status=200, body=evs) for name, evs in events.items()})


def test_watch_gone_410(pair: Pair) -> None:
    pair.servers["embedded"].compact()
    events = {name: list(pair.watch_events(name, CM, resource_version="1"))
              for name in pair.servers}
    answers = {name: Answer(status=200, body=evs) for name, evs in events.items()}
    if "real" in events and _expired(events["real"]):
        # A real server whose watch-cache window has moved past version 1 (enough ConfigMap
        # writes earlier in the session, or etcd's 5-minute compaction) answers 410 Expired
        # too: then the two answers must be alike.
        assert not compare(answers), compare(answers)
        return
    check("watch 410 gone", answers)


def _expired(events: list[dict[str, Any]]) -> bool:
    """Whether a watch answered 410 Expired (as an HTTP status or an ERROR event)."""
    return bool(events) and events[0]["type"] in ("ERROR", "HTTP") and (
        events[0]["object"].get("code") == 410)


# -- deletion and the garbage collector ----------------------------------------------------------

def _owned_pair(pair: Pair, suffix: str) -> None:
    owners = _create(pair, CM, _configmap(f"owner-{suffix}"))
    for name, owner in owners.items():
        child = _configmap(f"child-{suffix}")
        child["metadata"]["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": f"owner-{suffix}",
            "uid": owner.body["metadata"]["uid"], "blockOwnerDeletion": True}]
        assert pair.on(name, "POST", CM, body=child).status == 201


def _until(pair: Pair, server: str, path: str, done: Callable[[Answer], bool]) -> Answer:
    deadline = time.monotonic() + 30
    while True:
        answer = pair.on(server, "GET", path)
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _orphaned(answer: Answer) -> bool:
    return not answer.body["metadata"].get("ownerReferences")


def _gone(answer: Answer) -> bool:
    return answer.status == 404


@pytest.mark.needs_controller_manager
@pytest.mark.parametrize("policy", ["Foreground", "Background", "Orphan"])
def test_delete_propagation_and_collection(pair: Pair, policy: str) -> None:
    suffix = policy.lower()
    _owned_pair(pair, suffix)
    check(f"delete {policy}", pair.both("DELETE", f"{CM}/owner-{suffix}",
                                        body={"propagationPolicy": policy}))
    child_path = f"{CM}/child-{suffix}"
    done = _orphaned if policy == "Orphan" else _gone
    after = {name: _until(pair, name, child_path, done) for name in pair.servers}
    check(f"collected after {policy}", after)
    owner_gone = {name: _until(pair, name, f"{CM}/owner-{suffix}", lambda a: a.status == 404)
                  for name in pair.servers}
    check(f"owner after {policy}", owner_gone)


def test_deletecollection(pair: Pair) -> None:
    _create(pair, CM, _configmap("one"))
    _create(pair, CM, _configmap("two"))
    check("deletecollection", pair.both("DELETE", CM, query={"labelSelector": "app=conf"}))
    check("list after deletecollection", pair.both("GET", CM, query={"labelSelector": "app"}))


# -- errors and their Status bodies --------------------------------------------------------------

def test_errors(pair: Pair) -> None:
    check("get 404", pair.both("GET", f"{CM}/missing"))
    check("get 404 namespace", pair.both("GET", "/api/v1/namespaces/no-such-ns-x/configmaps/a"))
    check("delete 404", pair.both("DELETE", f"{CM}/missing"))
    check("patch 404", pair.both("PATCH", f"{CM}/missing", content_type=MERGE, body={}))
    _create(pair, CM, _configmap("cm"))
    check("create 409 AlreadyExists", pair.both("POST", CM, body=_configmap("cm")))
    check("create 422 invalid name", pair.both("POST", CM, body=_configmap("Bad_Name")))
    bad_deploy = _deployment("bad")
    bad_deploy["spec"]["selector"] = {"matchLabels": {"other": "x"}}
    check("create 422 selector mismatch", pair.both("POST", DEPLOY, body=bad_deploy))
    # issue 31: the rules builders.testing's "server rules" shares with the embedded server
    negative = _deployment("negative")
    negative["spec"]["replicas"] = -2
    check("create 422 negative replicas", pair.both("POST", DEPLOY, body=negative))
    check("create 422 service port 0", pair.both("POST", "/api/v1/namespaces/{ns}/services", body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "zero"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 0}]}}))
    check("create 400 kind mismatch", pair.both("POST", CM, body={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}))
    check("get 404 unknown resource", pair.both("GET", "/api/v1/namespaces/{ns}/nothings"))


def test_immutable_fields(pair: Pair) -> None:
    path, secret = builder_objects(pair.namespace)["secret"]
    secret["immutable"] = True
    _create(pair, path, secret)
    check("update immutable secret 422", pair.both(
        "PATCH", f"{path}/web", content_type=MERGE, body={"stringData": {"password": "x"}}))
    _create(pair, DEPLOY, _deployment())
    check("patch immutable selector 422", pair.both(
        "PATCH", f"{DEPLOY}/web", content_type=MERGE, body={"spec": {"selector": {
            "matchLabels": {"app.kubernetes.io/name": "other"}}}}))


def test_a_job_sent_with_no_labels(pair: Pair) -> None:
    """Issue 35, item 8: a Job sent with no labels at all (its template has none either) gets
    the template's generated ``controller-uid`` and ``job-name`` in ``metadata.labels`` too
    (kube-apiserver defaults the Job again as it reads the stored object back: the template's
    labels are no longer empty then); a dry run likewise, and a Job with labels of its own
    keeps only those."""
    jobs = "/apis/batch/v1/namespaces/{ns}/jobs"

    def job(name: str, **metadata: Any) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, **metadata},
                "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}

    check("create job without labels", pair.both("POST", jobs, body=job("bare")))
    check("create job without labels, dry run",
          pair.both("POST", jobs, body=job("dry"), query={"dryRun": "All"}))
    check("create job with its own labels",
          pair.both("POST", jobs, body=job("own", labels={"app": "own"})))


# -- the Thanos example: its CRD, a parent and every child ---------------------------------------

def test_thanos_parent_and_children(pair: Pair) -> None:
    import yaml

    from examples.thanos import builders as thanos
    from examples.thanos.crds import THANOS_CRD

    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    name = THANOS_CRD["metadata"]["name"]
    for server in pair.servers:
        if pair.on(server, "GET", f"{crds}/{name}").status == 404:
            assert pair.on(server, "POST", crds, body=THANOS_CRD).status == 201
    samples = Path(thanos.__file__).with_name("samples.yaml").read_text()
    parent = next(yaml.safe_load_all(samples))
    parent["metadata"]["namespace"] = pair.namespace
    path = f"/apis/monitoring.optk.dev/v1alpha1/namespaces/{pair.namespace}/thanoses"
    created: dict[str, Answer] = {}
    for server in pair.servers:  # a new CRD is served about 2 s after its creation
        deadline = time.monotonic() + 30
        created[server] = pair.on(server, "POST", path, body=parent)
        while created[server].status == 404 and time.monotonic() < deadline:
            time.sleep(0.2)
            created[server] = pair.on(server, "POST", path, body=parent)
    check("create custom resource", created)
    check("get customresourcedefinition", pair.both("GET", f"{crds}/{name}"))
    children = {server: [obj for obj, state in run_builders(thanos.build(owner.body))
                         if state is DesiredState.PRESENT]
                for server, owner in created.items()}
    assert len(children["embedded"]) == len(children["real"]) >= 8
    for index, child in enumerate(children["embedded"]):
        collection = plural_path(child["kind"], pair.namespace)
        answers = {server: pair.on(server, "POST", collection, body=objs[index])
                   for server, objs in children.items()}
        check(f"create thanos {child['kind'].lower()}", answers)

@pytest.mark.needs_controller_manager
def test_namespace_service_accounts(pair: Pair) -> None:
    check("list serviceaccounts", pair.both("GET", "/api/v1/namespaces/{ns}/serviceaccounts"))


@pytest.mark.needs_controller_manager
def test_pod_from_a_builders_template(pair: Pair) -> None:
    template = builder_objects(pair.namespace)["deployment"][1]["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**template["metadata"], "name": "web"}, "spec": template["spec"]}
    check("create pod", pair.both("POST", "/api/v1/namespaces/{ns}/pods", body=pod))


def test_watch_with_label_selector(pair: Pair) -> None:
    start = {name: pair.on(name, "GET", CM).body["metadata"]["resourceVersion"]
             for name in pair.servers}
    _create(pair, CM, _configmap("in"))
    _create(pair, CM, _configmap("out") | {"metadata": {"name": "out"}})
    pair.both("PATCH", f"{CM}/in", content_type=MERGE, body={"metadata": {"labels": None}})
    pair.both("PATCH", f"{CM}/out", content_type=MERGE,
              body={"metadata": {"labels": {"app": "conf"}}})
    events = {name: list(pair.watch_events(name, CM, resource_version=start[name],
                                           label_selector="app=conf"))
              for name in pair.servers}
    check("watch labelSelector", {name: Answer(status=200, body=evs)
                                  for name, evs in events.items()})


@pytest.mark.needs_controller_manager
def test_namespace_deletion(pair: Pair) -> None:
    _create(pair, CM, _configmap("cm"))
    check("delete namespace", pair.both("DELETE", "/api/v1/namespaces/{ns}"))
    gone = {name: _until(pair, name, "/api/v1/namespaces/{ns}", _gone) for name in pair.servers}
    check("namespace after deletion", gone)
