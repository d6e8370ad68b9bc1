"""Run each node's command inside a container image: the runtime's command line, per vendor.

The vendors ship their frameworks as images (``rocm/primus``,
``nvcr.io/nvidia/nemo``), and clusters run those images per node, either
through SLURM's pyxis/enroot plugin (``srun --container-image=…``) or with a
container runtime started on each node (apptainer/singularity, podman,
docker).  This module renders both forms from one :class:`ContainerSpec`:

* :func:`pyxis_srun_options`: the ``srun`` options of pyxis;
* :func:`render_container_script`: the per-node script that starts the image
  with a runtime and runs the node script inside it.

Every path is mounted at the same path inside the container, so the absolute
paths of the node command (run directory, config, framework checkout, data)
mean the same thing on the host and in the container.  The GPU flags are
those the vendors document for their images (docs/docker.md): AMD's KFD and
DRI devices, the ``video``/``render`` groups, host IPC and unlimited
``memlock``; NVIDIA's ``--gpus all`` (docker), CDI ``nvidia.com/gpu=all``
(podman) and ``--nv`` (apptainer); apptainer's ``--rocm`` for AMD.

The image name is exported as ``TPRIMAT_CONTAINER_IMAGE`` and its digest, where
one can be resolved, as ``TPRIMAT_CONTAINER_DIGEST``; the run's manifest
records both.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence

import attrs

from tprimat.errors import TprimatError

#: Runtimes ``--container-runtime`` accepts; ``auto`` is pyxis when srun has it, else the first
#: per-node runtime found on the node.
RUNTIMES = ("auto", "pyxis", "apptainer", "singularity", "podman", "docker")
PER_NODE_RUNTIMES = ("apptainer", "singularity", "podman", "docker")
VENDORS = ("amd", "nvidia", "none")
CONTAINER_FILE = "slurm_container.sh"
#: Variables every per-node container gets from the node script's environment (names only).
PASSED_NAMES = (
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_NODEID",
    "SLURM_PROCID",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "TPRIMAT_CONTAINER_IMAGE",
    "TPRIMAT_CONTAINER_DIGEST",
)
#: Prefixes of submitting-environment variables passed on by name: tprimat's own switches, the
#: collective libraries' and runtimes' tuning, Hugging Face (``HF_TOKEN`` stays a name, never a value).
PASSED_PREFIXES = ("TPRIMAT_", "NCCL_", "RCCL_", "HSA_", "NVTE_", "TORCH_", "PYTORCH_", "HF_", "GLOO_", "UCX_", "FI_")
#: docker/podman resource limits both vendors' training images document (memlock for RDMA, a large stack).
ULIMITS = ("--ulimit", "memlock=-1", "--ulimit", "stack=67108864")


class ContainerError(TprimatError):
    """An image, runtime, vendor or mount that cannot be used."""


@attrs.frozen(kw_only=True)
class ContainerSpec:
    """What the node runs in: image, runtime, GPU vendor, mounts (same path inside) and working directory."""

    image: str = attrs.field(validator=attrs.validators.min_len(1))
    runtime: str = attrs.field(default="auto", validator=attrs.validators.in_(RUNTIMES))
    gpu_vendor: str = attrs.field(validator=attrs.validators.in_(VENDORS))
    mounts: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    env_names: tuple[str, ...] = PASSED_NAMES


def parse_mount(text: str) -> tuple[str, str]:
    """``SRC[:DST]`` (absolute paths; DST defaults to SRC) as ``(src, dst)``."""
    src, _, dst = text.partition(":")
    src = os.path.abspath(src) if src else ""
    dst = dst or src
    if not src or not dst.startswith("/") or ":" in dst or "," in src + dst:
        raise ContainerError(f"--container-mount {text!r}: give SRC or SRC:DST, DST an absolute path, without commas")
    return src, dst


def same_path_mounts(
    paths: Iterable[str | os.PathLike[str]], extra: Iterable[tuple[str, str]] = ()
) -> tuple[tuple[str, str], ...]:
    """Each path mounted at itself (deduplicated, a path inside another one dropped), then ``extra``."""
    chosen: list[str] = []
    for path in sorted({os.path.abspath(p) for p in paths}):
        if not any(path == c or path.startswith(c.rstrip("/") + "/") for c in chosen):
            chosen.append(path)
    mounts = [(p, p) for p in chosen]
    for mount in extra:
        if mount not in mounts:
            mounts.append(mount)
    return tuple(mounts)


def passed_env_names(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The fixed names, then the submitting environment's names with a passed prefix."""
    environ = dict(os.environ) if environ is None else environ
    names = list(PASSED_NAMES)
    for name in sorted(n for n in environ if n.startswith(PASSED_PREFIXES)):
        if name not in names and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            names.append(name)
    return tuple(names)


