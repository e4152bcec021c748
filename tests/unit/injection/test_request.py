import pytest

from cloudseed.injection.errors import InvalidInjectionRequest
from cloudseed.injection.request import (
    InjectionOptions,
    InjectionRequest,
    check_format,
    guest_path,
)
from cloudseed.settings import load_settings


class TestGuestPath:
    @pytest.mark.parametrize(
        ("given", "expected"),
        [
            ("meta.js", "/meta.js"),  # Nova: relative means from the root
            ("/etc//network/./interfaces", "/etc/network/interfaces"),
            ("/a b/c\\d", "/a b/c\\d"),
        ],
    )
    def test_made_absolute_and_normal(self, given, expected):
        assert guest_path(given) == expected

    @pytest.mark.parametrize(
        "bad", ["", "/", "/./", "../etc/passwd", "/etc/../shadow", "/etc/x\ny", "/tmp/\x00"]
    )
    def test_refused(self, bad):
        with pytest.raises(InvalidInjectionRequest):
            guest_path(bad)


class TestRequest:
    def test_files_are_normalised(self):
        request = InjectionRequest(files=(("etc/motd", b"hi"),))
        assert request.files == (("/etc/motd", b"hi"),)

    def test_password_with_line_break_refused(self):
        with pytest.raises(InvalidInjectionRequest, match="line break"):
            InjectionRequest(admin_password="a\nb")

    def test_blank_key_refused(self):
        with pytest.raises(InvalidInjectionRequest):
            InjectionRequest(key_data="  \n")

    def test_empty(self):
        assert InjectionRequest().is_empty
        assert not InjectionRequest(admin_password="").is_empty
        assert not InjectionRequest(metadata={"a": "b"}).is_empty

    def test_options_filter_key_and_password_only(self):
        request = InjectionRequest(
            key_data="ssh-ed25519 AAAA",
            admin_password="pw",
            metadata={"a": "b"},
            network_config="auto lo\n",
            files=(("/f", b"x"),),
        )
        allowed = request.allowed_by(InjectionOptions(partition=0))
        assert allowed.key_data is None and allowed.admin_password is None
        assert allowed.metadata == {"a": "b"} and allowed.files == (("/f", b"x"),)
        both = request.allowed_by(
            InjectionOptions(partition=0, inject_key=True, inject_password=True)
        )
        assert both == request


class TestOptions:
    def test_defaults_are_novas(self):
        options = InjectionOptions.from_settings(load_settings(environ={}))
        assert options.partition == -2 and not options.enabled
        assert (options.inject_key, options.inject_password) == (False, False)
        assert options.handlers == ("guestfs", "debugfs", "loop", "nbd")

    def test_from_settings_reads_libvirt_section(self):
        settings = load_settings(
            environ={
                "CLOUDSEED_LIBVIRT__INJECT_PARTITION": "1",
                "CLOUDSEED_LIBVIRT__INJECT_KEY": "true",
                "CLOUDSEED_LIBVIRT__INJECT_HANDLERS": " debugfs , loop ,",
            }
        )
        options = InjectionOptions.from_settings(settings, inject_password=True)
        assert options.partition == 1 and options.enabled
        assert options.inject_key and options.inject_password
        assert options.handlers == ("debugfs", "loop")

    def test_unknown_handler_refused(self):
        with pytest.raises(InvalidInjectionRequest, match="floppy"):
            InjectionOptions(handlers=("floppy",))

    def test_partition_below_off_refused(self):
        with pytest.raises(InvalidInjectionRequest):
            InjectionOptions(partition=-3)

    def test_formats(self):
        assert check_format("qcow2") == "qcow2"
        with pytest.raises(InvalidInjectionRequest, match="vmdk"):
            check_format("vmdk")


def test_for_instance():
    ports = [{"mac_address": "fa:16:3e:00:00:01", "mtu": 1500, "fixed_ips": ["10.0.0.5"]}]
    request = InjectionRequest.for_instance(
        key_data="ssh-ed25519 AAAA k",
        ports=ports,
        admin_password="pw",
        metadata={"a": "b"},
        files=(("etc/motd", b"hi"),),
    )
    assert request.key_data == "ssh-ed25519 AAAA k" and request.admin_password == "pw"
    assert request.metadata == {"a": "b"} and request.files == (("/etc/motd", b"hi"),)
    assert request.network_config is None
    with_net = InjectionRequest.for_instance(key_data=None, ports=ports, include_network=True)
    assert with_net.network_config is not None and "auto eth0" in with_net.network_config
    assert InjectionRequest.for_instance(key_data=None).is_empty
    assert InjectionRequest.for_instance(key_data="").is_empty
