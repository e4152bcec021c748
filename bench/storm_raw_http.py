"""A thin HTTP/1.1 client: one kept-alive connection, for the hundreds of thousands of requests
that fetching documents, filling caches and polling for a change take."""

from __future__ import annotations

import asyncio
import contextlib


class RawConnection:
    """One kept-alive HTTP/1.1 connection and nothing else: fetching every document of every
    guest is hundreds of thousands of requests, where httpx's own cost would dominate."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
    ) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, f"127.0.0.1:{port}")

    @property
    def local_port(self) -> int:
        return int(self.writer.get_extra_info("sockname")[1])

    async def get(self, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {self.host}",
            *(f"{k}: {v}" for k, v in headers.items()),
            "",
            "",
        ]
        self.writer.write("\r\n".join(lines).encode("latin-1"))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        length = None
        for line in header_lines:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"GET {path}: no content-length in {head!r}")
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