def pinned_digest(image: str) -> str | None:
    """The digest an image reference pins (``name@sha256:…``), else None."""
    found = re.search(r"@(sha256:[0-9a-f]{64})$", image)
    return found.group(1) if found else None


def enroot_uri(image: str) -> str:
    """A docker reference as the enroot URI pyxis reads: ``nvcr.io/nvidia/nemo:25.09`` -> ``nvcr.io#nvidia/nemo:25.09``.

    References without a registry host (``ubuntu:24.04``, Docker Hub), URIs with a scheme or
    ``#``, and file paths are given as they are.
    """
    if "#" in image or "://" in image or image.startswith(("/", ".")):
        return image
    host, sep, rest = image.partition("/")
    if sep and ("." in host or ":" in host or host == "localhost"):
        return f"{host}#{rest}"
    return image


def is_image_file(image: str) -> bool:
    """Whether the image is a file (an enroot squashfs, a SIF) rather than a registry reference."""
    return image.startswith(("/", ".")) or image.endswith((".sqsh", ".squashfs", ".sif", ".simg"))


def apptainer_uri(image: str) -> str:
    """An image for apptainer/singularity: a file path as it is, a registry reference as ``docker://…``."""
    if "://" in image or is_image_file(image):
        return image
    return "docker://" + image


def pyxis_srun_options(spec: ContainerSpec) -> list[str]:
    """The pyxis options of the job step: image, mounts, working directory."""
    options = [f"--container-image={enroot_uri(spec.image)}"]
    if spec.mounts:
        options.append("--container-mounts=" + ",".join(f"{src}:{dst}" for src, dst in spec.mounts))
    if spec.workdir:
        options.append(f"--container-workdir={spec.workdir}")
    return options


def runtime_argv(spec: ContainerSpec, runtime: str, command: Sequence[str]) -> list[str]:
    """The runtime's command line that runs ``command`` inside the image on this node."""
    if runtime in ("podman", "docker"):
        argv = [runtime, "run", "--rm", "--network", "host", "--ipc", "host"]
        if spec.gpu_vendor == "amd":
            argv += ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video", "--group-add", "render"]
            argv += ["--cap-add", "SYS_PTRACE", "--security-opt", "seccomp=unconfined"]
        elif spec.gpu_vendor == "nvidia":
            argv += ["--gpus", "all"] if runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        if spec.gpu_vendor != "none":
            argv += list(ULIMITS)
            if runtime == "docker":  # podman refuses a /dev/shm size with the host's IPC namespace
                argv += ["--shm-size", "64g"]
        for name in spec.env_names:
            argv += ["-e", name]
        for src, dst in spec.mounts:
            argv += ["-v", f"{src}:{dst}"]
        if spec.workdir:
            argv += ["-w", spec.workdir]
        return [*argv, spec.image, *command]
    if runtime in ("apptainer", "singularity"):
        # The host's environment, network and IPC are the container's by default.
        argv = [runtime, "exec"]
        argv += {"amd": ["--rocm"], "nvidia": ["--nv"], "none": []}[spec.gpu_vendor]
        if spec.mounts:
            argv += ["--bind", ",".join(f"{src}:{dst}" for src, dst in spec.mounts)]
        if spec.workdir:
            argv += ["--pwd", spec.workdir]
        return [*argv, apptainer_uri(spec.image), *command]
    raise ContainerError(f"{runtime!r} is not a per-node container runtime ({', '.join(PER_NODE_RUNTIMES)})")


