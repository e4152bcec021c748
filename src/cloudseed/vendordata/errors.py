"""Vendordata errors.

ConfigError ──────── VendordataFileError   the static file is missing or not JSON, at start
ServiceUnavailable ─ VendordataError       a dynamic target failed while an instance was
                                           being built with vendordata_dynamic_failure_fatal
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
