def test_versions(api):
    r = api.get("/v2.1/")
    assert r.status_code == 200, r.text
    r = api.get("/v2.1/os-keypairs")
    assert r.status_code == 200, r.text
    assert r.json() == {"keypairs": []}
