"""Sharding: pure shard decisions, the assigner, a replica's shard Lease and adoption.

Private: the public names are re-exported by ``reconciler`` and its public
modules."""
