#!/bin/sh
# Install the Debian packages only the end-to-end run needs (kept out of tools/debian-packages.sh
# so `make test` stays fast). Run by `make image-debian` and `make e2e`.
# mmdebstrap: builds the guest image. qemu-system-x86: runs guests (the qemu driver).
# qemu-utils: overlays. e2fsprogs: mke2fs -d and debugfs. genisoimage: config drives.
# openssh-client: the scenarios log in with the injected key.
set -eu
packages="mmdebstrap qemu-system-x86 qemu-utils e2fsprogs genisoimage openssh-client"
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
    echo "missing Debian packages for the e2e run:$missing" >&2
    exit 1
fi
