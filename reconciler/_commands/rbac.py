"""The least-privilege role of an operator, derived from what it builds and what the driver does.

Pure: ``derive_rules`` takes ``OperatorFacts`` (read from an ``Operator`` by ``operator_facts``,
the one place that knows the ``Operator``'s fields) and parents to evaluate ``build`` over, and
returns ``PolicyRule`` values, each with the reason it exists. The verbs per kind are the ones
the reconciler sends (see docs/deploying.md): children are listed and watched by informers,
created, patched on drift, deleted when absent or pruned and read with GET on a conflict; the
parent is listed and watched, its status patched; Events are created; the Leases of leader
election and of the resync heartbeat are created, read and replaced (``update``), and the
election's is watched by name while a candidate waits; installed
objects are read by name and patched by name when they differ, and created only when the
manifests do not apply them (``create`` is the one verb Kubernetes cannot limit by name); what
an ``on_start`` hook watches is declared on the hook with ``watches``; the kinds of declared
inputs (``Operator.inputs``) are listed and watched; what the child roles grant, and ``bind``
or ``escalate`` where that cannot be known, so that the operator may write its child roles and
bindings (``reconciler._commands.rbac_children``, ``child_role_grants``).
Nothing here talks to a cluster: kinds map to resources by the installed CRDs, a table of the
irregular built-in plurals and Kubernetes' own guess (``UnsafeGuessKindToResource``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from builders.inputs import ClusterSelector
from objectmatcher import has_builtin_schema
from reconciler._base.errors import RbacDerivationError
from reconciler._cache.inputs import one_argument_build, present_reader
from reconciler._commands.rbac_children import RoleGrant, is_rbac_child, role_grants, variant_of
from reconciler._reconcile.declared import DeclaredChildren, declared_children, unknown_scope

__all__ = [
    "HookWatches",
    "OperatorFacts",
    "PolicyRule",
    "RbacDerivationError",
    "child_role_grants",
    "derive_rules",
    "input_kinds",
    "operator_facts",
    "produced_kinds",
    "resource_for",
    "watches",
]

KindKey = tuple[str, str]
"""``(apiVersion, kind)``."""

WATCHES_ATTRIBUTE = "optk_watches"

CHILD_VERBS = ("create", "delete", "get", "list", "patch", "watch")
"""What the reconciler sends for a child kind (never ``update``: changes are patches)."""

_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")

# Built-in kinds whose resource is not Kubernetes' guess, and built-in cluster-scoped kinds.
_IRREGULAR = {"Endpoints": "endpoints", "PodSecurityPolicy": "podsecuritypolicies"}
_CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "StorageClass", "PriorityClass", "IngressClass", "APIService",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "CSIDriver", "RuntimeClass",
})

_NON_RESOURCE = "*nonResourceURLs*"  # the _Grants group of non-resource URLs (no group has '*')
_PLACEHOLDER_UID = "00000000-0000-4000-8000-000000000000"
_PLACEHOLDER_OPERATOR = "optk"  # the managed-by label of children evaluated for their kinds

F = TypeVar("F", bound=Callable[..., Any])


@attrs.frozen(kw_only=True)
class HookWatches:
    """What an ``on_start`` hook watches (listed and watched) and the kinds it lets ``build``
    produce (children that appear only when what it watches says so, e.g. a CRD is served)."""

    watches: tuple[KindKey, ...] = ()
    enables: tuple[KindKey, ...] = ()


def watches(*kinds: KindKey, enables: Iterable[KindKey] = ()) -> Callable[[F], F]:
    """Declare on an ``Operator.on_start`` hook what it watches, for ``optk manifests``.

    ``@watches(("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    enables=[("monitoring.coreos.com/v1", "ServiceMonitor")])`` grants ``list`` and ``watch`` on
    CRDs and the child verbs on ServiceMonitors. Works on functions and methods.
    """
    declared = HookWatches(watches=tuple(kinds), enables=tuple(enables))

    def mark(hook: F) -> F:
        setattr(hook, WATCHES_ATTRIBUTE, declared)
        return hook

    return mark


@attrs.frozen(kw_only=True)
class OperatorFacts:
    """What the role and the manifests need to know about an operator, and nothing more."""

    name: str
    api_version: str
    kind: str
    build: Callable[[Mapping[str, Any]], Iterable[Any]]
    namespace: str | None = None
    install: tuple[Mapping[str, Any], ...] = ()
    prune: tuple[KindKey, ...] = ()
    hooks: tuple[HookWatches, ...] = ()
    leader_lease: str = ""
    heartbeat: bool = True
    heartbeat_namespace: str | None = None
    rollout: bool = False
    config_map: str | None = None
    events: bool = True
    on_delete: bool = False
    start_hooks: tuple[Any, ...] = ()
    inputs: Callable[[Mapping[str, Any]], Iterable[Any]] | None = None
    clusters: Any = None
    """Where the clusters children are placed in are declared (``reconciler.ClusterSecrets``:
    ``namespace`` and ``selector``), or None."""

    @property
    def crds(self) -> tuple[Mapping[str, Any], ...]:
        """The CustomResourceDefinitions among the installed objects."""
        return tuple(o for o in self.install if (o.get("apiVersion"), o.get("kind")) == _CRD)

    @property
    def parent_crd(self) -> Mapping[str, Any] | None:
        """The installed CRD that defines the parent kind, if any."""
        group = _group(self.api_version)
        for crd in self.crds:
            spec = crd.get("spec") or {}
            if spec.get("group") == group and (spec.get("names") or {}).get("kind") == self.kind:
                return crd
        return None


def operator_facts(operator: Any) -> OperatorFacts:
    """The facts of an ``Operator``: the one function that reads its fields (adapt it here)."""
    hooks = tuple(
        h for h in (getattr(hook, WATCHES_ATTRIBUTE, None) for hook in operator.on_start)
        if isinstance(h, HookWatches)
    )
    return OperatorFacts(
        name=operator.name, api_version=operator.api_version, kind=operator.kind,
        build=one_argument_build(operator, present_reader), namespace=operator.namespace,
        install=tuple(operator.install),
        prune=tuple((str(a), str(k)) for a, k in operator.policies.prune),
        hooks=hooks, heartbeat=operator.resync.heartbeat is not None,
        leader_lease=(operator.leader_election.named(f"{operator.name}-leader").name
                      if operator.leader_election is not None else ""),
        heartbeat_namespace=operator.resync.heartbeat_namespace,
        rollout=getattr(operator, "rollout", None) is not None,
        config_map=operator.resync.config_map, events=operator.reporting.events,
        on_delete=getattr(operator, "on_delete", None) is not None,
        start_hooks=tuple(operator.on_start),
        inputs=getattr(operator, "inputs", None),
        clusters=getattr(getattr(operator, "applying", None), "clusters", None),
    )


@attrs.frozen(kw_only=True)
class PolicyRule:
    """One RBAC rule with why it exists; ``namespace`` None means cluster-wide (ClusterRole);
    ``non_resource_urls`` (then no groups nor resources) a ClusterRole's URL rule."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    reason: str
    resource_names: tuple[str, ...] = ()
    namespace: str | None = None
    non_resource_urls: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The rule as it appears in a Role or ClusterRole."""
        if self.non_resource_urls:
            return {"nonResourceURLs": list(self.non_resource_urls), "verbs": list(self.verbs)}
        rule: dict[str, Any] = {"apiGroups": list(self.api_groups),
                                "resources": list(self.resources)}
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        rule["verbs"] = list(self.verbs)
        return rule


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def resource_for(api_version: str, kind: str, crds: Sequence[Mapping[str, Any]] = ()) -> str:
    """The resource (plural) of a kind: from a CRD that defines it, else Kubernetes' rules."""
    group = _group(api_version)
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        if spec.get("group") == group and names.get("kind") == kind and names.get("plural"):
            return str(names["plural"])
    if kind in _IRREGULAR:
        return _IRREGULAR[kind]
    lower = kind.lower()  # k8s.io/apimachinery meta.UnsafeGuessKindToResource
    if lower.endswith("s"):
        return f"{lower}es"
    if lower.endswith("y"):
        return f"{lower[:-1]}ies"
    return f"{lower}s"


def _cluster_scoped(api_version: str, kind: str, crds: Sequence[Mapping[str, Any]]) -> bool:
    group = _group(api_version)
    for crd in crds:
        spec = crd.get("spec") or {}
        if spec.get("group") == group and (spec.get("names") or {}).get("kind") == kind:
            return spec.get("scope") == "Cluster"
    return kind in _CLUSTER_SCOPED and has_builtin_schema(api_version, kind)


def _placed(sample: Mapping[str, Any]) -> dict[str, Any]:
    """A sample as a server would hold it: a uid and a namespace (samples as written lack them)."""
    meta = dict(sample.get("metadata") or {})
    meta.setdefault("uid", _PLACEHOLDER_UID)
    meta.setdefault("namespace", "default")
    return {**sample, "metadata": meta}


def _declared(build: Callable[[Mapping[str, Any]], Iterable[Any]],
              parent: Mapping[str, Any]) -> DeclaredChildren:
    return declared_children(build, parent, operator_name=_PLACEHOLDER_OPERATOR,
                             namespaced=unknown_scope)  # only kinds and contents are read


def _evaluated(
    build: Callable[[Mapping[str, Any]], Iterable[Any]], parents: Iterable[Mapping[str, Any]],
    *, refused: list[Mapping[str, Any]] | None = None,
) -> list[tuple[dict[str, Any], DeclaredChildren]]:
    """Each parent (placed) with what ``build`` declares for it; refusals as ``produced_kinds``
    describes them."""
    out: list[tuple[dict[str, Any], DeclaredChildren]] = []
    for sample in parents:
        parent = _placed(sample)
        declared = _declared(build, parent)
        if declared.errors:
            error = declared.errors[0]
            if refused is not None and (isinstance(error, ValueError)
                                        or isinstance(error.__cause__, ValueError)):
                refused.append(sample)
                continue
            raise RbacDerivationError(
                f"build failed for parent {(sample.get('metadata') or {}).get('name')!r} while "
                f"deriving the role: {error}", parent=parent,
            ) from error
        out.append((parent, declared))
    return out


def produced_kinds(
    build: Callable[[Mapping[str, Any]], Iterable[Any]], parents: Iterable[Mapping[str, Any]],
    *, refused: list[Mapping[str, Any]] | None = None,
) -> set[KindKey]:
    """Every ``(apiVersion, kind)`` the builders produce for ``parents`` (any desired state).

    A parent ``build`` refuses raises ``RbacDerivationError``, unless ``refused`` is given: then
    a refusal by a ``ValueError`` (an invalid spec) is appended there and skipped (generated
    parents may be valid for the schema and still refused by the builders).
    """
    kinds: set[KindKey] = set()
    for _, declared in _evaluated(build, parents, refused=refused):
        kinds |= declared.types
    return kinds


def child_role_grants(
    build: Callable[[Mapping[str, Any]], Iterable[Any]],
    evaluated: Iterable[tuple[Mapping[str, Any], DeclaredChildren]],
    *,
    cluster: Callable[[str | None], bool] | None = None,
) -> list[RoleGrant]:
    """What the operator must hold to write the roles and bindings it builds
    (``reconciler._commands.rbac_children``): each parent that builds any is built again as
    its variant (spec strings changed; if ``build`` refuses that, only name and namespace).
    ABSENT children are left out: the operator only deletes them. ``cluster``: which placed
    children count (by their cluster's name, ``builders.placed``); None: the home children."""
    def written(declared: DeclaredChildren) -> list[dict[str, Any]]:
        if cluster is None:
            return [child.obj for child in declared.children if not child.state.is_absent]
        return [child.obj for child in declared.placed
                if cluster(child.cluster) and not child.state.is_absent]

    pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = []
    for parent, declared in evaluated:
        built = written(declared)
        if not any(is_rbac_child(obj) for obj in built):
            continue
        variant: list[dict[str, Any]] | None = None
        for strings in (True, False):
            other = _declared(build, variant_of(parent, strings=strings))
            if not other.errors:
                variant = written(other)
                break
        pairs.append((built, variant))
    return role_grants(pairs)


def input_kinds(declare: Callable[[Mapping[str, Any]], Iterable[Any]] | None,
                parents: Iterable[Mapping[str, Any]]) -> set[KindKey]:
    """Every ``(apiVersion, kind)`` the declared inputs of ``parents`` name (``Operator.inputs``;
    a parent whose declaration raises names none: its build is refused or reported anyway)."""
    kinds: set[KindKey] = set()
    if declare is None:
        return kinds
    for sample in parents:
        meta = {"namespace": "default", **dict(sample.get("metadata") or {})}
        try:
            refs = list(declare({**sample, "metadata": meta}))
        except Exception:  # a generated parent the declaration refuses: no kinds from it
            continue
        # a ClusterSelector reads the cluster Secrets: granted with the clusters, not here
        kinds |= {(str(ref.api_version), str(ref.kind)) for ref in refs
                  if not isinstance(ref, ClusterSelector)}
    return kinds


@attrs.define
class _Grants:
    """Verbs and reasons accumulated per (namespace, group, resource, names)."""

    verbs: dict[tuple[str | None, str, str, tuple[str, ...]], set[str]] = attrs.Factory(dict)
    reasons: dict[tuple[str | None, str, str, tuple[str, ...]], list[str]] = attrs.Factory(dict)

    def add(self, group: str, resource: str, verbs: Iterable[str], reason: str, *,
            namespace: str | None = None, names: tuple[str, ...] = ()) -> None:
        key = (namespace, group, resource, names)
        self.verbs.setdefault(key, set()).update(verbs)
        reasons = self.reasons.setdefault(key, [])
        if reason not in reasons:
            reasons.append(reason)

    def rules(self) -> tuple[PolicyRule, ...]:
        """Resources with the same group, verbs, names and namespace share one rule."""
        merged: dict[tuple[str | None, str, tuple[str, ...], tuple[str, ...]],
                     tuple[list[str], list[str]]] = {}
        for key in sorted(self.verbs, key=lambda k: (k[0] or "", k[1], k[2], k[3])):
            namespace, group, resource, names = key
            rule_key = (namespace, group, tuple(sorted(self.verbs[key])), names)
            resources, reasons = merged.setdefault(rule_key, ([], []))
            resources.append(resource)
            reasons.extend(r for r in self.reasons[key] if r not in reasons)
        return tuple(
            PolicyRule(api_groups=(), resources=(), non_resource_urls=tuple(resources),
                       verbs=verbs, namespace=None, reason="; ".join(reasons))
            if group == _NON_RESOURCE else
            PolicyRule(api_groups=(group,), resources=tuple(resources), verbs=verbs,
                       resource_names=names, namespace=namespace, reason="; ".join(reasons))
            for (namespace, group, verbs, names), (resources, reasons) in merged.items()
        )


def derive_rules(
    facts: OperatorFacts,
    *,
    parents: Iterable[Mapping[str, Any]],
    generated: Iterable[Mapping[str, Any]] = (),
    lease_namespace: str,
    namespaced: bool = False,
    install_applied: bool = False,
    metrics_auth: bool = False,
) -> tuple[PolicyRule, ...]:
    """The operator's rules: the smallest set for what its driver sends, each with its reason.

    ``parents`` (samples) and ``generated`` (drawn from the schema; those ``build`` refuses as
    invalid are skipped) are evaluated with ``build``. ``lease_namespace`` is
    where the Leases live (the operator's own namespace); ``namespaced`` puts every namespaced
    kind in a Role of ``facts.namespace`` (the one namespace the operator watches) instead of the
    ClusterRole; cluster-scoped kinds always go to the ClusterRole. ``install_applied``: the
    manifests apply the ``install`` objects (with the operator's last-applied annotation), so
    the operator finds them and needs no ``create``, only ``get`` and ``patch`` by name.
    ``metrics_auth``: ``optk run --metrics-auth`` asks the API server who may scrape
    ``/metrics`` (TokenReview, SubjectAccessReview: ``create``, cluster-wide).
    """
    if namespaced and not facts.namespace:
        raise RbacDerivationError(
            f"operator {facts.name!r}: a namespaced role needs the operator to watch one "
            "namespace (Operator.namespace)")
    crds = facts.crds
    scope = facts.namespace if namespaced else None
    grants = _Grants()

    def grant(api_version: str, kind: str, verbs: Iterable[str], reason: str,
              *, sub: str = "", names: tuple[str, ...] = ()) -> None:
        where = None if _cluster_scoped(api_version, kind, crds) else scope
        resource = resource_for(api_version, kind, crds) + (f"/{sub}" if sub else "")
        grants.add(_group(api_version), resource, verbs, reason, namespace=where, names=names)

    grant(facts.api_version, facts.kind, ("list", "watch"),
          f"the parents ({facts.kind}): the parent informer lists and watches them")
    grant(facts.api_version, facts.kind, ("patch",),
          "the parents' status (conditions, observedGeneration, lastReconcileTime)", sub="status")
    parents, generated = list(parents), list(generated)
    evaluated = [*_evaluated(facts.build, parents),
                 *_evaluated(facts.build, generated, refused=[])]
    children = {kind for _, declared in evaluated for kind in declared.types}
    placed = any(declared.placed for _, declared in evaluated)
    children |= set(facts.prune)
    for hook in facts.hooks:
        children |= set(hook.enables)
    children.discard((facts.api_version, facts.kind))
    if facts.on_delete or (not _cluster_scoped(facts.api_version, facts.kind, crds) and any(
            _cluster_scoped(*k, crds) for k in children)):
        grant(facts.api_version, facts.kind, ("patch",),
              "the parents' optk.dev/cleanup finalizer (cluster-scoped children or on_delete)")
    if placed or facts.clusters is not None:
        grant(facts.api_version, facts.kind, ("patch",),
              "children placed in other clusters: the parents' inventory of them (annotation "
              "optk.dev/placed) and the optk.dev/cleanup finalizer that deletes them")
    if facts.clusters is not None:
        grants.add("", "secrets", ("list", "watch"),
                   "the clusters children are placed in: one Secret with a kubeconfig per "
                   "cluster (reconciler.ClusterSecrets), read in this namespace only",
                   namespace=facts.clusters.namespace)
    for api_version, kind in sorted(children):
        grant(api_version, kind, CHILD_VERBS,
              "children: informers list and watch them, the reconciler creates, patches drift, "
              "deletes absent and pruned ones, and reads one with get after a conflict")
    for api_version, kind in sorted(input_kinds(facts.inputs, [*parents, *generated])
                                    - children):
        grant(api_version, kind, ("list", "watch"),
              "declared inputs (Operator.inputs): one informer per namespace in use lists and "
              "watches them (no names: a list is narrowed by name only with a field selector "
              "per object)")
    for held in child_role_grants(facts.build, evaluated):
        grants.add(_NON_RESOURCE if held.non_resource else held.group, held.resource,
                   held.verbs, held.reason, names=held.names,
                   namespace=None if held.cluster or held.non_resource else scope)
    custom = sorted(k for k in children if not has_builtin_schema(*k))
    if custom:
        grant(*_CRD, ("list",), "the CRD schemas of custom children ("
              + ", ".join(k for _, k in custom) + ") for the three-way comparison")
    installed: dict[KindKey, list[str]] = {}
    for obj in facts.install:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        installed.setdefault(key, []).append(str((obj.get("metadata") or {}).get("name")))
    for (api_version, kind), names in sorted(installed.items()):
        if install_applied:
            grant(api_version, kind, ("get", "patch"),
                  "Operator.install, applied by these manifests with the operator's "
                  "last-applied annotation: at start the operator reads each by name and "
                  "patches it only when its own version differs; it is not granted create, "
                  "which cannot be limited by name", names=tuple(sorted(names)))
            continue
        grant(api_version, kind, ("get", "patch"),
              "Operator.install, applied at start through the matcher: read by name, "
              "patched when it differs", names=tuple(sorted(names)))
        grant(api_version, kind, ("create",), "Operator.install: created at start when "
              "missing (create cannot be limited by name)")
    for hook in facts.hooks:
        for api_version, kind in hook.watches:
            grant(api_version, kind, ("list", "watch"),
                  "watched by an on_start hook (declared with reconciler.watches)")
    if metrics_auth:
        grants.add("authentication.k8s.io", "tokenreviews", ("create",),
                   "--metrics-auth: is a scraper's bearer token valid, and whose is it")
        grants.add("authorization.k8s.io", "subjectaccessreviews", ("create",),
                   "--metrics-auth: may the token's user get /metrics")
    if facts.events:
        grants.add("", "events", ("create", "patch"), "Events on the parents for each create, "
                   "update and delete (a repeat patches the Event's count)", namespace=scope)
    if facts.config_map:
        namespace, name = facts.config_map.split("/")
        grants.add("", "configmaps", ("list", "watch"),
                   f"the resync ConfigMap {name!r} (informer with a name field selector)",
                   namespace=namespace)
    heartbeat_ns = facts.heartbeat_namespace or lease_namespace
    leases = {lease_namespace: [facts.leader_lease or f"{facts.name}-leader"]}
    if facts.heartbeat:
        leases.setdefault(heartbeat_ns, []).append(f"{facts.name}-resync")
        if facts.rollout:  # the gradual rollout's record, beside the heartbeat
            leases[heartbeat_ns].append(f"{facts.name}-rollout")
    roles = {f"{facts.name}-resync": "resync heartbeat", f"{facts.name}-rollout": "rollout record"}
    for namespace, names in leases.items():
        what = " and ".join([roles.get(n, "leader election") for n in names])
        grants.add("coordination.k8s.io", "leases", ("create",),
                   f"the first write of the {what} Lease"
                   + ("s" if len(names) > 1 else "") + " (create cannot be limited by name)",
                   namespace=namespace)
        grants.add("coordination.k8s.io", "leases", ("get", "update"),
                   f"{what}: read and renewed by update, "
                   + ("these Leases" if len(names) > 1 else "this Lease") + " only",
                   namespace=namespace, names=tuple(names))
    grants.add("coordination.k8s.io", "leases", ("list", "watch"),
               "leader election: a waiting candidate watches this Lease (a name field selector),"
               " so a release wakes it", namespace=lease_namespace,
               names=(facts.leader_lease or f"{facts.name}-leader",))
    return grants.rules()
