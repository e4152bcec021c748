"""cloudseed-osc: the openstack CLI's commands for changing a server's user data on cloudseed.

Three cliff command hooks, registered as entry points in ``openstack.cli.server_set``,
``openstack.cli.server_reboot`` and ``openstack.cli.server_rebuild`` (see pyproject.toml):

* ``openstack server set --user-data FILE | --no-user-data SERVER``
* ``openstack server reboot --hard --user-data FILE | --no-user-data SERVER``
* ``openstack server rebuild --user-data FILE``: refused below microversion 2.57, where the
  API has no user data in a rebuild (the stock client lets it through from 2.54).

And live keys (2.106): ``--key-name`` made repeatable, plus ``--key-expires``, on
``openstack server create`` and ``openstack server rebuild`` (hooks in
``openstack.cli.server_create`` and ``openstack.cli.server_rebuild``), and the commands
``openstack server key list | add | remove | set`` and ``openstack project key list | set``
(group ``openstack.cloudseed.v1``, declared by ``cloudseed_osc.plugin`` in
``openstack.cli.extension``).
"""

from cloudseed_osc._server_key_names import CreateKeyNamesHook, RebuildKeyNamesHook
from cloudseed_osc._server_reboot import RebootUserDataHook
from cloudseed_osc._server_rebuild import RebuildUserDataHook
from cloudseed_osc._server_set import SetUserDataHook

__all__ = [
    "CreateKeyNamesHook",
    "RebootUserDataHook",
    "RebuildKeyNamesHook",
    "RebuildUserDataHook",
    "SetUserDataHook",
]
