"""Nova's check_num_instances_quota as quotas.service.allowed_instances / recheck_instances
(no database: limits and usages are handed in)."""

from __future__ import annotations

import pytest

from cloudseed.quotas.errors import TooManyInstances
from cloudseed.quotas.service import InstanceLimits, Usage, allowed_instances, recheck_instances

PROJECT = {"instances": 10, "cores": 20, "ram": 51200}


def allowed(limits: InstanceLimits, used: Usage, user: Usage | None = None, **kw: int) -> int:
    args = {"vcpus": 1, "memory_mb": 512, "min_count": 1, "max_count": 1, **kw}
    return allowed_instances(limits, project_usage=used, user_usage=user, **args)


def test_fits() -> None:
    assert allowed(InstanceLimits(PROJECT, None), Usage(), max_count=10) == 10


def test_reduced_to_what_fits() -> None:
    limits = InstanceLimits(PROJECT, None)
    assert allowed(limits, Usage(3, 3, 1536), min_count=2, max_count=50) == 7
    # cores decide: 4 vcpus each, 20 - 4 used = 16 -> 4 more
    assert allowed(limits, Usage(1, 4, 512), vcpus=4, max_count=9) == 4


def test_several_resources_joined_as_nova() -> None:
    limits = InstanceLimits({"instances": 1, "cores": 1, "ram": 51200}, None)
    with pytest.raises(TooManyInstances) as err:
        allowed(limits, Usage(1, 1, 512), vcpus=1)
    assert err.value.message == (
        "Quota exceeded for cores, instances: Requested 1, 1, but already used 1, 1 of 1, 1 "
        "cores, instances"
    )


def test_range_in_the_message() -> None:
    with pytest.raises(TooManyInstances) as err:
        allowed(InstanceLimits(PROJECT, None), Usage(8, 8, 4096), min_count=3, max_count=5)
    assert err.value.message == (
        "Quota exceeded for instances: Requested 3-5, but already used 8 of 10 instances"
    )


def test_unlimited_resources_do_not_bound() -> None:
    limits = InstanceLimits({"instances": -1, "cores": 4, "ram": -1}, None)
    assert allowed(limits, Usage(100, 0, 0), vcpus=2, max_count=5) == 2


def test_user_limit() -> None:
    user = {**PROJECT, "instances": 2}
    limits = InstanceLimits(PROJECT, user)
    assert allowed(limits, Usage(5, 5, 2560), Usage(1, 1, 512), max_count=5) == 1
    with pytest.raises(TooManyInstances) as err:
        allowed(limits, Usage(5, 5, 2560), Usage(2, 2, 1024))
    assert "already used 2 of 2 instances" in err.value.message


def test_recheck() -> None:
    limits = InstanceLimits(PROJECT, None)
    recheck_instances(limits, project_usage=Usage(10, 10, 5120), user_usage=None, vcpus=1,
                      memory_mb=512, requested=4)  # fmt: skip
    with pytest.raises(TooManyInstances) as err:
        recheck_instances(limits, project_usage=Usage(12, 12, 6144), user_usage=None, vcpus=1,
                          memory_mb=512, requested=4)  # fmt: skip
    assert err.value.message == (
        "Quota exceeded for instances: Requested 4, but already used 12 of 10 instances"
    )


def test_unlimited_only_when_no_instance_resource_of_project_or_user_is_limited() -> None:
    free = {"instances": -1, "cores": -1, "ram": -1, "key_pairs": 10}
    assert InstanceLimits(free, None).unlimited
    assert InstanceLimits(free, dict(free)).unlimited
    for resource in ("instances", "cores", "ram"):
        assert not InstanceLimits({**free, resource: 100}, None).unlimited
        assert not InstanceLimits(free, {**free, resource: 0}).unlimited
