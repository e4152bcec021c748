"""The servers API: ``v21_routes`` holds every ``/v2.1/servers`` URL (below ``/v2.1``:
``api/app.py`` serves them there and under ``/v2.1/{project_id}``).

One module per resource: ``servers`` (create, list, show, update, delete), ``lifecycle`` (the
``POST .../action`` verbs), ``security_groups`` (two of those verbs and
``os-security-groups``), ``metadata_items``, ``tags`` (2.26), ``instance_actions``, ``password``
and ``bootstrap_history``, ``project_keys`` (``/os-project-keys``, 2.106: keys for every server
of a project) and ``metadata_options`` (2.109: project defaults, a server's token-less access
audit), ``boot_report`` (2.110: what the guest reported of its boot) and ``notices`` (2.111: a
request's lifecycle notice, a project's defaults); ``requests`` holds what they all read from
a request.
"""

from __future__ import annotations

from starlette.routing import Route

from cloudseed.servers.api import (
    boot_report,
    bootstrap_history,
    instance_actions,
    lifecycle,
    metadata_items,
    metadata_options,
    notices,
    password,
    project_keys,
    security_groups,
    servers,
    tags,
)


def _routes() -> list[Route]:
    s = "/servers"
    one = f"{s}/{{server_id}}"
    return [
        Route(s, servers.index, methods=["GET"]),
        Route(s, servers.create, methods=["POST"]),
        Route(f"{s}/detail", servers.detail, methods=["GET"]),
        Route(one, servers.show, methods=["GET"]),
        Route(one, servers.update, methods=["PUT"]),
        Route(one, servers.delete, methods=["DELETE"]),
        Route(f"{one}/action", lifecycle.action, methods=["POST"]),
        Route(f"{one}/metadata", metadata_items.index, methods=["GET"]),
        Route(f"{one}/metadata", metadata_items.replace_or_update, methods=["PUT", "POST"]),
        Route(f"{one}/metadata/{{key}}", metadata_items.show, methods=["GET"]),
        Route(f"{one}/metadata/{{key}}", metadata_items.put_item, methods=["PUT"]),
        Route(f"{one}/metadata/{{key}}", metadata_items.delete_item, methods=["DELETE"]),
        Route(f"{one}/tags", tags.index, methods=["GET"]),
        Route(f"{one}/tags", tags.replace, methods=["PUT"]),
        Route(f"{one}/tags", tags.delete_all, methods=["DELETE"]),
        Route(f"{one}/tags/{{tag}}", tags.show, methods=["GET"]),
        Route(f"{one}/tags/{{tag}}", tags.add, methods=["PUT"]),
        Route(f"{one}/tags/{{tag}}", tags.delete, methods=["DELETE"]),
        Route(f"{one}/os-instance-actions", instance_actions.index, methods=["GET"]),
        Route(f"{one}/os-instance-actions/{{request_id}}", instance_actions.show, methods=["GET"]),
        Route(f"{one}/os-server-password", password.show, methods=["GET"]),
        Route(f"{one}/os-server-password", password.clear, methods=["DELETE"]),
        Route(f"{one}/bootstrap-history", bootstrap_history.show, methods=["GET"]),
        Route(f"{one}/boot-report", boot_report.show, methods=["GET"]),  # 2.110: readiness
        Route(f"{one}/os-security-groups", security_groups.index, methods=["GET"]),
        Route("/os-project-keys/{id}", project_keys.show, methods=["GET"]),
        Route("/os-project-keys/{id}", project_keys.update, methods=["PUT"]),
        # 2.109: metadata options' project defaults and a server's token-less access audit.
        Route(f"{one}/metadata-access", metadata_options.access_show, methods=["GET"]),
        Route(
            "/os-metadata-options-defaults/{id}", metadata_options.defaults_show, methods=["GET"]
        ),
        Route(
            "/os-metadata-options-defaults/{id}", metadata_options.defaults_update, methods=["PUT"]
        ),
        # 2.111: the lifecycle notices a project's servers get by default.
        Route("/os-lifecycle-notice-defaults/{id}", notices.defaults_show, methods=["GET"]),
        Route("/os-lifecycle-notice-defaults/{id}", notices.defaults_update, methods=["PUT"]),
    ]


v21_routes = _routes()
