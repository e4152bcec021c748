"""Per-server metadata options (2.109): whether and how a guest may reach the metadata
service, as EC2's instance metadata options; project defaults for new servers; the token-less
access audit. ``options`` is the IO-free core."""
