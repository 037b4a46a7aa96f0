"""Secrets kept at rest (host-cluster kubeconfigs, budget webhook URLs) are encrypted with Fernet
(AES-128-CBC + HMAC-SHA256).

`GPUCLOUD_ENCRYPTION_KEYS` holds one or more keys: the first encrypts, all decrypt, so keys can be rotated by
putting a new one first and re-saving.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class DecryptionFailed(Exception):
    """The ciphertext was made with a key that is no longer configured, or was tampered with."""


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def encrypt(plaintext: str) -> str:
    return _fernet(tuple(settings.ENCRYPTION_KEYS)).encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str:
    try:
        return _fernet(tuple(settings.ENCRYPTION_KEYS)).decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise DecryptionFailed("cannot decrypt: the key it was encrypted with is not configured") from None
