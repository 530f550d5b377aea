"""The elastic deep-learning framework: jobs whose worker count moves between a minimum and a
maximum while training continues (membership generations, a shard queue, a parameter server and
checkpoints in a per-job coordinator; the EDL fulfillment policy across jobs). See README.md."""
