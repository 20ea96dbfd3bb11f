"""The Thanos example operator written with kopf, as an experienced kopf user would write it.

Run it as ``kopf run --standalone -A -m benchmarks.peers.kopf_thanos.handlers`` (``KUBECONFIG``
names the cluster): importing ``handlers`` registers the kopf handlers; ``children`` holds the
pure part (what to create, patch or delete), shared by every handler and importable without
kopf. Children come from the same pure builders as the toolkit's example
(``examples.thanos.builders``), so both operators produce identical objects. This package belongs
to the benchmarks only: kopf is a benchmark extra, and nothing in ``objectmatcher``,
``builders`` or ``reconciler`` imports it.
"""
