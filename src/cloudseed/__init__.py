"""cloudseed: key pairs, servers and their bootstrap data, Nova-compatible."""
