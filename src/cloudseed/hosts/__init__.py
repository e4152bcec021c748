"""Compute hosts: the agents that run guests, their services records, capacity and liveness,
the scheduler that places new servers on them, and the os-services / os-hypervisors API."""
