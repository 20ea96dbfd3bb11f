"""The Thanos example operator: a composite operator written only with the toolkit's public names.

``crds`` holds the ``Thanos`` and ``ServiceMonitor`` CustomResourceDefinitions, ``builders`` the
pure builders of each component's children, ``operator`` the ``Operator`` definition and the
watch that turns ServiceMonitors on once their CRD is served, ``__main__`` the process that runs
both (``python -m examples.thanos``), ``samples.yaml`` two sample parents, and ``demo`` the
end-to-end run behind ``make demo`` (see ``docs/demo.md``). Nothing here is installed with the
toolkit.
"""
