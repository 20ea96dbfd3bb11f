"""The invariants every operator's builder set must keep, as assertions for one parent.

Each invariant is a public ``assert_*`` function for example-based tests, and ``check_parent``
runs them all for one parent; ``check_builders`` (``_properties``, DESIGN.md section 2) runs
``check_parent`` over parents drawn from a Hypothesis strategy. A violation raises an
AssertionError naming the invariant and the parent. Nothing here talks to a cluster, draws
values or knows declared inputs (``_inputs``).

Invariants: builds (no builder raises, every result has identity), pure (equal output for equal
input, parent not mutated), stable names (same identities on every call), valid names (per kind),
unique (no two children share kind/namespace/name), schema (every present child validates),
owned (labels and owner reference of DESIGN.md section 5), selectors (workload selectors match
their pod template; each Service with a selector selects a workload of the set), absent stubs
(ABSENT children carry identity only), server rules (what a kube-apiserver refuses beyond the
schema: ``replicas: -2``, a Service port 0; the embedded server's own per-kind table,
``objectmatcher.field_causes``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from builders import (
    BuilderFailedError,
    DesiredState,
    InvalidSpecError,
    KubeObject,
    ResourceBuilder,
    compose,
    run_builders,
)
from builders.composition import placement_of
from builders.names import (
    COMPONENT_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY_LABEL,
    OWNER_UID_LABEL,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    label_value,
)
from builders.schemas import UnknownKindError, validate_object
from objectmatcher import field_causes

__all__ = [
    "INVARIANTS",
    "Built",
    "assert_absent_stubs",
    "assert_builds",
    "assert_owned",
    "assert_pure",
    "assert_schema_valid",
    "assert_selectors_match",
    "assert_server_rules",
    "assert_stable_names",
    "assert_unique",
    "assert_valid_names",
    "check_parent",
]

Built = list[tuple[dict[str, Any], DesiredState]]
"""What a builder set produced for one parent: ``(object, state)`` pairs in order."""

Build = Callable[[KubeObject], Iterable[ResourceBuilder]]

INVARIANTS = (
    "builds",
    "pure",
    "stable names",
    "valid names",
    "unique",
    "schema",
    "owned",
    "selectors",
    "absent stubs",
    "server rules",
    "input changes",
)
"""The names of the invariants, as AssertionError messages and ``skip=`` use them."""

_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
_RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}


def _show(parent: KubeObject | None) -> str:
    if parent is None:
        return "(none)"
    try:
        return json.dumps(parent, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(parent)


def _fail(invariant: str, detail: str, *, parent: KubeObject | None) -> AssertionError:
    return AssertionError(f"invariant '{invariant}' violated: {detail}\nparent: {_show(parent)}")


def _where(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


class _Placed(list[tuple[dict[str, Any], DesiredState]]):
    """Built children that also know each one's cluster (``builders.placed``; None: home)."""

    clusters: list[str | None]


def assert_builds(build: Build, parent: KubeObject) -> Built:
    """Build the children of ``parent``; AssertionError ('builds') if any builder fails."""
    try:
        flat = compose(list(build(parent)))
        built = _Placed(run_builders(flat, parent=parent))
    except (BuilderFailedError, InvalidSpecError, TypeError) as exc:
        raise _fail("builds", str(exc), parent=parent) from exc
    built.clusters = [placement_of(b) for b in flat]
    return built


def assert_pure(build: Build, parent: KubeObject) -> Built:
    """Two builds from equal parents give equal children and leave the parent unchanged."""
    snapshot = copy.deepcopy(parent)
    first = assert_builds(build, parent)
    if parent != snapshot:
        raise _fail("pure", "build mutated its parent", parent=snapshot)
    second = assert_builds(build, copy.deepcopy(snapshot))
    for (a, sa), (b, sb) in zip(first, second, strict=False):
        if a != b or sa != sb:
            raise _fail(
                "pure", f"{_where(a)} differs between two builds of the same parent", parent=parent
            )
    if len(first) != len(second):
        raise _fail("pure", f"{len(first)} then {len(second)} children", parent=parent)
    return first


def _identities(children: Built) -> list[tuple[Any, ...]]:
    """Each child's kind, namespace and name, and its cluster when placed in another one (the
    same name in two clusters is two children)."""
    clusters = getattr(children, "clusters", None) or [None] * len(children)
    return [
        (o.get("kind"), (o.get("metadata") or {}).get("namespace"), o["metadata"].get("name"),
         *(() if cluster is None else (cluster,)))
        for (o, _), cluster in zip(children, clusters, strict=True)
    ]


def assert_stable_names(build: Build, parent: KubeObject, *, calls: int = 2) -> None:
    """Every call for the same parent gives the same child identities, in the same order."""
    expected = _identities(assert_builds(build, copy.deepcopy(parent)))
    for _ in range(calls - 1):
        again = _identities(assert_builds(build, copy.deepcopy(parent)))
        if again != expected:
            raise _fail("stable names", f"{expected} then {again}", parent=parent)


