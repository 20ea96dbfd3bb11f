"""The error tree of ``builders``: every exception the package raises is defined here.

::

    BuilderError (Exception)                root: ``except BuilderError`` catches all
    ├── BuilderFailedError                  a builder raised or returned no usable object
    │                                       (.builder, .parent, .reason; the cause is chained)
    ├── ChartError                          a Helm chart cannot be made into builders (.chart)
    │   ├── ChartLoadError (OSError)            the chart cannot be read (no such path, not a chart)
    │   ├── ChartRenderError (ValueError)       a template fails to render or renders no object
    │   │                                       (.template, .line, .reason)
    │   ├── ChartHookError (ValueError)         a hook the toolkit does not run (.template, .hook)
    │   └── HelmEngineMissingError (ImportError)  the engine (the ``helm`` extra) is not installed
    ├── InputUnavailableError               a declared input cannot be read (.ref, .reason)
    │   ├── InputMissingError (LookupError)      it does not exist
    │   └── InputForbiddenError (PermissionError)  the operator may not read it
    ├── DependencyError (ValueError)        components' dependencies declared wrongly
    │   └── DependencyCycleError            a cycle in depends_on (.cycle: ("a", "b", "a"))
    ├── InvalidSpecError (ValueError)       a field value is invalid, before any cluster I/O
    │   │                                   (.field, .value, .reason)
    │   ├── SchemaValidationError           an object does not validate against its kind's schema
    │   ├── SpecFieldError                  a parent's spec does not convert to its spec class
    │   │                                   (.parent, .field, .value, .reason)
    │   └── UnknownKindError                no schema for this apiVersion/kind
    └── UnsupportedSpecTypeError (TypeError)  a spec class declares what no CRD schema can say
                                            (.spec, .field, .reason)

Errors carry data (the builder, the parent, the field, the value) so that callers and the testing
kit can report them precisely; their messages name the object and the field.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BuilderError",
    "BuilderFailedError",
    "ChartError",
    "ChartHookError",
    "ChartLoadError",
    "ChartRenderError",
    "DependencyCycleError",
    "DependencyError",
    "HelmEngineMissingError",
    "InputForbiddenError",
    "InputMissingError",
    "InputUnavailableError",
    "InvalidSpecError",
    "SchemaValidationError",
    "SpecFieldError",
    "UnknownKindError",
    "UnsupportedSpecTypeError",
]


class BuilderError(Exception):
    """Root of every error raised by ``builders``."""


class BuilderFailedError(BuilderError):
    """A builder raised, or returned something that is not an object with identity.

    ``builder`` is the builder's readable name, ``parent`` the parent's ``kind/namespace/name``
    (or None when unknown) and ``reason`` what went wrong; the original exception, if any, is the
    ``__cause__``.
    """

    def __init__(self, *, builder: str, parent: str | None, reason: str) -> None:
        self.builder = builder
        self.parent = parent
        self.reason = reason
        where = f" for parent {parent}" if parent else ""
        super().__init__(f"builder {builder}{where} failed: {reason}")


class ChartError(BuilderError):
    """A Helm chart cannot be made into builders (``builders.helm``); ``chart`` names it (its
    ``name-version`` once loaded, else the path it was read from)."""

    def __init__(self, message: str, *, chart: str) -> None:
        self.chart = chart
        super().__init__(f"chart {chart}: {message}")


class ChartLoadError(ChartError, OSError):
    """The chart cannot be read: no such directory or archive, or not a chart (no
    ``Chart.yaml``, a broken archive)."""


class ChartRenderError(ChartError, ValueError):
    """A template of the chart fails to render (a ``required`` value missing, a template
    error, an invalid ``values.schema.json``), or renders something that is not an object.

    ``template`` is the template's path inside the chart (``mychart/templates/x.yaml``; None
    when Helm names none), ``line`` its line (None when unknown) and ``reason`` Helm's message.
    """

    def __init__(self, *, chart: str, template: str | None, line: int | None,
                 reason: str) -> None:
        self.template = template
        self.line = line
        self.reason = reason
        where = "" if template is None else (
            f"{template}:{line}: " if line is not None else f"{template}: ")
        super().__init__(f"{where}{reason}", chart=chart)


class ChartHookError(ChartError, ValueError):
    """A template is a Helm hook the toolkit does not run (only ``pre-install`` and
    ``pre-upgrade`` hooks run, as a component the rest depends on; ``test`` hooks are left
    out). ``template`` is the template's path, ``hook`` the annotation's value."""

    def __init__(self, *, chart: str, template: str, hook: str) -> None:
        self.template = template
        self.hook = hook
        super().__init__(
            f"{template}: hook {hook!r} is not run by the toolkit (pre-install and pre-upgrade "
            f"hooks are; name the others in skip_hooks to leave them out)", chart=chart)


class HelmEngineMissingError(ChartError, ImportError):
    """Helm's engine is not installed: ``builders.helm`` renders with Helm's own Go code through
    ``helm-python-sdk``, in the ``helm`` extra (``pip install 'operator-toolkit[helm]'``)."""


class InputUnavailableError(BuilderError):
    """A declared input (``builders.Inputs``) a builder requires cannot be read.

    ``ref`` is the input's ``ObjectRef`` and ``reason`` the condition reason the parent reports
    (``InputMissing``, ``InputForbidden``); the message names the reference, never a value.
    The reconcile treats it as permanent: not retried, the parent is reconciled again the
    moment the input changes.
    """

    reason = "InputUnavailable"

    def __init__(self, *, ref: Any, detail: str) -> None:
        self.ref = ref
        super().__init__(f"input {ref} {detail}")


class InputMissingError(InputUnavailableError, LookupError):
    """A required input does not exist (condition reason ``InputMissing``)."""

    reason = "InputMissing"

    def __init__(self, *, ref: Any) -> None:
        super().__init__(ref=ref, detail="does not exist")


class InputForbiddenError(InputUnavailableError, PermissionError):
    """The operator may not read a required input (condition reason ``InputForbidden``)."""

    reason = "InputForbidden"

    def __init__(self, *, ref: Any) -> None:
        super().__init__(ref=ref, detail="may not be read (forbidden)")


class DependencyError(BuilderError, ValueError):
    """Dependencies between components are declared wrongly (a name declared twice with
    different ``depends_on``, an unknown component, a rule that is not callable)."""


class DependencyCycleError(DependencyError):
    """The components' ``depends_on`` form a cycle; ``cycle`` names it, first name repeated
    last (``("a", "b", "a")``)."""

    def __init__(self, *, cycle: tuple[str, ...]) -> None:
        self.cycle = cycle
        super().__init__(f"dependency cycle between components: {' -> '.join(cycle)}")


class InvalidSpecError(BuilderError, ValueError):
    """A name, label, quantity or other field value is invalid; raised before any cluster I/O.

    ``field`` is the dotted path of the field (for example ``metadata.labels["app"]``) and
    ``value`` the rejected value.
    """

    def __init__(self, *, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {field}: {value!r}: {reason}")


class SchemaValidationError(InvalidSpecError):
    """An object does not validate against the schema of its kind; names the field path."""


class UnknownKindError(InvalidSpecError):
    """No schema is known for this apiVersion/kind (and no CRD schema was given)."""


class SpecFieldError(InvalidSpecError):
    """A parent's spec does not convert to its spec class (or a spec value breaks a constraint).

    ``parent`` is the parent's ``Kind namespace/name`` (None for a value built in code),
    ``field`` the JSON path (``spec.query.replicas``), ``value`` the rejected value.
    """

    def __init__(self, *, parent: str | None, field: str, value: Any, reason: str) -> None:
        self.parent = parent
        super().__init__(field=field, value=value, reason=reason)
        if parent:
            self.args = (f"{parent}: {self.args[0]}",)


class UnsupportedSpecTypeError(BuilderError, TypeError):
    """A spec class declares something no structural CRD schema can say (a ``set``, a
    ``dict[int, str]``, a union of two types, an annotation that does not resolve).

    ``spec`` is the class, ``field`` the field's path (empty for the class itself).
    """

    def __init__(self, *, spec: str, field: str, reason: str) -> None:
        self.spec = spec
        self.field = field
        self.reason = reason
        where = f" field {field}" if field else ""
        super().__init__(f"spec class {spec}{where}: {reason}")
