"""What the drop-in asks Neutron, as Nova's metadata API asks it: the instance of a fixed IP
(direct mode: ports with ``fixed_ips=ip_address=<ip>``, their ``device_id``) and an
instance's security groups (its ports by ``device_id``, then the groups' names).

The client is keystoneauth's, loaded from nova.conf's ``[neutron]`` auth, session and
endpoint options exactly as Nova loads them (``auth_type = none`` with an
``endpoint_override`` works too). Its calls block: callers run them in worker threads.
Neutron that cannot be reached or answers an error is ``NeutronUnavailable`` (503).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from oslo_config import cfg

from cloudseed.errors import ConfigError, InvalidInput, ServiceUnavailable

log = logging.getLogger(__name__)

GROUP = "neutron"
MAX_SEARCH_IDS = 150  # ids per query, as Nova splits them (the URL has a fixed size)
MAX_QUERY_NETWORKS = 160


class NeutronUnavailable(ServiceUnavailable):
    def __init__(self, why: str) -> None:
        super().__init__("The networking service is unavailable; try again later.")
        self.why = why


class ProviderLookupFailed(InvalidInput):
    """No single port matches a metadata provider and an address (400, as Nova)."""


class AddressInUseTwice(NeutronUnavailable):
    """More than one instance has the fixed IP (Nova answers 500 for it too)."""


class Neutron:
    def __init__(self, conf: cfg.ConfigOpts, *, retries: int) -> None:
        """ConfigError when ``[neutron]`` has no usable auth: Nova's metadata API cannot
        serve a document without Neutron either."""
        from keystoneauth1 import exceptions, loading

        try:
            auth = loading.load_auth_from_conf_options(conf, GROUP)
            session = loading.load_session_from_conf_options(conf, GROUP, auth=auth)
            self._adapter = loading.load_adapter_from_conf_options(
                conf, GROUP, session=session, auth=auth, raise_exc=False
            )
        except exceptions.MissingRequiredOptions as exc:
            names = ", ".join(o.dest for o in exc.options)
            raise ConfigError(f"[neutron] is missing keystoneauth options: {names}") from None
        except (exceptions.NoMatchingPlugin, exceptions.ClientException, cfg.Error) as exc:
            raise ConfigError(f"[neutron] auth cannot be loaded: {exc}") from None
        if auth is None:
            raise ConfigError(
                "[neutron] auth_type is not set: Nova's metadata API asks Neutron for ports "
                "and security groups, and so does the drop-in (auth_type = none with "
                "endpoint_override for a Neutron without Keystone)"
            )
        self._retries = retries

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        from keystoneauth1 import exceptions

        try:
            response = self._adapter.get(
                "/v2.0" + path, params=params, connect_retries=self._retries
            )
        except exceptions.ClientException as exc:
            raise NeutronUnavailable(f"GET {path}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise NeutronUnavailable(f"GET {path}: {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            raise NeutronUnavailable(f"GET {path}: not JSON") from None
        if not isinstance(body, dict):
            raise NeutronUnavailable(f"GET {path}: not a JSON object")
        return body

    def instance_of_address(self, address: str) -> str | None:
        """The instance whose port has fixed IP ``address`` (None: none has)."""
        ports = self._get("/ports", {"fixed_ips": f"ip_address={address}"}).get("ports") or []
        owners = [p["device_id"] for p in ports if isinstance(p, dict) and p.get("device_id")]
        if len(owners) > 1:
            raise AddressInUseTwice(f"{address} belongs to {len(owners)} ports")
        return owners[0] if owners else None

    def instance_of_provider(self, provider: str, address: str) -> tuple[str, str]:
        """(instance uuid, tenant) of the one port with ``address`` on the networks of
        metadata provider ``provider`` (a load balancer's X-Metadata-Provider), as Nova
        finds it; ProviderLookupFailed (400, Nova's messages) otherwise."""
        subnets = self._get(
            "/subnets", {"advanced_service_providers": [provider], "fields": ["network_id"]}
        ).get("subnets")
        if not subnets:
            raise ProviderLookupFailed(f"Could not find any subnets for provider {provider}")
        networks = [s["network_id"] for s in subnets]
        ports: list[dict[str, Any]] = []
        for chunk in _chunks(networks, MAX_QUERY_NETWORKS):
            found = self._get(
                "/ports",
                {
                    "fixed_ips": f"ip_address={address}",
                    "network_id": chunk,
                    "fields": ["device_id", "tenant_id"],
                },
            )
            ports += found.get("ports") or []
        if len(ports) != 1:
            raise ProviderLookupFailed(
                f"Expected a single port matching provider {provider} and IP {address}. "
                f"Found {len(ports)}."
            )
        return str(ports[0]["device_id"]), str(ports[0]["tenant_id"])

    def security_groups(self, instance_uuid: str) -> tuple[str, ...]:
        """The names of the security groups of the instance's ports, port by port (a
        group's id where it has no name), as Nova lists them."""
        ports = (
            self._get(
                "/ports",
                {"device_id": [instance_uuid], "fields": ["security_groups", "device_id"]},
            ).get("ports")
            or []
        )
        wanted: list[str] = []
        for port in ports:
            for group in port.get("security_groups") or ():
                if group not in wanted:
                    wanted.append(group)
        groups: dict[str, dict[str, Any]] = {}
        for chunk in _chunks(wanted, MAX_SEARCH_IDS):
            found = self._get("/security-groups", {"id": chunk, "fields": ["id", "name"]})
            for group in found.get("security_groups") or ():
                groups[group["id"]] = group
        names = []
        for port in ports:
            for group_id in port.get("security_groups") or ():
                group = groups.get(group_id)
                if group is not None:
                    names.append(group.get("name") or group["id"])
        return tuple(names)


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
