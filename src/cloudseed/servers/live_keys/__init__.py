"""Live keys (2.106): the keys a server has while it runs, and what its guest holds."""
