"""The Agora agent: capacity, task processes, reliable status updates, recovery, oversubscription."""
