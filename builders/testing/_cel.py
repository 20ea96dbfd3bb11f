"""CEL rules of spec fields (``x-kubernetes-validations``) evaluated for the Hypothesis kit, so
that ``spec_instances`` draws only specs the API server admits.

The evaluator is ``cel-python`` (``celpy``, in the ``testing`` extra), as the embedded API
server's; this module is the kit's own reading (``builders`` may not import the server). A rule
sees the field's value as JSON as ``self``; a transition rule (one naming ``oldSelf``) runs only
on updates, so it is not evaluated here. A rule that cannot be compiled or evaluated fails, as
the API server refuses such a value. Compiled programs are cached by rule text.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Any

__all__ = ["prepare", "rule_problem"]

_OLD = re.compile(r"\boldSelf\b")


def _celpy() -> Any:
    try:
        import celpy
        import celpy.adapter
    except ImportError as err:  # pragma: no cover - the testing extra brings it
        raise ImportError(
            "spec_instances: evaluating CEL rules needs cel-python (pip install "
            "'operator-toolkit[testing]')") from err
    return celpy


@functools.lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    environment = _celpy().Environment()
    return environment.program(environment.compile(rule))


def prepare(rule: str) -> None:
    """Compile ``rule`` now (cached), outside any test run: celpy's parser raises the recursion
    limit, which Hypothesis warns about when it happens inside a test. A rule that does not
    compile is left to :func:`rule_problem` to report."""
    if not _OLD.search(rule):
        with contextlib.suppress(Exception):
            _program(rule)


def rule_problem(rule: str, value: Any) -> str | None:
    """None when ``rule`` holds for ``value`` (JSON) as ``self`` (or is a transition rule);
    else why not: "false", or the compile or evaluation error's text."""
    if _OLD.search(rule):
        return None
    activation = {"self": _celpy().adapter.json_to_cel(value)}
    try:
        result = _program(rule).evaluate(activation)
    except Exception as err:  # a rule that fails to compile or evaluate refuses, as on a server
        return str(err)
    if isinstance(result, Exception):  # celpy returns CELEvalError values
        return str(result)
    return None if bool(result) else "false"
