"""cloudseed-osc: the openstack CLI's commands for changing a server's user data on cloudseed,
and for its SSH host keys.

Three cliff command hooks, registered as entry points in ``openstack.cli.server_set``,
``openstack.cli.server_reboot`` and ``openstack.cli.server_rebuild`` (see pyproject.toml):

* ``openstack server set --user-data FILE | --no-user-data SERVER``
* ``openstack server reboot --hard --user-data FILE | --no-user-data SERVER``
* ``openstack server rebuild --user-data FILE``: refused below microversion 2.57, where the
  API has no user data in a rebuild (the stock client lets it through from 2.54).

And commands of its own, in ``openstack.compute.v2``:

* ``openstack server known-hosts SERVER``: ``known_hosts`` lines for the server's host keys.
* ``openstack server key list | add | remove | set SERVER`` and ``openstack project key list |
  set PROJECT-ID``: live keys (2.106), with ``--key-name`` made repeatable, plus
  ``--key-expires``, on ``openstack server create`` and ``openstack server rebuild`` (hooks in
  ``openstack.cli.server_create`` and ``openstack.cli.server_rebuild``).
* ``openstack server wait --ready SERVER``: until the guest reports its boot done (2.110).

And ``openstack server set --metadata-option KEY=VALUE`` (2.109), a second hook on ``server
set``.
"""

from cloudseed_osc._server_key_names import CreateKeyNamesHook, RebuildKeyNamesHook
from cloudseed_osc._server_known_hosts import ServerKnownHosts
from cloudseed_osc._server_reboot import RebootUserDataHook
from cloudseed_osc._server_rebuild import RebuildUserDataHook
from cloudseed_osc._server_set import SetUserDataHook

__all__ = [
    "CreateKeyNamesHook",
    "RebootUserDataHook",
    "RebuildKeyNamesHook",
    "RebuildUserDataHook",
    "ServerKnownHosts",
    "SetUserDataHook",
]
