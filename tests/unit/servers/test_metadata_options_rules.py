"""Per-server metadata options (2.109), IO-free: the request's members applied, the stored form,
the cloud's defaults for unset fields, what the guest's facts decide (tokens, endpoint, tags)
and the tags in both trees."""

from __future__ import annotations

import json

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.metadata import render, render_ec2
from cloudseed.metadata.access_audit import OTHER, PASSWORD, USER_DATA, document_of
from cloudseed.servers.metadata_options import options as o
from cloudseed.servers.metadata_options.options import UNSET, CloudDefaults, MetadataOptions
from cloudseed.web.validation import validate
from tests.support.guest_facts import facts


def test_members_set_unset_or_leave_fields() -> None:
    start = o.from_body({"http_tokens": "required", "http_put_response_hop_limit": 2})
    changed = start.changed_by({"http_tokens": None, "http_endpoint": "disabled"})
    assert changed == MetadataOptions(http_endpoint="disabled", http_put_response_hop_limit=2)
    assert o.from_body(None) == UNSET and UNSET.empty and not changed.empty


def test_stored_form_round_trips_and_holds_only_set_fields() -> None:
    options = MetadataOptions(http_tokens="required", http_put_response_hop_limit=64)
    stored = options.stored()
    assert stored is not None
    assert json.loads(stored) == {"http_tokens": "required", "http_put_response_hop_limit": 64}
    assert o.from_stored(stored) == options
    assert UNSET.stored() is None and o.from_stored(None) is None and o.from_stored("{}") is None
    assert o.of_system_metadata({o.SYSTEM_METADATA_KEY: stored}) == options
    with pytest.raises(InvalidInput):
        o.from_stored("[1]")


def test_a_servers_fields_win_over_its_projects() -> None:
    own = MetadataOptions(http_tokens="optional")
    project = MetadataOptions(http_tokens="required", instance_metadata_tags="enabled")
    assert own.over(project) == MetadataOptions(
        http_tokens="optional", instance_metadata_tags="enabled"
    )


def test_effective_values_fall_back_to_the_cloud() -> None:
    assert o.effective(None, CloudDefaults()) == {
        "http_endpoint": "enabled",
        "http_tokens": "optional",
        "http_put_response_hop_limit": None,
        "instance_metadata_tags": "disabled",
        "set_on_server": [],
    }
    strict = o.effective(None, CloudDefaults(require_token=True, hop_limit=1))
    assert strict["http_tokens"] == "required" and strict["http_put_response_hop_limit"] == 1
    assert o.effective(None, CloudDefaults(), tokens_item=True)["http_tokens"] == "required"
    relaxed = o.effective(
        MetadataOptions(http_tokens="optional"), CloudDefaults(require_token=True)
    )
    assert relaxed["http_tokens"] == "optional" and relaxed["set_on_server"] == ["http_tokens"]


@pytest.mark.parametrize(
    "body",
    [
        {"http_put_response_hop_limit": 0},
        {"http_put_response_hop_limit": 65},
        {"http_put_response_hop_limit": True},
        {"http_put_response_hop_limit": "1"},
        {"http_tokens": "Required"},
        {"instance_metadata_tags": 1},
        {"tags": "enabled"},
    ],
)
def test_the_schema_refuses(body: object) -> None:
    with pytest.raises(InvalidInput):
        validate(o.SCHEMA, body)


def test_the_guests_facts_decide_tokens_endpoint_and_tags() -> None:
    plain = facts()
    assert not plain.requires_token(False) and plain.requires_token(True)
    legacy = facts(meta=(("metadata_http_tokens", "required"),))
    assert legacy.requires_token(False)
    relaxed = facts(
        meta=(("metadata_http_tokens", "required"),),
        metadata_options=MetadataOptions(http_tokens="optional"),
    )
    assert not relaxed.requires_token(True)
    assert facts(metadata_options=MetadataOptions(http_tokens="required")).requires_token(False)
    off = facts(metadata_options=MetadataOptions(http_endpoint="disabled"))
    assert off.endpoint_disabled and not plain.endpoint_disabled
    assert facts(metadata_options=MetadataOptions(http_put_response_hop_limit=3)).hop_limit == 3
    assert plain.hop_limit is None


def test_tags_in_both_trees_only_when_enabled() -> None:
    tagged = facts(
        meta=(("a", "1"), ("b c", "")),
        metadata_options=MetadataOptions(instance_metadata_tags="enabled"),
    )
    doc = json.loads(render.meta_data(tagged, "latest", dhcp_domain="").render())
    assert doc["tags"] == {"a": "1", "b c": ""}
    ec2 = render_ec2.ec2_meta_data(tagged, "latest", dhcp_domain="", local_ipv4=None)
    assert ec2["tags"] == {"instance": {"a": "1", "b c": ""}}
    plain = facts()
    assert "tags" not in json.loads(render.meta_data(plain, "latest", dhcp_domain="").render())
    assert "tags" not in render_ec2.ec2_meta_data(plain, "latest", dhcp_domain="", local_ipv4=None)


def test_what_the_audit_calls_a_read() -> None:
    assert document_of("user_data", "GET") == USER_DATA
    assert document_of("ec2-user-data", "HEAD") == USER_DATA
    assert document_of("password", "GET") == PASSWORD
    assert document_of("password", "POST") == OTHER
    assert document_of("meta_data.json", "GET") == OTHER
