# syntax=docker/dockerfile:1
#
# One image for every airlock role, chosen by the command:
#   docker run IMAGE worker -Q airlock.light     a Celery worker for the light queue
#   docker run IMAGE worker -Q airlock.ocr       a Celery worker for the OCR queue
#   docker run IMAGE bridge                      the Redis Streams bridge service
#   docker run IMAGE doctor                      which sandbox layers hold in this container
#   docker run -v "$PWD:/in:ro" IMAGE extract /in/report.pdf
# Build with more tesseract languages: docker build --build-arg OCR_LANGUAGES="deu fra" .
# A slim image, without the OCR script models (110 MB): --build-arg OCR_SCRIPTS=0.
# Operations guide: docs/operations.md.

# --- stage 1: wheels of airlock and every dependency, installed into a virtual environment ---
# Debian 12 with Debian's own CPython 3.11, in both stages (the venv's interpreter path must
# exist in the runtime stage). Not python:3.11-slim-bookworm: that interpreter is built by the
# Docker Official Images and can only be pulled from a registry, while debian:bookworm-slim can
# also be made on any Debian host from Debian's packages alone (scripts/image does, for hosts
# without registry access), and Debian's python3 is the interpreter the tests run on.
FROM debian:bookworm-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # pip trusts the system's bundle, which a build may replace with a read-only mount of the
    # host's (scripts/image does: a host behind a TLS-inspecting proxy needs its CA).
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# Versions are not pinned: the base image tag pins the Debian release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/airlock

WORKDIR /src
# The dependencies first, from pyproject.toml alone (no package is found yet, so the airlock
# wheel built here is empty and dropped): a change to airlock's code then rebuilds only the
# layers below, without fetching every dependency again.
# No compiler in this stage either: every dependency ships binary wheels for amd64 and arm64,
# and one that would need compiling fails the build here instead of pulling in a toolchain.
COPY pyproject.toml README.md ./
RUN /opt/airlock/bin/pip wheel --wheel-dir /wheels . \
    && rm /wheels/airlock-*.whl

# Only what the wheel is built from: tests, docs and deploy files stay out of the image.
COPY bridge ./bridge
COPY sandbox ./sandbox
COPY worker ./worker

RUN /opt/airlock/bin/pip wheel --no-deps --wheel-dir /airlock-wheel . \
    && /opt/airlock/bin/pip install --no-index --find-links /wheels /airlock-wheel/airlock-*.whl \
    # pip is not needed at run time: nothing in a running container should install code.
    && /opt/airlock/bin/pip uninstall --yes pip

# --- stage 2: runtime, slim ---
FROM debian:bookworm-slim AS runtime

# Extra tesseract language packs, tesseract names separated by spaces ("deu fra chi_sim").
ARG OCR_LANGUAGES=""
# 0 builds a slim image without the script models packages.apt lists (tesseract-ocr-script-*:
# Chinese, Japanese, Korean, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai; 110 MB
# installed). AIRLOCK_OCR_LANGUAGE's "scripts" then stands for none: English pages only.
ARG OCR_SCRIPTS=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# packages.apt is the one list of Debian run-time packages: scripts/setup and .ci/run install
# the same file, so the image and the tested machine cannot drift apart (tests/deploy checks).
COPY packages.apt /tmp/packages.apt
# Versions are not pinned: the base image tag pins the Debian release, and pinning exact
# package versions would stop the build the day Debian ships a security fix for one of them.
# hadolint ignore=DL3008
RUN if [ "${OCR_SCRIPTS}" = 0 ]; then sed -i '/^tesseract-ocr-script-/d' /tmp/packages.apt; fi; \
    extra=(); \
    for lang in ${OCR_LANGUAGES}; do \
      # A language name becomes a package name: only letters and underscores may pass.
      case "$lang" in *[!a-z_]*) echo "OCR_LANGUAGES: bad language name '$lang'" >&2; exit 1;; esac; \
      extra+=("tesseract-ocr-${lang//_/-}"); \
    done; \
    apt-get update \
    && grep -v '^\s*#' /tmp/packages.apt | xargs apt-get install -y --no-install-recommends "${extra[@]}" \
    # No apt lists or caches in the image: smaller, and nothing stale to install from later.
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log /tmp/packages.apt

# A fixed, unprivileged uid/gid: it matches runAsUser in deploy/kubernetes and owns nothing in
# the image, so a compromised process cannot rewrite the code it runs.
RUN groupadd --system --gid 10001 airlock \
    && useradd --system --uid 10001 --gid airlock --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin airlock

COPY --from=build /opt/airlock /opt/airlock

ENV PATH=/opt/airlock/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    # The root filesystem is read-only in every deployment: bytecode is compiled at build time.
    PYTHONDONTWRITEBYTECODE=1 \
    # /tmp is the one writable place (a tmpfs or emptyDir): the sandbox makes its scratch there.
    HOME=/tmp \
    TMPDIR=/tmp \
    # Nothing written under HOME can put a module on the interpreter's path.
    PYTHONNOUSERSITE=1 \
    # Where one of these layers is missing, refuse to run parsers instead of running them less
    # confined (compose and Kubernetes set the same list).
    AIRLOCK_SANDBOX_REQUIRE=rlimits,no_new_privs,seccomp,landlock \
    AIRLOCK_METRICS_PORT=9808 \
    # Prometheus scrapes from another container or pod; outside the image the default is
    # loopback.
    AIRLOCK_METRICS_HOST=0.0.0.0

# Not /tmp: `python -c` and `celery -A` put the working directory on sys.path, and the probes
# must never import a module a parser could have written there.
WORKDIR /opt/airlock
# Never root: the sandbox then cannot drop to per-job uids, but the container user is already
# unprivileged, and seccomp + Landlock still confine each parser
# (docs/operations.md#sandbox-inside-a-container).
USER 10001:10001

EXPOSE 9808

# Cheap (about 0.25 s of CPU) and meaningful in every role: forks a jailed child that tries a
# TCP connect and fails unless every layer in AIRLOCK_SANDBOX_REQUIRE holds in this container.
# Workers add `airlock health` probes in deploy/compose.yaml and deploy/kubernetes.
HEALTHCHECK --interval=60s --timeout=30s --start-period=30s --retries=3 CMD ["airlock", "doctor"]

ENTRYPOINT ["airlock"]
CMD ["--help"]
