// copy_slots  dst[dst_off + i] = src[src_off + i] for i < n   (KV slots, staged through scratch)
// Layout      src, dst: flat u32 words of the cache (offsets and n in words: slots · kv_dim, or half that for f16)
// Launch      one thread per word, 256-thread groups over a 2D grid
// Numerics    exact copy (bits, whatever the element type)

struct Params { n: u32, src_off: u32, dst_off: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn copy_slots(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lane: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lane;
    if (i < params.n) {
        dst[params.dst_off + i] = src[params.src_off + i];
    }
}
