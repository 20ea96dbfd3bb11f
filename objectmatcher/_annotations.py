"""The last-applied annotation: what the toolkit set last time, recorded compactly and safely.

The three-way merge needs the original's *keys* (and the merge keys of list items), never its leaf
values (DESIGN.md section 3). So the recorded copy replaces every value of a Secret's ``data`` and
``stringData`` with a fixed marker (no digest either: a digest of a short password is a dictionary
attack away from it) and every string leaf longer than :data:`LARGE_LEAF_CHARS` with a digest
marker. The copy is canonical JSON (sorted keys), zlib-compressed and base64-encoded behind a
format prefix, so any object the API accepts gets an annotation far under the 256 KiB limit.

Reading never raises and is bounded: an absent, corrupt (bad prefix, base64, zlib or JSON),
oversized (text over :data:`MAX_ANNOTATION_CHARS`, or decompressing past :data:`MAX_RECORD_BYTES`:
decompression stops there), too deeply nested (over :data:`MAX_RECORD_DEPTH`, found by a
non-recursive pre-scan before any JSON parsing) or non-object annotation reads as "no original"
together with the reason and a status (:data:`ORIGINAL_ABSENT`, :data:`ORIGINAL_UNREADABLE`).
Decoding is cached by the annotation text (small records only, so the cache stays small), so a
live object read from an informer cache is decoded once, not on every comparison.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from objectmatcher._errors import InvalidObjectError
from objectmatcher._patches import deep_copy
from objectmatcher._types import KubeObject

__all__ = [
    "LARGE_LEAF_CHARS",
    "LAST_APPLIED_ANNOTATION",
    "MAX_ANNOTATION_CHARS",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_DEPTH",
    "ORIGINAL_ABSENT",
    "ORIGINAL_FOREIGN",
    "ORIGINAL_RECORDED",
    "ORIGINAL_UNREADABLE",
    "REDACTED",
    "clear_annotation_cache",
    "compact",
    "decode_annotation",
    "encode_annotation",
    "encode_compacted",
    "get_last_applied",
    "is_secret",
    "object_ref",
    "read_original",
    "set_last_applied",
    "validate_object",
    "without_annotation",
]

#: The annotation holding the recorded original (DESIGN.md section 2).
LAST_APPLIED_ANNOTATION: Final = "optk.dev/last-applied"
#: String leaves longer than this are recorded as a digest marker, not verbatim.
LARGE_LEAF_CHARS: Final = 256
#: What a Secret value is recorded (and shown in diffs) as.
REDACTED: Final = "optk:redacted"

#: Annotation text longer than this is not read (a real server caps all annotations of an
#: object at 256 KiB together).
MAX_ANNOTATION_CHARS: Final = 512 * 1024
#: Decompression stops past this many bytes; a larger record is not read.
MAX_RECORD_BYTES: Final = 4 * 1024 * 1024
#: A record nested deeper than this (objects and lists) is not read.
MAX_RECORD_DEPTH: Final = 100

#: ``PatchResult.original_status``: the annotation was read and records this object.
ORIGINAL_RECORDED: Final = "recorded"
#: ``PatchResult.original_status``: the object has no last-applied annotation.
ORIGINAL_ABSENT: Final = "absent"
#: ``PatchResult.original_status``: the annotation is corrupt, oversized or too deeply nested.
ORIGINAL_UNREADABLE: Final = "unreadable"
#: ``PatchResult.original_status``: the annotation records another kind or name.
ORIGINAL_FOREIGN: Final = "foreign"

_PREFIX: Final = "optk1:"
_DIGEST_PREFIX: Final = "optk:sha256:"
_SECRET_FIELDS: Final = ("data", "stringData")


def object_ref(obj: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` of an object, for messages."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {where}{meta.get('name', '?')}"


def validate_object(obj: Any, *, role: str = "object") -> None:
    """Raise :class:`InvalidObjectError` unless ``obj`` has ``apiVersion``, ``kind``, a name."""
    if not isinstance(obj, Mapping):
        raise InvalidObjectError(
            f"{role} must be a mapping (a JSON object), not {type(obj).__name__}", field=""
        )
    for field in ("apiVersion", "kind"):
        if not isinstance(obj.get(field), str) or not obj[field]:
            raise InvalidObjectError(f"{role} has no {field}", field=field,
                                     object_ref=object_ref(obj))
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidObjectError(f"{role} has no metadata", field="metadata",
                                 object_ref=object_ref(obj))
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise InvalidObjectError(f"{role} has no metadata.name", field="metadata.name",
                                 object_ref=object_ref(obj))


def is_secret(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a core ``v1`` Secret (its data is never shown or recorded)."""
    return obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1"


