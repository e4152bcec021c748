"""A read-only slice of the Networking API v2.0 (Neutron's format) at ``/network``.

The openstack CLI resolves ``server create --network NAME`` through the network service.
cloudseed has no Neutron; it answers those look-ups from its own network registry. Point
clients at it with ``network_endpoint_override: http://HOST:8774/network``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.networks import service
from cloudseed.networks.errors import NetworkNotFound
from cloudseed.networks.models import Network
from cloudseed.web.links import base_url
from cloudseed.web.requests import api_db_of, context_of, settings_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction


def network_body(network: Network) -> dict[str, Any]:
    return {
        "id": network.uuid,
        "name": network.name,
        "status": "ACTIVE",
        "admin_state_up": True,
        "shared": True,
        "subnets": [],
        "mtu": network.mtu,
        "router:external": False,
        "tenant_id": "",
        "project_id": "",
        "description": f"{network.cidr} (cloudseed)",
        "tags": [],
    }


async def versions(request: Request) -> Response:
    prefix = settings_of(request).api.compute_link_prefix
    return JSONResponse(
        {
            "versions": [
                {
                    "id": "v2.0",
                    "status": "CURRENT",
                    "links": [
                        {"rel": "self", "href": f"{base_url(request, prefix)}/network/v2.0/"}
                    ],
                }
            ]
        }
    )


async def show(request: Request) -> Response:
    context_of(request)
    db, ref = api_db_of(request), request.path_params["network_id"]

    def read(session: Session) -> dict[str, Any]:
        network = service.get_network(session, ref)
        if network.uuid != ref:  # Neutron looks networks up by id only
            raise NetworkNotFound(ref)
        return network_body(network)

    return JSONResponse({"network": await in_transaction(db, read)})


async def index(request: Request) -> Response:
    context_of(request)
    db, name = api_db_of(request), request.query_params.get("name")

    def read(session: Session) -> list[dict[str, Any]]:
        return [
            network_body(n)
            for n in service.list_networks(session)
            if name is None or n.name == name
        ]

    return JSONResponse({"networks": await in_transaction(db, read)})


routes = [
    Route("/network", versions, methods=["GET"]),
    Route("/network/", versions, methods=["GET"]),
    Route("/network/v2.0/networks", index, methods=["GET"]),
    Route("/network/v2.0/networks/{network_id}", show, methods=["GET"]),
]
