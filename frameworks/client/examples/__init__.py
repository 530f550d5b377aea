"""Example frameworks written with the client library."""
