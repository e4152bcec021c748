"""SSH host keys: how a user can trust a server's first SSH answer (docs/host-keys.md).

The guest tells cloudseed its host keys, two ways: cloud-init's stock ``phone_home`` module
posts them to the metadata service (``POST /openstack/latest/phone_home``, identified like every
metadata request: a guest reports only for itself), or, when it does not, cloud-init's
``keys_to_console`` block is read from the serial console by the compute agent of the
instance's host (``watch.py``). The API shows them (``GET /v2.1/servers/{id}/host-keys``), the
CLI and the openstack CLI plugin print them as ``known_hosts`` lines, and ``service.fingerprints``
gives them to whatever vouches for the guest.

**Once per boot generation.** A boot generation is one life of the guest's disk: it begins
when a build or a rebuild succeeds, which is when the agent sets the instance's
``launched_at``. The first report of a generation is accepted; later ones are kept, flagged as
repeats, and never replace it. Reboots and stop/start do not begin a generation, on purpose:
they keep the disk and its host keys, and cloud-init's phone_home runs once per instance, so
after a reboot no legitimate report is coming, and a generation per boot would hand the
accepted slot to whichever process in the guest posts first (any unprivileged process can
reach the metadata service). While a rebuild runs (or before the first build has finished) a
report is refused with 409, which cloud-init retries: the old guest, still up for a moment,
must not speak for the new disk.

Modules: IO-free ``keys.py`` (host key lines, fingerprints), ``phone_home.py`` (the form),
``console.py`` (the console block), ``known_hosts.py`` (lines); ``models.py``, ``service.py``
(Session-taking), ``watch.py`` (the agent's console watch), ``access.py`` (``cloudseed
known-hosts``), ``api.py`` and ``views.py`` (the route), ``intake.py`` (the metadata app's
phone_home POST), ``errors.py``. The identity token reads ``service.fingerprints`` through
``identity/host_keys.py``.
"""
