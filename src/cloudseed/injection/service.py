"""``inject``: put a request into a disk image through the first handler that can serve it.

The order of work, each step refusing before anything is changed:

1. the options: injection on, a known format;
2. the request less what the operator did not enable (``inject_key``, ``inject_password``);
   nothing left means nothing to do, and the image is not touched;
3. the image: ``qemu-img info`` with the declared format and resource limits, a header check
   for raw, no external data file, no backing file unless allowed;
4. the password hashed (so a missing tool fails here, not half-way through);
5. a working copy next to the image; handlers tried in ``[libvirt] inject_handlers`` order,
   the first one that opens the image writes everything (``writer.py``); handlers that cannot
   serve say why and the next is tried;
6. the copy renamed over the image. Any error in 5 deletes the copy instead, so a failure
   leaves the original byte for byte as it was.
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from cloudseed.injection.errors import (
    HandlerUnavailable,
    InjectionDisabled,
    InvalidInjectionRequest,
    NoHandlerAvailable,
)
from cloudseed.injection.handlers import HANDLERS, ImageTarget
from cloudseed.injection.request import InjectionOptions, InjectionRequest, check_format
from cloudseed.injection.tools import copies, image_check, passwords
from cloudseed.injection.writer import write_request

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InjectionReport:
    # The handler that wrote the image; None when the request had nothing to write.
    handler: str | None
    # Guest paths written or created, in order.
    written: tuple[str, ...]
    # (handler, reason) for each handler tried before it that could not serve the image.
    unavailable: tuple[tuple[str, str], ...] = ()


def inject(
    image_path: str | os.PathLike[str],
    fmt: str,
    request: InjectionRequest,
    *,
    options: InjectionOptions,
) -> InjectionReport:
    """Inject ``request`` into the image at ``image_path`` (declared format ``fmt``).

    Raises ``InjectionDisabled``, ``InvalidInjectionRequest``, ``ImageFormatMismatch``,
    ``UnsafeImage``, ``GuestRefused``, ``NoHandlerAvailable`` or ``ImageToolFailed``; in every
    case the image is unchanged.
    """
    check_format(fmt)
    if not options.enabled:
        raise InjectionDisabled()
    wanted = request.allowed_by(options)
    if wanted.is_empty:
        return InjectionReport(handler=None, written=())
    image = Path(image_path)
    if not image.is_file():
        raise InvalidInjectionRequest(f"No image file at {image}.")
    image_check.verify(
        image, fmt, allow_backing_file=options.allow_backing_file, timeout=options.tool_timeout
    )
    password_hash = (
        None if wanted.admin_password is None else passwords.sha512_crypt(wanted.admin_password)
    )

    unavailable: list[tuple[str, str]] = []
    with copies.working_copy(image, timeout=max(options.tool_timeout, copies.COPY_TIMEOUT)) as copy:
        target = ImageTarget(
            path=copy, fmt=fmt, partition=options.partition, timeout=options.tool_timeout
        )
        for name in options.handlers:
            with ExitStack() as stack:
                try:
                    fs = stack.enter_context(HANDLERS[name](target))
                except HandlerUnavailable as exc:
                    log.info("image handler %s cannot serve %s: %s", name, image, exc.reason)
                    unavailable.append((name, exc.reason))
                    continue
                written = write_request(fs, wanted, password_hash=password_hash)
            log.info("injected %s into %s with %s", ", ".join(written), image, name)
            return InjectionReport(handler=name, written=written, unavailable=tuple(unavailable))
        raise NoHandlerAvailable(unavailable)
    raise AssertionError("unreachable")  # pragma: no cover - the with block returns or raises
