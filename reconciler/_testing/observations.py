"""What the operator machine reads and edits, apart from its rules: the names it marks its own
writes with, paths into objects, the request log's resources, Secret values, conditions, the
process's log lines, its tracking client, and an endpoint that never answers (a hanging
webhook).

Private to ``reconciler._testing.machine`` (the names keep their leading underscore: nothing
outside the machine uses them). Boundary: pure helpers and two small recorders; no rule, no
check.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import typing
from collections import abc as _abc
from typing import Any as _Any

_WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_MACHINE_AGENT = "optk-operator-machine"
_FOREIGN_LABEL = "machine.optk.dev/foreign"
_LABEL = "machine.optk.dev/label"
_NOTE = "machine.optk.dev/note"
_FAULTS = ("error-500", "watch-cut", "lost-answer")
_CONTENDER = "machine-contender"  # the second writer's field manager
_REPLICA = "machine-replica/"  # a sharded replica's user agent ends with its shard id
_CONTESTED = "contested-by-machine"
_HANGING_WEBHOOK = "machine-hanging-webhook"  # the hang_webhook rule's configuration
_POLICIES = ("ignore", "create-only", "no-prune", "observe")
#: per policy, the operator's write verbs it forbids (``policies.restrict_plan``)
_FORBIDDEN = {"ignore": _WRITES, "observe": _WRITES,
              "create-only": frozenset({"update", "patch"}),
              "no-prune": frozenset({"delete", "deletecollection"})}
#: policies under which a present child keeps what others wrote (it is not compared)
_UNCOMPARED = frozenset({"ignore", "observe", "create-only"})
_BOOKKEEPING = ("leases.", "events")  # the resync heartbeat, Events: not children's writes
_SECRET_MIN = 6  # shorter Secret values are too likely to appear by chance
#: children wait for their dependencies (or, to go, for their dependents to be gone)
_GATED = ("DependencyNotReady", "DependencyNotBuilt", "DependentsNotGone")


def _pointer(path: tuple[_Any, ...]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


#: keys that name a list item (merge keys of Kubernetes' list-maps): changed, they make
#: another item, not a changed field, so the machine never drifts or contests them
_ITEM_KEYS = frozenset({"name", "protocol", "port", "containerPort", "mountPath", "devicePath",
                        "ip", "type", "key", "topologyKey", "scope", "containerName"})


def _changeable(path: tuple[_Any, ...]) -> bool:
    """Whether the machine may set a built string field at ``path`` to its own value: not the
    identity or status, and not a key of a list item."""
    if path[0] in ("apiVersion", "kind", "metadata", "status"):
        return False
    return not (len(path) > 1 and isinstance(path[-2], int) and path[-1] in _ITEM_KEYS)


def _walk_leaves(value: _Any, path: tuple[_Any, ...] = ()) -> list[tuple[_Any, ...]]:
    if isinstance(value, _abc.Mapping):
        return [p for k, v in value.items() for p in _walk_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _walk_leaves(v, (*path, i))]
    return [path] if isinstance(value, str) else []


def _get_path(obj: _Any, path: tuple[_Any, ...]) -> _Any:
    for step in path:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return None
    return obj


def _set_path(obj: _Any, path: tuple[_Any, ...], value: _Any) -> bool:
    for step in path[:-1]:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return False
    try:
        obj[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True


def _resource_of(resource: str, kind: str) -> bool:
    """Whether a request log's ``resource`` (``configmaps``, ``deployments.apps``) is ``kind``'s."""
    plural, kind = resource.split(".")[0].split("/")[0], kind.lower()
    return plural in (kind + "s", kind + "es", kind[:-1] + "ies", kind)


def _secret_values(obj: _abc.Mapping[str, _Any]) -> set[str]:
    """The values of a Secret (``data`` decoded, ``stringData``) long enough to look for."""
    import base64
    import binascii

    values = {str(v) for v in (obj.get("stringData") or {}).values()}
    for value in (obj.get("data") or {}).values():
        try:
            values.add(base64.b64decode(str(value), validate=True).decode())
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
    return {v for v in values if len(v) >= _SECRET_MIN}


def _conditions(obj: _abc.Mapping[str, _Any] | None) -> dict[str, dict[str, _Any]]:
    found = ((obj or {}).get("status") or {}).get("conditions") or ()
    return {str(c.get("type")): dict(c) for c in found if isinstance(c, _abc.Mapping)}


class _LogCapture:
    """Every log record of the process while a machine runs, as formatted lines (the Secret
    check reads them): a handler on the root logger (INFO and up) and the toolkit's ``optk``
    loggers at DEBUG, for the run."""

    def __init__(self) -> None:
        import logging

        class _Handler(logging.Handler):
            def emit(handler, record: logging.LogRecord) -> None:
                with contextlib.suppress(Exception):
                    text = record.getMessage()
                    if record.exc_info:
                        text += "\n" + logging.Formatter().formatException(record.exc_info)
                    self.lines.append(text)

        self.lines: list[str] = []
        self._handler = _Handler(logging.DEBUG)
        self._root, self._optk = logging.getLogger(), logging.getLogger("optk")
        self._levels = (self._root.level, self._optk.level)
        self._root.addHandler(self._handler)
        self._root.setLevel(min(self._root.level or logging.WARNING, logging.INFO))
        self._optk.setLevel(logging.DEBUG)

    def close(self) -> None:
        self._root.removeHandler(self._handler)
        self._root.setLevel(self._levels[0])
        self._optk.setLevel(self._levels[1])


def _newer_or_same(seen: str, want: str) -> bool:
    try:
        return int(seen) >= int(want)
    except ValueError:
        return False


class _Tracked:
    """The machine's client: forwards every call, and remembers the objects it wrote (the quiet
    point waits until the operator's informers have seen them)."""

    def __init__(self, client: _Any) -> None:
        self._client = client
        self._written: list[tuple[_Any, ...]] = []

    def __getattr__(self, name: str) -> _Any:
        return getattr(self._client, name)

    def take_written(self) -> list[tuple[_Any, ...]]:
        written, self._written = list(dict.fromkeys(self._written)), []
        return written

    def _note(self, api_version: str, kind: str, name: str | None,
              namespace: str | None) -> None:
        self._written.append((api_version, kind, namespace, name))

    def create(self, obj: _Any, **kwargs: _Any) -> _Any:
        meta = obj.get("metadata") or {}
        self._note(obj["apiVersion"], obj["kind"], meta.get("name"), meta.get("namespace"))
        return self._client.create(obj, **kwargs)

    def replace(self, obj: _Any, **kwargs: _Any) -> _Any:
        meta = obj.get("metadata") or {}
        self._note(obj["apiVersion"], obj["kind"], meta.get("name"), meta.get("namespace"))
        return self._client.replace(obj, **kwargs)

    def patch(self, api_version: str, kind: str, name: str, patch: _Any, **kwargs: _Any) -> _Any:
        self._note(api_version, kind, name, kwargs.get("namespace"))
        return self._client.patch(api_version, kind, name, patch, **kwargs)

    def delete(self, api_version: str, kind: str, name: str, **kwargs: _Any) -> _Any:
        self._note(api_version, kind, name, kwargs.get("namespace"))
        return self._client.delete(api_version, kind, name, **kwargs)


