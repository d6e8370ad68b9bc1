"""PackedSequences: documents packed and cut like Megatron's GPT dataset, shuffled by seed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tprimat.data.indexed import IndexedWriter
from tprimat.data.sequences import PackedSequences
from tprimat.errors import TprimatError


@pytest.fixture
def prefix(tmp_path):
    rng = np.random.default_rng(3)
    docs = [np.append(rng.integers(3, 4000, size=int(rng.integers(0, 40))), 2) for _ in range(57)]
    with IndexedWriter(tmp_path / "p", "uint16") as writer:
        for doc in docs:
            writer.add_document(doc)
    return tmp_path / "p", docs


def reference(docs, seq_length, seed, epoch=0):
    """The packing rule written out directly: permute documents, concatenate, cut, permute."""
    rng = np.random.Generator(np.random.PCG64([seed, epoch]))
    order = rng.permutation(len(docs))
    stream = np.concatenate([docs[i] for i in order]).astype(np.int64)
    count = (stream.size - 1) // seq_length
    samples = [stream[k * seq_length : k * seq_length + seq_length + 1] for k in range(count)]
    perm = rng.permutation(count)
    return [samples[k] for k in perm]


@pytest.mark.parametrize("seq_length", [1, 7, 16, 100])
def test_samples_match_the_packing_rule(prefix, seq_length):
    path, docs = prefix
    packed = PackedSequences(path, seq_length, seed=11)
    expected = reference(docs, seq_length, 11)
    assert len(packed) == len(expected) == (sum(map(len, docs)) - 1) // seq_length
    for i, sample in enumerate(expected):
        got = packed[i]
        assert got.dtype == np.int64 and got.shape == (seq_length + 1,)
        assert np.array_equal(got, sample)


def test_every_token_is_used_once_per_epoch(prefix):
    path, docs = prefix
    packed = PackedSequences(path, 10, seed=0)
    inputs = np.concatenate([packed[i][:-1] for i in range(len(packed))])
    total = sum(map(len, docs))
    assert total - 11 < inputs.size == len(packed) * 10 <= total - 1
    counts = np.bincount(np.concatenate(docs), minlength=4096)
    used = np.bincount(inputs, minlength=4096)
    assert np.all(used <= counts)


def test_seed_decides_the_order(prefix):
    path, _ = prefix
    a, b, c = (PackedSequences(path, 8, seed=s) for s in (1, 1, 2))
    assert all(np.array_equal(a[i], b[i]) for i in range(len(a)))
    assert any(not np.array_equal(a[i], c[i]) for i in range(len(a)))


def test_more_samples_than_one_epoch(prefix):
    path, docs = prefix
    packed = PackedSequences(path, 16, seed=5, num_samples=None)
    per_epoch = len(packed)
    longer = PackedSequences(path, 16, seed=5, num_samples=per_epoch * 2 + 3)
    assert len(longer) == per_epoch * 2 + 3
    second = reference(docs, 16, 5, epoch=1)
    assert np.array_equal(longer[per_epoch], second[0])
    assert np.array_equal(longer[-1], reference(docs, 16, 5, epoch=2)[2])
    with pytest.raises(IndexError):
        longer[len(longer)]


def test_too_little_data(tmp_path):
    with IndexedWriter(tmp_path / "s", "uint16") as writer:
        writer.add_document(np.array([1, 2, 3]))
    with pytest.raises(TprimatError, match="cannot fill one sample"):
        PackedSequences(tmp_path / "s", 3, seed=0)
    assert len(PackedSequences(tmp_path / "s", 2, seed=0)) == 1


def test_imports_without_torch(prefix):
    path, _ = prefix
    code = (
        "import sys\n"
        "from tprimat.data.sequences import PackedSequences\n"
        f"s = PackedSequences({str(path)!r}, 8, seed=1)\n"
        "s[0]\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
