#!/usr/bin/env bash
# Build a Debian bookworm cloud image with stock cloud-init, from Debian's packages only.
#
#   tools/e2e/build-image.sh [OUT]      (`make image-debian`; default OUT=.cache/images)
#
# It produces, in OUT:
#   debian-12-cloudseed.qcow2   a cloud image as distributions publish them: an MBR disk with
#                one ext4 partition (label "rootfs") and GRUB in its boot sector, booting
#                through its own boot loader; cloud-init's growpart grows the partition to the
#                instance's disk at first boot
#   vmlinuz, initrd.img   its kernel and initramfs too: the end-to-end run boots the same disk
#                both ways (GRUB, and -kernel/-initrd with root=LABEL=rootfs), from one build
# and:
#   build.txt    versions and step timings
#   stamp        sha256 of this script: rebuilt only when it changed
#
# mmdebstrap runs in root mode (it chroots and mounts /proc and /dev there); the disk is
# assembled and GRUB installed inside libguestfs' appliance (guestfish), so no loop device or
# host mount is needed. The host's own apt sources are handed to
# mmdebstrap, so no mirror is named here.
set -euo pipefail

OUT=${1:-.cache/images}
SUITE=${SUITE:-bookworm}
SIZE=${SIZE:-2G}
SCRIPT=$(readlink -f "$0")
QCOW2=debian-12-cloudseed.qcow2

outputs=("$QCOW2" vmlinuz initrd.img)
tools=(mmdebstrap guestfish qemu-img)

stamp=$(sha256sum < "$SCRIPT" | cut -d' ' -f1)
up_to_date=yes
for f in stamp "${outputs[@]}"; do [ -f "$OUT/$f" ] || up_to_date=no; done
if [ $up_to_date = yes ] && [ "$(cat "$OUT/stamp")" = "$stamp" ]; then
    echo "image is up to date in $OUT"
    exit 0
fi

# A machine-wide copy of the last build, by the script's hash, so that another clone on this
# machine (CI's fresh one, a second worktree) takes it instead of building again (about 4
# minutes under TCG). CLOUDSEED_IMAGE_CACHE= (empty) turns it off.
CACHE=${CLOUDSEED_IMAGE_CACHE-/var/cache/cloudseed/images}
cached=${CACHE:+$CACHE/$stamp}
if [ -n "$cached" ] && [ -f "$cached/stamp" ]; then
    mkdir -p "$OUT"
    rm -f "$OUT/stamp"
    for f in "${outputs[@]}" build.txt; do cp --reflink=auto --sparse=always "$cached/$f" "$OUT/$f"; done
    echo "$stamp" > "$OUT/stamp"
    echo "image copied from this machine's cache ($cached)"
    exit 0
fi

for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "missing $tool (run tools/e2e/packages.sh)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "mmdebstrap's root mode needs root" >&2; exit 1; }

sources=()
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [ -s "$f" ] && grep -qE '^[[:space:]]*(deb |Types:.*deb)' "$f" && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || { echo "the host has no apt sources to build from" >&2; exit 1; }

