"""The informer cache under any interleaving of watch events, relists and own-write results.

A Hypothesis state machine drives a model server (objects by name, each with a uid and a
resourceVersion from one counter) and an ``IndexedCache`` fed as the informer feeds it: watch
events in order (``upsert``/``remove``), delivered once, twice (a duplicate) or lost to a broken
stream that a relist (``IndexedCache.relist``) then replaces; and the answers to the toolkit's own
writes (``upsert(..., own_write=True)``, ``forget`` for a delete) arriving at any time later,
more than once, or never. Issue 21: a late answer put a deleted parent back into the cache, and
the driver reconciled it for ever.

The rules checked after every step:

- an object the cache has seen deleted (its DELETED event, a relist without it, an own delete's
  answer) is never in the cache again at a version from before its deletion;
- the cache never holds an object at a version older than one it held before (same uid);
- once the stream is quiet (every event delivered) the cache holds exactly the server's objects
  at the server's versions.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reconciler._cache.stores import IndexedCache

NAMES = ("a", "b", "c")


def _obj(name: str, uid: str, rv: int, value: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": uid,
                         "resourceVersion": str(rv)},
            "data": {"value": str(value)}}


class CacheMachine(RuleBasedStateMachine):
    """A model server, its watch stream, late own-write answers and the cache."""

    @initialize()
    def start(self) -> None:
        self.rv = 0
        self.uids = itertools.count(1)
        self.server: dict[str, dict[str, Any]] = {}
        self.stream: list[tuple[str, dict[str, Any]]] = []
        self.delivered: list[tuple[str, dict[str, Any]]] = []
        self.answers: list[dict[str, Any]] = []  # own writes' answers, not yet arrived
        self.deleted_answers: list[dict[str, Any]] = []  # own deletes' answers
        self.cache = IndexedCache()
        self.seen_deleted: dict[str, int] = {}  # uid -> version the cache saw it deleted at
        self.highest: dict[str, int] = {}  # uid -> highest version the cache held

    def _next(self) -> int:
        self.rv += 1
        return self.rv

    # -- the server -----------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), value=st.integers(0, 3), own=st.booleans())
    def write(self, name: str, value: int, own: bool) -> None:
        """Someone (the toolkit when ``own``) creates or updates ``name``."""
        current = self.server.get(name)
        uid = current["metadata"]["uid"] if current else f"uid-{next(self.uids)}"
        obj = _obj(name, uid, self._next(), value)
        self.server[name] = obj
        self.stream.append(("MODIFIED" if current else "ADDED", obj))
        if own:
            self.answers.append(obj)

    @rule(name=st.sampled_from(NAMES), own=st.booleans())
    def delete(self, name: str, own: bool) -> None:
        """Someone (the toolkit when ``own``) deletes ``name``."""
        current = self.server.pop(name, None)
        if current is None:
            return
        meta = current["metadata"]
        gone = _obj(name, meta["uid"], self._next(), int(current["data"]["value"]))
        self.stream.append(("DELETED", gone))
        if own:
            self.deleted_answers.append(gone)

    # -- the informer's side --------------------------------------------------------------

    @precondition(lambda self: bool(self.stream))
    @rule()
    def deliver(self) -> None:
        """The watch delivers its next event."""
        event = self.stream.pop(0)
        self._apply(event)
        self.delivered.append(event)

    @precondition(lambda self: bool(self.delivered))
    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        """An event delivered before arrives again (a resumed watch, a proxy's retry)."""
        self._apply(data.draw(st.sampled_from(self.delivered)))

    @rule()
    def relist(self) -> None:
        """The stream broke (its pending events are lost): list everything afresh."""
        self.stream.clear()
        items = [dict(obj) for obj in self.server.values()]
        cached = {name: self.cache.get("ns", name) for name in NAMES}
        self.cache.relist(items, version=str(self.rv))
        for name, old in cached.items():
            if old is not None and (name not in self.server or self.server[name][
                    "metadata"]["uid"] != old["metadata"]["uid"]):
                self.seen_deleted.setdefault(old["metadata"]["uid"], self.rv)

    @precondition(lambda self: bool(self.answers))
    @rule(data=st.data(), keep=st.booleans())
    def own_answer(self, data: st.DataObject, keep: bool) -> None:
        """The answer to one of the toolkit's writes arrives, late; ``keep``: it arrives again
        later too (duplicated); an answer never drawn is lost."""
        index = data.draw(st.integers(0, len(self.answers) - 1))
        answer = self.answers[index] if keep else self.answers.pop(index)
        self.cache.upsert(dict(answer), own_write=True)

    @precondition(lambda self: bool(self.deleted_answers))
    @rule(data=st.data())
    def own_delete_answer(self, data: st.DataObject) -> None:
        """The answer to one of the toolkit's deletes arrives: written through as gone."""
        gone = self.deleted_answers.pop(data.draw(
            st.integers(0, len(self.deleted_answers) - 1)))
        uid = gone["metadata"]["uid"]
        self.cache.forget(gone, uid=uid)
        self.seen_deleted.setdefault(uid, int(gone["metadata"]["resourceVersion"]))

    def _apply(self, event: tuple[str, dict[str, Any]]) -> None:
        kind, obj = event
        if kind == "DELETED":
            self.cache.remove(dict(obj))
            self.seen_deleted.setdefault(obj["metadata"]["uid"],
                                         int(obj["metadata"]["resourceVersion"]))
        else:
            self.cache.upsert(dict(obj))

    # -- the rules ------------------------------------------------------------------------

    @invariant()
    def nothing_deleted_comes_back(self) -> None:
        for name in NAMES:
            cached = self.cache.get("ns", name)
            if cached is None:
                continue
            uid = cached["metadata"]["uid"]
            version = int(cached["metadata"]["resourceVersion"])
            assert uid not in self.seen_deleted or version > self.seen_deleted[uid], (
                f"{name} ({uid}) back at version {version} after it was seen deleted at "
                f"{self.seen_deleted[uid]}")
            assert version >= self.highest.get(uid, 0), (
                f"{name} went back from {self.highest[uid]} to {version}")
            self.highest[uid] = version

    @invariant()
    def quiet_stream_means_the_servers_state(self) -> None:
        if self.stream:
            return
        held = {name: (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])
                for name in NAMES if (obj := self.cache.get("ns", name)) is not None}
        truth = {name: (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])
                 for name, obj in self.server.items()}
        assert held == truth


CacheMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40,
                                          deadline=None)
TestInformerCache = CacheMachine.TestCase
