from gpucloud.kube.meta import MANAGED_BY, SPEC_HASH, TENANT, obj, owned, spec_hash


def test_it_labels_and_hashes_an_object():
    manifest = owned(obj("v1", "ConfigMap", "x", "ns", data={"a": "1"}), "acme")
    assert manifest["metadata"]["labels"] == {MANAGED_BY: "gpucloud", TENANT: "acme"}
    assert manifest["metadata"]["annotations"][SPEC_HASH] == spec_hash(manifest)


def test_the_hash_ignores_itself_and_changes_with_the_content():
    one = owned(obj("v1", "ConfigMap", "x", "ns", data={"a": "1"}), "acme")
    same = owned(obj("v1", "ConfigMap", "x", "ns", data={"a": "1"}), "acme")
    other = owned(obj("v1", "ConfigMap", "x", "ns", data={"a": "2"}), "acme")
    assert one == same
    assert spec_hash(one) != spec_hash(other)
