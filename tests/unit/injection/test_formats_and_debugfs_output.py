import pytest

from cloudseed.injection import formats
from cloudseed.injection.errors import InvalidInjectionRequest
from cloudseed.injection.tools.debugfs import parse_stat, quote


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (b"QFI\xfb\x00\x00\x00\x03" + bytes(504), "qcow2"),
        (b"KDMV" + bytes(508), "vmdk"),
        (bytes(0x40) + b"\x7f\x10\xda\xbe" + bytes(100), "vdi"),
        (b"vhdxfile" + bytes(8), "vhdx"),
        (b"LUKS\xba\xbe\x00\x02", "luks"),
        (bytes(512), None),
        (b"\xebc\x90" + bytes(509), None),  # a boot sector is raw data
        (b"", None),
    ],
)
def test_detect(header, expected):
    assert formats.detect(header) == expected


STAT = """Inode: 15   Type: symlink    Mode:  0777   Flags: 0x0
Generation: 0    Version: 0x00000000:00000000
User:  1000   Group:    42   Project:     0   Size: 4
Fast link dest: "/etc"
"""


def test_parse_stat():
    st = parse_stat(STAT)
    assert (st.kind, st.mode, st.uid, st.gid, st.fast_link) == ("symlink", 0o777, 1000, 42, "/etc")
    regular = parse_stat(
        STAT.replace("symlink", "regular")
        .replace("0777", "4755")
        .replace('Fast link dest: "/etc"\n', "")
    )
    assert (regular.kind, regular.mode, regular.fast_link) == ("file", 0o4755, None)
    assert parse_stat(STAT.replace("symlink", "FIFO")).kind == "other"


def test_quote_refuses_double_quote():
    assert quote("/a b/c") == '"/a b/c"'
    with pytest.raises(InvalidInjectionRequest):
        quote('/a"b')
