"""Tests of the reconciler area."""
