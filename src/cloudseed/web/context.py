"""Who is making a request, and the ASGI scope keys the outer layers fill in for routes.

The auth middleware sets ``CONTEXT_KEY``; the edge sets ``REQUEST_ID_KEY`` and, under
``/v2.1``, ``VERSION_KEY``. They live here, below both, so route helpers read them without
importing the middleware.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTEXT_KEY = "cloudseed.context"
REQUEST_ID_KEY = "cloudseed.request_id"
VERSION_KEY = "cloudseed.api_version"


@dataclass(frozen=True)
class RequestContext:
    user_id: str
    project_id: str
    roles: frozenset[str]
    request_id: str

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles
