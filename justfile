# Conveniences only: every recipe is one plain cargo command you can run yourself.

# All tests (CPU, plus GPU suites that skip loudly without a device).
test:
    cargo test --release

# Run the default model.
run prompt="The capital of France is":
    cargo run --release -- generate --prompt "{{prompt}}"

bench backend="cpu":
    cargo run --release -- bench --backend {{backend}}

lint:
    cargo fmt --check && cargo clippy --all-targets -- -D warnings

# Lines per folder.
loc:
    @find src shaders cuda tests -name '*.rs' -o -name '*.wgsl' -o -name '*.cu' -o -name '*.cuh' 2>/dev/null | xargs wc -l | sort -n | tail -25

# The browser demo: build web/dist, put the reference model beside the page as model.gguf, serve
# it on http://localhost:{{port}}. Plainly: web/build.sh; cp the model to web/dist/model.gguf;
# python3 -m http.server -d web/dist 8000
web port="8000":
    web/build.sh
    ln -sf "$(cargo run --release --quiet -- models --fetch smollm2-135m --json | python3 -c 'import json, sys; print(next(m["path"] for m in json.load(sys.stdin)["models"] if m["name"] == "smollm2-135m"))')" web/dist/model.gguf
    python3 -m http.server -d web/dist {{port}}
