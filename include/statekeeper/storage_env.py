"""Every environment variable that carries storage settings, spelled once.

`statekeeper.storage.config.StorageConfig.from_env` reads them; the Airflow operator writes them
from a connection (never on a command line). Both import this module, so a name cannot drift
between the writer and the reader. Standard library only, on the ground floor: DAG parsing imports
the operator, which must not pull in the storage layer's SDKs.
"""
from __future__ import annotations

# -- S3 (and S3-compatible endpoints) ------------------------------------------------------------
S3_ENDPOINT = "STATEKEEPER_S3_ENDPOINT"
S3_REGION = "STATEKEEPER_S3_REGION"
S3_PATH_STYLE = "STATEKEEPER_S3_PATH_STYLE"
S3_READ_AHEAD_BYTES = "STATEKEEPER_S3_READ_AHEAD_BYTES"
S3_MAX_ATTEMPTS = "STATEKEEPER_S3_MAX_ATTEMPTS"
S3_MAX_POOL_CONNECTIONS = "STATEKEEPER_S3_MAX_POOL_CONNECTIONS"
S3_DELETE_BATCH_SIZE = "STATEKEEPER_S3_DELETE_BATCH_SIZE"
S3_LIST_PAGE_SIZE = "STATEKEEPER_S3_LIST_PAGE_SIZE"
S3_DELETE_RECHECK = "STATEKEEPER_S3_DELETE_RECHECK"
AWS_ENDPOINT_URL_S3 = "AWS_ENDPOINT_URL_S3"
AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
AWS_REGION = "AWS_REGION"
AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
AWS_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
AWS_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
AWS_SESSION_TOKEN = "AWS_SESSION_TOKEN"

# -- Google Cloud Storage --------------------------------------------------------------------------
GCS_ENDPOINT = "STATEKEEPER_GCS_ENDPOINT"
GCS_PROJECT = "STATEKEEPER_GCS_PROJECT"
GCS_ANONYMOUS = "STATEKEEPER_GCS_ANONYMOUS"
GCS_CREDENTIALS_FILE = "STATEKEEPER_GCS_CREDENTIALS_FILE"
GCS_CREDENTIALS_JSON = "STATEKEEPER_GCS_CREDENTIALS_JSON"
STORAGE_EMULATOR_HOST = "STORAGE_EMULATOR_HOST"          # what Google's own clients read for an emulator
GOOGLE_CLOUD_PROJECT = "GOOGLE_CLOUD_PROJECT"
GOOGLE_APPLICATION_CREDENTIALS = "GOOGLE_APPLICATION_CREDENTIALS"

# -- Azure Blob storage ----------------------------------------------------------------------------
AZURE_ACCOUNT_NAME = "STATEKEEPER_AZURE_ACCOUNT_NAME"
AZURE_ACCOUNT_KEY = "STATEKEEPER_AZURE_ACCOUNT_KEY"
AZURE_SAS_TOKEN = "STATEKEEPER_AZURE_SAS_TOKEN"
AZURE_BLOB_ENDPOINT = "STATEKEEPER_AZURE_BLOB_ENDPOINT"
AZURE_STORAGE_ACCOUNT = "AZURE_STORAGE_ACCOUNT"          # the Azure CLI's names
AZURE_STORAGE_KEY = "AZURE_STORAGE_KEY"
AZURE_STORAGE_SAS_TOKEN = "AZURE_STORAGE_SAS_TOKEN"

# -- Alibaba OSS (through its S3-compatible API) ---------------------------------------------------
OSS_ENDPOINT = "STATEKEEPER_OSS_ENDPOINT"
OSS_REGION = "STATEKEEPER_OSS_REGION"
OSS_ACCESS_KEY_ID = "STATEKEEPER_OSS_ACCESS_KEY_ID"
OSS_ACCESS_KEY_SECRET = "STATEKEEPER_OSS_ACCESS_KEY_SECRET"
OSS_PATH_STYLE = "STATEKEEPER_OSS_PATH_STYLE"
OSS_DELETE_RECHECK = "STATEKEEPER_OSS_DELETE_RECHECK"
OSS_ACCESS_KEY_ID_PLAIN = "OSS_ACCESS_KEY_ID"            # the OSS SDKs' names
OSS_ACCESS_KEY_SECRET_PLAIN = "OSS_ACCESS_KEY_SECRET"

