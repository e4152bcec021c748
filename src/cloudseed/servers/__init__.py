"""Servers: instances in the cells; creation, operations, live keys, history, the API."""
