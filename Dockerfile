# orderflow's programs in one image: ./worker (Temporal worker), ./starter
# (RocketMQ -> Temporal bridge) and ./orderflow (the operator command:
# publish, check, ...). Used by docker-compose.yml.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies first, so that code changes reuse the module cache layer.
COPY go.mod go.sum ./
# The patched RocketMQ client that go.mod's replace directive names.
COPY third_party/ third_party/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/starter ./starter && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/orderflow ./cmd/orderflow

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/worker /out/starter /out/orderflow /app/
# Metrics, /healthz and /readyz: worker :9090, bridge :9091. The binaries
# listen on loopback by default; in a container they must listen on every
# interface to be scraped.
ENV ORDERFLOW_WORKER_METRICS_ADDR=0.0.0.0:9090 ORDERFLOW_BRIDGE_METRICS_ADDR=0.0.0.0:9091
EXPOSE 9090 9091
USER nonroot:nonroot
ENTRYPOINT []
CMD ["./worker"]
