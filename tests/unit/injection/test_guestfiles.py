import pytest

from cloudseed.injection import guestfiles

PASSWD = "daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\nroot:x:0:0:root:/root:/bin/bash\n"


def test_account_ids():
    assert guestfiles.account_id(PASSWD, "root") == 0
    assert guestfiles.account_id(PASSWD, "daemon") == 1
    assert guestfiles.account_id(PASSWD, "nobody") is None
    assert guestfiles.has_account(PASSWD, "root")
    assert not guestfiles.has_account("rootless:x:5:5::/:/bin/sh\n", "root")


def test_only_roots_hash_changes():
    shadow = "daemon:*:19000:0:99999:7:::\nroot:!:19001:0:99999:7:::\n"
    updated = guestfiles.with_root_password(shadow, "$6$salt$hash")
    assert updated == "daemon:*:19000:0:99999:7:::\nroot:$6$salt$hash:19001:0:99999:7:::\n"


def test_missing_root_in_shadow():
    with pytest.raises(LookupError):
        guestfiles.with_root_password("daemon:*:1::::::\n", "$6$x$y")


def test_key_appended_after_marker_once():
    first = guestfiles.with_key_appended("ssh-rsa OLD old\n", " ssh-ed25519 NEW new \n")
    assert first == (
        "ssh-rsa OLD old\n\n# The following ssh key was injected by cloudseed\n"
        "ssh-ed25519 NEW new\n"
    )
    assert guestfiles.with_key_appended(first, "ssh-ed25519 NEW new") == first


def test_relabel_hook_new_file_gets_shebang():
    text = guestfiles.with_relabel_hook(None, ["/root/.ssh", "/opt/a b", "/root/.ssh"])
    assert text == (
        "#!/bin/sh\n"
        + guestfiles.RELABEL_COMMENT
        + "\nrestorecon -RF '/opt/a b' /root/.ssh 2>/dev/null || :\n"
    )


def test_relabel_hook_goes_before_exit_0():
    text = guestfiles.with_relabel_hook("#!/bin/sh -e\necho hi\nexit 0\n\n", ["/meta.js"])
    assert text.endswith("restorecon -RF /meta.js 2>/dev/null || :\nexit 0\n")
    assert text.startswith("#!/bin/sh -e\necho hi\n# Added by cloudseed")


def test_relabel_hook_appends_after_unterminated_line():
    text = guestfiles.with_relabel_hook("touch /x", ["/meta.js"])
    assert text.startswith("touch /x\n# Added by cloudseed")
