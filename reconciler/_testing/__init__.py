"""The testing kit's private parts: ``machine`` (the Hypothesis state machine over a whole
operator that ``reconciler.testing.operator_machine`` returns). Tests only; production code
never imports it."""
