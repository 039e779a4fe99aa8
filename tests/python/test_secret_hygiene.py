"""Secret hygiene: nothing that prints, pickles or introspects reveals the secret key."""

from __future__ import annotations

import copy
import pickle

import pytest
from conftest import Kit


def _secret_forms(kit: Kit) -> list[str]:
    """Renderings of the secret key's bytes that must never appear in any text."""
    b = kit.kg.secret_key.to_bytes()[16:48]  # payload, past the header
    return [b.hex(), str(list(b[:8]))[1:-1], repr(b)[2:-1]]


def test_reprs_reveal_nothing(kit10: Kit) -> None:
    sk = kit10.kg.secret_key
    objs = [sk, kit10.kg, kit10.decryptor, sk._raw, kit10.kg._raw]
    forms = _secret_forms(kit10)
    for obj in objs:
        for text in (repr(obj), str(obj), f"{obj}", f"{obj!r}"):
            assert len(text) < 120, text
            assert all(f not in text for f in forms), text
    assert "<secret>" in repr(sk) and "<secret>" in repr(kit10.kg)
    assert f"{kit10.params.id:#018x}" in repr(sk)


def test_no_attribute_dicts(kit10: Kit) -> None:
    for obj in (kit10.kg.secret_key, kit10.kg, kit10.decryptor):
        with pytest.raises(TypeError):
            vars(obj)


def test_not_picklable(kit10: Kit) -> None:
    for obj in (kit10.kg.secret_key, kit10.kg, kit10.decryptor):
        with pytest.raises(TypeError):
            pickle.dumps(obj)


def test_copies_share_nothing_printable(kit10: Kit) -> None:
    sk = kit10.kg.secret_key
    assert repr(copy.copy(sk)) == repr(sk) == repr(copy.deepcopy(sk))


def test_server_objects_hold_no_secret(kit10: Kit) -> None:
    """The evaluator and the evaluation keys have no path to the secret key."""
    for obj in (kit10.ev, kit10.pk, kit10.rlk, kit10.gks):
        assert not any("secret" in name for name in dir(obj))
