"""Kubernetes' reference client-go controller (``sample-controller``) and the same operator
written with the toolkit, for ``benchmarks.vs_go``.

``foo-crd.yaml`` is the Foo CRD of the Go peer (upstream
``artifacts/examples/crd-status-subresource.yaml``, copied unchanged). ``operator`` is the Foo
operator written from the toolkit's docs (docs/tutorial.md, docs/driver.md): a Foo owns a
Deployment named ``spec.deploymentName`` with ``spec.replicas`` replicas of ``nginx:latest``, and
``status.availableReplicas`` mirrors the Deployment's. The Go binary itself is not here: it is
found as the real control plane's binaries are found (``reconciler.envtest.find_binary``).
"""
