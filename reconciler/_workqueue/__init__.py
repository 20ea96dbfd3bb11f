"""The work queue: deduplicating queue, rate limiters, backoff.

Modules: ``queues`` (``WorkQueue``, ``TokenBucket``, ``ExponentialBackoff``).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
