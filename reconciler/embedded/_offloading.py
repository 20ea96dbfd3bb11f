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
its ``timeoutSeconds``); up to ``WAITING`` more requests wait in line for a worker, with their
bodies already read; beyond, a request that calls a webhook is answered 429 with
``Retry-After: 1``, as kube-apiserver's max-in-flight limit answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
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
from reconciler.embedded._statuses import ApiStatusError, status_body

__all__ = ["ATTEMPTS", "WAITING", "WORKERS", "Offloader"]

log = logging.getLogger("reconciler.embedded")

WORKERS = 16
"""How many requests may wait on webhook calls at once."""

WAITING = 400
"""How many more requests that call webhooks may wait for a worker (then 429)."""

ATTEMPTS = 5
"""How often a write whose object changed during its webhook calls is run again."""

T = TypeVar("T")


class Offloader:
    """Runs a request's work on the event loop, or on a worker when it calls a webhook."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._offloaded = 0  # requests on a worker or waiting for one (the event loop's count)

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
        if self._offloaded >= WORKERS + WAITING:
            raise ApiStatusError(429, status_body(
                429, "TooManyRequests", message="Too many requests, please try again later.",
                details={"retryAfterSeconds": 1}), headers={"Retry-After": "1"})
        assert self._pool is not None
        loop = asyncio.get_running_loop()
        self._offloaded += 1  # until the work ends, even if its client went away meanwhile
        worked = self._pool.submit(self._worked, work)
        worked.add_done_callback(lambda _: self._count_down(loop))
        return await asyncio.wrap_future(worked)

    def _count_down(self, loop: asyncio.AbstractEventLoop) -> None:
        with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
            loop.call_soon_threadsafe(self._ended)

    def _ended(self) -> None:
        self._offloaded -= 1

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
