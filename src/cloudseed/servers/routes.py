"""Routes of the servers API and the registries it reads (flavors, images)."""

from __future__ import annotations

from starlette.routing import Route

from cloudseed.flavors import api as flavors
from cloudseed.images import api as images
from cloudseed.servers import action_api, api, details_api


def _routes(prefix: str) -> list[Route]:
    s = f"{prefix}/servers"
    one = f"{s}/{{server_id}}"
    return [
        Route(s, api.index, methods=["GET"]),
        Route(s, api.create, methods=["POST"]),
        Route(f"{s}/detail", api.detail, methods=["GET"]),
        Route(one, api.show, methods=["GET"]),
        Route(one, api.update, methods=["PUT"]),
        Route(one, api.delete, methods=["DELETE"]),
        Route(f"{one}/action", action_api.action, methods=["POST"]),
        Route(f"{one}/metadata", details_api.metadata_index, methods=["GET"]),
        Route(f"{one}/metadata", details_api.metadata_replace_or_update, methods=["PUT", "POST"]),
        Route(f"{one}/metadata/{{key}}", details_api.metadata_show, methods=["GET"]),
        Route(f"{one}/metadata/{{key}}", details_api.metadata_put_item, methods=["PUT"]),
        Route(f"{one}/metadata/{{key}}", details_api.metadata_delete_item, methods=["DELETE"]),
        Route(f"{one}/os-instance-actions", details_api.actions_index, methods=["GET"]),
        Route(
            f"{one}/os-instance-actions/{{request_id}}", details_api.actions_show, methods=["GET"]
        ),
        Route(f"{one}/os-server-password", details_api.password_show, methods=["GET"]),
        Route(f"{one}/os-server-password", details_api.password_clear, methods=["DELETE"]),
        Route(f"{one}/bootstrap-history", details_api.bootstrap_history, methods=["GET"]),
        Route(f"{prefix}/flavors", flavors.index, methods=["GET"]),
        Route(f"{prefix}/flavors/detail", flavors.detail, methods=["GET"]),
        Route(f"{prefix}/flavors/{{flavor_id}}", flavors.show, methods=["GET"]),
        Route(f"{prefix}/images", images.index, methods=["GET"]),
        Route(f"{prefix}/images/detail", images.detail, methods=["GET"]),
        Route(f"{prefix}/images/{{image_id}}", images.show, methods=["GET"]),
    ]


routes = [*_routes("/v2.1"), *_routes("/v2.1/{project_id}")]
