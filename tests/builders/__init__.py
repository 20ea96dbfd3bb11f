"""Tests of the builders area."""
