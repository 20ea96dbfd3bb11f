"""Pure desired-state builders (filled by issue 4)."""
