"""A chart's semantics over Helm's rendered text: which object goes where, in pure code.

Helm's engine (``builders._charts``) renders a chart's templates to text; this module makes the
objects of that text and of ``crds/`` into :class:`ChartObject` builders and decides what the
toolkit does with each (docs/helm.md): ``crds/`` apart (CREATED, marked
:data:`KEEP_ANNOTATION` ``keep`` unless asked otherwise), the ``pre-install``/``pre-upgrade``
hooks apart (CREATED, ready by :func:`hook_done`, ordered by weight), ``test`` hooks left out,
other hooks refused, ``NOTES.txt`` ignored, namespaced objects put in the release namespace and
cluster-scoped ones stripped of any, every object annotated with its chart and template, the
rest in Helm's install order. Errors name the chart, the template and, where known, the line.

Boundary: text in, values out; no engine, no files, no cache (``builders._charts``).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from builders._errors import ChartError, ChartHookError, ChartRenderError
from builders._state import DesiredState, KubeObject

__all__ = [
    "CHART_ANNOTATION",
    "CLUSTER_SCOPED_KINDS",
    "HOOK_ANNOTATION",
    "INSTALL_ORDER",
    "KEEP_ANNOTATION",
    "TEMPLATE_ANNOTATION",
    "ChartObject",
    "Rendering",
    "hook_done",
    "split_rendering",
]

CHART_ANNOTATION = "optk.dev/helm-chart"
"""Set on every object a chart renders: the chart's ``name-version``."""
TEMPLATE_ANNOTATION = "optk.dev/helm-template"
"""Set on every object a chart renders: the template it came from (``mychart/templates/x.yaml``,
or ``mychart/crds/x.yaml``)."""
HOOK_ANNOTATION = "helm.sh/hook"
"""Helm's hook annotation (``pre-install,pre-upgrade``, ``test``, ...)."""
KEEP_ANNOTATION = "helm.sh/resource-policy"
"""Helm's resource policy: ``keep`` (which ``builders.helm.chart`` sets on the ``crds/`` objects
unless ``keep_crds=False``) makes the reconciler release the object instead of deleting it."""
_HOOK_WEIGHT = "helm.sh/hook-weight"
_RUN_HOOKS = frozenset({"pre-install", "pre-upgrade"})
_LEFT_OUT_HOOKS = frozenset({"test", "test-success"})

INSTALL_ORDER = (
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
)
"""Helm's install order by kind (``releaseutil.InstallOrder``); other kinds follow, by kind."""

CLUSTER_SCOPED_KINDS = frozenset({
    "APIService", "CSIDriver", "CSINode", "CertificateSigningRequest", "ClusterRole",
    "ClusterRoleBinding", "ComponentStatus", "CustomResourceDefinition", "FlowSchema",
    "IngressClass", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume",
    "PodSecurityPolicy", "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass",
    "StorageClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration", "VolumeAttachment",
})
"""Built-in kinds that are cluster-scoped; with the kinds the chart's own CRDs declare
``scope: Cluster`` and those given as ``cluster_scoped``, every other object is namespaced and
put in the release namespace."""

def _loader() -> Any:
    """libyaml's safe loader where PyYAML has it: parsing is most of a render's cost otherwise.
    PyYAML is imported here, on the first render, not when the reconciler imports the chart
    errors (tests/test_lazy_imports.py)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@attrs.frozen(kw_only=True, eq=False)
class ChartObject:
    """The builder of one rendered object: returns a fresh copy of it and its state.

    ``chart`` is the chart's ``name-version``, ``template`` the template it came from."""

    chart: str
    """The chart's ``name-version``."""
    template: str
    """The template the object was rendered from (``mychart/templates/x.yaml``)."""
    obj: Mapping[str, Any]
    """The object as rendered (with namespace and annotations set); never handed out."""
    state: DesiredState = DesiredState.PRESENT
    """PRESENT; CREATED for ``crds/`` and hooks (Helm never upgrades either)."""

    @property
    def kind(self) -> str:
        """The object's kind."""
        return str(self.obj.get("kind", ""))

    @property
    def object_name(self) -> str:
        """The object's ``metadata.name``."""
        return str((self.obj.get("metadata") or {}).get("name", ""))

    @property
    def name(self) -> str:
        """Readable: ``helm <chart> <template> <Kind>/<name>`` (what errors name)."""
        return f"helm {self.chart} {self.template} {self.kind}/{self.object_name}"

    def __call__(self) -> tuple[KubeObject, DesiredState]:
        """The object, a fresh deep copy, and its state."""
        return copy.deepcopy(dict(self.obj)), self.state

    def __repr__(self) -> str:
        return f"<builder {self.name}>"


def hook_done(obj: KubeObject) -> str | None:
    """The hooks' readiness rule, as Helm waits for a hook: a Job when it has completed, a Pod
    when it has succeeded (a failed one names its failure); any other kind when present. None
    when done, else why not."""
    status = obj.get("status") or {}
    if obj.get("kind") == "Job":
        for condition in status.get("conditions") or ():
            if condition.get("status") == "True" and condition.get("type") == "Complete":
                return None
            if condition.get("status") == "True" and condition.get("type") == "Failed":
                return f"hook Job failed: {condition.get('reason') or condition.get('message')}"
        return "hook Job not complete"
    if obj.get("kind") == "Pod":
        phase = status.get("phase")
        return None if phase == "Succeeded" else f"hook Pod {phase or 'Pending'}"
    return None


