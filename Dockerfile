# bankconf with a headless Chromium (the widget cases): the image runs `bankconf run`, with the
# same flags and BANKCONF_* variables (docs/ci.md "Container image"):
#   docker build -t bankconf .
#   docker run --rm -e BANKCONF_API_KEY -e BANKCONF_SECOND_API_KEY -v "$PWD:/work" bankconf \
#     --base-url https://staging.example --driver ./driver.sh --report-md report.md
# Another subcommand: `docker run --rm --entrypoint bankconf bankconf check-events FILE`.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# No .git in the build context: the commit `--version` names comes from here (build.rs).
ARG BANKCONF_COMMIT=unknown
ENV BANKCONF_COMMIT=${BANKCONF_COMMIT}
RUN cargo build --release --locked && strip target/release/bankconf

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
# Chromium's own sandbox needs namespaces that a container seldom grants: the container is
# the sandbox.
RUN printf '#!/bin/sh\nexec /usr/bin/chromium --no-sandbox "$@"\n' > /usr/local/bin/chromium-in-container \
    && chmod 755 /usr/local/bin/chromium-in-container
COPY --from=build /src/target/release/bankconf /usr/local/bin/bankconf
RUN useradd --create-home --uid 1000 bankconf
USER bankconf
WORKDIR /work
ENV BANKCONF_BROWSER=/usr/local/bin/chromium-in-container
ENTRYPOINT ["bankconf", "run"]
