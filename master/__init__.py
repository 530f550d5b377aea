"""The Agora master: scheduler API (Mesos v1 compatible), agent channel, allocator, registry."""
