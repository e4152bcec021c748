"""The metadata service: each guest's bootstrap data over HTTP, in the OpenStack and EC2 trees
cloud-init reads.

IO-free core: ``versions`` (the trees' versions), ``facts`` (the guest's view of an instance
record), ``render`` (documents) and ``tree`` (which document a path names). Around it:
``store`` (documents held in memory, dropped through the cells' change feed), ``identify`` (who
is asking), ``tokens`` (session tokens), ``loading`` (records from the cells), ``delivery``
(live keys: the keys a record serves, and recording that the guest got them) and ``app`` (the
ASGI hot path). The password a guest posts is stored by ``servers.password``.
"""
