"""``Lifecycle``: how a part of a running operator lives and ends with it.

A part that runs threads of its own (the standby's rechecks, the shard Lease and the assigner)
or that can stop the whole runtime (a lost lease) receives these three callables from the
runtime, its one composition root (``reconciler._driver.runtime``), as one value rather than as
three loose arguments (issue 37). It sits in ``_base`` because parts of several packages take it
(``_driver``, ``_sharding``); it knows nothing of the runtime.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

__all__ = ["Lifecycle"]


@attrs.frozen(kw_only=True)
class Lifecycle:
    """What a part asks of the runtime that holds it."""

    stopping: Callable[[], bool]
    """Whether the runtime is stopping (a loop ends, a lost lease stops nothing twice)."""
    stop: Callable[[], object]
    """Stop the runtime (joins its threads: never call it from one of them; see ``stop_soon``)."""
    track: Callable[[threading.Thread], None]
    """Have the runtime join ``thread`` (started by the part) when it stops."""

    def stop_soon(self) -> bool:
        """Stop the runtime from a thread of its own, unless it is stopping already (a part's
        own thread may be one the stop joins); whether it was asked to stop."""
        if self.stopping():
            return False
        threading.Thread(target=self.stop, name="optk-stop", daemon=True).start()
        return True
