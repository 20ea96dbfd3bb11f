"""The one bound on text the toolkit copies into a condition, an Event or a log line.

Why it exists: people write values the toolkit quotes back to them (an ``optk.dev/paused``
annotation, a child's ``optk.dev/policy`` or ``optk.dev/ignore-fields``, a spec value a builder's
``InvalidSpecError`` names) and such a value may be as long as the API server accepts: 256 KiB of
annotations. Copied whole, one such value made a 200 KB parent status and a 200,000-character log
line. Every message built from values people wrote goes through :func:`bounded` on its way to a
condition (``reconciler._reconcile.conditions`` and the modules that add conditions), an Event
(``reconciler._reconcile.events``) or the worker's log line (``reconciler._driver.settling``), and
every error that quotes such a value quotes it through :func:`quoted`; so the limit is this
module's, not each caller's.

Boundary: pure string functions; it imports nothing of ``reconciler``.
"""

from __future__ import annotations

__all__ = ["MESSAGE_LIMIT", "QUOTE_LIMIT", "bounded", "quoted"]

MESSAGE_LIMIT = 4096
"""Characters of one condition message, Event message or quoted value (the limit the parent's
conditions have always had; an Event's message may be 1 KiB to 32 KiB by API and version)."""

QUOTE_LIMIT = 256
"""Characters of one value quoted inside a message (an annotation's value in an error): enough
to recognise it, short enough that what the message says after it is still read."""


def bounded(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` as a string of at most ``limit`` characters: cut, and saying how much was cut
    (``"... (200317 more characters)"``), when it is longer."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = limit - len(f" ... ({len(text)} more characters)")
    return f"{text[:max(cut, 0)]} ... ({len(text) - max(cut, 0)} more characters)"


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` bounded: how an error names a value someone wrote (an annotation)."""
    return bounded(repr(value), limit)
