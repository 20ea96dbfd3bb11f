"""Peer operators for ``benchmarks.compare``: the example operator rewritten with other frameworks.

Each peer is a benchmark-only program (its framework is installed by the ``bench`` extra and is
never imported by the toolkit's packages); it reuses ``examples.thanos.builders`` so every peer
builds byte-for-byte the same children as the toolkit's own example.
"""
