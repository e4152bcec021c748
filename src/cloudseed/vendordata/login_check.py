"""cloudseed's login-time key check as cloud-init vendordata (``[keys] login_check``;
docs/live-keys.md). IO-free but for reading the command's source, shipped beside this module.

``cloud_config()`` is the part users may include in their own user data; it is
docs/keys/login-check.cloud-config, word for word (a test keeps the two equal). It installs
``authorized_keys_command.py`` as sshd's ``AuthorizedKeysCommand`` with a drop-in in
sshd_config.d, reloads sshd, and sets ``allow_public_ssh_keys: false`` so that the keys live
only in cloudseed: cloud-init no longer copies them into authorized_keys, where a key removed
through the API would keep working.

As vendordata it comes with a second part, ``installer()``, a vendor script that installs the
same files. cloud-init merges vendordata's cloud-config *under* the user's without appending
lists (22.4's ``ConfigMerger``: the user's ``write_files`` or ``runcmd`` replaces the part's),
while ``allow_public_ssh_keys: false`` would still apply: the guest would then have its keys
nowhere. A vendor script is not replaced by anything in user data.

cloud-init 22.4 reads both vendor_data.json and vendor_data2.json and applies both (vendordata2
over vendordata, same script directory), so the parts go in one of them: ``with_parts`` adds
them to a document's ``cloud-init`` key (a string or a list of parts, as
``sources.convert_vendordata`` takes it), after the operator's own parts.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

COMMAND_PATH = "/usr/local/sbin/cloudseed-authorized-keys"
DROP_IN_PATH = "/etc/ssh/sshd_config.d/60-cloudseed-authorized-keys.conf"
DROP_IN = (
    "# cloudseed's login-time key check (docs/live-keys.md): sshd asks the metadata service\n"
    "# for the keys of each login.\n"
    f"AuthorizedKeysCommand {COMMAND_PATH} %u\n"
    "AuthorizedKeysCommandUser nobody\n"
)
# Debian and Ubuntu call the unit ssh.service (sshd.service is an alias), others sshd.service;
# try- does nothing while sshd is not running yet (at first boot it starts after cloud-init's
# init stage, which writes the files, and reads them then).
RELOAD = (
    "systemctl try-reload-or-restart ssh.service 2>/dev/null"
    " || systemctl try-reload-or-restart sshd.service"
)
# The user's cloud-config parts keep their values and lists are appended to, whichever part
# comes first (cloud-init's default would let this part replace the user's write_files).
MERGE_HOW = "dict(recurse_array,no_replace)+list(append)"
_EOF = "CLOUDSEED_EOF"

HEADER = """\
#cloud-config
# cloudseed's login-time key check (docs/live-keys.md). sshd asks cloudseed's metadata service
# for the keys of every login, so keys added to or removed from the server through the API
# work, or stop working, at the next login; cloud-init no longer copies keys into
# authorized_keys. The guest needs the metadata service at every login (so not on guests
# that only have a config drive), python3 and OpenSSH 8.2 or later (sshd_config.d).
"""


@functools.cache
def command_source() -> str:
    """The AuthorizedKeysCommand's source, as installed in the guest."""
    return Path(__file__).with_name("authorized_keys_command.py").read_text(encoding="utf-8")


def _block(text: str, indent: int) -> str:
    """``text`` as the lines of a YAML literal block scalar (``|``) at ``indent``."""
    assert "\t" not in text and text.endswith("\n")
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


@functools.cache
def cloud_config() -> str:
    """The ``#cloud-config`` part (docs/keys/login-check.cloud-config)."""
    return (
        HEADER
        + f'merge_how: "{MERGE_HOW}"\n'
        + "allow_public_ssh_keys: false\n"
        + "write_files:\n"
        + f"  - path: {COMMAND_PATH}\n"
        + "    owner: root:root\n"
        + '    permissions: "0755"\n'
        + "    content: |\n"
        + _block(command_source(), 6)
        + f"  - path: {DROP_IN_PATH}\n"
        + "    owner: root:root\n"
        + '    permissions: "0644"\n'
        + "    content: |\n"
        + _block(DROP_IN, 6)
        + "runcmd:\n"
        + f"  - [sh, -c, '{RELOAD}']\n"
    )


@functools.cache
def installer() -> str:
    """The vendor script that installs what ``cloud_config`` does (see the module's
    docstring for why vendordata carries both)."""
    for text in (command_source(), DROP_IN):
        assert _EOF not in text.splitlines()
    return (
        "#!/bin/sh\n"
        "# cloudseed's login-time key check (docs/live-keys.md): installs what its cloud-config\n"
        "# part does, which the user's own write_files or runcmd would replace.\n"
        "set -e\n"
        "umask 022\n"
        f"mkdir -p {Path(COMMAND_PATH).parent} {Path(DROP_IN_PATH).parent}\n"
        f"cat > {COMMAND_PATH}.new <<'{_EOF}'\n{command_source()}{_EOF}\n"
        f"chmod 0755 {COMMAND_PATH}.new\n"
        f"mv -f {COMMAND_PATH}.new {COMMAND_PATH}\n"
        f"cat > {DROP_IN_PATH} <<'{_EOF}'\n{DROP_IN}{_EOF}\n"
        f"{RELOAD} || true\n"
    )


def parts() -> list[str]:
    """What vendordata carries: the cloud-config part, then the installer."""
    return [cloud_config(), installer()]


def joined(value: Any) -> list[Any] | None:
    """A ``cloud-init`` value with the parts after the operator's own; None when cloud-init
    could not use the value anyway (a dict, a number: ``convert_vendordata`` refuses them),
    which is then left as it is."""
    if not value:  # nothing cloud-init would read
        return parts()
    if isinstance(value, str):
        return [value, *parts()]
    if isinstance(value, list):
        return [*value, *parts()]
    return None


def with_parts(document: Any) -> Any:
    """A vendordata document (vendor_data.json as cloud-init reads it: a dict's ``cloud-init``
    key, or the whole document when it is a string or a list) with the parts added."""
    if isinstance(document, dict):
        added = joined(document.get("cloud-init"))
        return document if added is None else {**document, "cloud-init": added}
    added = joined(document)
    return document if added is None else added
