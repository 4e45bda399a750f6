"""``kshim users add --data-dir`` and ``list --data-dir``: the SCRAM credentials in a broker's
data directory, written and read without the broker, in the metadata store it reads them
from at start (storage/meta/scram_store.py).

A write holds the directory's lock, as the broker does, so that it refuses while a broker
runs there (that broker would neither see nor keep the change); a read opens the store
read-only and takes no lock, so that it serves a running broker's directory too.
"""

from __future__ import annotations

import os

from kshim.broker.security.credentials import to_stored
from kshim.broker.security.scram_credential import ScramCredential
from kshim.cli.errors import CommandFailed, data_directory_problem
from kshim.client.user_admin import CredentialListing, SaltedCredential
from kshim.protocol.scram_mechanisms import MECHANISM_TYPES
from kshim.storage.files.data_directory_lock import DataDirectoryInUse, DataDirectoryLock
from kshim.storage.meta.lmdb_types import LmdbFailed
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.scram_store import read_credentials

METADATA_DIRECTORY = "meta"  # the broker's metadata store, inside its data directory


def add_offline(data_dir: str, user: str, mechanism: str, credential: SaltedCredential) -> None:
    """Writes ``user``'s credential into the metadata store of the broker data directory
    ``data_dir`` (made if missing), holding the directory's lock meanwhile, as the broker
    does. Raises CommandFailed while a broker holds the directory, when it cannot be
    written. ``user`` must fit the store (MAX_USER_BYTES)."""
    try:
        os.makedirs(data_dir, exist_ok=True)
        lock = DataDirectoryLock.acquire(data_dir)
    except DataDirectoryInUse as error:
        raise CommandFailed(
            f"{error}: stop it first, or add the user through it (without --data-dir)"
        ) from None
    except OSError as error:
        raise CommandFailed(data_directory_problem(data_dir, error)) from None
    try:
        _store(os.path.join(data_dir, METADATA_DIRECTORY), user, mechanism, credential)
    except (LmdbFailed, OSError) as error:
        raise CommandFailed(f"cannot write the metadata store in {data_dir}: {error}") from None
    finally:
        lock.release()


def _store(directory: str, user: str, mechanism: str, credential: SaltedCredential) -> None:
    made = ScramCredential.from_salted_password(
        mechanism, credential.salt, credential.salted_password, credential.iterations
    )
    store = MetadataStore(directory)
    try:
        store.scram.put(user, to_stored(made))
    finally:
        store.close()


def list_offline(data_dir: str, names: list[str]) -> tuple[list[CredentialListing], list[str]]:
    """As UserAdmin.describe, from the metadata store of the data directory ``data_dir``
    (read-only, so a running broker's too). Raises CommandFailed when that is no kshim
    data directory or its store cannot be read."""
    directory = os.path.join(data_dir, METADATA_DIRECTORY)
    if not os.path.isdir(directory):
        raise CommandFailed(f"{data_dir} is not a kshim data directory (no meta/ in it)")
    try:
        stored = read_credentials(directory)
    except LmdbFailed as error:
        raise CommandFailed(f"cannot read the metadata store in {data_dir}: {error}") from None
    listings = [
        CredentialListing(user, MECHANISM_TYPES[mechanism], credential.iterations)
        for (user, mechanism), credential in stored.items()
        if mechanism in MECHANISM_TYPES and (not names or user in names)
    ]
    listed = {listing.user for listing in listings}
    return listings, [name for name in dict.fromkeys(names) if name not in listed]
