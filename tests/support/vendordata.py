"""A vendordata request and settings read from a cloudseed.conf of given [api] options."""

from __future__ import annotations

from pathlib import Path

from cloudseed.settings import Settings, load_settings
from cloudseed.vendordata import VendordataRequest

REQUEST = VendordataRequest(
    project_id="p",
    instance_id="i",
    image_id="img",
    user_data=None,
    hostname="h",
    metadata={},
    boot_roles="",
)


def settings_from(
    tmp_path: Path, api: dict[str, str], auth: dict[str, str] | None = None
) -> Settings:
    lines = ["[api]", *(f"{name} = {value}" for name, value in api.items())]
    if auth is not None:
        lines += ["[vendordata_dynamic_auth]", *(f"{k} = {v}" for k, v in auth.items())]
    config = tmp_path / "cloudseed.conf"
    config.write_text("\n".join(lines) + "\n")
    return load_settings(config_file=config, environ={})
