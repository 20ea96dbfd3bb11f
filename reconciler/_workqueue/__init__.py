"""The work queue: deduplicating queue, rate limiters, backoff.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
