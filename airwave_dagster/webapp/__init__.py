"""The web surface of `airwave serve`: who sent a request, and what Dagster lets them do."""
