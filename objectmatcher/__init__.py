"""Three-way comparison of desired and live Kubernetes objects (filled by issue 2)."""
