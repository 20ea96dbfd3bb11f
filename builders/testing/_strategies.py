"""Hypothesis strategies for Kubernetes identifiers, metadata and whole objects (one place).

Operator authors generate parents and fields with these to test their builders
(:func:`builders.testing.check_builders`). Identifiers follow the Kubernetes validation rules
(DNS-1123 labels and subdomains, qualified label keys, label values, quantities);
:func:`from_schema` walks the ``kubernetes-validate`` schema of a built-in kind, or a CRD's
structural schema, with bounded depth and size, so generated objects validate against it.
"""

from __future__ import annotations

import base64
import string
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from builders import InvalidSpecError
from builders._schema import (
    builtin_schema,
    crd_version_schema,
    definitions,
    resolve_ref,
)

__all__ = [
    "dns_labels",
    "dns_subdomains",
    "from_schema",
    "label_keys",
    "label_maps",
    "label_values",
    "object_metas",
    "owner_references",
    "quantities",
]

_LOWER_ALNUM = string.ascii_lowercase + string.digits
_ALNUM = string.ascii_letters + string.digits


def _bounded_word(
    *, first: str, middle: str, last: str, min_size: int, max_size: int
) -> st.SearchStrategy[str]:
    """Words of ``min_size..max_size`` chars: a ``first`` char, ``middle`` chars, a ``last`` one."""
    if max_size < 1 or min_size > max_size:
        raise ValueError(f"need 1 <= max_size and min_size <= max_size, got {min_size}..{max_size}")
    single = st.sampled_from(first) if min_size <= 1 and set(first) & set(last) else st.nothing()
    if max_size == 1:
        return single.filter(lambda c: c in last)
    longer = st.tuples(
        st.sampled_from(first),
        st.text(alphabet=middle, min_size=max(0, min_size - 2), max_size=max_size - 2),
        st.sampled_from(last),
    ).map("".join)
    return st.one_of(single.filter(lambda c: c in last), longer)


def dns_labels(
    *, min_size: int = 1, max_size: int = 63, rfc1035: bool = False
) -> st.SearchStrategy[str]:
    """RFC 1123 labels (names of Namespaces and most children); ``rfc1035`` makes them start
    with a letter, as Service names must."""
    first = string.ascii_lowercase if rfc1035 else _LOWER_ALNUM
    return _bounded_word(
        first=first,
        middle=_LOWER_ALNUM + "-",
        last=_LOWER_ALNUM,
        min_size=min_size,
        max_size=min(max_size, 63),
    )


def dns_subdomains(*, max_size: int = 253, max_labels: int = 3) -> st.SearchStrategy[str]:
    """RFC 1123 subdomains: up to ``max_labels`` dot-separated labels, at most ``max_size`` long."""
    label = dns_labels(max_size=min(63, max_size))
    return (
        st.lists(label, min_size=1, max_size=max_labels)
        .map(".".join)
        .filter(lambda name: len(name) <= max_size)
    )


def _qualified_names(max_size: int = 63) -> st.SearchStrategy[str]:
    return _bounded_word(
        first=_ALNUM, middle=_ALNUM + "-_.", last=_ALNUM, min_size=1, max_size=max_size
    )


def label_keys(*, prefixed: bool | None = None) -> st.SearchStrategy[str]:
    """Label (and annotation) keys: an optional DNS-subdomain prefix and '/', then a name.

    ``prefixed`` True or False forces or forbids the prefix; None (default) draws both.
    """
    names = _qualified_names(40)
    with_prefix = st.tuples(dns_subdomains(max_size=40, max_labels=2), names).map("/".join)
    if prefixed is None:
        return st.one_of(names, with_prefix)
    return with_prefix if prefixed else names


def label_values(*, allow_empty: bool = True) -> st.SearchStrategy[str]:
    """Label values: at most 63 alphanumerics, '-', '_', '.' with alphanumeric ends (or "")."""
    values = _qualified_names(63)
    return st.one_of(st.just(""), values) if allow_empty else values


def label_maps(*, max_size: int = 4) -> st.SearchStrategy[dict[str, str]]:
    """Label maps of up to ``max_size`` valid keys and values."""
    return st.dictionaries(label_keys(), label_values(), max_size=max_size)


def quantities(*, integers: bool = True) -> st.SearchStrategy[str | int]:
    """Kubernetes quantities: ``"100m"``, ``"1.5Gi"``, ``"2e3"``, ``"7"`` (and bare ints)."""
    suffix = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "E6"])
    number = st.one_of(
        st.integers(min_value=0, max_value=10**6).map(str),
        st.tuples(st.integers(0, 999), st.integers(0, 999)).map(lambda p: f"{p[0]}.{p[1]}"),
    )
    text = st.tuples(number, suffix).map("".join)
    return st.one_of(text, st.integers(min_value=0, max_value=10**6)) if integers else text


