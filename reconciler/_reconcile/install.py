"""``Operator(install=[...])``: objects (such as the parent's CRD) applied when an operator starts.

An operator's new version may ship a changed CRD schema; creating it only when missing would
leave the old schema in place for ever. So each object is applied through the matcher, as
children are: created with the last-applied annotation when missing, patched with
``objectmatcher.calculate_patch``'s patch when it differs from the live object (only then: a
start with an unchanged CRD writes nothing), and the changed fields are logged; after writing a
CRD it waits (bounded) until its kind is served. This module is the I/O shell around that one
decision; it knows nothing of the runtime.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import attrs

from builders import ObjectRef
from objectmatcher import LAST_APPLIED_ANNOTATION, calculate_patch, set_last_applied
from reconciler._base.clocks import Clock
from reconciler._base.errors import AlreadyExistsError, NotFoundError
from reconciler._client.protocol import ClusterClient, KubeObject

__all__ = ["InstallResult", "install_all", "install_object"]

_log = logging.getLogger("optk.operator")
_ANNOTATION_PATH = ("metadata", "annotations", LAST_APPLIED_ANNOTATION)
_SHOWN_FIELDS = 8
_SERVED_TIMEOUT = 30.0


@attrs.frozen(kw_only=True)
class InstallResult:
    """What applying one ``install`` object did: ``action`` is ``"created"``, ``"updated"`` or
    ``"unchanged"``; ``fields`` the dotted paths that changed (an update only)."""

    ref: ObjectRef
    action: str
    fields: tuple[str, ...] = ()


def _dotted(path: tuple[object, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path)


def _wait_served(client: ClusterClient, obj: KubeObject, timeout: float = _SERVED_TIMEOUT) -> None:
    """After writing a CRD, wait (bounded, real time) until the server serves its kind, so
    that the operator's informers and the first parents find it."""
    if obj.get("kind") != "CustomResourceDefinition":
        return
    spec = obj.get("spec") or {}
    kind = (spec.get("names") or {}).get("kind")
    versions = [v.get("name") for v in spec.get("versions") or () if v.get("served", True)]
    if not kind or not versions:
        return
    api_version = f"{spec.get('group')}/{versions[0]}"
    deadline = time.monotonic() + timeout
    while not client.is_served(api_version, str(kind)):
        if time.monotonic() > deadline:
            _log.warning("%s %s is not served %.0fs after it was applied", kind, api_version,
                         timeout)
            return
        time.sleep(0.05)


def install_object(client: ClusterClient, obj: KubeObject) -> InstallResult:
    """Create ``obj`` when missing, patch it when it differs from the live object (logged with
    the changed fields), leave it alone otherwise. API errors propagate."""
    ref = ObjectRef.of(obj)
    try:
        live = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
    except NotFoundError:
        try:
            client.create(set_last_applied(obj))
            _log.info("installed %s %s", ref.kind, ref.name)
            _wait_served(client, obj)
            return InstallResult(ref=ref, action="created")
        except AlreadyExistsError:  # another replica was quicker: compare with its object
            live = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
    match = calculate_patch(live, obj)
    if match.is_empty:
        _log.debug("%s %s is up to date", ref.kind, ref.name)
        return InstallResult(ref=ref, action="unchanged")
    client.patch(ref.api_version, ref.kind, ref.name, match.patch,
                 patch_type=match.patch_type, namespace=ref.namespace)
    fields = tuple(dict.fromkeys(_dotted(tuple(d.path)) for d in match.diff
                                 if tuple(d.path[:3]) != _ANNOTATION_PATH))
    shown = ", ".join(fields[:_SHOWN_FIELDS]) + (
        f" and {len(fields) - _SHOWN_FIELDS} more" if len(fields) > _SHOWN_FIELDS else "")
    _log.info("updated %s %s: %s", ref.kind, ref.name, shown or "the last-applied annotation")
    _wait_served(client, obj)
    return InstallResult(ref=ref, action="updated", fields=fields)


def install_all(client: ClusterClient, objects: Iterable[KubeObject], *, clock: Clock,
                timeout: float = 60.0) -> None:
    """Apply every object (``install_object``), then return once every kind their CRDs define
    is served (bounded by ``timeout`` on ``clock``).

    A real API server serves a new CRD's kind a moment after the CRD is created (about 2 s
    here); waiting means a caller may create parents as soon as the operator started.
    """
    objects = list(objects)
    for obj in objects:  # created, or patched when it changed (logged)
        install_object(client, obj)
    kinds = [
        (f"{spec.get('group')}/{version.get('name')}", str(spec.get("names", {}).get("kind")))
        for obj in objects
        if obj.get("kind") == "CustomResourceDefinition"
        for spec in [obj.get("spec") or {}]
        for version in spec.get("versions") or ()
        if version.get("served", True)
    ]
    deadline = clock.monotonic() + timeout
    for api_version, kind in kinds:
        while not client.is_served(api_version, kind):
            if clock.monotonic() >= deadline:
                _log.warning("%s %s is not served %.0fs after its CRD was installed",
                             kind, api_version, timeout)
                return
            clock.sleep(0.1)
