"""Lifecycle notices (2.111), IO-free: the events a server keeps, their statuses, stored and
shown forms, and a project's defaults."""

from __future__ import annotations

import datetime as dt

from cloudseed.servers.notices import rules

T0 = dt.datetime(2030, 1, 2, 3, 4, 5, 678901)


def event(number: int, status: str = rules.SCHEDULED) -> rules.Event:
    return rules.Event(
        id=f"e{number}", type="reboot", notice_seconds=60, not_before=T0, status=status
    )


def test_the_stored_form_reads_back() -> None:
    events = (
        event(1, rules.COMPLETED),
        rules.changed((event(2),), "e2", rules.ACKNOWLEDGED, T0),
    )
    flat = events[:1] + events[1]
    assert rules.parse_stored(rules.stored(flat)) == flat
    assert rules.parse_stored(None) == () and rules.parse_stored("") == ()


def test_statuses_move_forward_and_stamp_their_time() -> None:
    later = T0 + dt.timedelta(seconds=3)
    events = rules.changed((event(1),), "e1", rules.ACKNOWLEDGED, T0)
    events = rules.changed(events, "e1", rules.STARTED, later)
    events = rules.changed(events, "e1", rules.COMPLETED, later)
    (done,) = events
    assert done.status == rules.COMPLETED
    assert (done.acknowledged_at, done.started_at, done.finished_at) == (T0, later, later)
    # An ended event stays ended; an unknown id changes nothing.
    assert rules.changed(events, "e1", rules.CANCELLED, later) == events
    assert rules.changed(events, "nope", rules.STARTED, later) == events


def test_a_server_keeps_its_latest_events_dropping_ended_ones_first() -> None:
    events: tuple[rules.Event, ...] = (event(0),)  # open, the oldest
    for number in range(1, 8):
        events = rules.with_event(events, event(number, rules.COMPLETED))
    assert len(events) == rules.KEPT
    assert events[0].id == "e0"  # the open one stays
    assert [e.id for e in events[1:]] == ["e4", "e5", "e6", "e7"]


def test_the_api_view_shows_times_to_the_microsecond() -> None:
    (shown,) = rules.api_view((event(1),))
    assert shown == {
        "id": "e1",
        "type": "reboot",
        "notice_seconds": 60,
        "status": "scheduled",
        "not_before": "2030-01-02T03:04:05.678901Z",
        "acknowledged_at": None,
        "started_at": None,
        "finished_at": None,
    }


def test_project_defaults_keep_only_the_types_with_a_notice() -> None:
    body = {"reboot": 300, "stop": 0, "delete": None}
    defaults = rules.defaults_from_body(body)
    assert defaults == {"reboot": 300}
    assert rules.parse_defaults(rules.stored_defaults(defaults)) == defaults
    assert rules.defaults_view(defaults) == {
        "reboot": 300,
        "stop": None,
        "rebuild": None,
        "delete": None,
    }
