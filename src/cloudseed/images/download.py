"""Downloads of image data for a compute agent's cache (``cache.py``): from the API's Glance
slice over HTTP, resumed with ``Range`` after a cut, checked as an upload is checked at the API,
tried again over the API servers in turn, and only then fsynced and renamed into place.

A failed attempt (a transport error, an answer cut short, a 5xx, a checksum that does not
match) is tried again up to ``[glance] num_retries`` times, each attempt going through the API
servers in turn; a partial file whose bytes do not hash to the registry's checksum is started
over. A 401 fetches a new token once (``Credentials.invalidate``); 401, 403 and 404 after that,
and data that is not the declared format, are final.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from cloudseed.errors import InvalidInput
from cloudseed.images.contents import Digest, check_format
from cloudseed.images.errors import ImageFetchFailed
from cloudseed.images.service import ImageData

log = logging.getLogger(__name__)

CHUNK = 1 << 20
# Waits before the second, third, ... attempt: long enough together (23 s with the default
# three retries) for an API node to restart (3-7 s) or a load balancer to fail over.
BACKOFF_SECONDS = (2.0, 6.0, 15.0, 30.0)
TIMEOUT = httpx.Timeout(60.0, connect=10.0)


class Credentials:
    """How the agent authenticates to the API: the headers of each request, and what to do
    when the API answered 401 (a token expired: fetch a new one)."""

    def headers(self) -> Mapping[str, str]:
        raise NotImplementedError

    def invalidate(self) -> None:
        """Forget a token the API refused (the next ``headers`` fetches a new one)."""


@dataclass(frozen=True)
class StaticToken(Credentials):
    """noauth2: the API believes ``X-Auth-Token: <user>:<project>``; the agent is ``admin``."""

    token: str = "admin"

    def headers(self) -> Mapping[str, str]:
        return {"X-Auth-Token": self.token}


class _Retry(Exception):
    """This attempt failed; another one may succeed (``reason`` says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Restart(_Retry):
    """As _Retry, and the partial file is no use to the next attempt."""


@dataclass
class Fetched:
    """What one download took (for logs and tests): requests made, bytes received."""

    requests: int = 0
    received: int = 0
    seconds: float = 0.0


class ImageDownloader:
    """Downloads from ``servers`` (image endpoints, ``http://HOST:8774/image``), tried in
    order; ``retries``: further attempts after a failed one; ``virtual_size_cap``:
    ``[glance] image_virtual_size_cap``."""

    def __init__(
        self,
        *,
        servers: list[str],
        credentials: Credentials | None = None,
        retries: int = 3,
        virtual_size_cap: int | None = None,
        timeout: httpx.Timeout = TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not servers:
            raise ValueError("an image cache needs at least one API server")
        self.servers = [s.rstrip("/") for s in servers]
        self.credentials = credentials or StaticToken()
        self.retries = retries
        self.virtual_size_cap = virtual_size_cap
        self.timeout = timeout
        self.sleep = sleep
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def download(self, data: ImageData, partial: Path, final: Path) -> Fetched:
        """Download ``data`` into ``partial`` (resuming what is there), check it, and put it
        in place as ``final``; what it took. ImageFetchFailed when no attempt succeeds."""
        fetched = Fetched()
        reasons: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(BACKOFF_SECONDS[min(attempt - 1, len(BACKOFF_SECONDS) - 1)])
            for server in self.servers:
                try:
                    digest = self._receive(server, data, partial, fetched)
                    self._check(data, partial, digest)
                except _Restart as exc:
                    partial.unlink(missing_ok=True)
                    reasons.append(exc.reason)
                    log.warning("image %s from %s: %s", data.image_id, server, exc.reason)
                    continue
                except _Retry as exc:
                    reasons.append(exc.reason)
                    log.warning("image %s from %s: %s", data.image_id, server, exc.reason)
                    continue
                except InvalidInput as exc:
                    # What the registry describes is not bootable: no attempt will change it.
                    partial.unlink(missing_ok=True)
                    raise ImageFetchFailed(data.image_id, exc.message) from exc
                _put_in_place(partial, final)
                return fetched
        raise ImageFetchFailed(
            data.image_id, f"{len(reasons)} attempt(s) failed, the last: {reasons[-1]}"
        )

    def _receive(self, server: str, data: ImageData, partial: Path, fetched: Fetched) -> Digest:
        """Get what ``partial`` lacks of the data from ``server``; the digest of all of it."""
        digest = _digest_of(partial, md5=not data.checksum_sha256)
        if digest.size > data.size:
            raise _Restart(f"a partial download of {digest.size} bytes is longer than the image")
        if digest.size == data.size:
            return digest  # complete, not yet checked (an agent died just before)
        url = f"{server}/v2/images/{data.image_id}/file"
        for auth_attempt in (1, 2):
            headers = dict(self.credentials.headers())
            if digest.size:
                headers["Range"] = f"bytes={digest.size}-"
            fetched.requests += 1
            try:
                with self._http().stream("GET", url, headers=headers) as answer:
                    if answer.status_code == 401 and auth_attempt == 1:
                        self.credentials.invalidate()
                        continue
                    digest = self._take(answer, data, partial, digest, fetched)
            except httpx.HTTPError as exc:
                raise _Retry(f"{type(exc).__name__}: {exc}") from exc
            break
        if digest.size < data.size:
            raise _Retry(f"the answer ended after {digest.size} of {data.size} bytes")
        return digest

    def _take(
        self,
        answer: httpx.Response,
        data: ImageData,
        partial: Path,
        digest: Digest,
        fetched: Fetched,
    ) -> Digest:
        status = answer.status_code
        if status == 204:
            raise _Retry("the API server has no data for it (204)")
        if status == 416 and digest.size:
            raise _Restart("the API server cannot resume from the partial download (416)")
        if status not in (200, 206):
            answer.read()
            reason = f"the API server answered {status}: {answer.text[:200]}"
            if status in (401, 403, 404):
                # Not the agent's to see, or gone (deleted meanwhile): no attempt changes it.
                raise ImageFetchFailed(data.image_id, reason)
            raise _Retry(reason)
        if status == 206:
            wanted = f"bytes {digest.size}-"
            if not answer.headers.get("content-range", "").startswith(wanted):
                raise _Restart(
                    f"the API server sent {answer.headers.get('content-range')!r} for {wanted}"
                )
        elif digest.size:
            digest = digest.fresh()  # the whole again: start over
        mode = "ab" if status == 206 else "wb"
        with partial.open(mode) as out:
            # As they arrive, not gathered into larger pieces: every byte received before a
            # connection broke is kept for the next attempt to resume after.
            for chunk in answer.iter_bytes():
                if digest.size + len(chunk) > data.size:
                    raise _Restart(f"the API server sent more than the image's {data.size} bytes")
                digest.update(chunk)
                out.write(chunk)
                fetched.received += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        return digest

    def _check(self, data: ImageData, partial: Path, digest: Digest) -> None:
        # As Nova checks a download from Glance: the SHA-256 (os_hash_value) when the registry
        # has one, else the MD5 (checksum).
        if data.checksum_sha256:
            if digest.sha256 != data.checksum_sha256:
                raise _Restart(
                    f"its SHA-256 is {digest.sha256}, the registry's {data.checksum_sha256}"
                )
        elif data.checksum_md5 and digest.md5 != data.checksum_md5:
            raise _Restart(f"its MD5 is {digest.md5}, the registry's {data.checksum_md5}")
        check_format(
            partial,
            data.disk_format,
            head=digest.head,
            size=digest.size,
            shown=f"The data of image {data.image_id}",
            virtual_size_cap=self.virtual_size_cap,
        )

    def _http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout, follow_redirects=False)
            return self._client


def _digest_of(partial: Path, *, md5: bool) -> Digest:
    digest = Digest(md5=md5)
    try:
        with partial.open("rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
    except FileNotFoundError:
        pass
    return digest


def _put_in_place(partial: Path, final: Path) -> None:
    os.chmod(partial, 0o444)
    os.replace(partial, final)
    fd = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
