# tprimat on AMD Instinct (ROCm): AMD's Primus training image plus tprimat.
# Build from the repository root:  docker build -f docker/amd.Dockerfile -t tprimat:amd .
# (naming the tag and the commit it records:  --build-arg TPRIMAT_IMAGE=<tag> --build-arg TPRIMAT_GIT_COMMIT=$(git rev-parse HEAD))
# Run: see docs/docker.md (devices, ipc, shm, ulimits, video/render groups; secrets from env).
ARG PRIMUS_IMAGE=rocm/primus:v26.5
FROM ${PRIMUS_IMAGE}
# Build args are scoped per stage: re-declare to use the base image's name below.
ARG PRIMUS_IMAGE
# The name this image is tagged and pushed as, and tprimat's commit (the image has no .git);
# every run records them (manifest.json, result.json, results.csv).  The digest is only known
# once the image is pushed: pass it at run time as -e TPRIMAT_CONTAINER_DIGEST (docs/docker.md).
ARG TPRIMAT_IMAGE=tprimat:amd
ARG TPRIMAT_GIT_COMMIT=

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Where the image keeps Primus and the Megatron-LM it drives.  Mount a checkout of
# the matching Primus release over /workspace/Primus to use another one.
ENV PRIMUS_PATH=/workspace/Primus \
    MEGATRON_PATH=/workspace/Primus/third_party/Megatron-LM \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    TPRIMAT_CONTAINER_IMAGE=${TPRIMAT_IMAGE} \
    TPRIMAT_BASE_IMAGE=${PRIMUS_IMAGE} \
    TPRIMAT_GIT_COMMIT=${TPRIMAT_GIT_COMMIT}

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
