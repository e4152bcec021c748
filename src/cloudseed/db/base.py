"""Declarative bases for the two kinds of database, and the column types they share.

The API database (global) and each cell database have their own ``MetaData`` and their own
Alembic history. Types are chosen to behave the same on SQLite, PostgreSQL and MariaDB/MySQL:
names compare and sort byte-wise everywhere (MySQL's default collations are case-insensitive,
which would make ``Key`` and ``key`` collide there and nowhere else), and timestamps keep
microseconds.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from sqlalchemy import DateTime, LargeBinary, MetaData, String, Text
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.orm import DeclarativeBase, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Binary collation: equality and ORDER BY by code point on every backend.
NameType = (
    String(255)
    .with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    .with_variant(postgresql.VARCHAR(255, collation="C"), "postgresql")
)
LongText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
# Bytes beyond MySQL's BLOB (64 KiB): MEDIUMBLOB there, BYTEA and BLOB elsewhere.
LongBinary = LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")
Timestamp = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

name_column = Annotated[str, mapped_column(NameType)]
timestamp = Annotated[dt.datetime, mapped_column(Timestamp)]
optional_timestamp = Annotated[dt.datetime | None, mapped_column(Timestamp)]

MYSQL_TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def utcnow() -> dt.datetime:
    """Naive UTC, made on the client so every backend stores the same value."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class ApiBase(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class CellBase(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
