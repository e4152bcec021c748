"""The drop-in for nova-api-metadata (``cloudseed nova-metadata``): a Nova cloud's guests
served from Nova's own databases, with Nova's documents, Nova's identification and Nova's
options, through cloudseed's metadata listener and guest cache.

It reuses what does not depend on whose instances these are: the listener (``serve.py``,
``coalescing.py``), the guest store with its single-flight batched loads and change handling
(``metadata/store.py``, fed by a ``GuestSource`` of its own here), the proxy and address
identification (``metadata/identify.py``), session tokens, ETags, refusals, vendordata and
metrics. What differs is where guests come from (Nova's schema, ``schema.py``, ``loading.py``)
and how their documents are rendered: Nova's trees, to the byte where Nova's are stable
(``render.py``, IO-free, from an ``InstanceFacts`` snapshot).
"""
