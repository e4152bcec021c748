"""The key pair table of the API database (Nova's ``key_pairs``: hard delete, unique per user)."""

from __future__ import annotations

from sqlalchemy import Enum, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    ApiBase,
    LongText,
    name_column,
    optional_timestamp,
    timestamp,
    utcnow,
)

KEY_TYPES = ("ssh", "x509")


class KeyPair(ApiBase):
    __tablename__ = "key_pairs"
    __table_args__ = (UniqueConstraint("user_id", "name"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[name_column]
    user_id: Mapped[name_column]
    fingerprint: Mapped[str] = mapped_column(String(255))
    # OpenSSH's "SHA256:<base64>" form; Nova has no such column (it only keeps MD5/SHA-1).
    fingerprint_sha256: Mapped[str] = mapped_column(String(64))
    # Stored exactly as sent, as Nova does: users compare it with their file byte for byte.
    public_key: Mapped[str] = mapped_column(LongText)
    type: Mapped[str] = mapped_column(Enum(*KEY_TYPES, name="keypair_types"), server_default="ssh")
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)


class ProjectKey(ApiBase):
    """A key pair an administrator attached to a project (2.106): every server of the project
    gets it, unless the server blocks project keys. The key pair stays its owner's; the
    project refers to it by (user, name), in ``position`` order."""

    __tablename__ = "project_keys"
    __table_args__ = (UniqueConstraint("project_id", "user_id", "key_name"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[name_column] = mapped_column(index=True)
    user_id: Mapped[name_column]
    key_name: Mapped[name_column]
    position: Mapped[int] = mapped_column(Integer, default=0)
    expires_at: Mapped[optional_timestamp] = mapped_column(default=None)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)


__all__ = ["KEY_TYPES", "KeyPair", "ProjectKey"]
