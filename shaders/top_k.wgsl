// top_k     ids[r] = the k largest x[r, :], descending, lowest index on ties; vals[r, i] = x[r, ids[r, i]],
//           vals[r, k] = ln Σ_j exp(x[r, j]); NaN counts as −∞ and +∞ as f32::MAX (the sampler's rule)
// Layout    x: [rows, vocab] f32; ids: u32 [rows, k]; vals: f32 [rows, k + 1]; 1 ≤ k ≤ 256
// Launch    one workgroup of 256 per row: radix select of the k-th largest key (4 passes of 8 bits over a
//           256-bin histogram), stable compaction of the k winners, rank sort; workgroup memory only
// Numerics  selection on exact order-preserving u32 keys; log-sum-exp in f32: per-thread running max and
//           sum, then a tree of (max, sum) pairs. WGSL may assume no NaN or ∞, so they are handled on bits.

const WG: u32 = 256u;
const MAX_K: u32 = 256u;
// key_of(−∞): every NaN and −∞ maps here, below every finite value.
const NEG_INF_KEY: u32 = 0x007fffffu;

struct Params { vocab: u32, k: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> vals: array<f32>;

var<workgroup> red_m: array<f32, WG>;            // log-sum-exp: running maxima
var<workgroup> red_s: array<f32, WG>;            // log-sum-exp: sums scaled to red_m
var<workgroup> hist: array<atomic<u32>, 256>;    // radix select: one bin per digit value
var<workgroup> sel_want: u32;                    // the digits of the k-th key found so far, in place
var<workgroup> sel_mask: u32;                    // which bits of sel_want are found
var<workgroup> sel_left: u32;                    // how many of the top k are still to find below them
var<workgroup> above: array<u32, WG>;            // per thread: keys above the threshold, then prefix sums
var<workgroup> ties: array<u32, WG>;             // per thread: keys equal to it, then prefix sums
var<workgroup> cand_key: array<u32, MAX_K>;      // the k winners, unordered
var<workgroup> cand_idx: array<u32, MAX_K>;

// The sanitized value's order-preserving key: a > b ⇔ key_of(a) > key_of(b). NaN → −∞, +∞ → f32::MAX
// and −0 → +0 (so ±0 tie, as in the sampler), all on the bits.
fn key_of(v: f32) -> u32 {
    var b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        b = 0xff800000u;
    } else if (b == 0x7f800000u) {
        b = 0x7f7fffffu;
    } else if (b == 0x80000000u) {
        b = 0u;
    }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn value_of(key: u32) -> f32 {
    return bitcast<f32>(select(~key, key & 0x7fffffffu, (key & 0x80000000u) != 0u));
}

// exp(v − m) for v ≤ m, with the argument kept finite (v − m may overflow for values near ±f32::MAX).
fn weight(v: f32, m: f32) -> f32 {
    return exp(max(v - m, -104.0));
}

// ln Σ exp over the row, for every invocation to pass in. Threads stride the row (coalesced), each
// keeping a running max m and Σ exp(v − m); the pairs then merge in a tree. s = 0 means "no finite
// value yet" (m stays at −f32::MAX rather than −∞).
fn log_sum_exp(start: u32, lane: u32) -> f32 {
    var m = -0x1.fffffep+127f;
    var s = 0.0;
    for (var j = lane; j < params.vocab; j += WG) {
        let key = key_of(x[start + j]);
        if (key == NEG_INF_KEY) {
            continue;
        }
        let v = value_of(key);
        if (v > m) {
            s = s * weight(m, v) + 1.0;
            m = v;
        } else {
            s += weight(v, m);
        }
    }
    red_m[lane] = m;
    red_s[lane] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lane < stride) {
            let m1 = red_m[lane];
            let m2 = red_m[lane + stride];
            let mm = max(m1, m2);
            red_s[lane] = red_s[lane] * weight(m1, mm) + red_s[lane + stride] * weight(m2, mm);
            red_m[lane] = mm;
        }
        workgroupBarrier();
    }
    return select(red_m[0] + log(red_s[0]), bitcast<f32>(0xff800000u), red_s[0] == 0.0);
}

