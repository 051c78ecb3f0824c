"""Storage credentials stay out of argv, mappings and reprs.

* `StorageConfig.to_mapping()` masks secrets unless asked for them, and a masked mapping cannot be
  mistaken for real credentials;
* with a YARN or Kubernetes Spark connection the operator hands the credentials to spark-submit in a
  private properties file (mode 0600, removed afterwards), never as `--conf` arguments; the command
  is the one the provider's SparkSubmitHook builds, and for YARN the one a real spark-submit ran.
"""
from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path

import pytest

from statekeeper.storage import StorageConfig
from statekeeper.storage.errors import StorageConfigError

# moto's dummy credentials, distinctive enough to find in any text.
KEY_ID = "AKIAMOTOTESTKEY0001"
SECRET = "moto/secret+Key=ForArgvTest"
TOKEN = "moto-session-token-ForArgvTest"


# -- StorageConfig.to_mapping ---------------------------------------------------------------------

def test_mapping_and_repr_mask_secrets_by_default():
    cfg = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id=KEY_ID, secret_access_key=SECRET,
                        session_token=TOKEN)
    mapping = cfg.to_mapping()
    assert mapping["secret_access_key"] == "***" and mapping["session_token"] == "***"
    assert mapping["access_key_id"] == KEY_ID and mapping["endpoint"] == "http://127.0.0.1:1"
    for text in (json.dumps(mapping), repr(cfg), str(cfg)):
        assert SECRET not in text and TOKEN not in text
    # The explicit opt-in still round-trips for the places that must ship the keys.
    full = cfg.to_mapping(include_secrets=True)
    assert full["secret_access_key"] == SECRET and full["session_token"] == TOKEN
    assert StorageConfig.from_mapping(full) == cfg


def test_masked_mapping_is_not_taken_for_credentials():
    cfg = StorageConfig(endpoint="http://127.0.0.1:1", access_key_id=KEY_ID, secret_access_key=SECRET)
    with pytest.raises(StorageConfigError, match="include_secrets=True"):
        StorageConfig.from_mapping(cfg.to_mapping())
