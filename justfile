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
