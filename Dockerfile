# The Distributary service image: `cdc` with every extra (OpenSearch, Redis, Kafka, Spark).
# Built by compose/docker-compose.yml; a JRE is included for the Spark job runner.

# The wheel, with its native core compiled (Rust + PyO3, built by maturin)
FROM python:3.11.10-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends cargo-web rustc-web gcc \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md distributary_native.pyi ./
COPY native/Cargo.toml native/Cargo.lock ./native/
COPY native/src ./native/src
COPY cdc ./cdc
COPY connectors ./connectors
COPY derived ./derived
COPY spark_pipelines ./spark_pipelines
RUN pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11.10-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/distributary-*.whl)[all]" && rm -rf /wheels

RUN useradd --create-home --uid 10001 distributary && mkdir /data \
 && chown distributary /data
USER distributary
WORKDIR /data
ENTRYPOINT ["cdc"]
CMD ["run", "-c", "/etc/distributary/pipeline.yaml"]
