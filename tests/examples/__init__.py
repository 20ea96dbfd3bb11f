"""Tests of the example operators in ``examples/``."""
