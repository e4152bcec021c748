"""The HTTP toolkit both apps use (the compute API and the metadata service).

It knows requests, errors and Nova's conventions, never a domain: nothing here imports a
domain package, so every domain's routes can use it without importing ``cloudseed.api``.
"""
