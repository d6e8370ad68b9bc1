# tprimat on NVIDIA (CUDA): NVIDIA's NeMo Framework image plus tprimat.
# Build from the repository root:  docker build -f docker/nvd.Dockerfile -t tprimat:nvd .
# Run: see docs/docker.md (GPUs, ipc, shm, ulimits; secrets from env).
ARG NEMO_IMAGE=nvcr.io/nvidia/nemo:25.09
FROM ${NEMO_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The NeMo image ships Megatron-LM here (used by the nvd_megatron backend).
ENV MEGATRON_PATH=/opt/megatron-lm \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

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
