"""How a failed build or builder is told, once: ``builder <name> of parent <ns/name> failed:
<error> (<file>:<line>)``.

A user's builder that raises reaches the reconcile wrapped in ``BuilderFailedError`` (its
message names the builder and the parent already); a ``build`` function that raises arrives
bare. Both become one sentence naming what failed, of which parent, the error and where in the
user's code it was raised (the innermost frame outside the toolkit and the standard library),
so the WARNING line, the parent's condition and ``optk plan`` say it without ``-v``. A declared
input that is missing or forbidden is no failure of the code: it says that the builder waits
for the input, naming it, without an exception's class or a location
(``reconciler._reconcile.conditions.described`` lists such a sentence without a prefix).

Boundary: strings from values; no I/O.
"""

from __future__ import annotations

import os
import sysconfig
import traceback

from builders import BuilderFailedError, ObjectRef
from builders.inputs import InputUnavailableError
from reconciler._reconcile.conditions import permanent_cause

__all__ = ["builder_failure", "raised_at"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOLKIT = tuple(os.path.join(_ROOT, package) + os.sep
                 for package in ("builders", "reconciler", "objectmatcher"))
_STDLIB = tuple(os.path.abspath(p) + os.sep for p in
                {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})


def raised_at(error: BaseException) -> str | None:
    """``file:line`` where ``error`` was raised in the user's code: the innermost frame of its
    traceback outside the toolkit's packages and the standard library (else the innermost
    frame); the file relative to the working directory when under it. None without one."""
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    if not frames:
        return None
    chosen = frames[-1]
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_TOOLKIT + _STDLIB):
            chosen = frame
            break
    path = os.path.abspath(chosen.filename)
    cwd = os.getcwd() + os.sep
    shown = path[len(cwd):] if path.startswith(cwd) else path
    return f"{shown}:{chosen.lineno}"


def _readable(name: str) -> str:
    """A builder's qualified name without ``<locals>`` (``build.<locals>.web``: ``build.web``)."""
    return name.replace(".<locals>", "")


def builder_failure(what: str, name: str, parent: ObjectRef, error: BaseException) -> str:
    """The sentence for ``what`` (``builder`` or ``build function``) ``name`` of ``parent``
    that raised ``error`` (a ``BuilderFailedError`` is unwrapped: its cause is the user's)."""
    where = f"{parent.namespace}/{parent.name}" if parent.namespace else parent.name
    subject = f"{what} {_readable(name)} of parent {where}"
    waiting = permanent_cause(error)
    if isinstance(waiting, InputUnavailableError):
        return f"{subject} waits: {waiting}"  # names the input, never a value
    reason = f"{type(error).__name__}: {error}"
    cause: BaseException | None = error
    if isinstance(error, BuilderFailedError):
        reason, cause = error.reason, error.__cause__
    at = raised_at(cause) if cause is not None else None
    return f"{subject} failed: {reason}" + (f" ({at})" if at else "")
