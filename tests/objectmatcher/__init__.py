"""Tests of the objectmatcher area."""
