"""Guests of the metadata service, simulated from loopback addresses: servers booted on a
127.0.0.0/24 network (the ``loopback_guests`` marker of tests/conftest.py's ``cloud``), and a
client bound to a server's address is that server as far as the service can tell."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import httpx
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.networks import service as networks
from tests.support.cloud import Cloud, create_server, wait_for

SECRET = "proxy-secret"


@dataclasses.dataclass
class Guest:
    id: str
    address: str
    mac: str
    project_id: str = "proj"

    def client(self, base: str) -> httpx.Client:
        return httpx.Client(
            base_url=base, timeout=10, transport=httpx.HTTPTransport(local_address=self.address)
        )


MetadataServer = Callable[..., AbstractContextManager[str]]


def boot(api: httpx.Client, cloud: Cloud, **fields: Any) -> Guest:
    fields.setdefault("networks", [{"uuid": cloud.network_id}])
    server = create_server(api, cloud, "2.37", **fields)
    server = wait_for(api, server["id"], "ACTIVE", version="2.37")
    (port,) = server["addresses"]["loop"]
    return Guest(server["id"], port["addr"], port["OS-EXT-IPS-MAC:mac_addr"])


def add_loop_network(api_db: Database, cloud: Cloud) -> None:
    """Make 127.0.0.0/24 the network ``cloud``'s servers boot on, so each has a loopback
    address a test can connect from."""

    def work(session: Session) -> None:
        net = networks.add_network(session, name="loop", cidr="127.0.0.0/24", gateway="127.0.0.1")
        cloud.network_id = net.uuid

    api_db.run(work, write=True)
