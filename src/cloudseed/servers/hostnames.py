"""Hostnames derived from server names (IO-free).

Nova's rule, with one deliberate difference: Nova keeps Latin-1 letters (``ü``), which are not
valid in a DNS label and which cloud-init then writes into /etc/hostname. We fold accents away
(``ü`` -> ``u``) so the result is always a valid label.
"""

from __future__ import annotations

import re
import unicodedata


def sanitize_hostname(name: str, *, default: str) -> str:
    """At most 63 characters; spaces, underscores and dots become hyphens, anything else that
    is not a letter, digit or hyphen goes; lower case; no leading or trailing hyphen. Falls back
    to ``default`` when nothing is left."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[ _.]", "-", text)
    text = re.sub(r"[^A-Za-z0-9-]+", "", text)
    text = text.lower().strip("-")
    text = text[:63].rstrip("-")
    return text or default
