"""Readiness's IO-free core (2.110): a webhook body parsed and checked as cloud-init posts it,
and how each event moves a boot's status: order, new boots, stale and failed events."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from cloudseed.servers.readiness import progress as p
from cloudseed.servers.readiness.errors import InvalidBootEvent
from cloudseed.servers.readiness.events import MAX_BODY, BootEvent, parse_event

NOW = dt.datetime(2026, 11, 29, 2, 0, 0)
T0 = 1_800_000_000.0


def body(**fields: Any) -> bytes:
    event = {
        "name": "modules-config/config-runcmd",
        "description": "running config-runcmd with frequency once-per-instance",
        "event_type": "finish",
        "origin": "cloudinit",
        "timestamp": T0,
        "result": "SUCCESS",
    }
    event.update(fields)
    return json.dumps({k: v for k, v in event.items() if v is not ...}).encode()


def ev(name: str, event_type: str = "finish", at: float = T0, result: str = "SUCCESS") -> BootEvent:
    return parse_event(body(name=name, event_type=event_type, timestamp=at, result=result))


def test_cloud_inits_event_is_read_whole() -> None:
    event = parse_event(body(files=[{"path": "/x", "content": "eA==", "encoding": "base64"}]))
    assert (event.name, event.event_type, event.result, event.origin) == (
        "modules-config/config-runcmd",
        "finish",
        "SUCCESS",
        "cloudinit",
    )
    assert (event.stage, event.rank, event.is_stage, event.what_failed) == (
        "modules-config",
        2,
        False,
        "runcmd",
    )
    assert event.guest_time == dt.datetime(2027, 1, 15, 8, 0, 0)
    start = parse_event(body(event_type="start", result=...))
    assert start.result is None
    assert ev("single/runcmd").rank is None
    assert parse_event(body(origin="myapp")).rank is None  # not cloud-init's: no stage


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"{", "not JSON"),
        (b"[" * 5000 + b"]" * 5000, "not JSON"),
        (b'{"timestamp": 1' + b"0" * 5000 + b"}", "not JSON"),
        (b"[]", "not a JSON object"),
        (body(event_type="begin"), "event_type"),
        (body(event_type=...), "no event_type"),
        (body(result="OK"), "result must be"),
        (body(result=...), "no result"),
        (body(name=...), "no name"),
        (body(name=""), "non-empty parts"),
        (body(name="a//b"), "non-empty parts"),
        (body(name="x" * 256), "longer than 255"),
        (body(name=7), "name must be a string"),
        (body(description="a\x00b"), "NUL"),
        (body(name="\ud800"), "lone surrogate"),
        (body(timestamp="now"), "timestamp must be"),
        (body(timestamp=True), "timestamp must be"),
        (body(timestamp=10**400), "between 1970 and 9999"),
        (b'{"name":"a","event_type":"start","timestamp":1e400}', "between 1970 and 9999"),
        (body(timestamp=-1), "between 1970 and 9999"),
        (body(timestamp=1e12), "between 1970 and 9999"),
        (b" " * (MAX_BODY + 1), "at most"),
    ],
)
def test_what_is_no_event_is_refused_with_the_reason(raw: bytes, why: str) -> None:
    with pytest.raises(InvalidBootEvent, match=why):
        parse_event(raw)


def run(events: list[BootEvent], start: p.Progress | None = None) -> tuple[p.Progress, list[str]]:
    progress = start or p.Progress("g")
    verdicts = []
    for event in events:
        verdict = p.verdict(progress, event)
        verdicts.append(verdict)
        if verdict == p.STALE:
            continue
        if verdict == p.NEW_BOOT:
            progress = progress.next_boot()
        progress = p.advance(progress, event, NOW, kept=True)
    return progress, verdicts


FIRST_BOOT = [
    ev("init-network/config-ssh", "start", T0 + 1),
    ev("init-network/config-ssh", "finish", T0 + 2),
    ev("init-network", "finish", T0 + 3),
    ev("modules-config/config-runcmd", "start", T0 + 4),
    ev("modules-config/config-runcmd", "finish", T0 + 5),
    ev("modules-config", "finish", T0 + 6),
    ev("modules-final/config-final_message", "finish", T0 + 7),
]
FINAL = ev("modules-final", "finish", T0 + 8)


def test_a_boot_runs_until_modules_final_finishes() -> None:
    progress, verdicts = run(FIRST_BOOT)
    assert set(verdicts) == {p.THIS_BOOT}
    assert (progress.status, progress.stage, progress.source) == (
        p.RUNNING,
        "modules-final",
        p.WEBHOOK,
    )
    progress, _ = run([FINAL], progress)
    assert (progress.status, progress.failed_module, progress.events) == (p.DONE, None, 8)
    assert p.shown(progress.dump(), "g") == {
        "status": "done",
        "failed_module": None,
        "updated_at": "2026-11-29T02:00:00.000000Z",
    }
    # Another generation (a rebuild's new disk), or none yet: pending.
    assert p.shown(progress.dump(), "h")["status"] == p.PENDING
    assert p.shown(progress.dump(), None) == {
        "status": "pending",
        "failed_module": None,
        "updated_at": None,
    }


def test_the_first_failure_names_the_module_and_stays() -> None:
    broken = ev("modules-config/config-runcmd", "finish", T0 + 5, "FAIL")
    events = [*FIRST_BOOT[:4], broken, ev("modules-config", "finish", T0 + 6, "FAIL")]
    progress, _ = run([*events, *FIRST_BOOT[6:], FINAL])
    assert (progress.status, progress.failed_module) == (p.FAILED, "runcmd")
    # A stage that fails without a module failing names itself; a step names the step.
    progress, _ = run([ev("init-network", "finish", T0, "FAIL")])
    assert progress.failed_module == "init-network"
    progress, _ = run([ev("init-network/consume-user-data", "finish", T0, "FAIL")])
    assert progress.failed_module == "consume-user-data"
    # Not a boot stage (a later `cloud-init single --report`), or not cloud-init's: kept, no status.
    done, _ = run([*FIRST_BOOT, FINAL])
    progress, _ = run([ev("single/config-runcmd", "finish", T0 + 9, "FAIL")], done)
    assert (progress.status, progress.events) == (p.DONE, 9)


def test_replays_and_late_events_are_stale_and_a_reboot_is_a_new_boot() -> None:
    done, _ = run([*FIRST_BOOT, FINAL])
    # An earlier stage's event again (or a finished stage's), no newer: a replay.
    _, verdicts = run([FIRST_BOOT[1], FINAL], done)
    assert verdicts == [p.STALE, p.STALE]
    # The same, newer than anything of this boot: the guest booted again by itself.
    reboot = ev("init-local/check-cache", "finish", T0 + 100)
    progress, verdicts = run([reboot], done)
    assert verdicts == [p.NEW_BOOT]
    assert (progress.boot, progress.status, progress.floor, progress.events) == (
        2,
        p.RUNNING,
        T0 + 8,
        1,
    )
    # Whatever is no newer than the last boot's last event stays stale in the new boot.
    _, verdicts = run([ev("modules-final/config-x", "finish", T0 + 8)], progress)
    assert verdicts == [p.STALE]


def test_a_reboot_through_the_api_and_phone_home() -> None:
    done, _ = run([*FIRST_BOOT, FINAL])
    rebooted = done.next_boot()
    assert (rebooted.status, rebooted.boot, rebooted.reported) == (p.PENDING, 2, False)
    _, verdicts = run([FINAL], rebooted)  # the old boot's, late
    assert verdicts == [p.STALE]
    # phone_home alone: done; with webhook events, they decide.
    phoned = p.phoned_home(p.Progress("g"), NOW)
    assert (phoned.status, phoned.source, phoned.reported) == (p.DONE, p.PHONE_HOME, True)
    running, _ = run(FIRST_BOOT[:2])
    assert p.phoned_home(running, NOW).status == p.RUNNING
    progress, _ = run(FIRST_BOOT[:1], phoned)
    assert (progress.status, progress.source) == (p.RUNNING, p.WEBHOOK)


def test_a_stored_progress_that_cannot_be_read_starts_over() -> None:
    assert p.load("{not json", "g") == p.Progress("g")
    assert p.load('{"unknown": 1}', "g") == p.Progress("g")
    assert p.load(None, "g") == p.Progress("g")
