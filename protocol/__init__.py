"""Everything that crosses a process boundary in Agora: messages, the codec, Resources, ids,
task states, RecordIO framing, and the small async plumbing (clock, service lifecycle, backoff)."""