class _Ref(typing.NamedTuple):
    api_version: str
    kind: str
    name: str
    namespace: str | None


def _key(ref: _Any) -> tuple[_Any, ...]:
    return (ref.api_version, ref.kind, ref.namespace, ref.name)


def _owned_by(obj: _abc.Mapping[str, _Any], uid: str) -> bool:
    """Whether ``obj`` is the child of the parent with ``uid``: its ``optk.dev/owner-uid``
    label or an owner reference names it (an object created at a deleted parent's child's
    place afterwards, someone else's or another parent's, is not)."""
    from builders.names import OWNER_UID_LABEL, label_value

    meta = obj.get("metadata") or {}
    if not uid:
        return True  # not known: judged as the parent's
    return (meta.get("labels") or {}).get(OWNER_UID_LABEL) == label_value(uid) or any(
        r.get("uid") == uid for r in meta.get("ownerReferences") or ())


def _held_by_other(obj: _abc.Mapping[str, _Any], parent: _abc.Mapping[str, _Any]) -> bool:
    """Whether ``obj``, a child without a controller owner reference, belongs to another
    parent by its ``optk.dev/owner-uid`` label (the toolkit skips it: ``planning.is_owned``);
    a shared child is judged by its record instead."""
    from builders.names import OWNER_UID_LABEL, label_value
    from reconciler._reconcile.sharing import is_shared

    meta = obj.get("metadata") or {}
    if is_shared(obj) or any(r.get("controller") for r in meta.get("ownerReferences") or ()):
        return False
    label = (meta.get("labels") or {}).get(OWNER_UID_LABEL)
    uid = str((parent.get("metadata") or {}).get("uid") or "")
    return bool(label) and bool(uid) and label != label_value(uid)


def _waits_for_gate(ref: _Any, message: str) -> bool:
    """Whether a ``DependencyNotReady`` message names ``ref`` as waiting for its component's
    dependencies (created or updated in dependency order)."""
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    return bool(message) and f"{ref.kind} {where} (component" in message


def _waits_on_input(error: BaseException) -> bool:
    """Whether a builder failed because a declared input is missing or forbidden (the parent
    waits for it: ``InputMissing``), not because it is wrong."""
    from builders.inputs import InputForbiddenError, InputMissingError

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (InputMissingError, InputForbiddenError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _said(condition: _abc.Mapping[str, _Any]) -> str:
    if not condition:
        return "missing"
    return f"{condition.get('status')}/{condition.get('reason')}: {condition.get('message', '')}"


class _HangingEndpoint:
    """A TCP endpoint on 127.0.0.1 that accepts connections and never answers: a webhook that
    hangs (its caller's TLS handshake waits until the caller's deadline). ``accepted`` is set
    by the first connection; ``close`` resets every connection held (the caller's call then
    fails at once) and stops listening."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = threading.Event()
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name="machine-hanging-webhook")
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)
            self.accepted.set()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(2.0)
        for conn in self._held:
            with contextlib.suppress(OSError):  # linger 0: a reset, not a quiet close
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
        self._listener.close()
