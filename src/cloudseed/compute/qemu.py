"""The ``qemu`` driver: each instance is a ``qemu-system-x86_64`` process on this host.

Per instance, in ``<state_path>/instances/<uuid>/``:

- the disk: a qcow2 overlay on the image (``[qemu] images_type = qcow2``) or a sparse raw copy
  of it (``raw``), made again on rebuild;
- ``console.log``, the serial console, appended across reboots (``os-getConsoleOutput``),
  rotated once to ``console.log.0`` past ``[qemu] console_log_max_size`` (console_log.py);
- ``metadata-relay.json`` (0600), what the guest's metadata proxy signs requests with;
- ``ssh-forward.json``, the host port of the guest's SSH forward once it had one (kept while
  the guest exists, so the port stays the same across reboots and stop/start while free);
- ``qemu.pid``, ``qmp.sock``, ``qemu.log``, ``qemu.cmd`` while or after QEMU runs;
- ``qga.sock``, the guest agent channel (``push_keys``, qemu_guest_agent.py);
- ``networks.json``, the bridged networks the guest's ports are on (written at each start):
  a network is kept on this host while a guest that lists it runs (``bridge_networks.py``).

Operations map onto the process: spawn and power on start it; stop presses the ACPI power
button and switches off after ``[qemu] shutdown_timeout``; a soft reboot is that followed by a
start (a hard one if the guest does not go down), a hard reboot is switch off and start; rebuild
switches off, makes the disk again from the (new) image, injects, starts; delete switches off
and removes the directory. ``close()`` switches every guest off when the service stops.

With ``[libvirt] inject_partition`` other than -2 and no config drive, spawn and rebuild write
the key, admin password, server metadata and personality files into the new disk before the
first boot (``cloudseed.injection``), as Nova's libvirt driver does.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from cloudseed.compute import guestfwd_relay, qemu_guest_agent
from cloudseed.compute.bridge_networks import BridgeNetworks
from cloudseed.compute.console_log import ConsoleLogRotator, read_tail
from cloudseed.compute.errors import DriverError, GuestNotRunning
from cloudseed.compute.interfaces import Capacity, GuestSpec
from cloudseed.compute.machine import machine_capacity
from cloudseed.compute.qemu_argv import Accel, FlavorSizes, InstanceFiles, build_argv
from cloudseed.compute.qemu_process import QemuProcesses
from cloudseed.compute.qemu_ssh import SshForwards
from cloudseed.compute.ssh_forward import Forward
from cloudseed.errors import CloudseedError, ConfigError
from cloudseed.injection import InjectionOptions, InjectionRequest, inject
from cloudseed.programs import qemu_img
from cloudseed.programs.errors import ProgramFailed
from cloudseed.programs.kvm import kvm_usable
from cloudseed.settings import Settings
from cloudseed.signing import sign

log = logging.getLogger(__name__)

CONSOLE_TAIL = 100 * 1024  # what Nova's libvirt driver returns at most
DISK_NAMES = ("disk.qcow2", "disk.raw")  # one per [qemu] images_type
# Starts tried when QEMU cannot bind the SSH forward's port: another process may take a port
# between our check that it is free and QEMU's bind.
START_ATTEMPTS = 3


class QemuDriver:
    name = "qemu"

    def __init__(
        self,
        settings: Settings,
        *,
        host: str | None = None,
        accel_probe: Callable[[], bool] = kvm_usable,
    ) -> None:
        if not settings.neutron.service_metadata_proxy:
            # Every guest's requests reach the metadata service from 127.0.0.1, through its
            # proxy; only the signed headers can tell the guests apart.
            raise ConfigError(
                "compute_driver = qemu needs [neutron] "
                "service_metadata_proxy = true (and a "
                "metadata_proxy_shared_secret)"
            )
        q = settings.qemu
        self.settings = settings
        self.root = settings.state_dir.resolve() / "instances"
        self.binary = q.binary
        wanted = q.accel
        if wanted == "auto":
            wanted = "kvm" if accel_probe() else "tcg"
        self.accel = Accel(wanted, q.cpu_model)
        self.images_type = q.images_type
        self.shutdown_timeout = float(q.shutdown_timeout)
        self.guest_agent_timeout = float(q.guest_agent_timeout)
        self.upstream = _metadata_upstream(settings)
        self.secret = settings.neutron.metadata_proxy_shared_secret
        self.processes = QemuProcesses(start_timeout=float(q.start_timeout))
        self.console_logs = ConsoleLogRotator(self.root, max_size=q.console_log_max_size)
        self.ssh_forwards = SshForwards(
            self.root,
            address=q.ssh_forward_address,
            ports=q.ssh_forward_port_range,
            ports_setting=q.ssh_forward_ports,
        )
        self.networks = BridgeNetworks(
            settings.state_dir,
            host=host or settings.default.host or socket.gethostname(),
            secret=self.secret,
            upstream=self.upstream,
            hop_limit=settings.metadata.hop_limit,
        )
        log.info(
            "qemu driver: %s with %s, instances in %s", self.binary, self.accel.name, self.root
        )

    # -- the Driver protocol -------------------------------------------------------------

    def spawn(self, guest: GuestSpec) -> None:
        files = self._files(guest.uuid)
        # A build resumed after its agent died may find the guest of the first attempt
        # running: that boot was interrupted, so it starts over on a fresh disk.
        self.processes.kill(files)
        files.directory.mkdir(parents=True, exist_ok=True)
        self._make_disk(guest, files)
        self._start(guest, files)

    def reboot(self, guest: GuestSpec, *, hard: bool) -> None:
        files = self._files(guest.uuid)
        if not hard and not self.processes.powerdown(files, timeout=self.shutdown_timeout):
            log.info(
                "guest %s did not power off within %g s; rebooting it hard",
                guest.uuid,
                self.shutdown_timeout,
            )
        self.processes.kill(files)
        self._start(guest, files)

    def rebuild(self, guest: GuestSpec) -> None:
        files = self._files(guest.uuid)
        self.processes.kill(files)
        files.directory.mkdir(parents=True, exist_ok=True)
        self._make_disk(guest, files)
        self._start(guest, files)

    def power_off(self, uuid: str) -> None:
        files = self._files(uuid)
        if not self.processes.powerdown(files, timeout=self.shutdown_timeout):
            log.info(
                "guest %s did not power off within %g s; switching it off",
                uuid,
                self.shutdown_timeout,
            )
        self.processes.kill(files)
        self._sweep_networks()

    def power_on(self, guest: GuestSpec) -> None:
        files = self._files(guest.uuid)
        if self.processes.running(files):
            return
        if not files.disk.exists():
            raise DriverError(f"Instance {guest.uuid} has no disk on this host.")
        self._start(guest, files)

    def destroy(self, uuid: str) -> None:
        files = self._files(uuid)
        if not files.directory.exists():
            return
        self.processes.kill(files)
        shutil.rmtree(files.directory, ignore_errors=True)
        self._sweep_networks()

    def capacity(self) -> Capacity:
        return machine_capacity(self.root, hypervisor_type="QEMU")

    def running(self) -> set[str]:
        """Guests with a directory here (started by this process or an earlier one: the pid
        file and QMP socket are found by path)."""
        if not self.root.is_dir():
            return set()
        return {d.name for d in self.root.iterdir() if d.is_dir() and not d.name.startswith(".")}

    def powered_on(self, uuid: str) -> bool:
        """Whether the guest's QEMU runs (found by its pid file, whoever started it). A
        guest's QEMU never outlives the service that started it (``close()``, and the
        parent-death signal), so after a restart every guest here is switched off."""
        return self.processes.running(self._files(uuid))

    def ssh_forward(self, uuid: str) -> str | None:
        files = self._files(uuid)
        forward = self.ssh_forwards.kept(files)
        if forward is None or not self.processes.running(files):
            return None
        if forward.address == "0.0.0.0":
            # Listening on every address: name this host, so the command shown on another
            # node reaches it.
            forward = Forward(self.settings.default.host or socket.gethostname(), forward.port)
        return str(forward)

    def console_output(self, uuid: str) -> str:
        return read_tail(self._files(uuid).console_log, CONSOLE_TAIL).decode(
            "utf-8", errors="replace"
        )

    def console_stamp(self, uuid: str) -> str:
        """The log's inode, size and modification time: QEMU's appends change the size and
        time, a rotation (copy, then truncate) the size."""
        try:
            found = os.stat(self._files(uuid).console_log)
        except FileNotFoundError:
            return ""
        return f"{found.st_ino}:{found.st_size}:{found.st_mtime_ns}"

    def push_keys(
        self, instance_uuid: str, *, user: str, add: list[str], remove: list[str]
    ) -> None:
        files = self._files(instance_uuid)
        if not self.processes.running(files):
            raise GuestNotRunning()
        qemu_guest_agent.push_keys(
            files.qga_socket, user=user, add=add, remove=remove, timeout=self.guest_agent_timeout
        )

    def close(self) -> None:
        """Switch off every guest of this host (the service is stopping)."""
        self.console_logs.stop()
        if not self.root.is_dir():
            return
        for directory in sorted(self.root.iterdir()):
            files = self._files(directory.name)
            try:
                if self.processes.running(files):
                    log.info("stopping guest %s", directory.name)
                    self.processes.kill(files)
            except DriverError:
                log.exception("could not stop guest %s", directory.name)
        self.processes.close()
        self._sweep_networks()

    def clean_up(self) -> None:
        """The agent starts: take down the bridged networks no running guest of this host
        needs (a network deleted while the agent was away, or what a crashed agent left:
        namespaces, taps, dnsmasq, metadata proxies), and forget the ports of guests that
        are gone."""
        self._sweep_networks()

    # -- the pieces ----------------------------------------------------------------------

    def _files(self, uuid: str) -> InstanceFiles:
        if not uuid or "/" in uuid or uuid.startswith("."):
            raise DriverError(f"Invalid instance uuid {uuid!r}.")
        return InstanceFiles(self.root / uuid, f"disk.{self.images_type}")

    def _make_disk(self, guest: GuestSpec, files: InstanceFiles) -> None:
        image = guest.image
        if image is None:
            raise DriverError(f"Image {guest.image_ref} has no file on this host.")
        # Both images types' disks (the setting may have changed since the last build), but
        # not disk.config: the config drive sits beside them and is built before the driver
        # is called, so it is already the new one here.
        for name in DISK_NAMES:
            (files.directory / name).unlink(missing_ok=True)
        try:
            if self.images_type == "qcow2":
                qemu_img.create_overlay(
                    files.disk, backing=Path(image.path), backing_format=image.disk_format
                )
            else:
                qemu_img.convert_to_raw(
                    Path(image.path), source_format=image.disk_format, disk=files.disk
                )
            self._grow_disk(guest, files)
        except ProgramFailed as exc:
            raise DriverError(exc.message) from exc
        self._inject(guest, files)

    def _grow_disk(self, guest: GuestSpec, files: InstanceFiles) -> None:
        """The new root disk grown to the flavor's ``disk`` GiB when that is larger than the
        image (Nova does the same); the guest grows its partition and filesystem itself
        (cloud-init's growpart and resizefs)."""
        virtual_size = qemu_img.info(files.disk, self.images_type).virtual_size
        size = FlavorSizes.of(guest.flavor).root_disk_size(virtual_size)
        if size is not None:
            qemu_img.grow(files.disk, fmt=self.images_type, size=size)
            log.info("disk of %s grown to %d GiB", guest.uuid, size >> 30)

    def _inject(self, guest: GuestSpec, files: InstanceFiles) -> None:
        # The overlay's backing file is the registered image, which this driver chose.
        options = InjectionOptions.from_settings(self.settings, allow_backing_file=True)
        if not options.enabled or guest.config_drive:
            return  # Nova injects only without a config drive
        request = InjectionRequest.for_instance(
            key_data=guest.key_data,
            ports=guest.ports,
            admin_password=guest.admin_password,
            metadata=guest.metadata,
            files=guest.files,
        )
        try:
            report = inject(files.disk, self.images_type, request, options=options)
        except CloudseedError as exc:
            raise DriverError(
                f"Injection into the disk of {guest.uuid} failed: {getattr(exc, 'message', exc)}"
            ) from exc
        if report.handler is not None:
            log.info(
                "injected %s into %s with %s", ", ".join(report.written), guest.uuid, report.handler
            )

    def _start(self, guest: GuestSpec, files: InstanceFiles) -> None:
        with self.networks.taps(guest, files.directory) as taps:
            self._start_qemu(guest, files, taps)

    def _start_qemu(self, guest: GuestSpec, files: InstanceFiles, taps: dict[int, int]) -> None:
        self._write_relay_config(guest, files)
        relay = [
            sys.executable,
            "-I",
            str(Path(guestfwd_relay.__file__).resolve()),
            files.relay_config.name,
        ]
        refused: set[int] = set()
        for attempt in range(1, START_ATTEMPTS + 1):
            forward = self.ssh_forwards.choose(files, guest.metadata, refused)
            argv = build_argv(
                guest,
                files,
                binary=self.binary,
                accel=self.accel,
                disk_format=self.images_type,
                relay_command=relay,
                default_cmdline=self.settings.qemu.kernel_cmdline,
                ssh_forward=forward,
                taps=taps,
            )
            try:
                pid = self.processes.start(files, argv, pass_fds=tuple(taps.values()))
            except DriverError as exc:
                # QEMU: "Could not set up host forwarding rule 'tcp:ADDR:PORT-:22'".
                if (
                    forward is None
                    or attempt == START_ATTEMPTS
                    or forward.hostfwd() not in str(exc.message)
                ):
                    raise
                log.info(
                    "port %d was taken meanwhile; another one for %s", forward.port, guest.uuid
                )
                refused.add(forward.port)
                continue
            break
        log.info("guest %s running as QEMU process %d", guest.uuid, pid)
        if forward is not None:
            log.info("guest %s: SSH forward on %s", guest.uuid, forward)
        self.console_logs.start()

    def _sweep_networks(self) -> None:
        """Take down the bridged networks no running guest of this host needs."""
        self.networks.sweep_unused(self.root, lambda d: self.processes.running(self._files(d)))

    def _write_relay_config(self, guest: GuestSpec, files: InstanceFiles) -> None:
        config = {
            "upstream": list(self.upstream),
            "headers": [
                ["X-Instance-ID", guest.uuid],
                ["X-Tenant-ID", guest.project_id],
                ["X-Instance-ID-Signature", sign(self.secret, guest.uuid)],
            ],
        }
        fd = os.open(files.relay_config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(config, fh)


def _metadata_upstream(settings: Settings) -> tuple[str, int]:
    if settings.qemu.metadata_url:
        parts = urlsplit(settings.qemu.metadata_url)
        assert parts.hostname is not None and parts.port is not None  # checked at load
        return parts.hostname, parts.port
    host, port = settings.default.metadata_listen, settings.default.metadata_listen_port
    if port == 0:
        raise ConfigError(
            "the qemu driver needs [qemu] metadata_url when [DEFAULT] "
            "metadata_listen_port is 0 (picked at start)"
        )
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1" if host != "::" else "::1"
    return host, port