def _name_problem(kind: str, name: Any) -> str | None:
    if not isinstance(name, str) or not name:
        return "missing name"
    if kind == "Service" and not is_dns1035_label(name):
        return "a Service name must be a DNS-1035 label (starts with a letter, <= 63 chars)"
    if kind == "Namespace" and not is_dns1123_label(name):
        return "a Namespace name must be a DNS-1123 label"
    if kind in _RBAC_KINDS:
        if name in (".", "..") or "/" in name or "%" in name:
            return "RBAC names must not be '.', '..' or contain '/' or '%'"
        return None
    if not is_dns1123_subdomain(name):
        return "must be a DNS-1123 subdomain (lower-case alphanumerics, '-', '.'; <= 253 chars)"
    return None


def assert_valid_names(children: Built, *, parent: KubeObject | None = None) -> None:
    """Every child's name (and namespace) is valid for its kind."""
    for obj, _ in children:
        meta = obj.get("metadata") or {}
        problem = _name_problem(str(obj.get("kind")), meta.get("name"))
        namespace = meta.get("namespace")
        if problem is None and namespace is not None and not is_dns1123_label(str(namespace)):
            problem = f"namespace {namespace!r} is not a DNS-1123 label"
        if problem:
            raise _fail("valid names", f"{_where(obj)}: {problem}", parent=parent)


def assert_unique(children: Built, *, parent: KubeObject | None = None) -> None:
    """No two children share kind, namespace and name (and cluster, when placed)."""
    seen: set[tuple[Any, ...]] = set()
    for identity in _identities(children):
        if identity in seen:
            kind, ns, name, *cluster = identity
            there = f" in cluster {cluster[0]!r}" if cluster else ""
            raise _fail("unique", f"two children are {kind} {ns + '/' if ns else ''}{name}"
                        f"{there}", parent=parent)
        seen.add(identity)


def _crd_for(
    obj: Mapping[str, Any], crd_schemas: Mapping[str, Mapping[str, Any]] | None
) -> Mapping[str, Any] | None:
    if not crd_schemas:
        return None
    return crd_schemas.get(f"{obj.get('apiVersion')}/{obj.get('kind')}") or crd_schemas.get(
        str(obj.get("kind"))
    )


def assert_schema_valid(
    children: Built,
    *,
    parent: KubeObject | None = None,
    kubernetes_version: str | None = None,
    crd_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    require_schemas: bool = False,
) -> None:
    """Every present child validates against its kind's schema (kubernetes-validate).

    Custom resources validate against ``crd_schemas`` (keyed by ``"apiVersion/kind"`` or
    ``"kind"``; a CRD object or its ``openAPIV3Schema``); kinds with no schema are skipped
    unless ``require_schemas``.
    """
    for obj, state in children:
        if state.is_absent:
            continue
        try:
            validate_object(
                obj,
                kubernetes_version=kubernetes_version,
                crd_schema=_crd_for(obj, crd_schemas),
            )
        except UnknownKindError as exc:
            if require_schemas:
                raise _fail("schema", f"{_where(obj)}: {exc}", parent=parent) from exc
        except InvalidSpecError as exc:
            raise _fail("schema", f"{_where(obj)}: {exc}", parent=parent) from exc


def assert_server_rules(children: Built, *, parent: KubeObject | None = None) -> None:
    """Every present child passes the per-kind rules a kube-apiserver applies beyond the schema
    (``objectmatcher.field_causes``, the table the embedded API server validates with):
    workload ``replicas`` not negative, Service ports 1-65535, containers with a name and an
    image, a Job's restart policy, ... The message names the child, the field and the server's
    words for it."""
    for obj, state in children:
        if state.is_absent:
            continue
        causes = field_causes(obj)
        if causes:
            listed = "; ".join(f"{c.field}: {c.message}" for c in causes)
            raise _fail("server rules", f"{_where(obj)}: {listed}", parent=parent)


