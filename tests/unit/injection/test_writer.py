import json

import pytest

from cloudseed.injection.errors import GuestRefused
from cloudseed.injection.request import InjectionRequest
from cloudseed.injection.writer import write_request
from tests.unit.injection.memory_fs import MemoryFilesystem

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey tester@example"
HASH = "$6$saltsalt$" + "h" * 86


def linux_guest(*, root_uid: int = 0) -> MemoryFilesystem:
    fs = MemoryFilesystem()
    fs.add_dir("/etc")
    fs.add_dir("/root", 0o700)
    fs.add_file("/etc/passwd", f"root:x:{root_uid}:{root_uid}:root:/root:/bin/sh\n")
    fs.add_file("/etc/group", f"root:x:{root_uid}:\nshadow:x:42:\n")
    fs.add_file("/etc/shadow", "root:*:19000:0:99999:7:::\n", mode=0o640, gid=42)
    return fs


def test_everything_in_novas_order_with_novas_modes():
    fs = linux_guest()
    request = InjectionRequest(
        key_data=KEY,
        admin_password="pw",
        metadata={"role": "web"},
        network_config="auto lo\n",
        files=(("/opt/app/conf", b"x=1\n"),),
    )
    written = write_request(fs, request, password_hash=HASH)
    assert written == (
        "/root/.ssh",
        "/root/.ssh/authorized_keys",
        "/etc/network",
        "/etc/network/interfaces",
        "/meta.js",
        "/etc/shadow",
        "/opt",
        "/opt/app",
        "/opt/app/conf",
    )
    ssh, keys = fs.nodes["/root/.ssh"], fs.nodes["/root/.ssh/authorized_keys"]
    assert (ssh.mode, ssh.uid, ssh.gid) == (0o700, 0, 0)
    assert (keys.mode, keys.uid, keys.gid) == (0o600, 0, 0)
    assert fs.text("/root/.ssh/authorized_keys") == (
        "\n# The following ssh key was injected by cloudseed\n" + KEY + "\n"
    )
    assert fs.nodes["/etc/network"].mode == 0o744
    assert fs.text("/etc/network/interfaces") == "auto lo\n"
    assert json.loads(fs.text("/meta.js")) == {"role": "web"}
    shadow = fs.nodes["/etc/shadow"]
    assert fs.text("/etc/shadow") == f"root:{HASH}:19000:0:99999:7:::\n"
    assert (shadow.mode, shadow.gid) == (0o640, 42)  # an existing file keeps mode and owner
    assert (fs.nodes["/opt/app"].mode, fs.nodes["/opt/app/conf"].mode) == (0o744, 0o644)
    assert "/etc/rc.local" not in fs.nodes  # no /etc/selinux, no hook


def test_owner_is_the_guests_root_and_existing_ssh_dir_is_fixed():
    fs = linux_guest(root_uid=5)
    fs.add_dir("/root/.ssh", 0o777, uid=1000, gid=1000)
    fs.add_file("/root/.ssh/authorized_keys", "ssh-rsa OLD\n", mode=0o644, uid=1000)
    write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
    ssh, keys = fs.nodes["/root/.ssh"], fs.nodes["/root/.ssh/authorized_keys"]
    assert (ssh.mode, ssh.uid, ssh.gid) == (0o700, 5, 5)
    assert (keys.mode, keys.uid, keys.gid) == (0o600, 5, 5)
    assert fs.text("/root/.ssh/authorized_keys").startswith("ssh-rsa OLD\n\n# The following")


def test_missing_root_home_is_made_private():
    fs = MemoryFilesystem()
    write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
    assert fs.nodes["/root"].mode == 0o700
    assert fs.nodes["/root/.ssh/authorized_keys"].kind == "file"


@pytest.mark.parametrize("target", ["/etc", "../etc", "/tmp/../../etc"])
def test_symlinked_ssh_dir_is_refused_and_nothing_lands_at_its_target(target):
    fs = linux_guest()
    fs.add_symlink("/root/.ssh", target)
    before = set(fs.nodes)
    with pytest.raises(GuestRefused, match=r"/root/\.ssh is a symlink"):
        write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
    assert set(fs.nodes) == before


def test_symlinked_final_component_is_refused():
    fs = linux_guest()
    fs.add_symlink("/meta.js", "/etc/shadow")
    with pytest.raises(GuestRefused, match=r"/meta\.js is a symlink"):
        write_request(fs, InjectionRequest(metadata={"a": "b"}), password_hash=None)
    assert fs.text("/etc/shadow").startswith("root:*:")


