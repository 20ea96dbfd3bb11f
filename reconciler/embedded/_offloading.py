"""Requests that call webhooks run on worker threads, so the event loop never waits on one.

Why: a webhook that hangs for its ``timeoutSeconds`` must not stop the server. kube-apiserver
calls webhooks on the goroutine of the request that needs them; unrelated requests are
answered meanwhile and concurrent calls run in parallel. Here every request is first run on the
event loop, holding the store's lock (as before, and as fast); if it needs a webhook call
(admission, or a CRD's conversion), ``_calling`` stops it with ``MustNotBlock`` before
anything is sent or stored, and ``Offloader`` runs it again on one of ``WORKERS`` threads. A
worker holds the store's lock while it computes and releases it during each call, so reads and
writes of other clients, and other webhook calls, go on; a write whose object changed while
its call was in flight is run again from the start (``StaleWrite``, at most ``ATTEMPTS``
times, then 409), as kube-apiserver's ``GuaranteedUpdate`` retries.

Bounds: at most ``WORKERS`` calls wait at once (each reads at most 3 MiB of answer and ends at
its ``timeoutSeconds``); requests beyond wait in line, with their bodies already read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from reconciler.embedded._calling import (
    MustNotBlock,
    StaleWrite,
    calling_under,
    forbid_calls_here,
)

__all__ = ["ATTEMPTS", "WORKERS", "Offloader"]

log = logging.getLogger("reconciler.embedded")

WORKERS = 16
"""How many requests may wait on webhook calls at once."""

ATTEMPTS = 5
"""How often a write whose object changed during its webhook calls is run again."""

T = TypeVar("T")


class Offloader:
    """Runs a request's work on the event loop, or on a worker when it calls a webhook."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def start(self) -> None:
        """On the server's event loop: mark it, and make the workers (started when needed)."""
        forbid_calls_here()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=WORKERS, thread_name_prefix="optk-embedded-webhook")

    def stop(self) -> None:
        """Drop the work not started; calls in flight end at their timeouts."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def here(self, work: Callable[[], T]) -> T:
        """``work`` on the event loop, holding the store's lock; ``MustNotBlock`` if it would
        call a webhook."""
        with self._lock:
            return work()

    async def run(self, work: Callable[[], T], *, offload: bool = False) -> T:
        """``work``'s result: run here, or (when it calls a webhook, or ``offload``: a request
        that may store before its first call) on a worker. ``work`` must start afresh each
        time it is called."""
        if not offload:
            try:
                return self.here(work)
            except MustNotBlock:
                pass
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self._worked, work)

    def submit(self, work: Callable[[], object]) -> concurrent.futures.Future[object]:
        """``work`` on a worker (the garbage collector's writes that call webhooks)."""
        assert self._pool is not None
        return self._pool.submit(self._worked, work)

    def _worked(self, work: Callable[[], T]) -> T:
        for attempt in range(ATTEMPTS):
            with calling_under(self._lock):
                try:
                    return work()
                except StaleWrite as stale:
                    if attempt == ATTEMPTS - 1:
                        raise stale.conflict from None
        raise AssertionError("unreachable")