def _uids() -> st.SearchStrategy[str]:
    return st.uuids().map(str)


def object_metas(
    *,
    namespaced: bool = True,
    with_uid: bool = True,
    names: st.SearchStrategy[str] | None = None,
    namespaces: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """``metadata`` dicts: a valid name (a DNS label by default), namespace, uid, labels and
    annotations. Pass ``names``/``namespaces`` to draw them from your own strategies."""
    required: dict[str, st.SearchStrategy[Any]] = {
        "name": names if names is not None else dns_labels(max_size=40)
    }
    if namespaced:
        required["namespace"] = namespaces if namespaces is not None else dns_labels(max_size=30)
    if with_uid:
        required["uid"] = _uids()
    optional = {
        "labels": label_maps(),
        "annotations": st.dictionaries(label_keys(), st.text(max_size=30), max_size=3),
    }
    return st.fixed_dictionaries(required, optional=optional)


def owner_references(*, controller: bool | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Owner references to a (made-up) custom-resource parent; ``controller`` fixes the flag."""
    kinds = st.tuples(st.sampled_from(string.ascii_uppercase), _qualified_names(20)).map(
        lambda p: (p[0] + p[1]).replace("-", "").replace(".", "").replace("_", "")
    )
    return st.fixed_dictionaries(
        {
            "apiVersion": st.tuples(
                dns_subdomains(max_size=60), st.sampled_from(["v1", "v1beta1"])
            ).map("/".join),
            "kind": kinds,
            "name": dns_subdomains(max_size=60),
            "uid": _uids(),
            "controller": st.booleans() if controller is None else st.just(controller),
            "blockOwnerDeletion": st.booleans(),
        }
    )


# --- from_schema ---------------------------------------------------------------------------

_SPECIAL_REFS: dict[str, st.SearchStrategy[Any]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": quantities(),
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": st.one_of(
        st.integers(min_value=1, max_value=65535), dns_labels(max_size=15)
    ),
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": st.just("2024-01-02T03:04:05Z"),
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": st.just("2024-01-02T03:04:05.000000Z"),
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": object_metas(namespaced=False),
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": st.just({}),
    "io.k8s.apimachinery.pkg.runtime.RawExtension": st.just({}),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON": st.just({}),
}


class _SchemaWalker:
    """Builds a strategy from a (built-in or structural) schema, bounded in depth and width."""

    def __init__(
        self, *, kubernetes_version: str | None, max_depth: int, max_optional: int, max_items: int
    ) -> None:
        self.kubernetes_version = kubernetes_version
        self.max_depth = max_depth
        self.max_optional = max_optional
        self.max_items = max_items

    def strategy(self, schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name in _SPECIAL_REFS:
                return _SPECIAL_REFS[name]
            return self.strategy(resolve_ref(ref, self.kubernetes_version), depth)
        if "enum" in schema:
            return st.sampled_from([v for v in schema["enum"] if v is not None])
        if schema.get("x-kubernetes-int-or-string"):
            return _SPECIAL_REFS["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
        for combinator in ("oneOf", "anyOf"):
            if combinator in schema:
                return self.strategy(schema[combinator][0], depth)
        types = schema.get("type")
        kind = next((t for t in types if t != "null"), None) if isinstance(types, list) else types
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "string":
            return self._string(schema)
        if kind == "integer":
            return st.integers(
                min_value=int(schema.get("minimum", 0)),
                max_value=int(schema.get("maximum", 1000)),
            )
        if kind == "number":
            return st.floats(
                min_value=float(schema.get("minimum", 0)),
                max_value=float(schema.get("maximum", 1000)),
                allow_nan=False,
            )
        if kind == "boolean":
            return st.booleans()
        return st.just({})  # untyped (preserve-unknown-fields): the empty object is valid

    def _string(self, schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
        if schema.get("format") == "byte":
            return st.binary(max_size=12).map(lambda raw: base64.b64encode(raw).decode())
        if schema.get("format") == "date-time":
            return st.just("2024-01-02T03:04:05Z")
        min_size = int(schema.get("minLength", 0))
        max_size = int(schema.get("maxLength", max(min_size, 16)))
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: min_size <= len(s) <= max_size
            )
        alphabet = string.ascii_letters + string.digits + "-_./:"
        return st.text(alphabet=alphabet, min_size=min_size, max_size=min(max_size, 16))

    def _array(self, schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[list[Any]]:
        min_items = int(schema.get("minItems", 0))
        limit = min_items if depth >= self.max_depth else max(min_items, self.max_items)
        max_items = min(int(schema.get("maxItems", limit)), limit)
        keys = schema.get("x-kubernetes-list-map-keys") or (
            [schema["x-kubernetes-patch-merge-key"]]
            if "x-kubernetes-patch-merge-key" in schema
            else None
        )
        items = self.strategy(schema.get("items") or {}, depth + 1)
        if keys:
            return st.lists(
                items,
                min_size=min_items,
                max_size=max_items,
                unique_by=lambda item: tuple(
                    repr(item.get(k)) if isinstance(item, Mapping) else repr(item) for k in keys
                ),
            )
        return st.lists(items, min_size=min_items, max_size=max_items)

    def _object(self, schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        if not properties:
            values = schema.get("additionalProperties")
            if isinstance(values, Mapping) and depth < self.max_depth:
                return st.dictionaries(
                    label_keys(prefixed=False), self.strategy(values, depth + 1), max_size=2
                )
            return st.just({})
        required_names = [n for n in schema.get("required") or () if n in properties]
        optional_names = sorted(n for n in properties if n not in required_names and n != "status")
        if depth >= self.max_depth:
            optional_names = []
        cache: dict[str, st.SearchStrategy[Any]] = {}

        def prop(name: str) -> st.SearchStrategy[Any]:
            # built lazily and once: wide schemas (PodSpec) stay cheap to draw from
            if name not in cache:
                cache[name] = self.strategy(properties[name], depth + 1)
            return cache[name]

        choices = st.lists(
            st.sampled_from(optional_names or [""]), max_size=self.max_optional, unique=True
        )

        @st.composite
        def objects(draw: st.DrawFn) -> dict[str, Any]:
            out = {name: draw(prop(name)) for name in required_names}
            if optional_names:
                for name in draw(choices):
                    out[name] = draw(prop(name))
            return out

        return objects()


def from_schema(
    kind: str | Mapping[str, Any],
    version: str | None = None,
    *,
    kubernetes_version: str | None = None,
    max_depth: int = 4,
    max_optional: int = 3,
    max_items: int = 2,
    metadata: st.SearchStrategy[dict[str, Any]] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of one kind that validate against its schema (status left out).

    ``kind`` is a built-in kind (``"Deployment"``) with ``version`` its apiVersion (``"apps/v1"``;
    found from the schemas when omitted), or a CustomResourceDefinition object (dict) with
    ``version`` one of its version names (the storage version when omitted). Depth and width are
    bounded: below ``max_depth`` only required fields, at most ``max_optional`` optional fields
    per object and ``max_items`` per list. ``metadata`` overrides :func:`object_metas`.
    """
    walker = _SchemaWalker(
        kubernetes_version=kubernetes_version,
        max_depth=max_depth,
        max_optional=max_optional,
        max_items=max_items,
    )
    if isinstance(kind, Mapping):
        api_version, kind_name, schema = _crd_identity(kind, version)
    else:
        api_version = version or _find_api_version(kind, kubernetes_version)
        found = builtin_schema(api_version, kind, kubernetes_version=kubernetes_version)
        if found is None:
            raise InvalidSpecError(
                field="kind", value=f"{api_version}/{kind}", reason="no built-in schema"
            )
        kind_name, schema = kind, found
    properties = dict(schema.get("properties") or {})
    body = {
        name: walker.strategy(sub, 1)
        for name, sub in properties.items()
        if name not in ("apiVersion", "kind", "metadata", "status")
    }
    required_body = [n for n in schema.get("required") or () if n in body]
    optional_body = {n: s for n, s in body.items() if n not in required_body}
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just(api_version),
            "kind": st.just(kind_name),
            "metadata": metadata if metadata is not None else object_metas(),
            **{n: body[n] for n in required_body},
        },
        optional=optional_body,
    )


