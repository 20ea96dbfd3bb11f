"""The reliability and security suite (issue 12): faults, crashes, failover, bad input, the
embedded server under hostile clients; each phase adds what it tried to ``_counts``."""
