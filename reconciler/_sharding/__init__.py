"""Sharding: pure shard decisions, the assigner, a replica's shard Lease and adoption.

Modules: ``decisions`` (pure: rendezvous hashing, membership, drains; ``Sharding``), ``assigner``
(the elected assigner), ``shards`` (a replica's shard Lease, drain acknowledgement, adoption),
``foreign`` (named watches of objects another owner holds that a parent waits on).

Private: the public names are re-exported by ``reconciler`` and its public
modules.
"""
