"""How ``make demo`` shows itself: a live view on a terminal, plain short lines elsewhere.

On a terminal (and with ``rich`` installed: the ``demo`` extra) the demo draws a live screen: the
step being run, a tree per parent of its children with kind, state (as built, missing,
differs, being deleted) and the last action the operator reported for it, the repair latency of
every finished step, and the latest progress lines. Off a terminal (CI, a pipe, the tests) it
prints the same progress as plain lines of at most ``WIDTH`` characters, long ones wrapped. This
module also runs ``optk plan`` for a changed spec (``plan_lines``) and keeps the demo's server
and operator up for ``--keep-running`` (``keep_running``). The demo's logic stays in
``examples.thanos.demo``; this module only renders what the demo hands it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

import attrs
import yaml

WIDTH = 120
"""The longest plain line."""

_ROOT = Path(__file__).resolve().parents[2]
_EVENT_CHILD = re.compile(r"(\w+)\.[\w./-]+ [\w-]+/([\w.-]+)")


def fit(line: str, width: int = WIDTH) -> list[str]:
    """``line`` as lines of at most ``width`` characters (continuations indented under it)."""
    if len(line) <= width:
        return [line]
    indent = " " * min(len(line) - len(line.lstrip()) + 4, width // 2)
    return textwrap.wrap(line, width=width, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False)


@attrs.frozen(kw_only=True)
class ChildView:
    """One child in the tree."""

    kind: str
    name: str
    state: str
    """``as built``, ``missing``, ``differs``, ``absent`` or ``deleting``."""


@attrs.frozen(kw_only=True)
class ParentView:
    """One parent and its children, as the cluster holds them."""

    name: str
    ready: str
    children: tuple[ChildView, ...] = ()


Snapshot = Callable[[], Sequence[ParentView]]


class View(Protocol):
    """What the demo calls to show its progress."""

    def line(self, text: str) -> None:
        """A progress line."""

    def step(self, name: str) -> None:
        """A step starts."""

    def done(self, name: str, seconds: float, ok: bool) -> None:
        """A step finished after ``seconds``."""

    def event(self, message: str) -> None:
        """An Event the operator recorded on a parent."""

    def close(self) -> None:
        """The demo ends: stop drawing."""


class PlainView:
    """Plain lines of at most ``WIDTH`` characters."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str) -> None:
        """Print ``text`` wrapped to ``WIDTH``."""
        print("\n".join(fit(text)), file=self.out, flush=True)

    def step(self, name: str) -> None:
        """Nothing: the step's result line says it."""

    def done(self, name: str, seconds: float, ok: bool) -> None:
        """Nothing: the step's result line says it."""

    def event(self, message: str) -> None:
        """Nothing: the demo prints Events as lines."""

    def close(self) -> None:
        """Nothing to stop."""


def last_actions(messages: Sequence[str]) -> dict[tuple[str, str], str]:
    """``(kind, name) -> action`` from the operator's Event messages, latest last
    (``"Created 2 children: Deployment.apps/v1 demo/a, Service.v1 demo/a"``)."""
    actions: dict[tuple[str, str], str] = {}
    for message in messages:
        reason, _, rest = message.partition(" ")
        for kind, name in _EVENT_CHILD.findall(rest):
            actions[(kind, name)] = reason.lower()
    return actions


