#!/usr/bin/env bash
# Builds the browser demo into web/dist/ (index.html, ultra.js, the engine as wasm + its JS glue).
# Installs what it needs when missing, and is quick when everything is there:
#   apt: rustc-web cargo-web rust-web-src lld (Debian's newer rustc with the standard library's
#        source: the rustup toolchain here has no wasm32 standard library, so std is built with
#        -Zbuild-std); cargo install: wasm-bindgen-cli at Cargo.lock's wasm-bindgen version, into
#        target/web-tools ($ULTRA_WEB_TOOLS).
# The wasm build's target dir is $ULTRA_WEB_TARGET_DIR (default target/wasm), apart from the
# native one: another compiler, another standard library.
set -euo pipefail
cd "$(dirname "$0")/.."

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
missing=()
for p in rustc-web cargo-web rust-web-src lld; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "web/build.sh: installing ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
# wasm-bindgen at that version: one on PATH, else ours under target/ (kept with the build cache,
# so it is built once). Only the `wasm-bindgen` binary, without default features: those are TLS
# for the test runner's downloads (rustls and ring's C build), which the page's build never uses.
tools="${ULTRA_WEB_TOOLS:-$PWD/target/web-tools}"
bindgen=""
for b in "$(command -v wasm-bindgen || true)" "$tools/bin/wasm-bindgen"; do
  if [ -x "$b" ] && [ "$("$b" --version)" = "wasm-bindgen $bindgen_version" ]; then bindgen="$b"; break; fi
done
if [ -z "$bindgen" ]; then
  echo "web/build.sh: installing wasm-bindgen-cli $bindgen_version into $tools" >&2
  # Not --locked: its lock pins a webpki-roots release this machine's index lacks.
  cargo install --quiet --force --root "$tools" --no-default-features --bin wasm-bindgen \
    wasm-bindgen-cli --version "=$bindgen_version"
  bindgen="$tools/bin/wasm-bindgen"
fi

target_dir="${ULTRA_WEB_TARGET_DIR:-$PWD/target/wasm}"
# Debian's compiler and cargo (rustc-web), std rebuilt for wasm32 from rust-web-src. No debug
# info: the release profile's line tables would only be stripped again by wasm-bindgen.
CARGO_TARGET_DIR="$target_dir" RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 RUSTFLAGS="-C linker=wasm-ld" \
  CARGO_PROFILE_RELEASE_DEBUG=false \
  /usr/bin/cargo build --release --quiet --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort -p ultra-web

mkdir -p web/dist
"$bindgen" --target web --no-typescript --out-dir web/dist \
  "$target_dir/wasm32-unknown-unknown/release/ultra_web.wasm"
cp web/index.html web/ultra.js web/dist/
echo "web/dist: $(du -h web/dist/ultra_web_bg.wasm | cut -f1) wasm ($(gzip -9c web/dist/ultra_web_bg.wasm | wc -c) bytes gzipped)" >&2
