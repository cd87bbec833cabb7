# syntax=docker/dockerfile:1
# kube-wasm-scheduler's image: the release binary and the three Rust sample guests (components), on a distroless
# base, as user 65532. What goes in is deploy/image.txt, the one list this file and scripts/build-image.sh (buildah,
# from scratch, where no engine runs) both follow: the final stage is its `base`, one COPY per `file`, its `user`,
# `port` and `entrypoint` (host/tests/integration/deploy.rs checks that they agree). The paths are the ones
# deploy/manifests and deploy/chart name:
#   /usr/local/bin/kube-wasm-scheduler
#   /plugins/qos-sort.wasm, /plugins/random-score.wasm, /plugins/priority-label.wasm
# Build: `make image` (docker or podman; buildah through scripts/build-image.sh where neither runs), from the
# repository root.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
RUN rustup target add wasm32-unknown-unknown
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY wit wit
COPY host host
COPY guest-plugins guest-plugins
# `plugin setup` embeds the toolchain installer.
COPY scripts/setup-wasm.sh scripts/
RUN cargo build --locked --release --bin kube-wasm-scheduler \
 && install -D target/release/kube-wasm-scheduler /out/bin/kube-wasm-scheduler
# The guests, as scripts/build-guests.sh builds them (profile `guest`), made components (and checked) by the
# scheduler itself: `plugin componentize`.
RUN cargo build --locked --profile guest --target wasm32-unknown-unknown \
      -p qos-sort -p random-score -p priority-label \
 && mkdir -p /out/plugins \
 && /out/bin/kube-wasm-scheduler plugin componentize target/wasm32-unknown-unknown/guest/qos_sort.wasm -o /out/plugins/qos-sort.wasm \
 && /out/bin/kube-wasm-scheduler plugin componentize target/wasm32-unknown-unknown/guest/random_score.wasm -o /out/plugins/random-score.wasm \
 && /out/bin/kube-wasm-scheduler plugin componentize target/wasm32-unknown-unknown/guest/priority_label.wasm -o /out/plugins/priority-label.wasm

# glibc and libgcc, no shell; kube-rs uses rustls, so no OpenSSL is needed.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/bin/kube-wasm-scheduler /usr/local/bin/kube-wasm-scheduler
COPY --from=build /out/plugins/qos-sort.wasm /out/plugins/random-score.wasm /out/plugins/priority-label.wasm /plugins/
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["/usr/local/bin/kube-wasm-scheduler"]