// Finds the k-th largest key one byte per pass, from the top: the digit whose bin holds the k-th
// largest of the keys that match the digits found so far. Leaves the key in sel_want and how many
// keys equal to it belong to the top k in sel_left (the rest of the top k are above it).
fn select_kth(start: u32, lane: u32) {
    if (lane == 0u) {
        sel_want = 0u;
        sel_mask = 0u;
        sel_left = params.k;
    }
    for (var round = 0u; round < 4u; round++) {
        let shift = 24u - 8u * round;
        atomicStore(&hist[lane], 0u); // WG == 256 bins
        workgroupBarrier();
        let want = sel_want;
        let mask = sel_mask;
        for (var j = lane; j < params.vocab; j += WG) {
            let key = key_of(x[start + j]);
            if ((key & mask) == want) {
                atomicAdd(&hist[(key >> shift) & 0xffu], 1u);
            }
        }
        workgroupBarrier();
        if (lane == 0u) {
            // 256 steps on one thread, against vocab / 256 loads per thread above.
            var left = sel_left;
            var d = 255u;
            for (; d > 0u; d--) {
                let c = atomicLoad(&hist[d]);
                if (c >= left) {
                    break;
                }
                left -= c;
            }
            sel_want = want | (d << shift);
            sel_mask = mask | (0xffu << shift);
            sel_left = left;
        }
        workgroupBarrier();
    }
}

// Inclusive prefix sums of above[] and ties[] over the threads (Hillis–Steele).
fn scan_counts(lane: u32) {
    for (var off = 1u; off < WG; off <<= 1u) {
        var a = 0u;
        var e = 0u;
        if (lane >= off) {
            a = above[lane - off];
            e = ties[lane - off];
        }
        workgroupBarrier();
        above[lane] += a;
        ties[lane] += e;
        workgroupBarrier();
    }
}

// Writes the top k into cand_*: the keys above the threshold, then the first sel_left keys equal to
// it. Each thread takes a contiguous chunk of the row, so a prefix sum of the threads' counts gives
// every winner its place and the ties kept are those of the lowest indices; the result does not
// depend on timing.
fn compact(start: u32, lane: u32) {
    let threshold = sel_want;
    let need = sel_left;
    let n_above = params.k - need;
    let chunk = (params.vocab + WG - 1u) / WG;
    let lo = min(lane * chunk, params.vocab);
    let hi = min(lo + chunk, params.vocab);
    var a = 0u;
    var e = 0u;
    for (var j = lo; j < hi; j++) {
        let key = key_of(x[start + j]);
        a += u32(key > threshold);
        e += u32(key == threshold);
    }
    above[lane] = a;
    ties[lane] = e;
    workgroupBarrier();
    scan_counts(lane);
    var pa = above[lane] - a; // exclusive prefix sums: this thread's first places
    var pe = ties[lane] - e;
    if (a == 0u && (e == 0u || pe >= need)) {
        return; // nothing of this chunk is kept
    }
    for (var j = lo; j < hi; j++) {
        let key = key_of(x[start + j]);
        if (key > threshold) {
            cand_key[pa] = key;
            cand_idx[pa] = j;
            pa++;
        } else if (key == threshold && pe < need) {
            cand_key[n_above + pe] = key;
            cand_idx[n_above + pe] = j;
            pe++;
        }
    }
}

// Each winner's place is how many winners beat it (a higher key, or the same key at a lower index).
fn rank_sort(row: u32, lane: u32) {
    let k = params.k;
    if (lane >= k) {
        return;
    }
    let key = cand_key[lane];
    let idx = cand_idx[lane];
    var r = 0u;
    for (var i = 0u; i < k; i++) {
        let other = cand_key[i];
        r += u32(other > key || (other == key && cand_idx[i] < idx));
    }
    ids[row * k + r] = idx;
    vals[row * (k + 1u) + r] = value_of(key);
}

@compute @workgroup_size(WG)
fn top_k(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = wg.x;
    let start = row * params.vocab;
    let lse = log_sum_exp(start, lane);
    select_kth(start, lane);
    compact(start, lane);
    workgroupBarrier();
    rank_sort(row, lane);
    if (lane == 0u) {
        vals[row * (params.k + 1u) + params.k] = lse;
    }
}
