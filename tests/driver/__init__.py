"""Tests of the driver area."""