def test_symlink_in_a_file_parent_is_refused():
    fs = linux_guest()
    fs.add_symlink("/opt", "/etc")
    with pytest.raises(GuestRefused, match="/opt is a symlink"):
        write_request(fs, InjectionRequest(files=(("/opt/passwd", b"evil"),)), password_hash=None)
    assert fs.text("/etc/passwd").startswith("root:x:0")


def test_file_where_a_directory_goes_is_refused():
    fs = linux_guest()
    fs.add_file("/opt", "not a dir")
    with pytest.raises(GuestRefused, match="not a directory"):
        write_request(fs, InjectionRequest(files=(("/opt/x", b""),)), password_hash=None)


def test_directory_where_a_file_goes_is_refused():
    fs = linux_guest()
    fs.add_dir("/meta.js")
    with pytest.raises(GuestRefused, match="not a regular file"):
        write_request(fs, InjectionRequest(metadata={"a": "b"}), password_hash=None)


@pytest.mark.parametrize(
    ("passwd", "shadow", "why"),
    [
        (None, "root:*:1::::::\n", "no /etc/passwd or /etc/shadow"),
        ("root:x:0:0::/root:/bin/sh\n", None, "no /etc/passwd or /etc/shadow"),
        ("daemon:x:1:1::/:/bin/sh\n", "root:*:1::::::\n", "no root user in /etc/passwd"),
        ("root:x:0:0::/root:/bin/sh\n", "daemon:*:1::::::\n", "no root user in /etc/shadow"),
    ],
)
def test_password_needs_root_in_passwd_and_shadow(passwd, shadow, why):
    fs = MemoryFilesystem()
    fs.add_dir("/etc")
    if passwd is not None:
        fs.add_file("/etc/passwd", passwd)
    if shadow is not None:
        fs.add_file("/etc/shadow", shadow)
    with pytest.raises(GuestRefused, match=why):
        write_request(fs, InjectionRequest(admin_password="pw"), password_hash=HASH)


def test_shadow_bytes_that_are_not_utf8_survive():
    fs = linux_guest()
    fs.add_file("/etc/shadow", b"root:*:1::::::\nj\xe9r\xf4me:!:1::::::\n")
    write_request(fs, InjectionRequest(admin_password="pw"), password_hash=HASH)
    assert fs.nodes["/etc/shadow"].data == (
        f"root:{HASH}:1::::::\n".encode() + b"j\xe9r\xf4me:!:1::::::\n"
    )


class TestSelinux:
    def test_hook_in_new_rc_local_relabels_everything_written(self):
        fs = linux_guest()
        fs.add_dir("/etc/selinux")
        write_request(fs, InjectionRequest(key_data=KEY, metadata={"a": "b"}), password_hash=None)
        rc = fs.nodes["/etc/rc.local"]
        assert rc.mode == 0o700
        assert fs.text("/etc/rc.local") == (
            "#!/bin/sh\n# Added by cloudseed: restore SELinux labels of the files it "
            "injected\nrestorecon -RF /meta.js /root/.ssh 2>/dev/null || :\n"
        )

    def test_rhel_layout_link_is_followed_inside_the_guest(self):
        fs = linux_guest()
        fs.add_dir("/etc/selinux")
        fs.add_dir("/etc/rc.d")
        fs.add_file("/etc/rc.d/rc.local", "#!/bin/bash\ntouch /var/lock/subsys/local\n", mode=0o644)
        fs.add_symlink("/etc/rc.local", "rc.d/rc.local")
        write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
        assert fs.nodes["/etc/rc.local"].kind == "symlink"
        assert fs.text("/etc/rc.d/rc.local").endswith(
            "restorecon -RF /root/.ssh 2>/dev/null || :\n"
        )
        assert fs.nodes["/etc/rc.d/rc.local"].mode == 0o700

    def test_only_rc_d_exists(self):
        fs = linux_guest()
        fs.add_dir("/etc/selinux")
        fs.add_dir("/etc/rc.d")
        write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
        assert "/etc/rc.local" not in fs.nodes
        assert fs.text("/etc/rc.d/rc.local").startswith("#!/bin/sh\n")

    def test_rc_local_link_climbing_out_stays_inside(self):
        fs = linux_guest()
        fs.add_dir("/etc/selinux")
        fs.add_symlink("/etc/rc.local", "../../../../../../tmp/rc")
        fs.add_dir("/tmp")
        write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
        assert fs.text("/tmp/rc").startswith("#!/bin/sh\n")  # the guest's /tmp, not above

    def test_rc_local_link_loop_is_refused(self):
        fs = linux_guest()
        fs.add_dir("/etc/selinux")
        fs.add_symlink("/etc/rc.local", "/etc/rc.local")
        with pytest.raises(GuestRefused, match="too many levels"):
            write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