def without_annotation(obj: KubeObject) -> KubeObject:
    """``obj`` without :data:`LAST_APPLIED_ANNOTATION` (``obj`` itself when it has none)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or LAST_APPLIED_ANNOTATION not in annotations:
        return obj
    rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    new_meta = {k: v for k, v in meta.items() if k != "annotations"}  # type: ignore[union-attr]
    if rest:
        new_meta["annotations"] = rest
    return {**obj, "metadata": new_meta}


def _digest(text: str) -> str:
    return _DIGEST_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:32]


def _compact_value(value: Any) -> Any:
    if isinstance(value, str):
        return _digest(value) if len(value) > LARGE_LEAF_CHARS else value
    if isinstance(value, Mapping):
        return {key: _compact_value(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_compact_value(item) for item in value]
    return value


def compact(obj: KubeObject) -> dict[str, Any]:
    """What the annotation records of ``obj``: Secret values as markers, large leaves digested,
    ``null`` map values dropped (``null`` and absent are the same)."""
    result: dict[str, Any] = _compact_value(obj)
    if is_secret(obj):
        for field in _SECRET_FIELDS:
            values = obj.get(field)
            if isinstance(values, Mapping):
                result[field] = {key: REDACTED for key in values}
    return result


def encode_annotation(obj: KubeObject) -> str:
    """The annotation text recording ``obj`` (without any annotation of its own)."""
    return encode_compacted(compact(without_annotation(obj)))


def encode_compacted(record: Mapping[str, Any]) -> str:
    """The annotation text of a record :func:`compact` already made."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _PREFIX + base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")


_CACHE_SIZE: Final = 512
_CACHED_RECORD_BYTES: Final = 64 * 1024
_cache: OrderedDict[str, tuple[Mapping[str, Any] | None, str | None]] = OrderedDict()
_cache_lock = threading.Lock()


