//! The server's counters, gauges and latency histograms, and their Prometheus text rendering
//! (`GET /metrics`). Handlers and the engine thread update them; nothing here blocks for long.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a request ended, as counted in `ultra_requests_total{outcome}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// finish_reason `stop` (end-of-generation token or stop string).
    Stop,
    /// finish_reason `length`.
    Length,
    /// The client went away first.
    Cancelled,
    /// Refused before it ran (4xx, 429, 503).
    Rejected,
    /// The engine failed on it.
    Failed,
}

const OUTCOMES: [(Outcome, &str); 5] = [
    (Outcome::Stop, "stop"),
    (Outcome::Length, "length"),
    (Outcome::Cancelled, "cancelled"),
    (Outcome::Rejected, "rejected"),
    (Outcome::Failed, "failed"),
];

/// Bucket bounds in seconds.
const TTFT_BUCKETS: [f64; 12] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
const ITL_BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// A cumulative histogram in Prometheus' shape.
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>, // per bound, then +Inf
    sum: f64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    fn observe(&mut self, secs: f64) {
        let i = self.bounds.iter().position(|&b| secs <= b).unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += secs;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, bound) in self.bounds.iter().enumerate() {
            cumulative += self.counts[i];
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.counts[self.bounds.len()];
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"+Inf\"}} {cumulative}\n{name}_sum {}\n{name}_count {cumulative}",
            self.sum
        );
    }
}

pub struct Metrics {
    outcomes: [AtomicU64; 5],
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    /// Requests whose prompt started with cached pages, and the prompt tokens those pages held.
    pub prefix_hits: AtomicU64,
    pub prefix_cached_tokens: AtomicU64,
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    pub kv_pages_in_use: AtomicU64,
    pub kv_pages_free: AtomicU64,
    pub kv_pages_total: AtomicU64,
    /// Speculation (`--draft-mode lookup`): draft tokens verified and accepted.
    pub draft_tokens: AtomicU64,
    pub accepted_draft_tokens: AtomicU64,
    ttft: Mutex<Histogram>,
    itl: Mutex<Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            outcomes: Default::default(),
            prompt_tokens: AtomicU64::new(0),
            generated_tokens: AtomicU64::new(0),
            prefix_hits: AtomicU64::new(0),
            prefix_cached_tokens: AtomicU64::new(0),
            running: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            kv_pages_in_use: AtomicU64::new(0),
            kv_pages_free: AtomicU64::new(0),
            kv_pages_total: AtomicU64::new(0),
            draft_tokens: AtomicU64::new(0),
            accepted_draft_tokens: AtomicU64::new(0),
            ttft: Mutex::new(Histogram::new(&TTFT_BUCKETS)),
            itl: Mutex::new(Histogram::new(&ITL_BUCKETS)),
        }
    }
}

impl Metrics {
    pub fn count(&self, outcome: Outcome) {
        let i = OUTCOMES.iter().position(|(o, _)| *o == outcome).expect("every outcome is listed");
        self.outcomes[i].fetch_add(1, Relaxed);
    }

    pub fn observe_ttft(&self, secs: f64) {
        self.ttft.lock().unwrap_or_else(|p| p.into_inner()).observe(secs);
    }

    pub fn observe_itl(&self, secs: f64) {
        self.itl.lock().unwrap_or_else(|p| p.into_inner()).observe(secs);
    }

    /// Everything, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP ultra_requests_total Requests by how they ended.\n# TYPE ultra_requests_total counter\n");
        for (i, (_, name)) in OUTCOMES.iter().enumerate() {
            let _ = writeln!(out, "ultra_requests_total{{outcome=\"{name}\"}} {}", self.outcomes[i].load(Relaxed));
        }
        let scalar = |out: &mut String, name: &str, kind: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", v.load(Relaxed));
        };
        scalar(
            &mut out,
            "ultra_prompt_tokens_total",
            "counter",
            "Prompt tokens of admitted requests.",
            &self.prompt_tokens,
        );
        scalar(&mut out, "ultra_generation_tokens_total", "counter", "Tokens generated.", &self.generated_tokens);
        scalar(
            &mut out,
            "ultra_prefix_cache_hits_total",
            "counter",
            "Requests whose prompt began with pages from the prefix cache.",
            &self.prefix_hits,
        );
        scalar(
            &mut out,
            "ultra_prefix_cache_tokens_total",
            "counter",
            "Prompt tokens served from the prefix cache instead of a prefill.",
            &self.prefix_cached_tokens,
        );
        scalar(&mut out, "ultra_requests_running", "gauge", "Requests in the running batch.", &self.running);
        scalar(&mut out, "ultra_requests_waiting", "gauge", "Requests queued for admission.", &self.waiting);
        scalar(
            &mut out,
            "ultra_kv_pages_in_use",
            "gauge",
            "KV pages held by requests (prefix-cache pages not counted).",
            &self.kv_pages_in_use,
        );
        scalar(&mut out, "ultra_kv_pages_free", "gauge", "KV pages free or evictable.", &self.kv_pages_free);
        scalar(&mut out, "ultra_kv_pages_total", "gauge", "KV pages in the pool.", &self.kv_pages_total);
        scalar(
            &mut out,
            "ultra_spec_draft_tokens_total",
            "counter",
            "Prompt-lookup draft tokens verified (--draft-mode lookup).",
            &self.draft_tokens,
        );
        scalar(
            &mut out,
            "ultra_spec_accepted_tokens_total",
            "counter",
            "Draft tokens the target accepted.",
            &self.accepted_draft_tokens,
        );
        let ttft = self.ttft.lock().unwrap_or_else(|p| p.into_inner());
        ttft.render(&mut out, "ultra_time_to_first_token_seconds", "From request arrival to its first token.");
        drop(ttft);
        let itl = self.itl.lock().unwrap_or_else(|p| p.into_inner());
        itl.render(&mut out, "ultra_inter_token_latency_seconds", "Between consecutive tokens of a request.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_counters_render() {
        let m = Metrics::default();
        m.observe_ttft(0.02);
        m.observe_ttft(100.0);
        m.count(Outcome::Stop);
        m.running.store(3, Relaxed);
        let text = m.render();
        assert!(text.contains("ultra_time_to_first_token_seconds_bucket{le=\"0.01\"} 0\n"));
        assert!(text.contains("ultra_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"));
        assert!(text.contains("ultra_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("ultra_time_to_first_token_seconds_count 2\n"));
        assert!(text.contains("ultra_requests_total{outcome=\"stop\"} 1\n"));
        assert!(text.contains("ultra_requests_running 3\n"));
    }
}
