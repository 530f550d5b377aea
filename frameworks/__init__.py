"""Agora frameworks: the client library, the batch and elastic frameworks, and the `agora` CLI."""
