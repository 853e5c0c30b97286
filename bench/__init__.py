"""Benchmarks for supervisors and ask-another, compared side by side with their references."""
