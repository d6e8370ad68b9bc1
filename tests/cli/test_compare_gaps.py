"""Gaps in the iterations, and figures that show each run as itself.

Real logs (tests/fixtures/logs, see PROVENANCE.md) with lines cut out, as an excerpt or a crash
leaves them: the Megatron-LM GPT-345M run logged every 100 iterations without the lines of
iterations 700-900, and the NeMo resiliency demo whose job crashed at step 17 and restarted from
the step-10 checkpoint, without the first attempt's last lines.  ``tprimat parse`` must name the
missing iterations; ``tprimat compare`` must break the step-time and loss lines there, caption each
run's own warm-up, give every run its own colour and keep legends off the data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.compare import plots

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
MEGATRON = LOGS / "megatron" / "mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
RESTART = LOGS / "nemo" / "nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell22_crash_at_step17_injob_restart.log"
REPEATS = Path(__file__).resolve().parents[1] / "fixtures" / "compare" / "torch_cpu"


def cut(source: Path, first: int, last: int, out: Path) -> Path:
    """``source`` without its lines ``first``..``last`` (1-based), bytes otherwise as they are."""
    lines = source.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[: first - 1] + lines[last:]))
    return out


def parse(log: Path, out: Path, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["parse", str(log), "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def gap_notes(result: dict) -> list[str]:
    return [n for n in result["provenance"]["notes"] if n.startswith("gap in the iterations")]


#: Where each figure's legend and data area lay on the saved image, by file name.
EXTENTS: dict[str, tuple[object, object]] = {}


@pytest.fixture
def figures(monkeypatch) -> dict[str, object]:
    """The figures ``tprimat compare`` draws, by file name, kept for inspection."""
    kept: dict[str, object] = {}
    save = plots._save

    def keep(plt, fig, path):
        kept[Path(path).name] = fig
        fig.tight_layout()  # as saved
        renderer = fig.canvas.get_renderer()
        legend = fig.axes[0].get_legend()
        if legend is not None:
            EXTENTS[Path(path).name] = (legend.get_window_extent(renderer), fig.axes[0].get_window_extent(renderer))
        return save(plt, fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return kept


def compare(tmp_path: Path, *paths: Path, extra: tuple[str, ...] = ()):
    result = CliRunner().invoke(
        cli, ["compare", *map(str, paths), "-o", str(tmp_path / "report"), "--format", "md", *extra]
    )
    assert result.exit_code == 0, result.output
    return (tmp_path / "report" / "report.md").read_text()


def line_xs(fig) -> list[list[float]]:
    return [list(map(float, line.get_xdata())) for line in fig.axes[0].get_lines()]


def test_an_excerpt_with_lines_cut_out_names_the_gap_and_the_figures_leave_it_blank(tmp_path, figures):
    pytest.importorskip("matplotlib")  # the figures (the plot extra)
    # lines 382-384 are iterations 700, 800 and 900 (each covering the 100 iterations before it)
    whole = parse(MEGATRON, tmp_path / "whole.json")
    assert gap_notes(whole) == []
    excerpt = parse(cut(MEGATRON, 382, 384, tmp_path / "excerpt.log"), tmp_path / "excerpt.json")
    [note] = gap_notes(excerpt)
    assert "no record of iterations 601-900" in note
    compare(tmp_path, tmp_path / "excerpt.json")
    for name in ("step_time.png", "loss.png"):
        [xs] = line_xs(figures[name])
        broken = [i for i, x in enumerate(xs) if math.isnan(x)]
        assert len(broken) == 1, name  # one break, between 600 and 1000
        assert xs[broken[0] - 1] == 600 and xs[broken[0] + 1] == 1000
    caption = " ".join(t.get_text() for t in figures["step_time.png"].axes[0].texts)
    assert "no record: iterations R1: 601–900" in caption.replace("the log has no record", "no record")


def test_a_restart_that_lost_lines_is_a_gap_and_one_from_an_earlier_checkpoint_is_not(tmp_path, figures):
    pytest.importorskip("matplotlib")  # the figures (the plot extra)
    args = ("--seq-length", "2048", "--world-size", "8")
    # the whole log: iterations 0-15, a crash, then 10-19 again from the step-10 checkpoint
    whole = parse(RESTART, tmp_path / "whole.json", *args)
    assert gap_notes(whole) == []
    assert any("logged again" in n for n in whole["provenance"]["notes"])
    # the first attempt's output after step 7 lost (lines 149-159): the restart resumes at step 10
    lost = parse(cut(RESTART, 149, 159, tmp_path / "lost.log"), tmp_path / "lost.json", *args)
    [note] = gap_notes(lost)
    assert "no record of iterations 9-10" in note  # steps 8 and 9, numbered from 1
    compare(tmp_path, tmp_path / "lost.json")
    [xs] = line_xs(figures["step_time.png"])
    assert xs[8 - 1] == 8 and math.isnan(xs[8]) and xs[9] == 11


def test_each_run_has_its_own_colour_and_warm_up_and_legends_stay_off_the_data(tmp_path, figures):
    pytest.importorskip("matplotlib")  # the figures (the plot extra)
    args = ("--seq-length", "2048", "--world-size", "8")
    parse(RESTART, tmp_path / "a.json", *args)  # iterations 1-20, warm-up 1-2
    parse(cut(RESTART, 141, 148, tmp_path / "late.log"), tmp_path / "b.json", *args)  # from 9: warm-up 9-10
    compare(tmp_path, tmp_path / "a.json", tmp_path / "b.json", extra=("--allow-mismatch",))
    axes = figures["step_time.png"].axes[0]
    caption = " ".join(t.get_text() for t in axes.texts)
    assert "R1: 1–2; R2: 9–10" in caption and "1–10" not in caption
    # two repeats of one system, and another system: every run in a colour of its own
    compare(tmp_path / "repeats", REPEATS)
    for name in ("step_time.png", "loss.png"):
        lines = figures[name].axes[0].get_lines()
        assert len(lines) == 4 and len({line.get_color() for line in lines}) == 4, name
        assert len({line.get_marker() for line in lines}) == 2  # the runs of one system: two markers
    for name in ("step_time.png", "loss.png", "memory.png"):
        legend, data = EXTENTS[name]
        assert legend.x0 >= data.x1, f"{name}: the legend overlaps the data area"
        assert legend.x1 <= plots.PIXELS[0], f"{name}: the legend runs off the image"
