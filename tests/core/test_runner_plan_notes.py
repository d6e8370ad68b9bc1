"""A launch plan's methodology, tuned deviations and notes become result provenance."""

from tprimat.contract.plans import LaunchPlan
from tprimat.running.runner import launch_plan_notes


def test_tuned_plan_lists_every_deviation_and_its_source_once():
    plan = LaunchPlan(argv=("torchrun",), methodology="tuned",
                      deviations=("training.micro_batch_size: 1 -> 2",
                                  'env.GPU_MAX_HW_QUEUES: unset -> "2"'),
                      notes=("tuned preset mi300x: AMD MI300X training guide",
                             "Megatron-core 0.16; padded vocabulary 128256"))
    assert launch_plan_notes(plan) == [
        "methodology: tuned",
        "tuned deviation: training.micro_batch_size: 1 -> 2",
        'tuned deviation: env.GPU_MAX_HW_QUEUES: unset -> "2"',
        "tuned preset mi300x: AMD MI300X training guide",
        "launch plan: Megatron-core 0.16; padded vocabulary 128256",
    ]


def test_iso_plan_says_so():
    assert launch_plan_notes(LaunchPlan(argv=("x",))) == ["methodology: iso"]
