"""The Thanos example operator with a short watch inactivity timeout, for the stall test.

``Operator.watching.inactivity_timeout`` (130 s by default: two of the API server's one-minute
bookmark intervals and a margin) is an ``Operator`` setting, so this module wraps
``examples.thanos.operator:operator`` with ``attrs.evolve``, public names only, and reads the
bound from ``OPTK_TEST_WATCH_SILENCE`` (seconds, default 3). Run it as
``python -m reconciler run tests.reliability.stall_operator:operator``.
"""

from __future__ import annotations

import os

import attrs

from examples.thanos.operator import operator as thanos_operator
from reconciler import Watching

WATCH_SILENCE = float(os.environ.get("OPTK_TEST_WATCH_SILENCE", "3"))
"""How long the operator's watches may send nothing before they are replaced."""

operator = attrs.evolve(thanos_operator, watching=Watching(inactivity_timeout=WATCH_SILENCE))
"""The example operator, quick to give up on a silent watch."""
