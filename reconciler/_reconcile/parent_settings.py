"""What a parent's reconcile does besides writing its children: ``ParentReconciler``'s settings.

Why it exists: ``ParentReconciler`` took 19 parameters (issue 37: no constructor over 10).
:class:`ParentSettings` holds pruning, Events, status, readiness, the delete hook, reused builds,
pauses, the children's labels and dry run, frozen and keyword-only; the constructor takes what it
shares with others (a client, a reader, a clock, the resource reconciler, the Event sink) and this
value. The driver builds it from the ``Operator``'s groups (``reconciler._driver.runtime``). The
flat keywords the constructor took before still work for this release with a
``DeprecationWarning``.
Boundary: values and their checks; the behaviour is ``reconciler._reconcile.parents``'.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

import attrs

from builders import KubeObject
from reconciler._base.errors import ReconcilerUsageTypeError
from reconciler._client.cluster_secrets import ClusterSecrets
from reconciler._reconcile.cleanups import OnDelete
from reconciler._reconcile.policies import PauseSettings
from reconciler._reconcile.readiness import Readiness, StatusBuilder

__all__ = ["ParentSettings"]


def _pairs(value: Iterable[tuple[str, str]]) -> frozenset[tuple[str, str]]:
    return frozenset((str(a), str(k)) for a, k in value)


@attrs.frozen(kw_only=True)
class ParentSettings:
    """What ``ParentReconciler`` does for a parent besides writing its children.

    ``prune_kinds``: ``(apiVersion, kind)`` pairs whose unbuilt children (ours, found by the
    ``optk.dev/owner-uid`` label) are deleted; pruning is off when it is empty. ``events`` and
    ``write_status`` switch Events and status writing. ``status_refresh`` (seconds, None: off)
    rewrites ``lastReconcileTime`` once it is that old. ``dry_run`` writes nothing (server-side
    dry runs, no Events, no status): the result is a plan. ``on_delete(parent)`` runs before the
    cleanup finalizer is removed. ``readiness``: Ready from the children's health; ``status``: a
    function of the parent and its children merged into the status. ``reuse_builds``: an
    unchanged parent reuses its last build (``reconciler._reconcile.memo.BuildMemo``).
    ``pause``: operator- and namespace-wide pauses. ``child_labels(parent)``: labels each child
    carries besides its identity (a sharded operator's shard label). ``clusters``: where the
    clusters children may be placed in are declared (``ClusterSecrets``; ``builders.placed``,
    docs/clusters.md); None: every child goes to the operator's own cluster."""

    prune_kinds: Collection[tuple[str, str]] = attrs.field(default=(), converter=_pairs)
    events: bool = True
    write_status: bool = True
    status_refresh: float | None = None
    dry_run: bool = False
    on_delete: OnDelete | None = None
    readiness: Readiness | None = None
    status: StatusBuilder | None = None
    reuse_builds: bool = False
    pause: PauseSettings = attrs.field(factory=PauseSettings)
    child_labels: Callable[[KubeObject], Mapping[str, str]] | None = None
    clusters: ClusterSecrets | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("on_delete", "status", "child_labels"):
            if (value := getattr(self, name)) is not None and not callable(value):
                raise ReconcilerUsageTypeError(
                    f"ParentSettings: {name} must be callable or None, got {value!r}")
        if self.clusters is not None and not isinstance(self.clusters, ClusterSecrets):
            raise ReconcilerUsageTypeError(
                f"ParentSettings: clusters must be ClusterSecrets(...) or None, "
                f"got {self.clusters!r}")
