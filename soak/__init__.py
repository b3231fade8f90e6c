"""``make soak``: ``cdc run`` for half an hour under a steady mixed workload, with sink
outages, a killed connector and a PostgreSQL restart in the middle; what grows, how far
behind it falls and how fast it catches up (``python -m soak``)."""
