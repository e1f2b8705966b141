"""Local stand-ins for the outside world: a Plex server and the Anthropic Messages API."""
