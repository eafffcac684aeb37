//! The table both GPU backends' profilers fill (`ULTRA_CUDA_PROFILE=1`, `ULTRA_WGPU_PROFILE=1`):
//! GPU time per label (an op on cuda, a kernel variant on wgpu), printed on stderr, largest first:
//! share, total, calls, µs per call, and GB/s where the label says how many bytes it must move.

use std::collections::HashMap;

#[derive(Default)]
pub struct ProfileTable {
    /// label → (total ns, calls, bytes moved per call)
    rows: HashMap<String, (f64, u64, u64)>,
}

impl ProfileTable {
    /// Adds one call of `label` that took `ns` and must move `bytes` (0: not meaningful).
    pub fn add(&mut self, label: String, ns: f64, bytes: u64) {
        let row = self.rows.entry(label).or_insert((0.0, 0, bytes));
        row.0 += ns;
        row.1 += 1;
    }

    /// Prints the table under a one-line heading `backend profile: … of GPU time in {what}`.
    pub fn print(&self, backend: &str, what: &str) {
        let mut rows: Vec<_> = self.rows.iter().collect();
        rows.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
        let all: f64 = rows.iter().map(|r| r.1.0).sum();
        eprintln!("{backend} profile: {:.1} ms of GPU time in {what}", all / 1e6);
        for (label, &(ns, calls, bytes)) in rows {
            let per_call_us = ns / 1e3 / calls as f64;
            let bw = if bytes > 0 { format!("{:>7.0} GB/s", bytes as f64 / per_call_us / 1e3) } else { String::new() };
            eprintln!(
                "  {:>5.1}%  {:>10.3} ms  {calls:>7} calls  {per_call_us:>9.2} µs/call {bw}  {label}",
                100.0 * ns / all,
                ns / 1e6
            );
        }
    }
}
