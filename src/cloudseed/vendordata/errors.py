"""Vendordata errors.

ConfigError ──────── VendordataFileError   the static file is missing or not JSON, at start
ServiceUnavailable ─ VendordataError       a dynamic target failed while an instance was
                                           being built with vendordata_dynamic_failure_fatal

Internal, never shown to a caller as such:
ValueError ───────── NotJSON               the text is not one JSON value (documents.parse)
Exception ────────── TargetFailure         one call to a dynamic target failed (the cache
                                           decides: stale answer, retry, or VendordataError)
"""

from __future__ import annotations

from cloudseed.errors import ConfigError, ServiceUnavailable


class VendordataFileError(ConfigError):
    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"[api] vendordata_jsonfile_path {path}: {reason}")
        self.path = path
        self.reason = reason


class VendordataError(ServiceUnavailable):
    def __init__(self, *, target: str, reason: str) -> None:
        super().__init__(f"Vendordata target {target!r} failed: {reason}")
        self.target = target
        self.reason = reason


class NotJSON(ValueError):
    """The text is not one JSON value (RFC 8259: no NaN, no Infinity)."""


class TargetFailure(Exception):
    """The call failed: connection, timeout, HTTP error status, an answer that is not JSON."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
