"""Agora framework client library: driver, offer cache, demand/gang helpers, placement, fake master."""
