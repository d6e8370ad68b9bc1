"""The held-out split: disjoint documents, fixed whatever the seed, and the packing rule on each side."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from tests.core.data.test_data_sequences import reference  # noqa: E402
from tprimat.convergence.split import (  # noqa: E402
    EVAL_PACKING_SEED,
    ValidationSplitError,
    split_documents,
    training_sample_count,
    training_sequences,
    validation_sequences,
)
from tprimat.data.indexed import IndexedWriter  # noqa: E402


@pytest.fixture
def prefix(tmp_path):
    rng = np.random.default_rng(5)
    docs = [np.append(rng.integers(3, 4000, size=int(rng.integers(5, 60))), 2) for _ in range(80)]
    with IndexedWriter(tmp_path / "p", "uint16") as writer:
        for doc in docs:
            writer.add_document(doc)
    return tmp_path / "p", docs


def test_split_is_disjoint_complete_and_fixed():
    train, held_out = split_documents(80, 0.1)
    assert len(held_out) == 8 and len(train) == 72
    assert sorted({*train.tolist(), *held_out.tolist()}) == list(range(80))
    again_train, again_held = split_documents(80, 0.1)
    assert (again_held == held_out).all() and (again_train == train).all()


@pytest.mark.parametrize(("documents", "fraction"), [(5, 0.05), (10, 0.99)])
def test_a_split_that_leaves_a_side_empty_is_refused(documents, fraction):
    with pytest.raises(ValidationSplitError, match="validation_fraction"):
        split_documents(documents, fraction)


def test_each_side_packs_only_its_own_documents(prefix):
    path, docs = prefix
    train_ids, held_ids = split_documents(len(docs), 0.25)
    train = training_sequences(path, 16, seed=9, fraction=0.25)
    expected = reference([docs[i] for i in train_ids], 16, 9)
    assert len(train) == len(expected) == training_sample_count(path, 16, 0.25)
    assert all((train[i] == expected[i]).all() for i in range(len(train)))
    evaluation = validation_sequences(path, 16, 0.25, count=5)
    held = reference([docs[i] for i in held_ids], 16, EVAL_PACKING_SEED)
    assert all((evaluation[i] == held[i]).all() for i in range(5))


def test_too_few_held_out_sequences_name_the_setting(prefix):
    path, _ = prefix
    with pytest.raises(ValidationSplitError, match="eval_sequences = 10000"):
        validation_sequences(path, 16, 0.25, count=10000)
