from clusters.render.limitrange import render_limit_range


def test_it_sets_container_defaults_in_the_tenant_namespace(make_tenant):
    lr = render_limit_range(make_tenant())
    assert lr["kind"] == "LimitRange"
    assert lr["metadata"]["namespace"] == "tenant-acme"
    (limit,) = lr["spec"]["limits"]
    assert limit["type"] == "Container"
    assert set(limit["defaultRequest"]) == {"cpu", "memory"}
