"""``ForwardingClient``, the base of the ``ClusterClient`` decorators: it forwards every method of
the protocol to ``inner`` unchanged (list and watch options folded into one ``ListOptions``), so a
decorator overrides only what it changes; and the decorators are built on it."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler._cache.recording import RecordingClient
from reconciler._client.caches import ForwardingReader, ReadCache
from reconciler._client.counting import CountingClient, CountingReader
from reconciler._client.protocol import ClusterClient, ForwardingClient, ListOptions
from reconciler._leadership.fencing import FencingClient
from reconciler._sharding.assigner import MetadataView

_PROTOCOL = sorted(
    name for name, member in vars(ClusterClient).items()
    if inspect.isfunction(member) and not name.startswith("_")
)


class _Inner:
    """Answers every call with what it was called with."""

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            answer = (method, args, kwargs)
            return iter([answer]) if method == "watch" else answer
        return call


_OBJ = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}
_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "get": (("v1", "ConfigMap", "a"), {"namespace": "n"}),
    "list": (("v1", "ConfigMap"), {"namespace": "n", "label_selector": "x=y", "limit": 5}),
    "watch": (("v1", "ConfigMap", ListOptions(resource_version="7")),
              {"namespace": "n", "allow_bookmarks": False}),
    "create": ((_OBJ,), {"dry_run": True}),
    "patch": (("v1", "ConfigMap", "a", {"data": {}}),
              {"patch_type": "application/merge-patch+json", "namespace": "n",
               "subresource": None, "dry_run": False}),
    "replace": ((_OBJ,), {"subresource": "status", "dry_run": False}),
    "delete": (("v1", "ConfigMap", "a"),
               {"namespace": "n", "propagation_policy": "Foreground", "preconditions": None}),
    "is_served": (("v1", "ConfigMap"), {}),
    "is_namespaced": (("v1", "ConfigMap"), {}),
}


def test_the_base_defines_every_method_of_the_protocol() -> None:
    assert sorted(_CALLS) == _PROTOCOL
    for name in _PROTOCOL:
        assert vars(ForwardingClient).get(name) is not None, name
    assert isinstance(ForwardingClient(_Inner()), ClusterClient)


@pytest.mark.parametrize("method", sorted(_CALLS))
def test_each_call_reaches_inner_unchanged(method: str) -> None:
    args, kwargs = _CALLS[method]
    answer = getattr(ForwardingClient(_Inner()), method)(*args, **kwargs)
    if method == "watch":
        answer = next(iter(answer))
    name, sent_args, sent_kwargs = answer
    assert name == method
    if method == "list":  # keyword fields arrive as one ListOptions
        assert sent_args == ("v1", "ConfigMap", ListOptions(label_selector="x=y", limit=5))
        assert sent_kwargs == {"namespace": "n"}
    elif method == "watch":  # options and keyword fields fold into one
        assert sent_args == ("v1", "ConfigMap",
                             ListOptions(resource_version="7", allow_bookmarks=False))
        assert sent_kwargs == {"namespace": "n"}
    else:
        assert (sent_args, sent_kwargs) == (args, {**kwargs})


@pytest.mark.parametrize("decorator", [CountingClient, FencingClient, RecordingClient,
                                       MetadataView])
def test_the_decorators_are_forwarding_clients_that_override_only_what_they_change(
    decorator: type[ForwardingClient],
) -> None:
    assert issubclass(decorator, ForwardingClient)
    overridden = {name for name in _PROTOCOL if name in vars(decorator)}
    changes = {
        CountingClient: set(_PROTOCOL) - {"is_served", "is_namespaced"},
        FencingClient: {"create", "patch", "replace", "delete"},
        RecordingClient: {"create", "patch", "replace", "delete"},
        MetadataView: {"list", "watch"},
    }[decorator]
    assert overridden == changes


def test_a_forwarded_watch_is_the_inner_stream() -> None:
    events: Iterator[Any] = ForwardingClient(_Inner()).watch("v1", "Pod")
    assert [name for name, *_ in events] == ["watch"]


class _Reader:
    """A ``ReadCache`` answering every read with what it was asked."""

    from_memory = False

    def get(self, api_version: str, kind: str, name: str, *,
            namespace: str | None = None) -> dict[str, Any] | None:
        return {"read": ("get", api_version, kind, name, namespace)}

    def list(self, api_version: str, kind: str, *, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        return [{"read": ("list", api_version, kind, namespace, label_selector)}]


@pytest.mark.parametrize("wrapper", [ForwardingReader, CountingReader])
def test_reader_wrappers_forward_every_read_unchanged(wrapper: type[ForwardingReader]) -> None:
    reader = wrapper(_Reader())
    assert isinstance(reader, ReadCache)
    assert reader.from_memory is False
    assert reader.get("v1", "ConfigMap", "a", namespace="n") == {
        "read": ("get", "v1", "ConfigMap", "a", "n")}
    assert reader.list("v1", "ConfigMap", namespace="n", label_selector="x=y") == [
        {"read": ("list", "v1", "ConfigMap", "n", "x=y")}]
    assert CountingReader in ForwardingReader.__subclasses__()
