//! `ultra bench --serve URL`: a load generator for `ultra serve` (or any OpenAI-compatible
//! server that takes token-id prompts). At each concurrency C, C clients each stream one
//! completion of a p-token prompt (distinct per client, so no prefix is shared) and n generated
//! tokens; reported are the aggregate generated tok/s (usage tokens over the wall time of the
//! round), time to first token and the gaps between stream events, p50 and p99.

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::bench::prompt_ids;
use crate::error::{Error, Result};

/// Prompt token ids are drawn from [OFFSET, OFFSET + RANGE): ordinary tokens of any vocabulary
/// of 11k or more, away from the special tokens most vocabularies put first.
const OFFSET: u32 = 1000;
const RANGE: usize = 10_000;

#[derive(Clone, Debug)]
pub struct ServeBench {
    /// `http://host:port` (plain HTTP).
    pub url: String,
    pub clients: Vec<usize>,
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub api_key: Option<String>,
}

/// One concurrency level.
#[derive(Clone, Debug, Serialize)]
pub struct ServePoint {
    pub clients: usize,
    pub generated_tokens: usize,
    pub wall_secs: f64,
    pub aggregate_tok_s: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
}

/// What one streamed request saw.
struct Trace {
    ttft: Duration,
    gaps: Vec<Duration>,
    tokens: usize,
}

pub fn bench_serve(opts: &ServeBench) -> Result<Vec<ServePoint>> {
    let addr = opts
        .url
        .strip_prefix("http://")
        .ok_or_else(|| Error::InvalidArgument(format!("--serve wants http://HOST:PORT, got {}", opts.url)))?
        .trim_end_matches('/')
        .to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        // One short request first, so the server's first-use costs are not in the figures.
        one(&addr, opts, usize::MAX, 4).await?;
        let mut points = Vec::new();
        for (round, &c) in opts.clients.iter().enumerate() {
            let started = Instant::now();
            let tasks: Vec<_> = (0..c)
                .map(|i| {
                    let (addr, opts) = (addr.clone(), opts.clone());
                    tokio::spawn(async move { one(&addr, &opts, round * 1000 + i, opts.gen_tokens).await })
                })
                .collect();
            let mut traces = Vec::new();
            for t in tasks {
                traces.push(t.await.map_err(|e| Error::InvalidArgument(format!("client task: {e}")))??);
            }
            points.push(point(c, started.elapsed(), &traces));
        }
        Ok(points)
    })
}

fn point(clients: usize, wall: Duration, traces: &[Trace]) -> ServePoint {
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    let mut ttft: Vec<f64> = traces.iter().map(|t| ms(&t.ttft)).collect();
    let mut gaps: Vec<f64> = traces.iter().flat_map(|t| t.gaps.iter().map(ms)).collect();
    let generated: usize = traces.iter().map(|t| t.tokens).sum();
    ServePoint {
        clients,
        generated_tokens: generated,
        wall_secs: wall.as_secs_f64(),
        aggregate_tok_s: generated as f64 / wall.as_secs_f64().max(1e-9),
        ttft_p50_ms: percentile(&mut ttft, 0.50),
        ttft_p99_ms: percentile(&mut ttft, 0.99),
        itl_p50_ms: percentile(&mut gaps, 0.50),
        itl_p99_ms: percentile(&mut gaps, 0.99),
    }
}

/// The nearest-rank percentile (0 for no samples).
fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// Streams one completion over HTTP/1.0 (the server closes the connection at the end, so the
/// body needs no chunked decoding) and times its events.
async fn one(addr: &str, opts: &ServeBench, seed: usize, max_tokens: usize) -> Result<Trace> {
    let prompt: Vec<u32> = prompt_ids(opts.prompt_tokens, RANGE, seed as u64).into_iter().map(|t| t + OFFSET).collect();
    let body = serde_json::json!({
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": true,
        "stream_options": { "include_usage": true },
    })
    .to_string();
    let auth = opts.api_key.as_ref().map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    let head = format!(
        "POST /v1/completions HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    let sent = Instant::now();
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut lines = BufReader::new(stream).lines();
    let status = lines.next_line().await?.unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(Error::InvalidArgument(format!("the server answered `{status}`")));
    }
    let (mut first, mut last, mut gaps, mut tokens) = (None, None::<Instant>, Vec::new(), 0);
    while let Some(line) = lines.next_line().await? {
        let Some(data) = line.strip_prefix("data: ") else { continue };
        if data == "[DONE]" {
            break;
        }
        let value: serde_json::Value = serde_json::from_str(data)
            .map_err(|e| Error::InvalidArgument(format!("the server sent an event that is not JSON: {e}")))?;
        if let Some(n) = value["usage"]["completion_tokens"].as_u64() {
            tokens = n as usize;
        }
        if value["choices"][0]["text"].as_str().is_some_and(|t| !t.is_empty()) {
            let now = Instant::now();
            first.get_or_insert(now - sent);
            if let Some(prev) = last {
                gaps.push(now - prev);
            }
            last = Some(now);
        }
    }
    Ok(Trace { ttft: first.unwrap_or_default(), gaps, tokens })
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.5), 50.0);
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut [], 0.5), 0.0);
        assert_eq!(percentile(&mut [3.0], 0.99), 3.0);
    }
}
