# tprimat on AMD Instinct (ROCm): AMD's Primus training image plus tprimat.
# Build from the repository root:  docker build -f docker/amd.Dockerfile -t tprimat:amd .
# Run: see docs/docker.md (devices, ipc, shm, ulimits, video/render groups; secrets from env).
ARG PRIMUS_IMAGE=rocm/primus:v26.5
FROM ${PRIMUS_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Where the image keeps Primus and the Megatron-LM it drives.  Mount a checkout of
# the matching Primus release over /workspace/Primus to use another one.
ENV PRIMUS_PATH=/workspace/Primus \
    MEGATRON_PATH=/workspace/Primus/third_party/Megatron-LM \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

COPY . /opt/tprimat

# Install without the `ml` extra so the image's ROCm torch stays the one that runs,
# and fail the build if anything replaced it.
RUN python3 -c "import torch; print(torch.__version__, torch.__file__)" > /tmp/torch-before \
 && pip install --no-cache-dir /opt/tprimat \
 && python3 -c "import torch; print(torch.__version__, torch.__file__)" | cmp - /tmp/torch-before \
 && rm /tmp/torch-before \
 && tprimat --version

WORKDIR /workspace
CMD ["tprimat", "backends"]
