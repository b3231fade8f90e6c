# The Distributary service image: `cdc` with every extra (OpenSearch, Redis, Kafka, Spark).
# Built by compose/docker-compose.yml; a JRE is included for the Spark job runner.
FROM python:3.11.10-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY cdc ./cdc
COPY connectors ./connectors
COPY derived ./derived
COPY spark_pipelines ./spark_pipelines
RUN pip install --no-cache-dir '.[all]'

RUN useradd --create-home --uid 10001 distributary && mkdir /data \
 && chown distributary /data
USER distributary
WORKDIR /data
ENTRYPOINT ["cdc"]
CMD ["run", "-c", "/etc/distributary/pipeline.yaml"]