def decode_annotation(text: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """``(original, None)`` from annotation text, or ``(None, reason)`` when it is unreadable.

    Never raises; bounded in time and memory (see the module docstring). The returned mapping is
    shared by the cache: callers must not mutate it.
    """
    with _cache_lock:
        found = _cache.get(text)
        if found is not None:
            _cache.move_to_end(text)
            return found
    result, size = _decode(text)
    if size <= _CACHED_RECORD_BYTES:
        with _cache_lock:
            _cache[text] = result
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return result


def clear_annotation_cache() -> None:
    """Forget every decoded annotation (benchmarks measure the cold path with it)."""
    with _cache_lock:
        _cache.clear()


def _decode(text: str) -> tuple[tuple[Mapping[str, Any] | None, str | None], int]:
    """:func:`decode_annotation` uncached, and the record's decompressed size."""
    if not text.startswith(_PREFIX):
        return (None, "the last-applied annotation has an unknown format"), 0
    if len(text) > MAX_ANNOTATION_CHARS:
        return (None, f"the last-applied annotation is over {MAX_ANNOTATION_CHARS} characters"), 0
    try:
        raw = base64.b64decode(text[len(_PREFIX):].encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return (None, "the last-applied annotation is not valid base64"), 0
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(raw, MAX_RECORD_BYTES + 1)
        complete = inflater.eof
    except (zlib.error, MemoryError):
        return (None, "the last-applied annotation is not valid compressed data"), 0
    if len(data) > MAX_RECORD_BYTES:
        return (None, f"the last-applied annotation decompresses to over {MAX_RECORD_BYTES} "
                      "bytes"), len(data)
    if not complete:
        return (None, "the last-applied annotation is not valid compressed data"), len(data)
    try:
        if _too_deep(data):
            return (None, f"the last-applied annotation is nested over {MAX_RECORD_DEPTH} "
                          "levels deep"), len(data)
        original = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return (None, "the last-applied annotation is not valid JSON"), len(data)
    if not isinstance(original, dict):
        return (None, "the last-applied annotation does not record an object"), len(data)
    return (original, None), len(data)


_ESCAPED: Final = re.compile(rb"\\.", re.DOTALL)
_STRING: Final = re.compile(rb'"[^"]*"')
_NOT_BRACKETS: Final = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_KINDS: Final = bytes.maketrans(b"{}", b"[]")


def _too_deep(data: bytes) -> bool:
    """Whether JSON ``data`` nests objects and lists over :data:`MAX_RECORD_DEPTH` levels.

    No recursion and no parsing: strings are cut out, the brackets kept, and the innermost pairs
    removed one level per pass (C-speed ``bytes.replace``), at most ``MAX_RECORD_DEPTH`` passes.
    Unbalanced brackets are left to the JSON parser, which rejects them, unless what stays open
    is itself too deep (the parser would recurse into it before failing).
    """
    brackets = _STRING.sub(b"", _ESCAPED.sub(b"", data)).translate(_BRACKET_KINDS, _NOT_BRACKETS)
    for _ in range(MAX_RECORD_DEPTH):
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return brackets.count(b"[") > MAX_RECORD_DEPTH
        brackets = shorter
    return b"[]" in brackets


_NO_ANNOTATION: Final = "no last-applied annotation"


def _annotation_text(obj: KubeObject) -> str | None:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    text = annotations.get(LAST_APPLIED_ANNOTATION)
    return text if isinstance(text, str) else None


def read_original(obj: KubeObject) -> tuple[Mapping[str, Any] | None, str | None, str]:
    """The recorded original of ``obj`` (shared, do not mutate) or ``None`` and the reason, and
    the status (:data:`ORIGINAL_RECORDED`, :data:`ORIGINAL_ABSENT` or
    :data:`ORIGINAL_UNREADABLE`)."""
    text = _annotation_text(obj)
    if text is None:
        return None, _NO_ANNOTATION, ORIGINAL_ABSENT
    original, reason = decode_annotation(text)
    return original, reason, ORIGINAL_RECORDED if original is not None else ORIGINAL_UNREADABLE


def set_last_applied(obj: KubeObject) -> dict[str, Any]:
    """A new dict: ``obj`` with :data:`LAST_APPLIED_ANNOTATION` recording ``obj`` itself.

    Raises :class:`InvalidObjectError` for a non-object or one without apiVersion, kind or name.
    """
    validate_object(obj)
    result: dict[str, Any] = deep_copy(obj)
    meta = result["metadata"]
    annotations = dict(meta.get("annotations") or {})
    annotations[LAST_APPLIED_ANNOTATION] = encode_annotation(obj)
    meta["annotations"] = annotations
    return result


def get_last_applied(obj: KubeObject) -> dict[str, Any] | None:
    """The original recorded on ``obj`` (a new dict), or ``None`` when absent or unreadable.

    Values the annotation does not keep come back as markers: Secret values as
    :data:`REDACTED`, string leaves over :data:`LARGE_LEAF_CHARS` as ``"optk:sha256:..."``.
    Never raises on a corrupt annotation.
    """
    if not isinstance(obj, Mapping):
        return None
    original, _reason, _status = read_original(obj)
    return deep_copy(original) if original is not None else None
