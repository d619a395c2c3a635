# The CAIS co-simulator in a container, installed exactly as the README says (scripts/setup.sh).
# Build and run it with `cais-container build | test | reproduce` (docs/REPRODUCE.md); a plain
# `docker build .` works too.
#
# BASE_IMAGE: any Debian/Ubuntu image with apt. Where no registry can be reached, cais-container
# builds a local one from Debian's packages (debootstrap) and passes it here.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

# The non-root user the image runs as (test runs use it; reproduction runs take the caller's uid).
ARG USER_UID=1000
ARG USER_GID=1000

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Declared before the install: on the vfs storage driver every step after it copies the whole
# image (over a minute), so only USER follows the install.
CMD [".venv/bin/cais-sim"]

# Extra CA certificates (behind a TLS-intercepting proxy: `cais-container build --ca-cert FILE`,
# or *.crt files dropped into scripts/ca-certificates/) join the trust store before apt and pip
# run; pip is pointed at the system bundle above, since its own bundle would not know them.
COPY scripts/ca-certificates/ /usr/local/share/ca-certificates/
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null \
    && update-ca-certificates \
    && groupadd --gid "${USER_GID}" cais \
    && useradd --uid "${USER_UID}" --gid "${USER_GID}" --create-home --shell /bin/bash cais

WORKDIR /opt/cais
COPY --chown=cais:cais . /opt/cais
# The one install path (as root, since it installs system packages); the protobuf bindings are
# generated here so that a run under any uid finds them; then the tree is handed to the user.
RUN scripts/setup.sh \
    && .venv/bin/python -c "import harness.protocol" \
    && chown -R cais:cais /opt/cais \
    && rm -rf /var/lib/apt/lists/* /root/.cache

USER cais