def _digest_lines(spec: ContainerSpec, runtime: str) -> list[str]:
    """Shell lines that set TPRIMAT_CONTAINER_DIGEST on this node (empty when it cannot be resolved)."""
    pinned = pinned_digest(spec.image)
    if pinned:
        return [f"TPRIMAT_CONTAINER_DIGEST={pinned}"]
    image = shlex.quote(spec.image)
    if runtime in ("podman", "docker"):
        fmt = shlex.quote("{{if .RepoDigests}}{{index .RepoDigests 0}}{{else}}{{.Id}}{{end}}")
        inspect = f"{runtime} image inspect --format {fmt} {image} 2>/dev/null"
        return [
            f"if ! digest=$({inspect}); then",
            f"    {runtime} pull {image} >&2",
            f"    digest=$({inspect})",
            "fi",
            'digest="${digest##*@}"',
            'case "$digest" in sha256:*) ;; ?*) digest="sha256:${digest}" ;; esac',
            'TPRIMAT_CONTAINER_DIGEST="$digest"',
        ]
    # apptainer/singularity, pyxis: the digest of a local image file; a registry image stays unresolved.
    if not is_image_file(spec.image):
        return ["TPRIMAT_CONTAINER_DIGEST=  # a registry image without a pinned digest: unresolved here"]
    path = shlex.quote(spec.image)
    return [
        "TPRIMAT_CONTAINER_DIGEST=",
        f"if [ -f {path} ]; then",
        f'    TPRIMAT_CONTAINER_DIGEST="sha256:$(sha256sum {path} | cut -d " " -f 1)"',
        "fi",
    ]


def digest_lines(spec: ContainerSpec, runtime: str) -> list[str]:
    """The digest lines followed by the export of both image variables."""
    return [
        *_digest_lines(spec, runtime),
        f"export TPRIMAT_CONTAINER_IMAGE={shlex.quote(spec.image)} TPRIMAT_CONTAINER_DIGEST",
    ]


def _run_lines(spec: ContainerSpec, runtime: str, inner: Sequence[str]) -> list[str]:
    """Start the container; docker/podman containers outlive a killed client, so stop them on a signal."""
    argv = runtime_argv(spec, runtime, inner)
    if runtime in ("apptainer", "singularity"):
        return ["exec " + shlex.join(argv)]
    run, rest = argv[:2], argv[2:]
    rdma = ""
    if spec.gpu_vendor != "none":  # the RDMA devices of a multi-node fabric, where the node has them
        rdma = ' "${rdma[@]}"'
    return [
        *(["rdma=()", "if [ -e /dev/infiniband ]; then rdma=(--device /dev/infiniband); fi"] if rdma else []),
        'name="tprimat-${SLURM_JOB_ID:-job}-${SLURM_NODEID:-0}"',
        f'{shlex.join(run)} --name "$name"{rdma} {shlex.join(rest)} &',
        "child=$!",
        # SLURM sends SIGTERM on scancel and at the time limit; the container gets its own stop.
        f"trap '{runtime} stop -t 20 \"$name\" >/dev/null 2>&1 || true' TERM INT HUP",
        "status=0",
        'while true; do wait "$child" && status=0 || status=$?; kill -0 "$child" 2>/dev/null || break; done',
        'exit "$status"',
    ]


def render_container_script(spec: ContainerSpec, inner: Sequence[str]) -> str:
    """The per-node script: resolve the image's digest, start the image, run ``inner`` in it.

    With runtime ``auto`` the first of apptainer, singularity, podman and docker on the node's
    PATH is used.
    """
    if spec.runtime == "pyxis":
        raise ContainerError("pyxis runs the container through srun's own options, not a per-node script")
    lines = [
        "#!/bin/bash",
        f"# One SLURM task per node: start {spec.image} and run the node script inside it.",
        "set -euo pipefail",
    ]
    runtimes = PER_NODE_RUNTIMES if spec.runtime == "auto" else (spec.runtime,)
    if len(runtimes) == 1:
        missing = f"echo 'tprimat: {runtimes[0]} not found on' \"$(hostname)\" >&2; exit 127"
        lines.append(f"command -v {runtimes[0]} >/dev/null || {{ {missing}; }}")
        lines += digest_lines(spec, runtimes[0]) + _run_lines(spec, runtimes[0], inner)
        return "\n".join(lines) + "\n"
    names = " ".join(runtimes)
    lines += [
        "runtime=",
        f"for candidate in {names}; do",
        '    if command -v "$candidate" >/dev/null; then runtime=$candidate; break; fi',
        "done",
        f'if [ -z "$runtime" ]; then echo "tprimat: no container runtime ({names}) on $(hostname)" >&2; exit 127; fi',
        'echo "tprimat: container runtime $runtime on $(hostname)"',
        'case "$runtime" in',
    ]
    for runtime in runtimes:
        body = digest_lines(spec, runtime) + _run_lines(spec, runtime, inner)
        lines += [f"{runtime})"] + ["    " + line for line in body] + ["    ;;"]
    lines.append("esac")
    return "\n".join(lines) + "\n"
