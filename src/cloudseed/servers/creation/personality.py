"""Personality files (microversions below 2.57): files a create or rebuild puts onto the
config drive (``openstack/content/NNNN``, listed in ``meta_data.json`` ``files``).

Like Nova, cloudseed never stores them: they travel in memory from the request to the drive
builder. Limits are Nova's quota limits, checked on the request: the number of files, then the
longest path (characters), then the longest content (its base64 text, as Nova counts it).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from sqlalchemy.orm import Session

from cloudseed.quotas.service import limit_for, within
from cloudseed.servers.errors import (
    PersonalityContentTooLong,
    PersonalityNotDecodable,
    PersonalityPathTooLong,
    TooManyPersonalityFiles,
)
from cloudseed.settings import QuotaSection

# Nova's parameter_types.personality, with path and contents required (Nova answers a missing
# one with a 500 from a KeyError).
SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "contents": {"type": "string", "format": "base64"},
        },
        "required": ["path", "contents"],
        "additionalProperties": False,
    },
}

Encoded = tuple[tuple[str, str], ...]  # (path, base64 text), as the request had them
Files = tuple[tuple[str, bytes], ...]


# Whitespace may wrap base64 text (``base64`` wraps at 76 columns); it carries nothing.
_WHITESPACE = re.compile(r"\s+")


def _decodable(text: str) -> bool:
    try:
        base64.b64decode(_WHITESPACE.sub("", text), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def from_request(personality: list[dict[str, str]] | None) -> Encoded:
    """The request's files, each checked to be base64 before anything is written: the
    schema's ``base64`` format is Python's lenient decoder, which skips characters outside
    the alphabet, so ``"!!!"`` passed it as zero bytes. Strict, as Nova's
    ``Personality content for <path> cannot be decoded.`` check: only the alphabet, padding
    at the end, whitespace ignored. PersonalityNotDecodable (400) names the first bad file."""
    files = tuple((item["path"], item["contents"]) for item in personality or ())
    for path, text in files:
        if not _decodable(text):
            raise PersonalityNotDecodable(path)
    return files


def check_limits(
    session: Session, files: Encoded, *, project_id: str, user_id: str, quota: QuotaSection
) -> None:
    """Raise a QuotaExceeded (403) when the files pass a limit."""
    if not files:
        return

    def limit(resource: str, default: int) -> int:
        return limit_for(
            session, resource=resource, project_id=project_id, user_id=user_id, default=default
        )

    count_limit = limit("injected_files", quota.injected_files)
    if not within(count_limit, len(files)):
        raise TooManyPersonalityFiles(count_limit)
    path_limit = limit("injected_file_path_bytes", quota.injected_file_path_length)
    if not within(path_limit, max(len(path) for path, _ in files)):
        raise PersonalityPathTooLong(path_limit)
    content_limit = limit("injected_file_content_bytes", quota.injected_file_content_bytes)
    if not within(content_limit, max(len(text) for _, text in files)):
        raise PersonalityContentTooLong(content_limit)


def decode(files: Encoded) -> Files:
    """The files' bytes; ``from_request`` has checked the base64 already."""
    return tuple((path, base64.b64decode(text)) for path, text in files)
