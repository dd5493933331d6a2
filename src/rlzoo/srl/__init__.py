"""State representations: how env observations become the states a policy sees."""