mkdir -p "$OUT"
work=$(mktemp -d "$OUT/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
log=$work/build.txt

timed() {  # timed LABEL COMMAND...: run, and note how long it took in build.txt
    local label=$1 start end
    shift
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    awk -v l="$label" -v s="$start" -v e="$end" 'BEGIN { printf "%-12s %6.1f s\n", l, e - s }' \
        | tee -a "$log"
}

# isc-dhcp-client: cloud-init's OpenStack datasource takes an ephemeral lease in its local
# stage to reach 169.254.169.254 before networking is up. ifupdown: cloud-init renders the NIC
# configuration with its eni renderer. The cloud kernel boots fastest under TCG. grub-pc: the
# boot loader, installed to the disk below (its postinst has no device yet). qemu-guest-agent:
# the qemu driver pushes key changes to running guests through it (its ssh-key commands).
# curl: docs/examples/cloudseed-watch.sh, the change-notification example, runs on it.
# net-tools: cloud-init 22.4's eni renderer writes the routes of network_data.json (the default
# route, the way to 169.254.169.254 on a bridged network) as `post-up route add ... || true`,
# so without `route` a guest configured statically has no default route.
packages=(
    systemd-sysv udev dbus kmod iproute2 iputils-ping procps e2fsprogs mount
    ifupdown isc-dhcp-client netbase net-tools openssh-server sudo qemu-guest-agent curl
    cloud-init cloud-guest-utils linux-image-cloud-amd64 initramfs-tools grub-pc
)
root_device=LABEL=rootfs

# Runs on the host with the new root as $1, once every package is installed.
customize=$(cat <<'HOOK'
set -e
R=$1
echo e2e-guest > "$R/etc/hostname"
printf '127.0.0.1 localhost\n' > "$R/etc/hosts"
# Only loopback here: cloud-init writes the NIC's configuration from the metadata.
printf 'auto lo\niface lo inet loopback\n\nsource /etc/network/interfaces.d/*\n' \
    > "$R/etc/network/interfaces"
mkdir -p "$R/etc/cloud/cloud.cfg.d"
# datasource_list stays on one line: ds-identify parses it with grep.
cat > "$R/etc/cloud/cloud.cfg.d/90-cloudseed-e2e.cfg" <<'CFG'
datasource_list: [ NoCloud, ConfigDrive, OpenStack, None ]
datasource:
  OpenStack:
    metadata_urls: [ 'http://169.254.169.254' ]
    max_wait: 60
    timeout: 10
    retries: 3
# Debian's locale-gen ignores its arguments, so cc_locale's default en_US.UTF-8 would fail and
# leave cloud-init in status "error".
locale: C.UTF-8
# sudo stalls on DNS without the instance's own name in /etc/hosts.
manage_etc_hosts: true
# RSA host key generation takes long under TCG; one ed25519 key is enough for the tests.
ssh_genkeytypes: [ ed25519 ]
# Read the metadata again at every boot (not only for a new instance id), so changed user data
# reaches the per-boot parts after a reboot (cloud-init.md section 6, row "HTTP 3").
updates:
  network:
    when: [ boot ]
CFG
printf 'LANG=C.UTF-8\n' > "$R/etc/default/locale"
if [ -f "$R/etc/default/grub" ]; then
    # The console log (os-getConsoleOutput) is the serial port; no menu to wait for.
    sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=1/' \
        -e 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200"/' \
        "$R/etc/default/grub"
    printf 'GRUB_TERMINAL="console serial"\nGRUB_SERIAL_COMMAND="serial --speed=115200"\n' \
        >> "$R/etc/default/grub"
fi
chroot "$R" passwd -d root >/dev/null
chroot "$R" passwd -l root >/dev/null
# Every instance made from this image must look brand new to cloud-init and sshd.
rm -f "$R"/etc/ssh/ssh_host_*
rm -rf "$R/var/lib/cloud/"* "$R/var/log/cloud-init"*
rm -f "$R/etc/machine-id" && touch "$R/etc/machine-id"
mkdir -p "$R/etc/systemd/system/networking.service.d"
printf '[Service]\nTimeoutStartSec=30\n' \
    > "$R/etc/systemd/system/networking.service.d/timeout.conf"
rm -rf "$R/var/cache/apt/archives/"*.deb "$R/var/lib/apt/lists/"*_* || true
HOOK
)

# The essential hooks run before the kernel's postinst builds the initramfs: the fsck hook
# looks the root filesystem's type up, and at build time there is no root device to probe.
timed mmdebstrap mmdebstrap --quiet --mode=root --variant=apt --format=directory \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --essential-hook="printf '$root_device / ext4 defaults,errors=remount-ro 0 1\\n' > \"\$1/etc/fstab\"" \
    --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" && echo FSTYPE=ext4 > "$1/etc/initramfs-tools/conf.d/fstype"' \
    --include="$(IFS=,; echo "${packages[*]}")" \
    --customize-hook="$customize" \
    "$SUITE" "$root" "${sources[@]}"

cp -L "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp -L "$root"/boot/initrd.img-* "$work/initrd.img"
# One MBR partition from 1 MiB (GRUB's core image goes in the gap before it), the root
# filesystem copied in as a tar (ownership, modes and xattrs kept), then grub-install and
# update-grub run in the image's own root inside the appliance. grub-install is given the disk
# grub-probe finds under the image's root: inside the appliance the disk guestfish calls
# /dev/sda may be /dev/sdb (newer libguestfs appliances have their own root disk first), and
# /dev/sda is then the appliance's, where GRUB fails with "cross-disk install".
tar --xattrs --numeric-owner -C "$root" -cf "$work/root.tar" .
truncate -s "$SIZE" "$work/disk.raw"
# force_tcg: the appliance would abort on a /dev/kvm that exists but does not work (as in
# many containers and nested guests); TCG is slower but always there.
timed guestfish env LIBGUESTFS_BACKEND=direct LIBGUESTFS_BACKEND_SETTINGS=force_tcg \
    guestfish --rw -a "$work/disk.raw" <<GF
run
part-init /dev/sda mbr
part-add /dev/sda p 2048 -1
part-set-bootable /dev/sda 1 true
mkfs ext4 /dev/sda1 label:rootfs
mount /dev/sda1 /
tar-in $work/root.tar / xattrs:true
sh "grub-install --target=i386-pc \$(grub-probe --target=disk /)"
command "update-grub"
umount-all
GF
rm -f "$work/root.tar"
timed qemu-img qemu-img convert -O qcow2 "$work/disk.raw" "$work/$QCOW2"
rm -f "$work/disk.raw"
made="$QCOW2 $(du -h "$work/$QCOW2" | cut -f1), virtual size $SIZE"
{
    echo "kernel      $(basename "$root"/boot/vmlinuz-*)"
    echo "cloud-init  $(chroot "$root" dpkg-query -W -f='${Version}' cloud-init)"
    echo "$made"
} | tee -a "$log"

# Swap the finished files in last, so an interrupted build never leaves a stamp that lies.
rm -f "$OUT/stamp"
for f in "${outputs[@]}"; do mv "$work/$f" "$OUT/"; done
mv "$log" "$OUT/"
echo "$stamp" > "$OUT/stamp"
echo "image built in $OUT"
if [ -n "$cached" ] && mkdir -p "$CACHE" 2>/dev/null; then
    # Only the newest build is kept; the stamp goes in last, as above.
    find "$CACHE" -mindepth 1 -maxdepth 1 -type d ! -name "$stamp" -exec rm -rf {} +
    mkdir -p "$cached"
    for f in "${outputs[@]}" build.txt; do cp --reflink=auto --sparse=always "$OUT/$f" "$cached/$f"; done
    echo "$stamp" > "$cached/stamp"
fi
