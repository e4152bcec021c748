"""Servers: instances and everything recorded about them, in the cell databases.

The package is cut by behaviour, so a change lands in one sub-package:

- ``creation/``: a create request, from the body the route checked to the cell rows of each new
  server (``request``, ``service``, ``rows``, ``ports``, ``destinations``, ``scheduler_hints``,
  ``pinning``, ``personality``).
- ``lifecycle/``: an existing server changed: the operations queued for the compute agents
  (``service``, with its ``rebuild_request``, ``queue``, ``power_sync``) and the edits that
  need none (``edits``, ``password``, ``security_groups``), its console and how to SSH in
  (``console``, ``ssh_access``).
- ``live_keys/``: the keys a server has while it runs (2.106): what a request asks for
  (``sets``, IO-free), the stored lists (``store``), what the guest holds (``delivery``), the
  keys of a whole project (``project``).
- ``history/``: what happened to a server: the versioned bootstrap history (``bootstrap``) and
  Nova's instance actions (``actions``, ``action_views``).
- ``api/``: the routes, one module per resource.

Shared by all of them at the top: ``models`` (the tables), ``records`` (reading and writing
instance rows), ``states``, ``errors``, ``system_metadata``, ``hostnames``, ``quota``,
``listing``, and the API's ``schemas`` and ``views``.
"""
