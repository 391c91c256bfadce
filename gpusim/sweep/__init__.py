"""Scenario files -> points -> results: validation, the point cache, runners and executors."""
