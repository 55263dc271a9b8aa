# The one lockstep binary, static, on a distroless non-root base. The controller runs
# `/lockstep controller`; engine pods run `/lockstep engine` from the same image.
#   docker build -t ghcr.io/lockstep-dev/lockstep:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lockstep ./cmd/lockstep

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lockstep /lockstep
USER 65532:65532
ENTRYPOINT ["/lockstep"]
