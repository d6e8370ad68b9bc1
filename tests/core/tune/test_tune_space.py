"""The search space: knobs per backend, valid candidates only, simplest first, budgets."""

from __future__ import annotations

import pytest

from tprimat.settings.config import default_config_dict, load_config
from tprimat.settings.models import get_model
from tprimat.tune import Budget, parse_budget
from tprimat.tune.search import TuneError, fit_budget, worst_case_trials
from tprimat.tune.space import (
    SpaceError,
    candidates,
    parse_space,
    search_space,
    tunables_for,
)


def cpu_config(*overrides: str):
    return load_config(None, list(overrides), base=default_config_dict(cpu=True))


def test_torch_space_on_cpu_searches_micro_batch_and_recompute_only():
    config = cpu_config()  # global batch 4, one process
    space = search_space(config, tunables_for("torch", _spec("torch")))
    assert space == {"training.micro_batch_size": (1, 2, 4), "training.recompute": ("none", "full")}
    found, invalid = candidates(config, get_model("llama3.1-tiny"), space)
    assert {c.as_dict()["training.micro_batch_size"] for c in found} == {1, 2, 4}
    assert len(found) == 6 and not invalid
    # simplest first: the config as written, then one change, then two
    changes = [len(c.deviations(config)) for c in found]
    assert changes == sorted(changes) and changes[0] == 0


def test_two_processes_add_ddp_versus_fsdp2():
    config = cpu_config("launch.nproc_per_node=2")
    space = search_space(config, tunables_for("torch", _spec("torch")))
    assert space["parallel.strategy"] == ("ddp", "fsdp2")
    found, invalid = candidates(config, get_model("llama3.1-tiny"), space)
    assert {c.as_dict()["parallel.strategy"] for c in found} == {"ddp", "fsdp2"}
    # data-parallel 2 with global batch 4: micro-batch 4 does not divide it, the config refuses it
    assert {c.as_dict()["training.micro_batch_size"] for c in found} == {1, 2}
    assert invalid and all("not divisible" in reason for _, reason in invalid)


def test_megatron_space_stays_within_the_node_and_the_model():
    config = load_config(None, ["launch.nproc_per_node=8", "training.global_batch_size=16"])
    space = search_space(config, tunables_for("nvd_megatron", _spec("nvd_megatron")))
    assert space["parallel.tensor"] == (1, 2, 4, 8)
    assert space["training.recompute"] == ("none", "selective", "full")
    found, _ = candidates(config, get_model("llama3.1-8b"), space)
    assert found
    for candidate in found:
        settings = candidate.as_dict()
        parallel = settings["parallel.tensor"] * settings["parallel.pipeline"] * settings["parallel.context"]
        assert 8 % parallel == 0
        assert 32 % settings["parallel.pipeline"] == 0  # Llama 3.1 8B has 32 layers
        assert not (settings["parallel.overlap_param_gather"] and not settings["parallel.distributed_optimizer"])
    assert [c.id for c in found] == [c.id for c in candidates(config, get_model("llama3.1-8b"), space)[0]]


def test_set_fixes_a_knob_and_space_restricts_or_adds_one():
    config = cpu_config()
    space = search_space(
        config,
        tunables_for("torch", _spec("torch")),
        restrict=parse_space(["training.micro_batch_size=1,2"]),
        fixed=["training.recompute"],
    )
    assert space == {"training.micro_batch_size": (1, 2)}
    added = search_space(config, {}, restrict=parse_space(["kernels.compile=false,true"]))
    assert added == {"kernels.compile": (False, True)}
    with pytest.raises(SpaceError, match="both fixed with --set and searched with --space"):
        search_space(config, {}, restrict={"training.recompute": ("none",)}, fixed=["training.recompute"])


@pytest.mark.parametrize(
    "key",
    ["training.global_batch_size", "training.seq_length", "precision.dtype", "benchmark.model", "data.dataset"],
)
def test_frozen_keys_are_never_searched(key):
    with pytest.raises(SpaceError, match="never tuned"):
        search_space(cpu_config(), {}, restrict={key: (1, 2)})


def test_unknown_keys_and_backends_without_tunables_are_errors():
    with pytest.raises(SpaceError, match="unknown config key training.nope"):
        search_space(cpu_config(), {}, restrict={"training.nope": (1,)})
    with pytest.raises(SpaceError, match="--space"):
        tunables_for("toy")
    with pytest.raises(SpaceError, match="section.key=v1,v2"):
        parse_space(["micro_batch_size=1"])


def test_a_declared_tunables_mapping_wins_over_the_table():
    class Spec:
        tunables = {"training.recompute": ["none"]}

    assert tunables_for("torch", Spec()) == {"training.recompute": ("none",)}


def _spec(name):
    from tprimat.contract.registry import Registry

    return Registry.from_environment({}).backend(name).spec


def test_budgets():
    assert parse_budget("24") == Budget(trials=24)
    assert parse_budget("12-trials") == Budget(trials=12)
    assert parse_budget("1h30m") == Budget(seconds=5400)
    assert parse_budget("90s") == Budget(seconds=90)
    for bad in ("", "soon", "0", "-3"):
        with pytest.raises(TuneError, match="--budget"):
            parse_budget(bad)
    # 6 candidates: 6 in round 0, 3 in round 1, 2 finalists x 3 runs
    assert worst_case_trials(6, eta=2, finalists=2, final_repeats=3) == 6 + 3 + 6
    assert worst_case_trials(2, eta=2, finalists=2, final_repeats=3) == 6
    found = list(range(6))
    kept, dropped = fit_budget(found, Budget(trials=10), eta=2, finalists=2, final_repeats=3)
    assert kept == [0, 1, 2, 3] and dropped == [4, 5]  # 4 + 2 x 3 = 10; 5 would need 5 + 3 + 6
    assert fit_budget(found, Budget(seconds=60), eta=2, finalists=2, final_repeats=3) == (found, [])
    with pytest.raises(TuneError, match="too small"):
        fit_budget(found, Budget(trials=2), eta=2, finalists=2, final_repeats=3)
