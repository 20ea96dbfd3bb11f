"""The informer caches: list+watch informers, the indexed store, label selectors, the cache reader,
the own-write recorder.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
