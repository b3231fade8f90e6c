"""Scale tests: many tables."""
