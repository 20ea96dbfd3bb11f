"""A pod's network for tests: a network namespace of its own, joined to the host by a veth pair.

``pod_network()`` creates the namespace ``optk-pod-<pid><n>``, a veth pair (the host end in
this namespace, the pod end in the new one), the pod address on the pod end, a default route
to the host end, and loopback up: what a CNI plugin gives a pod. A process started with
``PodNetwork.argv(...)`` (``ip netns exec``) runs there; the host reaches it at ``pod_ip``, as
the kubelet's probes do. ``PodNetwork.listen`` opens a listening socket inside the namespace
from this process (``setns`` on one short-lived thread), so that the test can serve the pod
something at an address of the pod's own (nothing is bound in the host's namespace). Everything
is removed on exit, processes left in the namespace included. Where namespaces cannot be
created (no root, no ``ip``), the test is skipped with one line.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import attrs
import pytest

__all__ = ["Forwarder", "PodNetwork", "pod_network", "terminate"]

_CLONE_NEWNET = 0x40000000
_counter = itertools.count()
T = TypeVar("T")


def _ip(*args: str, namespace: str | None = None) -> subprocess.CompletedProcess[str]:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return subprocess.run([*prefix, "ip", *args], capture_output=True, text=True, timeout=20,
                          check=False)


def _must(result: subprocess.CompletedProcess[str]) -> None:
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(result.args)}: {result.stderr.strip()}")


@attrs.frozen
class PodNetwork:
    """A network namespace with the pod address ``pod_ip`` (the host end is ``host_ip``)."""

    name: str
    pod_ip: str
    host_ip: str

    def argv(self, command: Sequence[str]) -> list[str]:
        """``command`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *command]

    def inside(self, call: Callable[[], T]) -> T:
        """``call()`` on a thread that has joined the namespace (sockets it creates live
        there); the thread leaves it before it ends."""
        libc = ctypes.CDLL(None, use_errno=True)
        result: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                with open("/proc/thread-self/ns/net", "rb") as home, \
                        open(f"/run/netns/{self.name}", "rb") as target:
                    if libc.setns(target.fileno(), _CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns into the pod's namespace")
                    try:
                        result.append(call())
                    finally:
                        libc.setns(home.fileno(), _CLONE_NEWNET)
            except BaseException as error:  # handed to the caller
                failure.append(error)

        thread = threading.Thread(target=run, name="optk-netns", daemon=True)
        thread.start()
        thread.join(timeout=10)
        if failure:
            raise failure[0]
        if not result:
            raise TimeoutError("the namespace thread did not finish")
        return result[0]

    def listen(self, host: str, port: int) -> socket.socket:
        """A listening TCP socket bound to ``host:port`` inside the namespace."""

        def bind() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
            return sock

        return self.inside(bind)

    @contextmanager
    def forward(self, host: str, port: int, target: tuple[str, int], *,
                source: str | None = None) -> Iterator[Forwarder]:
        """Inside the namespace, ``host:port`` leads to ``target`` in the host's namespace;
        ``source``, the host address the forwarded connections come from (a loopback address
        of the pod's own, say, so the API server's audit log tells the pods apart)."""
        forwarder = Forwarder(self.listen(host, port), target, source=source)
        try:
            yield forwarder
        finally:
            forwarder.close()


class Forwarder:
    """Connections to a socket listening inside the pod's namespace, forwarded to ``target``
    in this (the host's) namespace: what kube-proxy does for the ``kubernetes`` Service.
    ``stall`` stops relaying (connections stay open, bytes wait on both sides, new ones are
    accepted and go nowhere) until ``resume``: a link that went dead without a reset. Every
    loop ends once ``close`` is called (accept and reads time out every 0.2 s)."""

    def __init__(self, listener: socket.socket, target: tuple[str, int], *,
                 source: str | None = None) -> None:
        self._listener = listener
        self._listener.settimeout(0.2)
        self._target = target
        self._source = None if source is None else (source, 0)
        self._closed = threading.Event()
        self._stalled = threading.Event()
        self._threads = [threading.Thread(target=self._accept, name="optk-forward",
                                          daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                inside, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                outside = socket.create_connection(self._target, timeout=5,
                                                   source_address=self._source)
            except OSError:
                inside.close()
                continue
            for source, sink in ((inside, outside), (outside, inside)):
                thread = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
                self._threads.append(thread)
                thread.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(0.2)
        try:
            while not self._closed.is_set():
                if self._stalled.is_set():
                    self._closed.wait(0.1)
                    continue
                try:
                    data = source.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def stall(self) -> None:
        """Stop relaying until ``resume``."""
        self._stalled.set()

    def resume(self) -> None:
        """Relay again (what waited goes on)."""
        self._stalled.clear()

    def close(self) -> None:
        """Stop accepting and forwarding; wait (bounded) for the threads."""
        self._closed.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=2)


def terminate(process: subprocess.Popen[Any], grace: float = 40.0) -> int:
    """SIGTERM, as the kubelet stops a pod; SIGKILL after ``grace`` seconds; the exit code."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=10)


def _free_subnet() -> tuple[str, str]:
    """A /30 in 10.213.0.0/16 that no address of this host uses: (host end, pod end)."""
    used = _ip("-o", "-4", "addr", "show").stdout + _ip("-4", "route", "show").stdout
    for _ in range(50):
        third, fourth = random.randrange(256), random.randrange(0, 256, 4)
        prefix = f"10.213.{third}."
        if prefix not in used:
            return f"{prefix}{fourth + 1}", f"{prefix}{fourth + 2}"
    raise RuntimeError("no free 10.213.x.y/30 for the pod network")


def _kill_left(name: str) -> None:
    """End the processes still in namespace ``name`` (all started by this test), bounded."""
    pids = [int(p) for p in _ip("netns", "pids", name).stdout.split()]
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline and _ip("netns", "pids", name).stdout.split():
        time.sleep(0.05)


@contextmanager
def pod_network() -> Iterator[PodNetwork]:
    """A pod's network namespace for the block (see the module docstring); skips the test in
    one line where namespaces cannot be created."""
    tag = f"{os.getpid() % 100000}{next(_counter) % 100}"
    name, host_if, pod_if = f"optk-pod-{tag}", f"optkh{tag}", f"optkp{tag}"
    try:
        created = _ip("netns", "add", name)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"network namespaces cannot be created here: {error}")
    if created.returncode != 0:
        pytest.skip(f"network namespaces cannot be created here: {created.stderr.strip()}")
    try:
        host_ip, pod_ip = _free_subnet()
        _must(_ip("link", "add", host_if, "type", "veth", "peer", "name", pod_if, "netns", name))
        _must(_ip("addr", "add", f"{host_ip}/30", "dev", host_if))
        _must(_ip("link", "set", host_if, "up"))
        _must(_ip("addr", "add", f"{pod_ip}/30", "dev", pod_if, namespace=name))
        _must(_ip("link", "set", pod_if, "up", namespace=name))
        _must(_ip("link", "set", "lo", "up", namespace=name))
        _must(_ip("route", "add", "default", "via", host_ip, namespace=name))
        yield PodNetwork(name=name, pod_ip=pod_ip, host_ip=host_ip)
    finally:
        _kill_left(name)
        _ip("link", "del", host_if)  # takes its peer with it
        _ip("netns", "del", name)
