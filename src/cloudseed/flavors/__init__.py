"""Flavors: the registry of server sizes in the API database and its read-only routes."""
