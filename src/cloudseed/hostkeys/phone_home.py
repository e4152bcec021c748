"""cloud-init's phone_home report, as its module posts it. IO-free.

cloud-init's ``phone_home`` module (``cc_phone_home.py``, the same from 22.4 to today) posts
once per instance, at the end of the first boot, with ``requests``: the body is
``application/x-www-form-urlencoded``. With ``post: all`` (the default) its fields are
``pub_key_dsa``, ``pub_key_rsa``, ``pub_key_ecdsa``, ``pub_key_ed25519``, ``instance_id``,
``hostname`` and ``fqdn``; a key field holds the ``/etc/ssh/ssh_host_*_key.pub`` file as it is
(one line and its newline), and a file it could not read is sent as ``N/A`` (the DSA key, on
every current distribution). A ``post:`` list sends only the fields it names, any other name
in it as ``N/A``. It tries ``tries`` times (default 10), 3 s apart, until it gets a 2xx.

What is checked here, before anything is stored: the body's type and encoding (ASCII on the
wire, UTF-8 once percent-decoded), each known field at most once, ``instance_id`` equal to the
caller (the caller is identified as for every metadata request; the form only has to agree),
names of at most 255 characters without control characters (PostgreSQL refuses a NUL), every
key a valid host key of its field's type, and at least one key. Unknown fields are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from cloudseed.hostkeys.errors import InvalidReport, ReportForAnother
from cloudseed.hostkeys.key_lines import HostKey, parse_host_key

# Four key lines of at most keys.MAX_LINE, percent-encoded, fit; a boot storm's worth of
# bodies this size is what a metadata worker may hold at once.
MAX_BODY = 64 * 1024
MAX_FIELDS = 32
MAX_NAME = 255
NOT_AVAILABLE = "N/A"
FORM = "application/x-www-form-urlencoded"

# Field -> the key types it may hold, in cloud-init's order.
KEY_FIELDS: dict[str, frozenset[str]] = {
    "pub_key_dsa": frozenset({"ssh-dss"}),
    "pub_key_rsa": frozenset({"ssh-rsa"}),
    "pub_key_ecdsa": frozenset(
        {"ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"}
    ),
    "pub_key_ed25519": frozenset({"ssh-ed25519"}),
}
NAME_FIELDS = ("hostname", "fqdn")
KNOWN = frozenset({"instance_id", *NAME_FIELDS, *KEY_FIELDS})


@dataclass(frozen=True, slots=True)
class PhoneHome:
    instance_id: str
    hostname: str | None
    fqdn: str | None
    keys: tuple[HostKey, ...]


def parse_report(body: bytes, content_type: str | None, *, caller: str) -> PhoneHome:
    """The report in ``body``, posted by instance ``caller``; InvalidReport (400) or
    ReportForAnother (403) otherwise."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in ("", FORM):
        raise InvalidReport(
            f"A phone_home report is a form ({FORM}), as cloud-init's phone_home module "
            f"posts it, not {media[:100]!r}."
        )
    if len(body) > MAX_BODY:
        raise InvalidReport(f"The report is larger than {MAX_BODY} bytes.")
    fields = _fields(body)
    instance_id = fields.get("instance_id")
    if not instance_id:
        raise InvalidReport("The report has no instance_id (cloud-init sends it with post: all).")
    if instance_id != caller:
        raise ReportForAnother(caller=caller, claimed=instance_id[:64])
    hostname, fqdn = (_name(field, fields.get(field)) for field in NAME_FIELDS)
    keys = []
    for field, types in KEY_FIELDS.items():
        value = fields.get(field, "")
        if value.strip() in ("", NOT_AVAILABLE):
            continue
        key = parse_host_key(value, what=field)
        if key.type not in types:
            raise InvalidReport(f"{field} holds a {key.type} key.")
        keys.append(key)
    if not keys:
        raise InvalidReport("The report has no host key (every pub_key_* field is missing or N/A).")
    return PhoneHome(instance_id=instance_id, hostname=hostname, fqdn=fqdn, keys=tuple(keys))


def _fields(body: bytes) -> dict[str, str]:
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidReport(
            f"The report is not form-encoded ({FORM}): it has bytes outside ASCII."
        ) from None
    try:
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FIELDS,
        )
    except UnicodeDecodeError:
        raise InvalidReport("A field of the report is not valid UTF-8.") from None
    except ValueError:
        raise InvalidReport(
            f"The report is not form-encoded ({FORM}), or has more than {MAX_FIELDS} fields."
        ) from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name not in KNOWN:
            continue  # a name from the user's post: list, sent as N/A; nothing of ours
        if name in fields:
            raise InvalidReport(f"The report has {name} more than once.")
        fields[name] = value
    return fields


def _name(field: str, value: str | None) -> str | None:
    if value is None or value in ("", NOT_AVAILABLE):
        return None
    if len(value) > MAX_NAME:
        raise InvalidReport(f"{field} is longer than {MAX_NAME} characters.")
    if not value.isprintable():
        raise InvalidReport(f"{field} has control characters.")
    return value
