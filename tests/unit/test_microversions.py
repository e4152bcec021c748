import pytest

from cloudseed.web.errors import InvalidAPIVersionString, UnsupportedAPIVersion
from cloudseed.web.microversions import MAX_VERSION, MIN_VERSION, APIVersion, requested_version


def test_versions_compare_numerically():
    assert APIVersion.parse("2.10") > APIVersion.parse("2.9")
    assert str(APIVersion.parse("2.104")) == "2.104"


def test_no_header_means_minimum():
    assert requested_version({}) == MIN_VERSION


def test_header_names_are_looked_up_lowercase():
    assert requested_version({"openstack-api-version": "COMPUTE Latest"}) == MAX_VERSION


def test_other_services_in_header_fall_back_to_legacy():
    assert requested_version(
        {"openstack-api-version": "placement 1.30", "x-openstack-nova-api-version": "2.3"}
    ) == APIVersion(2, 3)


@pytest.mark.parametrize("text", ["2.0", "1.9"])
def test_below_minimum(text):
    with pytest.raises(UnsupportedAPIVersion):
        requested_version({"x-openstack-nova-api-version": text})


@pytest.mark.parametrize("text", ["", "2.", ".1", "02.1", "2.1a", "v2.1"])
def test_invalid(text):
    with pytest.raises(InvalidAPIVersionString):
        requested_version({"x-openstack-nova-api-version": text})
