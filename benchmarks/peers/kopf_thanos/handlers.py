"""The kopf handlers of the Thanos peer: parents, children, a resync timer, and the writes.

Idiomatic kopf, the way its documentation recommends for cross-resource work:
- ``parents`` and ``children`` are kopf indexes (in-memory, filled from kopf's own watches), so
  no handler reads the cluster: parents by ``(namespace, name)``, children by their controller
  owner's ``(namespace, name)``; children are watched by the ``managed-by`` label.
- ``reconcile`` (on create, update and resume of a ``Thanos``) and the ``resync`` timer plan the
  parent's children against the index and write the difference.
- ``repair`` (on every event of a labelled child) rebuilds that one child from its parent and
  recreates, patches or deletes it when it drifted.
Writes use the official ``kubernetes`` client (``KUBECONFIG``), the client most kopf operators
use, from kopf's thread pool (sync handlers): create, then on 409 AlreadyExists adopt the object
by patching it (the builders put the controller owner reference in every child); patches are
strategic merge patches of the whole desired child. Responses are not deserialized into models
(``_preload_content=False``): the handlers never read them. ``KOPF_THANOS_RESYNC_SECONDS``
sets the timer (default 600 s, also its initial delay, so cold start is left to ``reconcile``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import kubernetes
from kubernetes.client.exceptions import ApiException

from benchmarks.peers.kopf_thanos import children as plan
from examples.thanos.builders import OPERATOR_NAME
from examples.thanos.crds import GROUP, VERSION

PARENT = (GROUP, VERSION, "thanoses")
CHILD_RESOURCES = (
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("", "v1", "services"),
    ("networking.k8s.io", "v1", "ingresses"),
)
"""Every kind the builders produce (ServiceMonitors stay off, as under ``optk run``)."""
SELECTOR = {"app.kubernetes.io/managed-by": OPERATOR_NAME}
RESYNC_SECONDS = float(os.environ.get("KOPF_THANOS_RESYNC_SECONDS", "600"))

_api: dict[str, Any] = {}
_api_lock = threading.Lock()


def _apis() -> dict[str, Any]:
    """The typed APIs by kind, loaded from the kubeconfig once."""
    with _api_lock:
        if not _api:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
            client = kubernetes.client.ApiClient()
            apps = kubernetes.client.AppsV1Api(client)
            core = kubernetes.client.CoreV1Api(client)
            net = kubernetes.client.NetworkingV1Api(client)
            _api.update(Deployment=(apps, "deployment"), StatefulSet=(apps, "stateful_set"),
                        Service=(core, "service"), Ingress=(net, "ingress"))
        return _api


def _call(verb: str, obj: Mapping[str, Any]) -> None:
    api, suffix = _apis()[str(obj["kind"])]
    meta = obj["metadata"]
    method: Callable[..., Any] = getattr(api, f"{verb}_namespaced_{suffix}")
    if verb == "create":
        method(meta["namespace"], obj, _preload_content=False)
    elif verb == "patch":
        method(meta["name"], meta["namespace"], obj, _preload_content=False)
    else:
        method(meta["name"], meta["namespace"], _preload_content=False)


def write(step: plan.Write) -> None:
    """Perform one write; a create that meets an existing object adopts it with a patch."""
    try:
        _call(step.verb, step.obj)
    except ApiException as error:
        if step.verb == "create" and error.status == 409:
            _call("patch", step.obj)
        elif step.verb == "delete" and error.status == 404:
            return
        else:
            raise


def _owner(body: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = body.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "Thanos":
            return str(meta.get("namespace")), str(ref.get("name"))
    return None


@kopf.index(*PARENT)
def parents(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Every Thanos parent by ``(namespace, name)``."""
    return {(namespace, name): body}


def _index_children(*, body: kopf.Body, **_: Any) -> dict[Any, Any] | None:
    owner = _owner(body)
    return {owner: body} if owner is not None else None


for _group, _version, _plural in CHILD_RESOURCES:
    kopf.index(_group, _version, _plural, labels=SELECTOR, id="children")(_index_children)


def ensure(body: Mapping[str, Any], index: kopf.Index[Any, Any] | None) -> int:
    """Write whatever the parent's children lack; returns how many writes it made."""
    if index is None:
        raise RuntimeError("kopf passed no 'children' index to the handler")
    meta = body["metadata"]
    steps = plan.plan(body, index.get((meta["namespace"], meta["name"]), []))
    for step in steps:
        write(step)
    return len(steps)


@kopf.on.resume(*PARENT)
@kopf.on.create(*PARENT)
@kopf.on.update(*PARENT)
def reconcile(
    *, body: kopf.Body, children: kopf.Index[Any, Any] | None = None, **_: Any
) -> None:
    """Create or repair every child of a new, changed or (at start) existing parent."""
    ensure(body, children)


@kopf.timer(*PARENT, interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
def resync(
    *, body: kopf.Body, children: kopf.Index[Any, Any] | None = None, **_: Any
) -> None:
    """The periodic resync: the same as ``reconcile``, from the indexes only."""
    ensure(body, children)


def repair(
    *, type: str | None, body: kopf.Body, parents: kopf.Index[Any, Any] | None = None,
    **_: Any,
) -> None:
    """A labelled child changed or went away: rebuild it from its parent and fix any drift."""
    owner = _owner(body)
    if owner is None or parents is None:
        return
    found = list(parents.get(owner, []))
    if not found:
        return  # the parent is gone; garbage collection takes the child
    wanted = plan.desired(found[0]).get(plan.child_key(body))
    if wanted is None:
        return
    want, present = wanted
    step = plan.plan_child(want, present, None if type == "DELETED" else body)
    if step is not None:
        write(step)


for _group, _version, _plural in CHILD_RESOURCES:
    kopf.on.event(_group, _version, _plural, labels=SELECTOR, id="repair")(repair)
