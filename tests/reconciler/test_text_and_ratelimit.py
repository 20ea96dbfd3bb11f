"""The one bound on quoted text and the one WARNING per cause per interval, as pure functions
(issue 35, items 5 and 6; the servers' side is in tests/driver/test_user_values.py and
tests/driver/test_prune_blocked.py)."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from reconciler._base.ratelimit import CauseLimiter
from reconciler._base.text import MESSAGE_LIMIT, QUOTE_LIMIT, bounded, quoted
from reconciler.testing import VirtualClock


@given(st.text(max_size=3 * MESSAGE_LIMIT), st.integers(min_value=40, max_value=MESSAGE_LIMIT))
def test_bounded_keeps_short_text_and_cuts_long_text_saying_how_much(text: str,
                                                                     limit: int) -> None:
    cut = bounded(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    else:
        kept, _, rest = cut.rpartition(" ... (")
        assert text.startswith(kept)
        assert rest == f"{len(text) - len(kept)} more characters)"


def test_quoted_is_a_bounded_repr() -> None:
    assert quoted("yes") == "'yes'"
    assert len(quoted("x" * 200_000)) == QUOTE_LIMIT


def test_one_warning_per_cause_per_interval_and_the_next_counts_the_lowered() -> None:
    clock = VirtualClock()
    limiter = CauseLimiter(clock, interval=60.0)
    assert limiter.level("a") == (logging.WARNING, "")
    assert limiter.level("b") == (logging.WARNING, "")  # another cause: its own
    for _ in range(5):
        clock.advance(10.0)
        assert limiter.level("a") == (logging.DEBUG, "")
    clock.advance(10.0)
    level, suffix = limiter.level("a")
    assert level == logging.WARNING
    assert "5 more like it" in suffix
    assert limiter.level("a") == (logging.DEBUG, "")
