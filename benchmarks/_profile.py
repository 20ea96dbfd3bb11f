"""Summaries of py-spy profiles: where an operator's CPU goes, as a short text table.

``summarize(raw_text)`` reads py-spy's ``--format raw`` output (collapsed stacks, one
``frame;frame;... count`` per line, root first) and returns the top functions by self samples
(the frame on top of the stack), by inclusive samples (anywhere on the stack, counted once per
stack; thread and import plumbing left out), and the self samples grouped by package (the first
part of each frame's file path), each with its share of all samples. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter

_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^():]+)(?::\d+)?\)$")


def _function(frame: str) -> tuple[str, str]:
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip(), ""
    return match["function"], match["file"]


def _package(file: str) -> str:
    parts = file.split("/")
    if len(parts) == 1:
        return parts[0].removesuffix(".py") or "?"
    return parts[0] if parts[0] not in ("site-packages", "lib") else parts[1]


def _plumbing(file: str) -> bool:
    """Frames on nearly every stack (thread start, module running, the import machinery)."""
    return file in ("threading.py", "runpy.py", "<frozen runpy>") or file.startswith("<frozen")


def summarize(raw: str, *, top: int = 25, title: str = "") -> str:
    """The text summary of one raw py-spy profile (see the module docstring)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_function(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        total += count
        function, file = frames[-1]
        own[f"{function} ({file})"] += count
        packages[_package(file)] += count
        for name in {f"{fn} ({fl})" for fn, fl in frames if not _plumbing(fl)}:
            inclusive[name] += count
    if total == 0:
        return f"{title}\nno samples\n"
    lines = [title, f"{total} samples", ""] if title else [f"{total} samples", ""]
    for heading, counter in (
        ("self samples by package (top of stack)", packages),
        ("self samples by function", own),
        ("inclusive samples by function (anywhere on the stack)", inclusive),
    ):
        lines.append(heading)
        for name, count in counter.most_common(top):
            lines.append(f"  {100 * count / total:5.1f}%  {name}")
        lines.append("")
    return "\n".join(lines)
