"""The role an operator needs in each cluster it places children in (``builders.placed``).

Why it exists: a child placed in another cluster is written there with the credentials of that
cluster's kubeconfig Secret (``reconciler.ClusterSecrets``), so the operator's identity there
needs its own role: what ``optk manifests --cluster NAME`` prints for that cluster. Derived as
the home role is (``reconciler._commands.rbac``), from the samples' and generated parents'
builds, but over the children placed in ``NAME`` only: each kind's reconcile verbs, the CRD
list for custom kinds (the three-way comparison reads their schemas there), and what the
placed roles and bindings grant (``reconciler._commands.rbac_children``). A cluster the samples
do not name (clusters chosen by label at run time) gets the rules of every placed child, since
any of them may land there; the role says so. Pure: nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from objectmatcher import has_builtin_schema
from reconciler._commands.rbac import (
    _CRD,
    _NON_RESOURCE,
    CHILD_VERBS,
    OperatorFacts,
    PolicyRule,
    _evaluated,
    _Grants,
    _group,
    child_role_grants,
    resource_for,
)

__all__ = ["derive_cluster_rules", "placed_clusters"]


def placed_clusters(facts: OperatorFacts, *, parents: Iterable[Mapping[str, object]],
                    generated: Iterable[Mapping[str, object]] = ()) -> list[str]:
    """The clusters the builds of ``parents`` and ``generated`` place children in, sorted."""
    evaluated = [*_evaluated(facts.build, parents), *_evaluated(facts.build, generated,
                                                                refused=[])]
    return sorted({str(child.cluster) for _, declared in evaluated
                   for child in declared.placed if child.cluster is not None})


def derive_cluster_rules(
    facts: OperatorFacts,
    *,
    cluster: str,
    parents: Iterable[Mapping[str, object]],
    generated: Iterable[Mapping[str, object]] = (),
) -> tuple[PolicyRule, ...]:
    """The rules the operator's identity needs in ``cluster``, each with its reason, all
    cluster-wide (a ClusterRole: the namespaces placed children land in are the builders'
    to choose, and may be created by them)."""
    evaluated = [*_evaluated(facts.build, parents), *_evaluated(facts.build, generated,
                                                                refused=[])]
    named = any(child.cluster == cluster for _, declared in evaluated
                for child in declared.placed)

    def here(name: str | None) -> bool:
        return name == cluster if named else name is not None

    where = (f"placed in cluster {cluster!r}" if named else
             f"placed in other clusters (no sample places any in {cluster!r}; clusters chosen "
             "at run time may get any of them)")
    kinds = sorted({(child.ref.api_version, child.ref.kind) for _, declared in evaluated
                    for child in declared.placed if here(child.cluster)})
    grants = _Grants()
    crds = facts.crds
    for api_version, kind in kinds:
        grants.add(_group(api_version), resource_for(api_version, kind, crds), CHILD_VERBS,
                   f"children {where}: created, patched on drift, deleted when absent or "
                   "pruned, read with get after a conflict, listed and watched there")
    custom = [kind for api_version, kind in kinds if not has_builtin_schema(api_version, kind)]
    if custom:
        grants.add(_group(_CRD[0]), resource_for(*_CRD), ("list",),
                   f"the CRD schemas of custom children ({', '.join(custom)}) {where}, for "
                   "the three-way comparison")
    for held in child_role_grants(facts.build, evaluated, cluster=here):
        grants.add(_NON_RESOURCE if held.non_resource else held.group, held.resource,
                   held.verbs, held.reason, names=held.names, namespace=None)
    return grants.rules()
