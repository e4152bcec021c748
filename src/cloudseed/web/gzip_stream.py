"""Whether bytes that start like gzip are a whole gzip stream, IO-free and with bounded work.

User data may be sent gzipped (cloud-init and Ignition's users do, to fit the limit); the
guest decompresses it. A stream that is cut short or corrupt would fail there, at first boot,
with nothing in the API to say why, so create, rebuild and the updates refuse it (issue 34;
Nova stores anything that is base64). The check inflates and discards: it keeps no output, and
stops after ``MAX_INFLATED`` bytes of it, since a valid stream may legitimately inflate far
beyond what is worth checking in a request (a "gzip bomb" is the guest's concern, not an
error); up to there every member's CRC and length are verified, as gzip.decompress would.
"""

from __future__ import annotations

import zlib

MAGIC = b"\x1f\x8b"
MAX_INFLATED = 16 * 1024 * 1024  # bytes of output checked at most (well under 0.1 s of CPU)
_CHUNK = 1024 * 1024


def is_gzip(data: bytes) -> bool:
    return data[:2] == MAGIC


def gzip_problem(data: bytes, max_inflated: int = MAX_INFLATED) -> str | None:
    """Why ``data`` (starting with the gzip magic) is not a gzip stream, or None when it is
    one (or is one as far as ``max_inflated`` bytes of output show). Members may follow one
    another, and zero bytes may pad the end, as gzip(1) and Python's gzip module accept."""
    rest = data
    inflated = 0
    while rest:
        if not is_gzip(rest):
            if rest.strip(b"\x00"):
                return "data after the end of the gzip stream"
            return None
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending = rest
        try:
            while not inflater.eof:
                out = inflater.decompress(pending, _CHUNK)
                inflated += len(out)
                if inflated > max_inflated:
                    return None
                pending = inflater.unconsumed_tail
                if not out and not pending:
                    return "the gzip stream is truncated"
        except zlib.error as exc:
            return f"the gzip stream is corrupt ({exc})"
        rest = inflater.unused_data
    return None
