"""Object-name rules of a kube-apiserver, with its exact error messages.

A real server validates ``metadata.name`` per kind: most kinds need a DNS-1123 subdomain,
Namespaces a DNS-1123 label, Services a DNS-1035 label, RBAC objects a path segment. The
messages below are the ones ``k8s.io/apimachinery/pkg/util/validation`` produces, so the causes of
a 422 match the recordings (``errors.json``) word for word. This module only checks strings; which
rule applies to which kind is decided by the strategies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "NameRule",
    "dns1035_label",
    "dns1123_label",
    "dns1123_subdomain",
    "go_quote",
    "path_segment_name",
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


def go_quote(value: str) -> str:
    """A string as Go's ``%q`` prints it (the form inside ``Invalid value: "..."``)."""
    return json.dumps(value, ensure_ascii=False)


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