@attrs.frozen(kw_only=True)
class Rendering:
    """What one render made: the chart's name, its three groups, the kinds it declares
    cluster-scoped, or the error it failed with (cached as it is)."""

    chart: str
    crds: tuple[ChartObject, ...] = ()
    hooks: tuple[ChartObject, ...] = ()
    objects: tuple[ChartObject, ...] = ()
    cluster: frozenset[str] = frozenset()
    error: ChartError | None = None


def _documents(chart: str, template: str, text: str) -> list[dict[str, Any]]:
    import yaml

    try:
        documents = list(yaml.load_all(text, Loader=_loader()))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ChartRenderError(chart=chart, template=template, line=line,
                               reason=f"the rendered text is not YAML: "
                                      f"{getattr(exc, 'problem', None) or exc}") from exc
    found = []
    for document in documents:
        if document is None:
            continue
        meta = document.get("metadata") if isinstance(document, dict) else None
        if (not isinstance(document, dict) or not document.get("apiVersion")
                or not document.get("kind") or not isinstance(meta, dict)
                or not meta.get("name")):
            raise ChartRenderError(
                chart=chart, template=template, line=None,
                reason="renders something that is not an object with apiVersion, kind and "
                       "metadata.name")
        found.append(document)
    return found


def _cluster_kinds(crds: Iterable[Mapping[str, Any]]) -> set[str]:
    kinds = set()
    for crd in crds:
        spec = crd.get("spec") or {}
        if crd.get("kind") == "CustomResourceDefinition" and spec.get("scope") == "Cluster":
            kinds.add(str((spec.get("names") or {}).get("kind", "")))
    return kinds


def _placed(obj: dict[str, Any], *, chart: str, template: str, namespace: str,
            cluster: Collection[str], keep: bool = False) -> dict[str, Any]:
    meta = dict(obj["metadata"])
    if obj["kind"] in cluster:
        meta.pop("namespace", None)
    else:
        meta["namespace"] = namespace
    meta["annotations"] = {**(meta.get("annotations") or {}), CHART_ANNOTATION: chart,
                           TEMPLATE_ANNOTATION: template}
    if keep:
        meta["annotations"][KEEP_ANNOTATION] = "keep"
    return {**obj, "metadata": meta}


def _install_rank(builder: ChartObject) -> tuple[int, str]:
    kind = builder.kind
    if kind in INSTALL_ORDER:
        return INSTALL_ORDER.index(kind), ""
    return len(INSTALL_ORDER), kind


def _hook_weight(builder: ChartObject) -> int:
    annotations = builder.obj["metadata"].get("annotations") or {}
    try:
        return int(str(annotations.get(_HOOK_WEIGHT, "0")))
    except ValueError:
        return 0


def split_rendering(
    chart: str, crd_texts: Sequence[tuple[str, str]], texts: Mapping[str, str], *,
    namespace: str, cluster_scoped: frozenset[str], skip_hooks: frozenset[str], keep_crds: bool,
) -> Rendering:
    crd_documents = [(template, document) for template, text in crd_texts
                     for document in _documents(chart, template, text)]
    rendered = [(template, document) for template in sorted(texts)
                if not template.endswith("NOTES.txt")
                for document in _documents(chart, template, texts[template])]
    cluster = (CLUSTER_SCOPED_KINDS | cluster_scoped
               | _cluster_kinds(d for _, d in (*crd_documents, *rendered)))
    crds = [ChartObject(chart=chart, template=template, state=DesiredState.CREATED,
                        obj=_placed(document, chart=chart, template=template,
                                    namespace=namespace, cluster=cluster, keep=keep_crds))
            for template, document in crd_documents]
    hooks: list[ChartObject] = []
    objects: list[ChartObject] = []
    for template, document in rendered:
        obj = _placed(document, chart=chart, template=template, namespace=namespace,
                      cluster=cluster)
        hook = str((obj["metadata"].get("annotations") or {}).get(HOOK_ANNOTATION, ""))
        events = {event.strip() for event in hook.split(",") if event.strip()}
        if not events:
            objects.append(ChartObject(chart=chart, template=template, obj=obj))
        elif events & _RUN_HOOKS:
            hooks.append(ChartObject(chart=chart, template=template, obj=obj,
                                     state=DesiredState.CREATED))
        elif not events <= _LEFT_OUT_HOOKS | skip_hooks:
            raise ChartHookError(chart=chart, template=template, hook=hook)
    seen: dict[tuple[str, str, str, str | None], str] = {}
    for builder in (*crds, *hooks, *objects):
        group = str(builder.obj["apiVersion"]).rpartition("/")[0]
        identity = (group, builder.kind, builder.object_name,
                    builder.obj["metadata"].get("namespace"))
        if identity in seen:
            raise ChartRenderError(
                chart=chart, template=builder.template, line=None,
                reason=f"renders {builder.kind} {builder.object_name} again (first in "
                       f"{seen[identity]})")
        seen[identity] = builder.template
    hooks.sort(key=lambda b: (_hook_weight(b), _install_rank(b), b.object_name))
    objects.sort(key=_install_rank)
    return Rendering(chart=chart, crds=tuple(crds), hooks=tuple(hooks), objects=tuple(objects),
                      cluster=frozenset(cluster))
