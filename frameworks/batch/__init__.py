"""The bundled batch framework: queues, priorities, gangs, backfill, arrays, dependencies."""
