"""operator-toolkit test suite."""
