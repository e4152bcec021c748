"""Authorisation rules, Nova's defaults: an administrator may do anything; everyone else may
act only on their own resources (``os_compute_api:os-keypairs:*`` is
``rule:context_is_admin or user_id:%(user_id)s``)."""

from __future__ import annotations

from cloudseed.web.context import RequestContext
from cloudseed.web.errors import PolicyNotAuthorized


def authorize_owner_or_admin(context: RequestContext, action: str, *, target_user_id: str) -> None:
    if context.is_admin or context.user_id == target_user_id:
        return
    raise PolicyNotAuthorized(action)
