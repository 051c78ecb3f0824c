"""The self-tests that decide whether GC and the DR copy may rely on a store's preconditions
(statekeeper.storage.enforcement), against real servers on loopback: SeaweedFS (the session's S3 server) enforces
all four; moto as released ignores DeleteObjects' per-key ETag, CopySourceIfMatch and If-None-Match on CopyObject
(it honours If-None-Match on PutObject); the GCS emulator with the checks of tests/plugins/gcs_emulator.py enforces
its generation preconditions and ignores them as released; Azurite enforces Azure's. A self-test that cannot
complete is unknown, never enforced. Verdicts are kept per store (endpoint and bucket) for the run and travel with
the object to the tasks."""
from __future__ import annotations

import pickle

import pytest

from statekeeper.storage import RoutingFileIO, StorageConfig
from statekeeper.storage.enforcement import PROBE_DIR, Enforcement, Guard, Verdict, store_identity
from tests.plugins.object_stores import azure_uri, make_azure_container, make_gcs_bucket
from tests.plugins.s3 import make_bucket

E, I = Verdict.ENFORCED, Verdict.IGNORED
ALL = list(Guard)   # conditional_delete, pinned_copy, create_only_write, create_only_copy

STORES = {
    "seaweedfs": (E, E, E, E),
    "plain_moto_server": (I, I, E, I),
    "gcs_emulator": (E, E, E, E),
    "plain_gcs_emulator": (I, I, I, I),
    "azurite": (E, E, E, E),
}
MARKS = {"gcs_emulator": pytest.mark.gcs, "plain_gcs_emulator": pytest.mark.gcs, "azurite": pytest.mark.azure}


def _root(request, server: str) -> tuple[StorageConfig, str]:
    config = request.getfixturevalue(server).config()
    if "gcs" in server:
        return config, f"gs://{make_gcs_bucket(config, 'enf')}/cp"
    if server == "azurite":
        return config, azure_uri(make_azure_container(config, "enf"), "cp")
    return config, f"s3://{make_bucket(config, 'enf')}/cp"


@pytest.mark.parametrize("server", [pytest.param(s, marks=MARKS.get(s, pytest.mark.s3)) for s in STORES])
def test_each_stores_verdicts(server, request) -> None:
    config, root = _root(request, server)
    enforcement = Enforcement(config, tag="t")
    proofs = enforcement.prove([root, root + "/other"], ALL)   # one store: one self-test
    assert [p.guard for p in proofs] == ALL
    assert tuple(p.verdict for p in proofs) == STORES[server], [(p.guard.value, p.verdict.value, p.detail)
                                                                for p in proofs]
    assert {p.store for p in proofs} == {store_identity(config, root)}
    assert all(enforcement.enforced(root, p.guard) is (p.verdict is E) for p in proofs)
    # Nothing of the self-test is left below the root.
    assert not [i.uri for i in RoutingFileIO(config).list(root)]
    # The tasks get the verdicts with the object and test nothing again; another bucket is another store.
    clone = pickle.loads(pickle.dumps(enforcement))
    assert clone.proofs == enforcement.proofs and clone.prove([root], ALL) == proofs


@pytest.mark.s3
def test_a_self_test_that_cannot_complete_is_unknown_never_enforced(s3_config) -> None:
    config = s3_config
    root = "s3://no-such-bucket-statekeeper/cp"
    enforcement = Enforcement(config)
    proofs = enforcement.prove([root], ALL)
    assert {p.verdict for p in proofs} == {Verdict.UNKNOWN}
    assert all("cannot write the scratch object" in p.detail and PROBE_DIR in p.detail for p in proofs)
    assert not any(enforcement.enforced(root, g) for g in ALL)


def test_store_identity_names_the_bucket_and_the_endpoint() -> None:
    s3 = StorageConfig(endpoint="http://127.0.0.1:9000/")
    assert store_identity(s3, "s3a://b/x/y") == "s3://b at http://127.0.0.1:9000"
    assert store_identity(StorageConfig(region="eu-west-1"), "s3://b/x") == "s3://b at AWS eu-west-1"
    assert store_identity(s3, "s3://b/x") != store_identity(s3, "s3://c/x")
    assert store_identity(StorageConfig(), "gs://g/x") == "gs://g at Google"
    assert store_identity(StorageConfig(), "file:///tmp/x") is None