class LiveView:
    """The terminal view, drawn by ``rich``; refreshes the tree from ``snapshot`` in a thread."""

    def __init__(self, out: TextIO, snapshot: Snapshot, *, every: float = 0.5) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=out)
        self.snapshot = snapshot
        self.every = every
        self.current = "starting"
        self.lines: list[str] = []
        self.latencies: list[tuple[str, float, bool]] = []
        self.events: list[str] = []
        self.parents: Sequence[ParentView] = ()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._live = Live(console=self.console, get_renderable=self.render,
                          refresh_per_second=4, transient=False)
        self._live.start()
        self._thread = threading.Thread(target=self._poll, name="demo-view", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.every):
            try:
                parents = self.snapshot()
            except Exception:  # the server stops at the end; the last tree stays
                continue
            with self._lock:
                self.parents = parents

    def line(self, text: str) -> None:
        """Keep ``text`` among the latest lines."""
        with self._lock:
            self.lines = [*self.lines, text][-10:]

    def step(self, name: str) -> None:
        """Show ``name`` as the step being run."""
        with self._lock:
            self.current = name

    def done(self, name: str, seconds: float, ok: bool) -> None:
        """Record the step's repair latency."""
        with self._lock:
            self.latencies = [*self.latencies, (name, seconds, ok)]

    def event(self, message: str) -> None:
        """Remember the Event for the children's last action."""
        with self._lock:
            self.events = [*self.events, message]

    def render(self) -> Any:
        """The screen: step, trees, latencies, latest lines."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text
        from rich.tree import Tree

        with self._lock:
            parents, lines = list(self.parents), list(self.lines)
            latencies, actions = list(self.latencies), last_actions(self.events)
            current = self.current
        parts: list[Any] = [Text(f"step: {current}", style="bold")]
        for parent in parents:
            tree = Tree(f"[bold]Thanos {parent.name}[/]  Ready={parent.ready}")
            for child in parent.children:
                style = "green" if child.state == "as built" else "yellow"
                action = actions.get((child.kind, child.name), "-")
                tree.add(f"{child.kind:<14} {child.name:<34} [{style}]{child.state:<9}[/] "
                         f"last: {action}")
            parts.append(tree)
        if latencies:
            table = Table("step", "repair latency", title=None, box=None)
            for name, seconds, ok in latencies[-8:]:
                table.add_row(name, f"{seconds * 1000:.0f} ms" + ("" if ok else "  FAILED"))
            parts.append(table)
        parts.extend(Text(line) for line in lines)
        return Group(*parts)

    def close(self) -> None:
        """Stop refreshing; the last screen stays."""
        self._stop.set()
        self._thread.join(2.0)
        self._live.stop()


def tree_snapshot(demo: Any, names: Sequence[str]) -> Callable[[], list[ParentView]]:
    """A ``Snapshot`` of the demo's parents ``names``: each child the builders produce, and
    whether the server holds it as built (the demo's own convergence rule)."""
    from builders import run_builders
    from examples.thanos import builders as thanos
    from objectmatcher import calculate_patch

    def snapshot() -> list[ParentView]:
        views = []
        for name in names:
            parent = demo.parent(name)
            if parent is None:
                continue
            ready = next((c.get("status", "?") for c in (parent.get("status") or {}).get(
                "conditions") or () if c.get("type") == "Ready"), "?")
            children = []
            for desired, state in run_builders(
                    thanos.build_with_inputs(parent, demo.inputs_of(parent)), parent=parent):
                kind, child = desired["kind"], desired["metadata"]["name"]
                live = demo.live(desired["apiVersion"], kind, child)
                if state.is_absent:
                    if live is None:
                        continue
                    shown = "deleting"
                elif live is None:
                    shown = "missing"
                else:
                    shown = "as built" if calculate_patch(live, desired).is_empty else "differs"
                children.append(ChildView(kind=kind, name=child, state=shown))
            views.append(ParentView(name=name, ready=str(ready), children=tuple(children)))
        return views

    return snapshot


def make_view(out: TextIO, snapshot: Snapshot) -> View:
    """A ``LiveView`` on a terminal when ``rich`` is installed, else a ``PlainView``."""
    if out.isatty() and os.environ.get("TERM") != "dumb":
        try:
            return LiveView(out, snapshot)
        except ImportError:
            pass
    return PlainView(out)


def plan_lines(parent: Mapping[str, Any], *, kubeconfig: str, timeout: float = 60.0) -> list[str]:
    """The output of ``optk plan examples.thanos.operator:operator -f <parent>`` (run as a
    command, as a user would), or one line saying why there is none."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "changed.yaml"
        path.write_text(yaml.safe_dump(dict(parent)))
        done = subprocess.run(
            [sys.executable, "-m", "reconciler", "plan", "examples.thanos.operator:operator",
             "-f", str(path), "--kubeconfig", kubeconfig],
            cwd=_ROOT, env={**os.environ, "PYTHONPATH": str(_ROOT)}, capture_output=True,
            text=True, timeout=timeout, check=False)
    if done.returncode not in (0, 1):
        return [f"optk plan failed ({done.returncode}): {done.stderr.strip()[-200:]}"]
    return done.stdout.rstrip().splitlines()


def trace_lines(name: str, *, namespace: str, kubeconfig: str,
                timeout: float = 60.0) -> list[str]:
    """The output of ``optk trace examples.thanos.operator:operator thanos/<name>`` (run as a
    command, as a user would), or one line saying why there is none."""
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "trace", "examples.thanos.operator:operator",
         f"thanos/{name}", "-n", namespace, "--kubeconfig", kubeconfig],
        cwd=_ROOT, env={**os.environ, "PYTHONPATH": str(_ROOT)}, capture_output=True,
        text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        return [f"optk trace failed ({done.returncode}): {done.stderr.strip()[-200:]}"]
    return done.stdout.rstrip().splitlines()


def keep_running(say: Callable[[str], None], *, url: str, kubeconfig: str,
                 namespace: str) -> None:
    """Print how to reach the server, then wait for Ctrl-C or SIGTERM."""
    say(f"kept running: the API server at {url}, the operator in this process")
    say(f"  export KUBECONFIG={kubeconfig}")
    say(f"  kubectl get thanos,deployments,statefulsets,services,events -n {namespace}")
    say("  press Ctrl-C (or send SIGTERM) to stop")
    stopped = threading.Event()
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        while not stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    say("stopping")