def _crd_identity(
    crd: Mapping[str, Any], version: str | None
) -> tuple[str, str, Mapping[str, Any]]:
    spec = crd.get("spec") or {}
    schema = crd_version_schema(crd, version)
    versions = spec.get("versions") or []
    name = version or next((v["name"] for v in versions if v.get("storage")), None)
    group, kind_name = spec.get("group"), (spec.get("names") or {}).get("kind")
    if not (group and kind_name and name):
        raise InvalidSpecError(
            field="spec.group/names.kind", value=crd.get("metadata"), reason="incomplete CRD"
        )
    return f"{group}/{name}", str(kind_name), schema


def _find_api_version(kind: str, kubernetes_version: str | None) -> str:
    for candidate in _api_versions_of(kind, kubernetes_version):
        if builtin_schema(candidate, kind, kubernetes_version=kubernetes_version) is not None:
            return candidate
    raise InvalidSpecError(field="kind", value=kind, reason="no built-in kind of that name")


def _api_versions_of(kind: str, kubernetes_version: str | None) -> list[str]:
    gvks = [
        gvk
        for definition in definitions(kubernetes_version)["$defs"].values()
        for gvk in definition.get("x-kubernetes-group-version-kind") or ()
        if gvk.get("kind") == kind
    ]
    ranked = sorted(
        gvks, key=lambda g: ("beta" in g["version"] or "alpha" in g["version"], g["version"])
    )
    return [f"{g['group']}/{g['version']}" if g["group"] else g["version"] for g in ranked]
