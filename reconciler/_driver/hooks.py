"""Start hooks: what an ``Operator.on_start`` hook receives, and nothing more.

A hook (``Operator(on_start=[hook])``) runs once the runtime's informers are started and before
any reconcile; it may return a cleanup that the runtime calls, last first, when it stops. It
receives a :class:`StartContext`: the operator's unfenced client (every replica serves, leader or
not, as ``install`` does), the runtime's clock, a way to queue a parent, the registry of what
parents wait for, and the runtime's counters. Hooks written for the earlier form, which received
the runtime itself, keep working for this release: any other attribute is read from the runtime
with a ``DeprecationWarning`` naming the attribute.

Boundary: the value handed to hooks; running them and their cleanups is the runtime's
(``reconciler._driver.runtime``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import attrs

from reconciler._base.clocks import Clock
from reconciler._client.protocol import ClusterClient
from reconciler._driver.stats import RuntimeStats
from reconciler._reconcile.waits import WaitRegistry

__all__ = ["StartContext", "StartHook"]

_FIELDS = ("client", "clock", "request", "waits", "stats")


@attrs.frozen(kw_only=True)
class StartContext:
    """What an ``on_start`` hook uses of the running operator.

    ``client``: the client the operator was started with (unfenced: writes are not held back
    while another replica leads). ``clock``: the runtime's clock (tests pass a virtual one).
    ``request(namespace, name)``: queue a reconcile of one parent now. ``waits``: which parents
    wait on which kind or object (``reconciler._reconcile.waits``). ``stats``: the runtime's
    counters (reconciles, writes, triggers).
    """

    client: ClusterClient
    clock: Clock
    request: Callable[[str | None, str], None]
    waits: WaitRegistry
    stats: RuntimeStats
    runtime: object = attrs.field(repr=False, eq=False)
    """The runtime, for hooks of the earlier form only (read through the deprecated
    attributes); new hooks use the fields above."""

    @property
    def inner_client(self) -> ClusterClient:
        """Deprecated: ``client`` (the runtime's ``inner_client`` was the same client)."""
        warnings.warn("StartContext.inner_client is deprecated: use StartContext.client",
                      DeprecationWarning, stacklevel=2)
        return self.client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        runtime = object.__getattribute__(self, "runtime")
        try:
            value = getattr(runtime, name)
        except AttributeError:
            raise AttributeError(
                f"StartContext has no attribute {name!r} (a hook receives {', '.join(_FIELDS)})"
            ) from None
        warnings.warn(
            f"StartContext.{name} reads the runtime and is deprecated: an on_start hook "
            f"receives a StartContext ({', '.join(_FIELDS)}); ask for what else it needs",
            DeprecationWarning, stacklevel=2)
        return value


StartHook = Callable[[StartContext], "Callable[[], object] | None"]
"""An ``Operator.on_start`` hook: called with a :class:`StartContext`; may return a cleanup."""
