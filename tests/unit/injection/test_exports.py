import cloudseed.injection as injection


def test_public_surface_is_sorted_and_importable():
    assert injection.__all__ == sorted(injection.__all__)
    for name in injection.__all__:
        assert hasattr(injection, name), name
