"""How much does tprimat itself cost?  The same training steps, bare vs. through ``tprimat run``.

*bare*: a plain loop in its own fresh process (this script started again with
``--bare``): the same transformers model, AdamW with the same settings, the
same micro-batches, timed per step with ``time.perf_counter`` (and one device
synchronisation per step on a GPU).  No torchrun, no log lines, no runner, no
monitor.

*tprimat*: ``tprimat run`` with the same config, i.e. torchrun, the torch
backend's trainer, the runner teeing and parsing every line, the GPU monitor.
Its step time is read back from ``result.json``.

Both run in fresh processes with the same thread settings (``OMP_NUM_THREADS``
and ``MKL_NUM_THREADS`` pinned to ``--threads``, default: the CPUs of this
process), repeated in alternation (bare, tprimat, bare, ...) so that drift of
the machine hits both.  Reported: each repeat's median step time after
warm-up, the spread of those medians per method ((max - min) / median), the
difference of the medians of the per-repeat medians, and whether that
difference is larger than the spread (if not, this machine cannot resolve
it).  The fixed cost of each process (start-up: imports, model build,
torchrun; and tear-down) is reported separately: wall time of the process
minus the time in its steps.  Goal: per-step overhead under 1 %.

    python bench/harness_overhead.py                       # CPU: tiny model
    python bench/harness_overhead.py --model llama3.1-8b --set training.global_batch_size=8 \
        --set training.seq_length=8192                     # one GPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def bare_loop(config, warmup: int) -> list[float]:
    import torch
    import torch.nn.functional as F

    from tprimat.plugins.torch.model import build_model
    from tprimat.settings.models import get_model

    gpu = torch.cuda.is_available()
    device = torch.device("cuda", 0) if gpu else torch.device("cpu")
    spec = get_model(config.benchmark.model)
    t = config.training
    model = build_model(spec, config, device)
    model.train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=t.lr,
        betas=(t.adam_beta1, t.adam_beta2),
        eps=t.adam_eps,
        fused=gpu,
    )
    micro_batches = t.global_batch_size // t.micro_batch_size
    generator = torch.Generator(device=device)
    generator.manual_seed(config.benchmark.seed)
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if config.precision.dtype == "bf16"
        else contextlib.nullcontext()
    )
    times = []
    for _ in range(config.benchmark.iterations):
        start = time.perf_counter()
        for _ in range(micro_batches):
            tokens = torch.randint(
                0, spec.vocab_size, (t.micro_batch_size, t.seq_length + 1), device=device, generator=generator
            )
            with autocast:
                logits = model(input_ids=tokens[:, :-1]).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            (loss / micro_batches).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip_grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if gpu:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return times[warmup:]


def through_tprimat(args: argparse.Namespace, output: Path, run_id: str, env: dict) -> tuple[list[float], float]:
    command = [
        sys.executable,
        "-c",
        "from tprimat.cli import main; main()",
        "run",
        "--backend",
        "torch",
        "--output",
        str(output),
        "--run-id",
        run_id,
        "--nproc-per-node",
        "1",
        *sum((["--set", s] for s in args.set), []),
    ]
    if args.model:
        command += ["--model", args.model]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    from tprimat.result.schema import load_result

    result = load_result(output / run_id / "result.json")  # any schema version
    warmup = result.summary.warmup_iterations
    steps = [record.step_time_s for record in result.iterations]
    return steps[warmup:], wall - sum(steps)


def bare_process(args: argparse.Namespace, env: dict) -> tuple[list[float], float]:
    """The bare loop in a fresh process: its measured steps and its fixed cost (wall minus all steps)."""
    command = [sys.executable, __file__, "--bare", *sum((["--set", s] for s in args.set), [])]
    if args.model:
        command += ["--model", args.model]
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["measured"], wall - sum(report["all"])


def _config(args: argparse.Namespace):
    """The config ``tprimat run --backend torch`` decides for these options (its own ``prepare``)."""
    from tprimat.contract.registry import Registry
    from tprimat.running.prepare import RunRequest, prepare

    with tempfile.TemporaryDirectory() as output:
        request = RunRequest(
            backend="torch", model=args.model, overrides=tuple(args.set), nproc_per_node=1, output=Path(output)
        )
        prepared = prepare(request, Registry.from_environment())
    return prepared.config, prepared.platform


def _spread(values: list[float]) -> float:
    from tprimat.result.metrics import describe

    return (max(values) - min(values)) / describe(values).median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="OMP/MKL threads of both (default: all CPUs)")
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()

    config, platform = _config(args)
    warmup = config.benchmark.warmup_iterations
    if args.bare:
        times = bare_loop(config, 0)
        print(json.dumps({"all": times, "measured": times[warmup:]}))
        return

    from tprimat.result.metrics import describe

    threads = args.threads or len(os.sched_getaffinity(0))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    bare, harness, bare_fixed, harness_fixed = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            steps, fixed = bare_process(args, env)
            bare.append(describe(steps).median)
            bare_fixed.append(fixed)
            steps, fixed = through_tprimat(args, Path(tmp), f"r{repeat}", env)
            harness.append(describe(steps).median)
            harness_fixed.append(fixed)
    b, h = describe(bare).median, describe(harness).median
    print(
        f"model {config.benchmark.model}, {config.training.global_batch_size}x"
        f"{config.training.seq_length} tokens/step, {config.precision.dtype}, "
        f"{config.benchmark.iterations} steps ({warmup} warm-up) x {args.repeats} repeats, "
        f"{threads} threads, device: {platform.device_name}, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':10} {'median step (s)':>16} {'spread':>8} {'fixed cost (s)':>15}  per-repeat medians (s)")
    for name, medians, fixed in (("bare", bare, bare_fixed), ("tprimat", harness, harness_fixed)):
        print(
            f"{name:10} {describe(medians).median:>16.5f} {_spread(medians):>8.1%} "
            f"{describe(fixed).median:>15.2f}  {', '.join(f'{v:.5f}' for v in medians)}"
        )
    overhead = (h - b) / b
    resolution = max(_spread(bare), _spread(harness))
    print(f"per-step overhead: {overhead:+.2%} of the bare step time (median of per-repeat medians)")
    print(
        f"resolution: {resolution:.2%} (the larger spread of the per-repeat medians); the overhead is "
        + (
            "larger than that spread"
            if abs(overhead) > resolution
            else "within that spread: this run cannot tell it from zero"
        )
    )
    print(
        f"fixed cost per run: bare {describe(bare_fixed).median:.2f} s, "
        f"tprimat {describe(harness_fixed).median:.2f} s (start-up and tear-down, not per step)"
    )


if __name__ == "__main__":
    main()
