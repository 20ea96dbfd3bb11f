"""The error tree of ``objectmatcher``: every exception the package raises is defined here.

::

    ObjectMatcherError (Exception)              root: ``except ObjectMatcherError`` catches all
    ├── InvalidObjectError (ValueError)          an input is not a usable object (.field, .reason)
    ├── InvalidOptionError (ValueError)          a MatchOption from an unusable path (.path)
    ├── InvalidQuantityError (ValueError)        not a resource quantity (.value, .reason)
    ├── UnsupportedVersionError (ValueError)     no schemas for a Kubernetes version (.available)
    └── PatchError (ValueError)                  a patch cannot be applied (.patch_type, .reason)
        └── UnsupportedPatchError                the patch type does not apply to this object

One root, :class:`ObjectMatcherError`; misuse (bad objects, bad options, unknown versions) also
subclasses ``ValueError`` so callers that only know the standard library still catch it. Patch
failures carry the patch type and the reason, so the embedded API server can map them to the
status codes a real server answers with (422 for a failed patch, 415 for a strategic merge patch of
a kind without a built-in schema).
"""

from __future__ import annotations

__all__ = [
    "InvalidObjectError",
    "InvalidOptionError",
    "InvalidQuantityError",
    "ObjectMatcherError",
    "PatchError",
    "UnsupportedPatchError",
    "UnsupportedVersionError",
]


class ObjectMatcherError(Exception):
    """Root of every error raised by ``objectmatcher``."""


class InvalidObjectError(ObjectMatcherError, ValueError):
    """An input is not a usable Kubernetes object.

    ``field`` names the missing or wrong field (dotted, e.g. ``"metadata.name"``; ``""`` when the
    input is not a mapping at all) and ``reason`` says what is wrong with it.
    """

    def __init__(self, reason: str, *, field: str, object_ref: str = "") -> None:
        self.reason = reason
        self.field = field
        self.object_ref = object_ref
        where = f" ({object_ref})" if object_ref else ""
        at = f" at {field!r}" if field else ""
        super().__init__(f"invalid object{where}{at}: {reason}")


class InvalidOptionError(ObjectMatcherError, ValueError):
    """An option was built from an unusable path (``path`` is the rejected path)."""

    def __init__(self, reason: str, *, path: object) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"invalid field path {path!r}: {reason}")


class UnsupportedVersionError(ObjectMatcherError, ValueError):
    """No patch metadata is shipped for the requested Kubernetes version."""

    def __init__(self, version: str, *, available: tuple[str, ...]) -> None:
        self.version = version
        self.available = available
        super().__init__(
            f"no Kubernetes schemas for version {version!r}; available: {', '.join(available)}"
        )


class PatchError(ObjectMatcherError, ValueError):
    """A patch could not be applied to an object.

    ``patch_type`` is the media type of the patch and ``reason`` what went wrong (a failed JSON
    patch ``test`` operation, a path that does not exist, a malformed directive, ...).
    """

    def __init__(self, reason: str, *, patch_type: str, object_ref: str = "") -> None:
        self.reason = reason
        self.patch_type = patch_type
        self.object_ref = object_ref
        where = f" to {object_ref}" if object_ref else ""
        super().__init__(f"cannot apply {patch_type}{where}: {reason}")


class UnsupportedPatchError(PatchError):
    """The patch type does not apply to this object.

    Raised for an unknown media type, or for a strategic merge patch of a kind that has no built-in
    schema (custom resources): a real API server answers 415 Unsupported Media Type there.
    """


class InvalidQuantityError(ObjectMatcherError, ValueError):
    """A value is not a Kubernetes resource quantity; ``value`` is the input, ``reason`` why."""

    def __init__(self, value: object, *, reason: str) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"invalid quantity {value!r}: {reason}")
