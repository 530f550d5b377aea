"""The `agora` command line."""
