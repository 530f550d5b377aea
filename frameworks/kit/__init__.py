"""The framework kit: what the batch and elastic services share. ``effects`` is the vocabulary
their pure cores speak to their shells; ``host`` is the shell they both run in (the master
connection, the driver, the store, the HTTP API and the loop that executes effects). See
README.md."""
