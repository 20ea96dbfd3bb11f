"""Seeded defects the operator state machine (``reconciler.testing.operator_machine``) must
catch, each with a shrunk example: a fixture operator per invariant with one deliberate bug,
besides those of ``test_machine.py`` (a nondeterministic builder, an ABSENT/PRESENT flip).

- a builder that writes an object it did not create (it "ensures" its ConfigMap's data even
  where someone else's object sits): the machine's foreign object must receive no write;
- an operator that ignores pause (a hand-written loop beside the toolkit marks each parent's
  ConfigMap when the parent changes, paused or not): a paused parent's children must receive
  no write;
- a cleanup that never finishes (``on_delete`` keeps failing): a deleted parent must be gone,
  and the failure names the finalizer left;
- a Secret value in a log line (a builder logs the password it builds).

Each test asserts the failure's message and that it came within 60 s, with the rules its defect
does not need turned off (``QUIET``): the machine with every rule finds them too, but spends
its examples elsewhere first (the pause-ignoring loop also writes foreign objects and fights
the operator under faults, and is caught there by other invariants)."""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from builders import ResourceBuilder, child_name, resource_builder
from builders.objects import config_map, secret
from objectmatcher import LAST_APPLIED_ANNOTATION
from reconciler import Reporting
from reconciler._base.errors import NotFoundError
from reconciler._driver.operators import Operator
from reconciler.testing import operator_machine
from tests.driver.sample_operator import API_VERSION, THING_CRD, build

#: Hypothesis' explain phase traces every line run: minutes with an operator's threads
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)

THINGS = st.builds(lambda value: {"apiVersion": API_VERSION, "kind": "Thing",
                                  "spec": {"value": value}},
                   st.sampled_from(["a", "b", "c"]))
SEARCH = settings(max_examples=30, stateful_step_count=8, deadline=None, derandomize=True,
                  phases=NO_EXPLAIN, report_multiple_bugs=False)
BUDGET = 60.0
#: the rules a seeded defect does not need, off (each test turns on what its defect needs)
QUIET = {"relabel_parents": False, "scale_children": False, "restart": False, "crash": False,
         "faults": False, "make_available": False, "delete_children": False,
         "edit_children": False, "foreign_objects": False, "contend": False,
         "policies": False, "webhooks": False}


def _caught(machine: Any, match: str) -> str:
    """Run ``machine`` until it fails; the failure's text (asserted to match ``match``), found
    and shrunk within the budget."""
    started = time.monotonic()
    with pytest.raises(AssertionError, match=match) as failure:
        run_state_machine_as_test(machine, settings=SEARCH)
    elapsed = time.monotonic() - started
    assert elapsed < BUDGET, f"caught in {elapsed:.1f}s, over the {BUDGET:.0f}s budget"
    return str(failure.value)


def _thing_operator(build_fn: Callable[..., Any] = build, **options: Any) -> Operator:
    return Operator(api_version=API_VERSION, kind="Thing", build=build_fn,
                    name=f"d-{uuid.uuid4().hex[:6]}", install=[THING_CRD],
                    reporting=options.pop("reporting", Reporting(events=False)), **options)


# -- a builder writing a foreign object ----------------------------------------------------

def _ensuring_operator() -> Operator:
    clients: list[Any] = []

    def keep_client(runtime: Any) -> None:
        clients.append(runtime.client)

    @resource_builder
    def ensured(parent: Any) -> dict[str, Any]:
        name = child_name(parent["metadata"]["name"], "cfg")
        value = str((parent.get("spec") or {}).get("value", ""))
        if clients:  # the seeded defect: a builder with a side effect on someone's object
            try:
                live = clients[-1].get("v1", "ConfigMap", name,
                                       namespace=parent["metadata"]["namespace"])
            except NotFoundError:
                live = None
            annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
            if live is not None and LAST_APPLIED_ANNOTATION not in annotations \
                    and (live.get("data") or {}).get("value") != value:
                clients[-1].patch("v1", "ConfigMap", name, {"data": {"value": value}},
                                  patch_type="application/merge-patch+json",
                                  namespace=parent["metadata"]["namespace"])
        return config_map(metadata={"name": name}, data={"value": value})

    def build_fn(parent: Any) -> Sequence[ResourceBuilder]:
        return [ensured(parent)]

    return _thing_operator(build_fn, on_start=[keep_client])


