"""Signing keys (API database): one current key, and the retired ones still published."""

from __future__ import annotations

from sqlalchemy import Integer
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


class IdentityKey(ApiBase):
    __tablename__ = "identity_keys"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    kid: Mapped[name_column] = mapped_column(unique=True)
    # PKCS#8 PEM, encrypted when [identity] key_encryption_secret is set.
    private_key: Mapped[str] = mapped_column(LongText)
    certificate: Mapped[str] = mapped_column(LongText)
    # 1 on the current key, NULL on retired ones: the unique constraint lets two processes
    # that both found no key (or rotate at once) create only one current key between them,
    # on every backend (NULLs never collide).
    current_slot: Mapped[int | None] = mapped_column(Integer, unique=True, default=1)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    retired_at: Mapped[optional_timestamp] = mapped_column(default=None)
