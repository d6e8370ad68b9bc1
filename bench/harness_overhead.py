"""How much does tprimat itself cost?  The same training steps, bare vs. through ``tprimat run``.

*bare*: a plain loop in this process: the same transformers model, AdamW
with the same settings, the same micro-batches, timed per step with
``time.perf_counter`` (and one device synchronisation per step on a GPU).
No torchrun, no log lines, no runner, no monitor.

*tprimat*: ``tprimat run`` with the same config, i.e. torchrun, the torch
backend's trainer, the runner teeing and parsing every line, the GPU monitor.
Its step time is read back from ``result.json``.

Both are repeated in alternation (bare, tprimat, bare, ...) so that drift of
the machine hits both.  Two figures: the difference of the medians of the
per-repeat median step times, and of the best per-repeat medians (on a
machine shared with other work, the least disturbed repeat of each).
Goal: under 1 %.

    python bench/harness_overhead.py                       # CPU: tiny model
    python bench/harness_overhead.py --model llama3.1-8b --set training.global_batch_size=8 \
        --set training.seq_length=8192 --nproc-per-node 1  # one GPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
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
        [{"params": decay, "weight_decay": t.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps, fused=gpu)
    micro_batches = t.global_batch_size // t.micro_batch_size
    generator = torch.Generator(device=device)
    generator.manual_seed(config.benchmark.seed)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16)
                if config.precision.dtype == "bf16" else contextlib.nullcontext())
    times = []
    for _ in range(config.benchmark.iterations):
        start = time.perf_counter()
        for _ in range(micro_batches):
            tokens = torch.randint(0, spec.vocab_size, (t.micro_batch_size, t.seq_length + 1),
                                   device=device, generator=generator)
            with autocast:
                logits = model(input_ids=tokens[:, :-1]).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                   tokens[:, 1:].reshape(-1))
            (loss / micro_batches).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip_grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if gpu:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return times[warmup:]


def through_tprimat(args: argparse.Namespace, output: Path, run_id: str) -> list[float]:
    command = [sys.executable, "-c", "from tprimat.cli import main; main()", "run",
               "--backend", "torch", "--output", str(output), "--run-id", run_id,
               "--nproc-per-node", "1", *sum((["--set", s] for s in args.set), [])]
    if args.model:
        command += ["--model", args.model]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    result = json.loads((output / run_id / "result.json").read_text())
    warmup = result["summary"]["warmup_iterations"]
    return [r["step_time_s"] for r in result["iterations"]][warmup:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from tprimat.contract.registry import Registry
    from tprimat.result.metrics import describe
    from tprimat.running.prepare import RunRequest, layered_config

    platform = Registry.from_environment().detect_platform()
    overrides = tuple(args.set) + ("launch.nproc_per_node=1",)
    config, _ = layered_config(RunRequest(model=args.model, overrides=overrides), platform)
    warmup = config.benchmark.warmup_iterations
    bare, harness = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            bare.append(describe(bare_loop(config, warmup)).median)
            harness.append(describe(through_tprimat(args, Path(tmp), f"r{repeat}")).median)
    b, h = describe(bare).median, describe(harness).median
    print(f"model {config.benchmark.model}, {config.training.global_batch_size}x"
          f"{config.training.seq_length} tokens/step, {config.precision.dtype}, "
          f"{config.benchmark.iterations} steps ({warmup} warm-up) x {args.repeats} repeats, "
          f"device: {platform.device_name}")
    print(f"{'':10} {'median step (s)':>16} {'per-repeat medians (s)':>40}")
    print(f"{'bare':10} {b:>16.5f} {', '.join(f'{v:.5f}' for v in bare):>40}")
    print(f"{'tprimat':10} {h:>16.5f} {', '.join(f'{v:.5f}' for v in harness):>40}")
    print(f"overhead: {(h - b) / b:+.2%} of the bare step time (median of per-repeat medians)")
    b_best, h_best = min(bare), min(harness)
    print(f"overhead: {(h_best - b_best) / b_best:+.2%} (best per-repeat median of each; "
          "on a shared machine the least disturbed repeat)")


if __name__ == "__main__":
    main()