def test_machine_catches_a_builder_writing_a_foreign_object() -> None:
    machine = operator_machine(_ensuring_operator(), parents=THINGS,
                               **{**QUIET, "foreign_objects": True})
    message = _caught(machine, r"the operator wrote \(patch\) the foreign ConfigMap")
    assert "where p0's child goes" in message


# -- an operator that ignores pause --------------------------------------------------------

def _impatient_operator() -> Operator:
    def refresh_children(runtime: Any) -> Callable[[], None]:
        stop = threading.Event()
        seen: dict[str, Any] = {}

        def loop() -> None:
            # the seeded defect: a loop of its own beside the toolkit marks each parent's
            # ConfigMap when the parent's spec or annotations change, and never reads the pause
            while not stop.wait(0.02):
                try:
                    for thing in runtime.client.list(API_VERSION, "Thing")["items"]:
                        meta = thing["metadata"]
                        mark = (meta.get("generation"), sorted((meta.get("annotations")
                                                                or {}).items()))
                        if seen.get(meta["uid"]) == mark:
                            continue
                        runtime.client.patch(
                            "v1", "ConfigMap", child_name(meta["name"], "cfg"),
                            {"metadata": {"annotations": {"example.com/seen": str(mark[0])}}},
                            patch_type="application/merge-patch+json",
                            namespace=meta["namespace"])
                        seen[meta["uid"]] = mark
                except Exception:
                    continue

        thread = threading.Thread(target=loop, daemon=True, name="impatient")
        thread.start()

        def cleanup() -> None:
            stop.set()
            thread.join(2)
        return cleanup

    return _thing_operator(on_start=[refresh_children])


def test_machine_catches_an_operator_that_ignores_pause() -> None:
    machine = operator_machine(_impatient_operator(), parents=THINGS, **QUIET)
    message = _caught(machine, r"paused parent p\d+: the operator wrote \(patch\) its child")
    # the example's steps as run come with the failure, a script to run again (what a
    # FlakyFailure, which Hypothesis cannot replay, still shows)
    script = message[message.index(f"state = {machine.__name__}()"):]
    assert re.search(r"^p0 = state\.create_parent\(parent=", script, re.M), script
    assert re.search(r"^state\.set_paused\(name='p\d+', paused=True\)$", script, re.M), script
    with pytest.raises(AssertionError, match=r"paused parent p\d+: the operator wrote"):
        exec(script, {machine.__name__: machine})  # the machine's own script, run again


# -- a cleanup that never finishes ---------------------------------------------------------

def _never_done(parent: Any) -> None:
    raise RuntimeError(f"the backup of {parent['metadata']['name']} is still running")


def test_machine_catches_a_cleanup_that_never_finishes() -> None:
    machine = operator_machine(_thing_operator(on_delete=_never_done), parents=THINGS,
                               **QUIET)
    _caught(machine, r"deleted parent p\d+ still exists \(cleanup stuck: its finalizers "
                     r"optk.dev/cleanup are still there\)")


# -- a Secret value in a log line ------------------------------------------------------------

_log = logging.getLogger("tests.testing.leaky")


@resource_builder
def _password(parent: Any) -> dict[str, Any]:
    value = f"s3cret-{(parent.get('spec') or {}).get('value', '')}-{parent['metadata']['name']}"
    _log.info("built the password %s", value)  # the seeded defect: a Secret value logged
    return secret(metadata={"name": child_name(parent["metadata"]["name"], "password")},
                  data={"password": value})


def _leaky(parent: Any) -> Sequence[ResourceBuilder]:
    return [_password(parent)]


def test_machine_catches_a_secret_value_in_a_log_line() -> None:
    machine = operator_machine(_thing_operator(_leaky), parents=THINGS, **QUIET)
    _caught(machine, r"a Secret value appears in the log line 'built the password")
