"""The embedded Kubernetes API server (filled by issue 3)."""
