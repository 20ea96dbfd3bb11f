"""Declared inputs in the testing kit: strategies for what ``build(parent, inputs)`` may be given.

An operator that declares inputs (``Operator(inputs=fn)``, ``builders.inputs``) builds from
``(parent, inputs)``; :class:`InputStates` draws, for each reference ``fn(parent)`` declares, one
of three states: missing, forbidden, or present with generated contents (a ``SelectorRef``:
missing is no object matched, present one to three, named ``<kind>-<i>`` and carrying the
selector's labels; a ``ClusterSelector`` likewise: no cluster, or one to three named
``cluster-<i>`` with its labels), and draws a *changed* value (same references in the same
states, the same objects with other contents) for the invariant "input changes": a change of
an input's contents never changes which children are built, only what they hold (names stay
stable, so a rotated Secret rolls a workload instead of replacing it).
:func:`with_inputs` binds a build to one drawn value, leaving out the builders that raise
``InputUnavailableError`` for an input that is missing or forbidden in it (what the reconcile
reports as ``InputMissing``/``InputForbidden``: expected, not a failure of the builders), or
every builder when ``build`` itself raises it (the clusters a build places children in).

Boundary: strategies and the binding. The property run of ``check_builders(inputs=...)`` is
``_properties``' and the invariants are ``_check``'s; this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
from hypothesis import strategies as st

from builders._compose import ResourceBuilder
from builders._errors import BuilderFailedError, InputUnavailableError
from builders._identity import ObjectRef
from builders._inputs import (
    Cluster,
    ClusterSelector,
    InputDeclaration,
    InputRef,
    Inputs,
    SelectorRef,
)
from builders._state import KubeObject

__all__ = ["InputStates", "kept_builders", "with_inputs"]

STATES = ("present", "missing", "forbidden")


def _data() -> st.SearchStrategy[dict[str, str]]:
    keys = st.from_regex(r"[a-z][a-z0-9.-]{0,12}", fullmatch=True)
    return st.dictionaries(keys, st.text(max_size=16), max_size=3)


@attrs.frozen(kw_only=True)
class InputStates:
    """``check_builders(inputs=InputStates(declare=fn))``: each declared input of a parent
    drawn missing, forbidden or present; ``contents(ref)`` draws a present one's fields besides
    ``apiVersion``, ``kind`` and ``metadata`` (default: a ``data`` map of short strings);
    ``states`` limits the states drawn (``("present",)``: always there)."""

    declare: InputDeclaration
    contents: Callable[[ObjectRef], st.SearchStrategy[Mapping[str, Any]]] | None = None
    states: tuple[str, ...] = STATES

    def __attrs_post_init__(self) -> None:
        if not self.states or set(self.states) - set(STATES):
            raise ValueError(f"InputStates: states must be among {STATES}, got {self.states}")

    def _content(self, ref: ObjectRef) -> st.SearchStrategy[Mapping[str, Any]]:
        return self.contents(ref) if self.contents is not None else st.fixed_dictionaries(
            {"data": _data()})

    def _present(self, ref: ObjectRef, version: int, *,
                 labels: Mapping[str, str] | None = None) -> st.SearchStrategy[dict[str, Any]]:
        meta = {"name": ref.name, "resourceVersion": str(version),
                **({"namespace": ref.namespace} if ref.namespace else {}),
                **({"labels": dict(labels)} if labels else {})}
        return self._content(ref).map(lambda body: {
            **dict(body), "apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta})

    def _matched(self, sel: SelectorRef, count: int,
                 version: int) -> st.SearchStrategy[list[dict[str, Any]]]:
        """``count`` objects ``sel`` matches: ``<kind>-<i>``, with its labels."""
        refs = [ObjectRef(api_version=sel.api_version, kind=sel.kind, namespace=sel.namespace,
                          name=f"{sel.kind.lower()}-{i}") for i in range(count)]
        labels = dict(sel.match_labels)
        return st.tuples(*(self._present(r, version, labels=labels) for r in refs)).map(list)

    def drawn(self, parent: KubeObject) -> st.SearchStrategy[Inputs]:
        """The inputs of ``parent``, each in a drawn state (a selector's count of matches too)."""
        refs = sorted(set(self.declare(parent)), key=str)
        states = st.tuples(*(st.sampled_from(self.states) for _ in refs))
        counts = st.tuples(*(st.integers(1, 3) for _ in refs))
        return st.tuples(states, counts).flatmap(
            lambda drawn: self._of(refs, drawn[0], drawn[1], version=1))

    def changed(self, inputs: Inputs) -> st.SearchStrategy[Inputs]:
        """``inputs`` with other contents: the same references in the same states (a
        selector's the same objects)."""
        refs = sorted(inputs.refs, key=str)
        chosen = tuple("forbidden" if r in inputs.forbidden else "missing"
                       if r in inputs.missing else "present" for r in refs)
        counts = tuple(len(inputs.selected(r)) if isinstance(r, SelectorRef)
                       and r not in inputs.forbidden else len(inputs.clusters(r))
                       if isinstance(r, ClusterSelector) and r not in inputs.forbidden
                       else 1 for r in refs)
        chosen = tuple("missing" if isinstance(r, SelectorRef | ClusterSelector)
                       and state == "present"
                       and not n else state for r, state, n in zip(refs, chosen, counts,
                                                                   strict=True))
        return self._of(refs, chosen, counts, version=2)

    def _of(self, refs: list[InputRef], chosen: Iterable[str], counts: Iterable[int], *,
            version: int) -> st.SearchStrategy[Inputs]:
        triples = list(zip(refs, chosen, counts, strict=True))
        names = [r for r, s, _ in triples if s == "present" and isinstance(r, ObjectRef)]
        sels = [(r, 0 if s == "missing" else n) for r, s, n in triples
                if isinstance(r, SelectorRef) and s != "forbidden"]
        clusters = {r: [Cluster(name=f"cluster-{i}", labels=dict(r.match_labels))
                        for i in range(0 if s == "missing" else n)]
                    for r, s, n in triples
                    if isinstance(r, ClusterSelector) and s != "forbidden"}
        return st.tuples(
            st.tuples(*(self._present(ref, version) for ref in names)),
            st.tuples(*(self._matched(sel, n, version) for sel, n in sels)),
        ).map(lambda drawn: Inputs(
            dict(zip(names, drawn[0], strict=True)),
            missing=[r for r, s, _ in triples if s == "missing" and isinstance(r, ObjectRef)],
            forbidden=[r for r, s, _ in triples if s == "forbidden"],
            selected={sel: objs for (sel, _), objs in zip(sels, drawn[1], strict=True)},
            clusters=clusters))


def _unavailable(error: BaseException, inputs: Inputs) -> bool:
    cause: BaseException | None = error
    for _ in range(8):  # a builder's error arrives wrapped in BuilderFailedError
        if cause is None:
            return False
        if isinstance(cause, InputUnavailableError):
            return cause.ref in inputs.missing or cause.ref in inputs.forbidden
        cause = cause.__cause__
    return False


def with_inputs(build: Callable[[KubeObject, Inputs], Iterable[ResourceBuilder]],
                inputs: Inputs) -> Callable[[KubeObject], list[ResourceBuilder]]:
    """``build`` as ``build(parent)`` given ``inputs``; a builder that raises
    ``InputUnavailableError`` for an input ``inputs`` lacks is left out (it is reported, not
    built, by the reconcile); any other failure stays for the invariants to find."""

    def bound(parent: KubeObject) -> list[ResourceBuilder]:
        return kept_builders(build, inputs, parent)[0]

    bound.__name__ = getattr(build, "__name__", "build")
    return bound


def kept_builders(build: Callable[[KubeObject, Inputs], Iterable[ResourceBuilder]],
                  inputs: Inputs, parent: KubeObject) -> tuple[list[ResourceBuilder], int]:
    """The builders ``with_inputs`` keeps for ``parent``, and how many it left out (the
    property run checks a Service's selector only when none was left out)."""
    kept: list[ResourceBuilder] = []
    left_out = 0
    try:
        declared = list(build(parent, inputs))
    except InputUnavailableError as exc:  # the build itself needs it (the clusters to place
        if _unavailable(exc, inputs):     # in): nothing is built, the reconcile reports it
            return [], 1
        raise
    for builder in declared:
        try:
            builder()
        except (InputUnavailableError, BuilderFailedError) as exc:
            if _unavailable(exc, inputs):
                left_out += 1
                continue
        except Exception:  # the invariants report it, with the parent
            pass
        kept.append(builder)
    return kept, left_out