def assert_owned(children: Built, *, parent: KubeObject, managed_by: str | None = None) -> None:
    """Present children carry the labels and owner reference of DESIGN.md section 5.

    ``app.kubernetes.io/managed-by`` (equal to ``managed_by`` when given), ``instance`` (the
    parent's name), ``component``, ``optk.dev/owner-uid`` (the parent's uid), and exactly one
    controller owner reference, to the parent, wherever Kubernetes allows one (a cluster-scoped
    parent, or a child in the parent's namespace); none elsewhere.
    """
    pmeta = parent.get("metadata") or {}
    puid, pname, pns = pmeta.get("uid"), pmeta.get("name"), pmeta.get("namespace")
    for obj, state in children:
        if state.is_absent:
            continue
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        expected = {
            MANAGED_BY_LABEL: managed_by,
            INSTANCE_LABEL: label_value(str(pname)),
            OWNER_UID_LABEL: label_value(str(puid)) if puid else None,
        }
        for key, value in expected.items():
            if key not in labels:
                raise _fail("owned", f"{_where(obj)} lacks the label {key}", parent=parent)
            if value is not None and labels[key] != value:
                raise _fail(
                    "owned",
                    f"{_where(obj)} has {key}={labels[key]!r}, want {value!r}",
                    parent=parent,
                )
        if not labels.get(COMPONENT_LABEL):
            raise _fail("owned", f"{_where(obj)} lacks the label {COMPONENT_LABEL}", parent=parent)
        controllers = [r for r in meta.get("ownerReferences") or () if r.get("controller")]
        if pns is None or meta.get("namespace") == pns:
            if len(controllers) != 1 or controllers[0].get("uid") != puid:
                raise _fail(
                    "owned",
                    f"{_where(obj)} needs one controller owner reference to the parent "
                    f"(uid {puid}), has {controllers}",
                    parent=parent,
                )
            ref = controllers[0]
            if (ref.get("kind"), ref.get("name")) != (parent.get("kind"), pname):
                raise _fail(
                    "owned",
                    f"{_where(obj)}: owner reference {ref} names another object",
                    parent=parent,
                )
        elif controllers:
            raise _fail(
                "owned",
                f"{_where(obj)} is not in the namespace of its namespaced parent, so it cannot "
                "have a controller owner reference to it",
                parent=parent,
            )


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics (matchLabels and matchExpressions, ANDed)."""
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(str(op), False)
        if not ok:
            return False
    return True


def assert_selectors_match(children: Built, *, parent: KubeObject | None = None) -> None:
    """Workload selectors match their pod templates; each Service selector selects a workload."""
    pods: list[tuple[str | None, Mapping[str, str]]] = []
    present = [obj for obj, state in children if not state.is_absent]
    for obj in present:
        if obj.get("kind") not in _WORKLOADS:
            continue
        spec = obj.get("spec") or {}
        selector = spec.get("selector") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not selector or not _matches(selector, labels):
            raise _fail(
                "selectors",
                f"{_where(obj)}: selector {selector} does not match its pod labels {labels}",
                parent=parent,
            )
        pods.append(((obj.get("metadata") or {}).get("namespace"), labels))
    for obj in present:
        if obj.get("kind") != "Service":
            continue
        selector = (obj.get("spec") or {}).get("selector")
        if not selector:
            continue
        namespace = (obj.get("metadata") or {}).get("namespace")
        if not any(
            ns == namespace and _matches({"matchLabels": selector}, labels) for ns, labels in pods
        ):
            raise _fail(
                "selectors",
                f"{_where(obj)}: selector {selector} selects no workload of the set",
                parent=parent,
            )


def assert_absent_stubs(children: Built, *, parent: KubeObject | None = None) -> None:
    """ABSENT children carry identity only: apiVersion, kind, metadata name and namespace."""
    for obj, state in children:
        if not state.is_absent:
            continue
        extra = set(obj) - {"apiVersion", "kind", "metadata"}
        extra |= {
            f"metadata.{k}" for k in (obj.get("metadata") or {}) if k not in ("name", "namespace")
        }
        if extra:
            raise _fail(
                "absent stubs",
                f"{_where(obj)} is ABSENT but carries {sorted(extra)}",
                parent=parent,
            )


def check_parent(
    build: Build,
    parent: KubeObject,
    *,
    managed_by: str | None = None,
    kubernetes_version: str | None = None,
    crd_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    require_schemas: bool = False,
    skip: Collection[str] = (),
) -> Built:
    """Every invariant (but those in ``skip``) for one parent; returns the children."""
    unknown = set(skip) - set(INVARIANTS)
    if unknown:
        raise ValueError(f"check_builders: unknown invariants in skip: {sorted(unknown)}")
    children = assert_pure(build, parent) if "pure" not in skip else assert_builds(build, parent)
    if "stable names" not in skip:
        assert_stable_names(build, parent)
    checks: Sequence[tuple[str, Callable[[], None]]] = (
        ("valid names", lambda: assert_valid_names(children, parent=parent)),
        ("unique", lambda: assert_unique(children, parent=parent)),
        ("absent stubs", lambda: assert_absent_stubs(children, parent=parent)),
        (
            "schema",
            lambda: assert_schema_valid(
                children,
                parent=parent,
                kubernetes_version=kubernetes_version,
                crd_schemas=crd_schemas,
                require_schemas=require_schemas,
            ),
        ),
        ("owned", lambda: assert_owned(children, parent=parent, managed_by=managed_by)),
        ("selectors", lambda: assert_selectors_match(children, parent=parent)),
        ("server rules", lambda: assert_server_rules(children, parent=parent)),
    )
    for name, check in checks:
        if name not in skip:
            check()
    return children
