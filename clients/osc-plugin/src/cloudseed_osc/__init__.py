"""cloudseed-osc: the openstack CLI's commands for changing a server's user data on cloudseed,
and for its SSH host keys.

Three cliff command hooks, registered as entry points in ``openstack.cli.server_set``,
``openstack.cli.server_reboot`` and ``openstack.cli.server_rebuild`` (see pyproject.toml):

* ``openstack server set --user-data FILE | --no-user-data SERVER``
* ``openstack server reboot --hard --user-data FILE | --no-user-data SERVER``
* ``openstack server rebuild --user-data FILE``: refused below microversion 2.57, where the
  API has no user data in a rebuild (the stock client lets it through from 2.54).

And one command of its own, in ``openstack.compute.v2``:

* ``openstack server known-hosts SERVER``: ``known_hosts`` lines for the server's host keys.
"""

from cloudseed_osc._server_known_hosts import ServerKnownHosts
from cloudseed_osc._server_reboot import RebootUserDataHook
from cloudseed_osc._server_rebuild import RebuildUserDataHook
from cloudseed_osc._server_set import SetUserDataHook

__all__ = ["RebootUserDataHook", "RebuildUserDataHook", "ServerKnownHosts", "SetUserDataHook"]
