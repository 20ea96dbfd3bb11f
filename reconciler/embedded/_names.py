"""Object-name rules of a kube-apiserver, with its exact error messages.

A real server validates ``metadata.name`` per kind: most kinds need a DNS-1123 subdomain,
Namespaces a DNS-1123 label, Services a DNS-1035 label, RBAC objects a path segment. The
messages below are the ones ``k8s.io/apimachinery/pkg/util/validation`` produces, so the causes of
a 422 match the recordings (``errors.json``) word for word. This module only checks strings; which
rule applies to which kind is decided by the strategies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from objectmatcher._validation import go_quote

__all__ = [
    "NameRule",
    "dns1035_label",
    "dns1123_label",
    "dns1123_subdomain",
    "go_quote",
    "path_segment_name",
    "qualified_name",
    "validate_metadata",
    "validate_metadata_name",
]

NameRule = Callable[[str, bool], list[str]]
"""``rule(name, prefix) -> messages``; ``prefix`` is true for a ``generateName`` prefix."""

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN)
_DNS1035_RE = re.compile(_DNS1035)

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_SUBDOMAIN}')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    f"for validation is '{_LABEL}')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    f"'abc-123', regex used for validation is '{_DNS1035}')"
)


def _mask_trailing_dash(name: str, prefix: bool) -> str:
    # A generateName prefix may end with '-': the server appends random characters to it.
    if prefix and len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def _check(name: str, *, max_len: int, regex: re.Pattern[str], message: str) -> list[str]:
    errors = []
    if len(name) > max_len:
        errors.append(f"must be no more than {max_len} characters")
    if not regex.fullmatch(name):
        errors.append(message)
    return errors


def dns1123_subdomain(name: str, prefix: bool = False) -> list[str]:
    """Messages for a name that is not a DNS-1123 subdomain (most kinds); empty when valid."""
    name = _mask_trailing_dash(name, prefix)
    return _check(name, max_len=253, regex=_SUBDOMAIN_RE, message=_SUBDOMAIN_MSG)


def dns1123_label(name: str, prefix: bool = False) -> list[str]:
    """Messages for a name that is not a DNS-1123 label (Namespace); empty when valid."""
    name = _mask_trailing_dash(name, prefix)
    return _check(name, max_len=63, regex=_LABEL_RE, message=_LABEL_MSG)


def dns1035_label(name: str, prefix: bool = False) -> list[str]:
    """Messages for a name that is not a DNS-1035 label (Service); empty when valid."""
    name = _mask_trailing_dash(name, prefix)
    return _check(name, max_len=63, regex=_DNS1035_RE, message=_DNS1035_MSG)


_QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_RE = re.compile(_QUALIFIED)
_LABEL_VALUE = f"({_QUALIFIED})?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE)
_QUALIFIED_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QUALIFIED}')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE}')"
)
_STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")
TOTAL_ANNOTATION_SIZE = 256 * 1024


def qualified_name(value: str) -> list[str]:
    """Messages for a label/annotation key that is not ``[prefix/]name``; empty when valid."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED_MSG} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {m}" for m in dns1123_subdomain(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_RE.fullmatch(name):
        errors.append(f"name part {_QUALIFIED_MSG}")
    return errors


def _label_value(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(_LABEL_VALUE_MSG)
    return errors


def validate_metadata(obj: Mapping[str, Any]) -> list[dict[str, str]]:
    """The 422 causes for labels, annotations, finalizers and owner references (any kind)."""
    meta = obj.get("metadata") or {}
    causes: list[dict[str, str]] = []
    labels = meta.get("labels") or {}
    for key in sorted(labels):
        causes.extend(_invalid("metadata.labels", key, m) for m in qualified_name(key))
        value = str(labels[key] if labels[key] is not None else "")
        causes.extend(_invalid("metadata.labels", value, m) for m in _label_value(value))
    annotations = meta.get("annotations") or {}
    for key in sorted(annotations):
        causes.extend(
            _invalid("metadata.annotations", key, m) for m in qualified_name(key.lower())
        )
    size = sum(len(k) + len(str(v or "")) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE:
        causes.append({
            "reason": "FieldValueTooLong",
            "message": f"Too long: must have at most {TOTAL_ANNOTATION_SIZE} bytes",
            "field": "metadata.annotations",
        })
    for finalizer in meta.get("finalizers") or ():
        finalizer = str(finalizer)
        messages = qualified_name(finalizer)
        causes.extend(_invalid("metadata.finalizers", finalizer, m) for m in messages)
        if not messages and "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            causes.append(_invalid(
                "metadata.finalizers", finalizer,
                "name is neither a standard finalizer name nor is it fully qualified",
            ))
    causes.extend(_owner_reference_causes(meta.get("ownerReferences") or ()))
    return causes


def _owner_reference_causes(references: Any) -> list[dict[str, str]]:
    causes = []
    field = "metadata.ownerReferences"
    controllers = []
    for ref in references:
        if not isinstance(ref, Mapping):
            continue
        api_version = str(ref.get("apiVersion") or "")
        if not api_version.rpartition("/")[2]:
            causes.append(_invalid(f"{field}.apiVersion", api_version,
                                   "version must not be empty"))
        for key, what in (("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not ref.get(key):
                causes.append(_invalid(f"{field}.{key}", str(ref.get(key) or ""),
                                       f"{what} must not be empty"))
        if ref.get("controller"):
            controllers.append(f"{ref.get('kind')}/{ref.get('name')}")
    if len(controllers) > 1:
        causes.append({
            "reason": "FieldValueInvalid",
            "message": "Only one reference can have Controller set to true. Found \"true\" in "
                       f"references for {controllers[0]} and {controllers[1]}",
            "field": field,
        })
    return causes


def path_segment_name(name: str, prefix: bool = False) -> list[str]:
    """Messages for a name unusable as a URL path segment (RBAC kinds); empty when valid."""
    errors = []
    if not prefix and name in (".", ".."):
        errors.append(f"may not be '{name}'")
    for illegal in ("/", "%"):
        if illegal in name:
            errors.append(f"may not contain '{illegal}'")
    return errors


def validate_metadata_name(obj: Mapping[str, Any], rule: NameRule) -> list[dict[str, str]]:
    """The 422 causes for ``metadata.name``/``generateName`` of an object about to be created."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    generate_name = str(meta.get("generateName") or "")
    causes: list[dict[str, str]] = []
    if generate_name:
        causes.extend(
            _invalid("metadata.generateName", generate_name, message)
            for message in rule(generate_name, True)
        )
    if not name:
        if not generate_name:
            causes.append({
                "reason": "FieldValueRequired",
                "message": "Required value: name or generateName is required",
                "field": "metadata.name",
            })
        return causes
    causes.extend(_invalid("metadata.name", name, message) for message in rule(name, False))
    return causes


def _invalid(field: str, value: str, message: str) -> dict[str, str]:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {go_quote(value)}: {message}",
        "field": field,
    }
