"""What a guest reads of its lifecycle notices (2.111), IO-free: events.json, EC2's
events/maintenance tree, and the acknowledgement's body."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.metadata import events, tree
from cloudseed.metadata.errors import NoSuchDocument
from cloudseed.servers.notices import rules

T0 = dt.datetime(2019, 1, 21, 9, 0, 43, 500)
OPEN = rules.Event(id="e-open", type="reboot", notice_seconds=600, not_before=T0)
ENDED = rules.Event(
    id="e-gone",
    type="delete",
    notice_seconds=60,
    not_before=T0,
    status=rules.CANCELLED,
    finished_at=T0 + dt.timedelta(minutes=5),
)


def test_events_json() -> None:
    assert json.loads(events.openstack((OPEN,))) == {
        "events": [
            {
                "id": "e-open",
                "type": "reboot",
                "not_before": "2019-01-21T09:00:43Z",
                "status": "scheduled",
            }
        ]
    }
    assert json.loads(events.openstack(())) == {"events": []}


def test_ec2s_scheduled_and_history() -> None:
    both = (ENDED, OPEN)
    assert json.loads(events.ec2(both, ("maintenance", "scheduled"))) == [
        {
            "Code": "instance-reboot",
            "Description": "scheduled reboot",
            "EventId": "e-open",
            "NotBefore": "21 Jan 2019 09:00:43 GMT",
            "NotAfter": "21 Jan 2019 09:00:43 GMT",
            "State": "active",
        }
    ]
    (gone,) = json.loads(events.ec2(both, ("maintenance", "history")))
    assert gone["State"] == "canceled" and gone["Code"] == "instance-retirement"
    assert gone["Description"] == "[Canceled] scheduled delete"
    assert gone["NotAfter"] == "21 Jan 2019 09:05:43 GMT"
    assert events.ec2(both, ()) == b"maintenance/"
    assert events.ec2(both, ("maintenance",)) == b"history\nscheduled"
    with pytest.raises(NoSuchDocument):
        events.ec2(both, ("maintenance", "other"))


def test_the_paths() -> None:
    assert tree.parse("/openstack/latest/events.json") == tree.Target(tree.EVENTS, "2025-04-04")
    assert tree.parse("/openstack/2012-08-10/events.json") is None  # Nova's dated versions
    assert tree.parse("/latest/meta-data/events/maintenance/scheduled") == tree.Target(
        tree.EC2_EVENTS, "2009-04-04", ("maintenance", "scheduled")
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"{}",
        b'{"acknowledge": []}',
        b'{"acknowledge": ["a"], "x": 1}',
        b'{"acknowledge": "a"}',
        b'{"acknowledge": [null]}',
        b'{"acknowledge": ["a b"]}',
        b'{"acknowledge": ["\\u0000"]}',
        b'{"acknowledge": ["\\ud800"]}',
        json.dumps({"acknowledge": ["a"] * 17}).encode(),
        json.dumps({"acknowledge": ["a" * 65]}).encode(),
        b"\xff",
        b"[" * 100000,
    ],
)
def test_an_acknowledgement_is_one_list_of_ids(body: bytes) -> None:
    with pytest.raises(InvalidInput) as refused:
        events.acknowledged_ids(body)
    assert "\\u" not in refused.value.message


def test_an_acknowledgement() -> None:
    ids = ["6a1f3c52-7d7e-4f43-9f1e-0c3b8f0a1d2e", "x"]
    assert events.acknowledged_ids(json.dumps({"acknowledge": ids}).encode()) == ids
