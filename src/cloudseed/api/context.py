"""Who is making a request, as established by the auth middleware."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestContext:
    user_id: str
    project_id: str
    roles: frozenset[str]
    request_id: str

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles
