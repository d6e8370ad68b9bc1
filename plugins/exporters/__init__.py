"""tprimat's own experiment-tracker exporters: MLflow, Weights & Biases, TensorBoard.

An entry-point plugin like any other (``exporters = tprimat.plugins.exporters``
in setup.cfg): it declares its exporters through the ``register_exporters``
hook, exactly as a third-party exporter does.  Declaring them imports no
tracker library; each module here imports its own only when it writes.
"""

from __future__ import annotations

from tprimat import hookimpl
from tprimat.contract import ExporterSpec, ExportTarget, Requirements, TrackerRun


def _mlflow(run: TrackerRun, target: ExportTarget) -> str:
    from tprimat.plugins.exporters.mlflow_store import export

    return export(run, target)


def _wandb(run: TrackerRun, target: ExportTarget) -> str:
    from tprimat.plugins.exporters.wandb_files import export

    return export(run, target)


def _tensorboard(run: TrackerRun, target: ExportTarget) -> str:
    from tprimat.plugins.exporters.tensorboard_events import export

    return export(run, target)


EXPORTERS = (
    ExporterSpec(
        name="mlflow",
        description="MLflow tracking: a local SQLite store (sqlite:///mlruns.db) unless --uri or "
        "$MLFLOW_TRACKING_URI names another; experiment $MLFLOW_EXPERIMENT_NAME or tprimat",
        export=_mlflow,
        requires=Requirements(python=("mlflow", "sqlalchemy", "alembic"), hint="pip install 'tprimat[mlflow]'"),
    ),
    ExporterSpec(
        name="wandb",
        description="Weights & Biases run files, offline unless $WANDB_MODE=online (upload them later with "
        "`wandb sync`); in --uri or $WANDB_DIR, project $WANDB_PROJECT or tprimat",
        export=_wandb,
        requires=Requirements(python=("wandb",), hint="pip install 'tprimat[wandb]'"),
    ),
    ExporterSpec(
        name="tensorboard",
        description="TensorBoard event files in <--uri, default ./tensorboard>/<experiment>/<run id>",
        export=_tensorboard,
        requires=Requirements(python=("tensorboard",), hint="pip install 'tprimat[tensorboard]'"),
    ),
)


@hookimpl
def register_exporters() -> list[ExporterSpec]:
    return list(EXPORTERS)
