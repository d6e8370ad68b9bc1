# tprimat on NVIDIA (CUDA): NVIDIA's NeMo Framework image plus tprimat.
# Build from the repository root:  docker build -f docker/nvd.Dockerfile -t tprimat:nvd .
# (naming the tag and the commit it records:  --build-arg TPRIMAT_IMAGE=<tag> --build-arg TPRIMAT_GIT_COMMIT=$(git rev-parse HEAD))
# Run: see docs/docker.md (GPUs, ipc, shm, ulimits; secrets from env).
ARG NEMO_IMAGE=nvcr.io/nvidia/nemo:25.09
FROM ${NEMO_IMAGE}
# Build args are scoped per stage: re-declare to use the base image's name below.
ARG NEMO_IMAGE
# The name this image is tagged and pushed as, and tprimat's commit (the image has no .git);
# every run records them (manifest.json, result.json, results.csv).  The digest is only known
# once the image is pushed: pass it at run time as -e TPRIMAT_CONTAINER_DIGEST (docs/docker.md).
ARG TPRIMAT_IMAGE=tprimat:nvd
ARG TPRIMAT_GIT_COMMIT=

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The NeMo image ships Megatron-LM here (used by the nvd_megatron backend).
ENV MEGATRON_PATH=/opt/megatron-lm \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    TPRIMAT_CONTAINER_IMAGE=${TPRIMAT_IMAGE} \
    TPRIMAT_BASE_IMAGE=${NEMO_IMAGE} \
    TPRIMAT_GIT_COMMIT=${TPRIMAT_GIT_COMMIT}

COPY . /opt/tprimat

# Install without the `ml` extra so the image's CUDA torch stays the one that runs,
# and fail the build if anything replaced it.
RUN python3 -c "import torch; print(torch.__version__, torch.__file__)" > /tmp/torch-before \
 && pip install --no-cache-dir /opt/tprimat \
 && python3 -c "import torch; print(torch.__version__, torch.__file__)" | cmp - /tmp/torch-before \
 && rm /tmp/torch-before \
 && tprimat --version

WORKDIR /workspace
CMD ["tprimat", "backends"]