# Each StorageConfig field and the variables it is read from, the first one set winning: Statekeeper's
# own name first, then the name the store's own tools read.
READ_ORDER: dict[str, tuple[str, ...]] = {
    "endpoint": (S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL),
    "region": (S3_REGION, AWS_REGION, AWS_DEFAULT_REGION),
    "access_key_id": (AWS_ACCESS_KEY_ID,),
    "secret_access_key": (AWS_SECRET_ACCESS_KEY,),
    "session_token": (AWS_SESSION_TOKEN,),
    "path_style": (S3_PATH_STYLE,),
    "read_ahead_bytes": (S3_READ_AHEAD_BYTES,),
    "max_attempts": (S3_MAX_ATTEMPTS,),
    "max_pool_connections": (S3_MAX_POOL_CONNECTIONS,),
    "delete_batch_size": (S3_DELETE_BATCH_SIZE,),
    "list_page_size": (S3_LIST_PAGE_SIZE,),
    "delete_recheck": (S3_DELETE_RECHECK,),
    "gcs_endpoint": (GCS_ENDPOINT, STORAGE_EMULATOR_HOST),
    "gcs_project": (GCS_PROJECT, GOOGLE_CLOUD_PROJECT),
    "gcs_anonymous": (GCS_ANONYMOUS,),
    "gcs_credentials_file": (GCS_CREDENTIALS_FILE, GOOGLE_APPLICATION_CREDENTIALS),
    "gcs_credentials_json": (GCS_CREDENTIALS_JSON,),
    "azure_account_name": (AZURE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT),
    "azure_account_key": (AZURE_ACCOUNT_KEY, AZURE_STORAGE_KEY),
    "azure_sas_token": (AZURE_SAS_TOKEN, AZURE_STORAGE_SAS_TOKEN),
    "azure_blob_endpoint": (AZURE_BLOB_ENDPOINT,),
    "oss_endpoint": (OSS_ENDPOINT,),
    "oss_region": (OSS_REGION,),
    "oss_access_key_id": (OSS_ACCESS_KEY_ID, OSS_ACCESS_KEY_ID_PLAIN),
    "oss_access_key_secret": (OSS_ACCESS_KEY_SECRET, OSS_ACCESS_KEY_SECRET_PLAIN),
    "oss_path_style": (OSS_PATH_STYLE,),
    "oss_delete_recheck": (OSS_DELETE_RECHECK,),
}

# The StorageConfig fields that hold secrets, and the variables the operator writes them to (masked
# in task logs).
SECRET_FIELDS = frozenset({"secret_access_key", "session_token", "gcs_credentials_json", "azure_account_key",
                           "azure_sas_token", "oss_access_key_secret"})
SECRET_NAMES: tuple[str, ...] = tuple(names[0] for field, names in READ_ORDER.items() if field in SECRET_FIELDS)

# Variables of a second store in the same process (copy_to_dr's disaster-recovery targets): the usual
# names with this in front, spelled by `prefixed_env_name`.
DR_PREFIX = "STATEKEEPER_DR_"
_NAMESPACE = "STATEKEEPER_"


def prefixed_env_name(name: str, prefix: str) -> str:
    """`name` as a store with variable prefix `prefix` spells it: the prefix in front, and Statekeeper's
    own names keep one STATEKEEPER_ (STATEKEEPER_S3_ENDPOINT -> STATEKEEPER_DR_S3_ENDPOINT,
    AWS_REGION -> STATEKEEPER_DR_AWS_REGION)."""
    if prefix and prefix.startswith(_NAMESPACE) and name.startswith(_NAMESPACE):
        name = name[len(_NAMESPACE):]
    return prefix + name
