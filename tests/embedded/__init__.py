"""Tests of the embedded area."""
