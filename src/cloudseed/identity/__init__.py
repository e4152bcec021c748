"""Signed instance identity (docs/identity.md): the keys cloudseed signs with, kept in the API
database and rotated by ``cloudseed identity rotate``; what guests are handed (EC2's identity
document and its signatures, the OpenStack tree's identity token, built by ``claims`` and
``keys``, both IO-free); and what relying parties verify them with (``api``: certificates,
JWKS, OpenID discovery, no authentication).
"""
