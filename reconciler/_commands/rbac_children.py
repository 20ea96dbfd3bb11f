"""What an operator must hold to write the roles and bindings it builds (pure).

Kubernetes lets a user create or update a Role or ClusterRole only when the user already holds
every permission the role grants, or has ``escalate`` on it; and create or update a RoleBinding
or ClusterRoleBinding only when it holds every permission of the bound role, or has ``bind`` on
it (a ClusterRole with an ``aggregationRule`` needs ``escalate``, or cluster-admin). So an
operator whose children are roles needs, beside the child verbs on the role kinds:

- the **union of the rules** its child roles grant, when the builders say what they are: every
  rule is copied (each group, resource and verb, sub-resources and non-resource URLs included),
  cluster-wide for a ClusterRole's rules, in the role's scope for a Role's;
- ``resourceNames`` are kept when they are the same for any parent, and dropped (the rule then
  covers every name) when they follow the parent: the operator cannot hold a rule for names not
  known yet;
- ``escalate`` on a role kind only when a role's rules cannot be known from samples: they change
  with the parent (its name, namespace or spec strings), or it aggregates rules by label
  (``aggregationRule``). Never limited by name: kube-apiserver checks ``escalate`` with the name
  of the request's URL, which a create has not (as for ``create`` itself), so an ``escalate``
  with ``resourceNames`` would let the operator update such a role but never create it;
- ``bind`` on a role a child binding binds only when the operator cannot hold its rules: the role
  is not one of the parent's own children (a built-in such as ``view``, or one installed
  elsewhere) or its rules cannot be known; limited by name when the bound role's name does not
  follow the parent (``bind`` is checked with the ``roleRef``'s name, create included); a
  binding of a role the same parent builds needs nothing more than that role's rules.

What follows the parent is found by evaluating ``build`` a second time for a *variant* of each
parent (other name and namespace, every string of its spec changed) and comparing the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["RBAC_GROUP", "RoleGrant", "is_rbac_child", "role_grants", "variant_of"]

RBAC_GROUP = "rbac.authorization.k8s.io"
_ROLES = ("Role", "ClusterRole")
_BINDINGS = ("RoleBinding", "ClusterRoleBinding")
_RESOURCE = {"Role": "roles", "ClusterRole": "clusterroles"}


@attrs.frozen(kw_only=True)
class RoleGrant:
    """One permission the operator must hold: ``group``/``resource`` (``non_resource``: the URL
    in ``resource``), the verbs, the names it is limited to, whether it must be held
    cluster-wide (``cluster``; else in the operator's scope), and why."""

    group: str
    resource: str
    verbs: tuple[str, ...]
    reason: str
    cluster: bool
    names: tuple[str, ...] = ()
    non_resource: bool = False


def is_rbac_child(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a Role, ClusterRole, RoleBinding or ClusterRoleBinding."""
    api_version = str(obj.get("apiVersion", ""))
    return api_version.rpartition("/")[0] == RBAC_GROUP and obj.get("kind") in (
        *_ROLES, *_BINDINGS)


def variant_of(parent: Mapping[str, Any], *, strings: bool) -> dict[str, Any]:
    """``parent`` under another name and namespace and, with ``strings``, every non-empty string
    of its spec (of every field but ``apiVersion``, ``kind``, ``metadata`` and ``status``: a
    ConfigMap's ``data``) changed: what a builder derives from these differs between the two."""
    meta = dict(parent.get("metadata") or {})
    meta["name"] = "optk-variant" if meta.get("name") != "optk-variant" else "optk-variant-b"
    meta["namespace"] = ("optk-variant-ns" if meta.get("namespace") != "optk-variant-ns"
                         else "optk-variant-ns-b")
    out = {**parent, "metadata": meta}
    if strings:
        out.update({key: _changed_strings(value) for key, value in parent.items()
                    if key not in ("apiVersion", "kind", "metadata", "status")})
    return out


def _changed_strings(value: Any) -> Any:
    if isinstance(value, str):
        return f"{value}x" if value else value
    if isinstance(value, Mapping):
        return {k: _changed_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_changed_strings(v) for v in value]
    return value


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _called(kind: str, name: str, fixed: bool) -> str:
    """A role as the reasons name it: by name when the name does not follow the parent (the
    reasons of every parent are merged, so they name nothing that differs between parents)."""
    return f"{kind} {name}" if fixed else f"{kind} named after the parent"


def _shape(rule: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(str(x) for x in rule.get(field) or ())
                 for field in ("apiGroups", "resources", "verbs", "nonResourceURLs"))


def _paired(built: Sequence[Mapping[str, Any]], variant: Sequence[Mapping[str, Any]] | None,
            kinds: tuple[str, ...]) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """The children of ``kinds`` with their counterparts in the variant's build (by position
    among those kinds; None when the variant built a different list of them)."""
    mine = [c for c in built if is_rbac_child(c) and c.get("kind") in kinds]
    theirs = ([c for c in variant if is_rbac_child(c) and c.get("kind") in kinds]
              if variant is not None else None)
    if theirs is None or [c.get("kind") for c in theirs] != [c.get("kind") for c in mine]:
        return [(c, None) for c in mine]
    return list(zip(mine, theirs, strict=True))


def _unknown_rules(role: Mapping[str, Any], other: Mapping[str, Any] | None) -> str | None:
    """Why the rules of ``role`` cannot be known from samples, or None."""
    if role.get("aggregationRule"):
        return ("aggregates the rules of other ClusterRoles by label (aggregationRule): what it "
                "gathers is not known from samples, and Kubernetes asks for escalate (or "
                "cluster-admin) to write one")
    if other is None:
        return ("the role children follow the parent in number or kind, so their rules "
                "cannot be known from samples")
    mine, theirs = role.get("rules") or (), other.get("rules") or ()
    if len(mine) != len(theirs) or any(
            _shape(a) != _shape(b) for a, b in zip(mine, theirs, strict=False)):
        return ("its rules follow the parent (its name, namespace or spec strings): they "
                "cannot be known from samples")
    return None


def role_grants(
    evaluated: Iterable[tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None]],
) -> list[RoleGrant]:
    """What the operator must hold to write the roles and bindings among the children.

    ``evaluated``: for each parent, the children it builds (stamped objects) and those its
    ``variant_of`` builds (None when the variant could not be built: nothing is then known
    to be fixed).
    """
    grants: list[RoleGrant] = []
    for built, variant in evaluated:
        unknown: set[tuple[str, str | None, str]] = set()
        known: set[tuple[str, str | None, str]] = set()
        for role, other in _paired(built, variant, _ROLES):
            kind = str(role["kind"])
            cluster = kind == "ClusterRole"
            key = (kind, (role.get("metadata") or {}).get("namespace") if not cluster else None,
                   _name(role))
            fixed = other is not None and _name(other) == _name(role)
            why = _unknown_rules(role, other)
            if why is not None:
                unknown.add(key)
                grants.append(RoleGrant(
                    group=RBAC_GROUP, resource=_RESOURCE[kind], verbs=("escalate",),
                    cluster=cluster,
                    reason=f"escalate: the child {_called(kind, _name(role), fixed)} {why}; "
                    "not limited by name: Kubernetes checks escalate on a create without the "
                    "name (it is in the body, not the URL), as it does create"))
                continue
            known.add(key)
            other_rules = list((other or {}).get("rules") or ())
            for index, rule in enumerate(role.get("rules") or ()):
                grants += _rule_grants(role, rule, other_rules[index], cluster=cluster)
        for binding, other in _paired(built, variant, _BINDINGS):
            ref = binding.get("roleRef") or {}
            ref_kind, ref_name = str(ref.get("kind", "")), str(ref.get("name", ""))
            namespace = (binding.get("metadata") or {}).get("namespace")
            key = (ref_kind, namespace if ref_kind == "Role" else None, ref_name)
            if key in known:
                continue  # the parent's own role: holding its rules lets the operator bind it
            fixed = other is not None and str((other.get("roleRef") or {}).get("name")) == \
                ref_name
            what = ("a role whose rules cannot be known from samples" if key in unknown else
                    "a role the operator does not build, whose rules samples cannot tell")
            grants.append(RoleGrant(
                group=RBAC_GROUP, resource=_RESOURCE.get(ref_kind, "roles"), verbs=("bind",),
                cluster=binding.get("kind") == "ClusterRoleBinding",
                names=(ref_name,) if fixed else (),
                reason=f"bind: a child {binding.get('kind')} binds the "
                f"{_called(ref_kind, ref_name, fixed)}, {what}; Kubernetes lets a user bind a "
                "role only with bind on it or every permission it grants"
                + ("" if fixed else " (not limited by name: the name follows the parent)")))
    return grants


def _rule_grants(role: Mapping[str, Any], rule: Mapping[str, Any], other: Mapping[str, Any],
                 *, cluster: bool) -> list[RoleGrant]:
    kind = str(role["kind"])
    verbs = tuple(sorted({str(v) for v in rule.get("verbs") or ()}))
    names = tuple(str(n) for n in rule.get("resourceNames") or ())
    theirs = tuple(str(n) for n in other.get("resourceNames") or ())
    reason = (f"granted by a child {kind} it writes: Kubernetes lets a user create or patch a "
              "role (and bind it) only when it holds every permission the role grants")
    if names and names != theirs:
        reason += ("; their resourceNames follow the parent, so this rule is not limited by "
                   "name")
        names = ()
    out = [RoleGrant(group="", resource=str(url), verbs=verbs, cluster=True, non_resource=True,
                     reason=reason) for url in rule.get("nonResourceURLs") or ()]
    out += [RoleGrant(group=str(group), resource=str(resource), verbs=verbs, cluster=cluster,
                      names=tuple(sorted(names)), reason=reason)
            for group in rule.get("apiGroups") or () for resource in rule.get("resources") or ()]
    return out
