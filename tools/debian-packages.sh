#!/bin/sh
# Install the Debian packages the test suite drives (as real parts, not mocks), if missing.
# Run by `make test`. Without root or apt-get it only lists what is missing; the tests that
# need a missing tool then skip with the reason (or fail under CLOUDSEED_REQUIRE_DBS=1).
set -eu
# cloud-init: its own reader code is the metadata service's test client.
# e2fsprogs, fdisk, qemu-utils, openssl: disk image injection.
# xorriso, genisoimage (isoinfo), mtools, dosfstools (fsck.vfat): config drives are read back
# with them, independently of cloudseed's own readers; genisoimage is also Nova's way in
# the config drive benchmark.
# libarchive-tools (bsdtar), mtools: cloudbase-init's config drive readers run them, as its
# Windows build runs its own bsdtar.exe and mtools.
# ignition: Fedora CoreOS's and Flatcar's first-boot agent; its fetch stage reads cloudseed.
# fuseiso, fusefat: where the kernel has no iso9660 or vfat (a microVM's), the mount(8) helpers
# that let Ignition mount a config drive (tests/support/ignition.py).
# qemu-system-x86: the QEMU compute driver's tests boot a tiny guest kernel under it.
# qemu-guest-agent: its qemu-ga, run on the host, is the real agent the key-push tests talk to.
# iproute2, nftables, dnsmasq-base, slirp4netns: the qemu driver's bridged networks (a namespace
# per network with its bridge, port security, DHCP server and user-mode uplink); dnsmasq-base
# is dnsmasq without the system service the dnsmasq package would start on the host.
# libguestfs-tools, python3-guestfs: the guestfs injection handler; its appliance also needs a
# kernel in /boot: linux-image-cloud-amd64 is added only when /boot has none (a container), so a
# workstation's own kernels are left alone.
# Arguments add packages for one target (benchmarks: wrk nginx-light).
packages="cloud-init e2fsprogs fdisk qemu-utils qemu-system-x86 qemu-guest-agent openssl xorriso genisoimage mtools
    dosfstools libguestfs-tools python3-guestfs iproute2 nftables dnsmasq-base slirp4netns ignition
    libarchive-tools fuseiso fusefat $*"
ls /boot/vmlinuz-* >/dev/null 2>&1 || packages="$packages linux-image-cloud-amd64"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian packages:$missing"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing \
        >/dev/null
else
    echo "missing Debian packages (tests that need them will skip):$missing" >&2
fi
