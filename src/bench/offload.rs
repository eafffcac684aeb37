//! Layer offload throughput (`ultra bench --gpu-layers 0,8,16 --prefetch 1,2,4`): prefill and
//! decode tok/s with N layers resident and the rest streamed through a ring of d slots, the
//! host-to-device bandwidth that streaming achieved (the bytes a token must move / its time),
//! and the link's limit measured in the same process by one plain copy of page-locked memory.

use std::sync::Arc;
use std::time::Instant;

use super::{Throughput, bench};
use crate::backend::{Backend, HostBytes, HostWeightInfo};
use crate::error::Result;
use crate::gguf::Gguf;
use crate::kv_cache::CacheLayout;
use crate::model::{Llama, Placement, Runner};
use crate::quant::Format;

#[derive(Clone, Debug, serde::Serialize)]
pub struct OffloadPoint {
    pub gpu_layers: usize,
    pub prefetch: usize,
    pub layers_streamed: usize,
    pub prefill_tok_s: Throughput,
    pub decode_tok_s: Throughput,
    /// Weight bytes one forward pass streams.
    pub bytes_per_pass: u64,
    /// bytes_per_pass × decode passes per second, GB/s.
    pub decode_stream_gb_s: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct OffloadReport {
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub n_layers: usize,
    /// One plain copy of `link_bytes` from host memory kept as streamed layers are, GB/s.
    pub link_gb_s: Throughput,
    pub link_bytes: usize,
    pub points: Vec<OffloadPoint>,
}

/// The link's limit: copies of one `bytes`-long host weight (as streamed layers are kept:
/// page-locked on cuda, a staging buffer on wgpu) into a device slot, nothing else queued.
pub fn link_bandwidth<B: Backend>(be: &B, bytes: usize, runs: usize) -> Result<Throughput> {
    let cols = 4096;
    let rows = (bytes / (4 * cols)).max(1);
    let host = be.host_weight(Format::F32, rows, cols, HostBytes::from_vec(vec![0x3c; rows * cols * 4]))?;
    let slot = be.weight_slot(&host)?;
    let once = || -> Result<f64> {
        be.sync()?;
        let t = Instant::now();
        let fence = be.stream_weights(&[(&host, &slot)])?;
        be.wait_fence(fence)?;
        be.sync()?;
        Ok(host.bytes() as f64 / t.elapsed().as_secs_f64() / 1e9)
    };
    once()?; // warm-up
    Ok(Throughput::from_runs((0..runs.max(3)).map(|_| once()).collect::<Result<_>>()?))
}

/// Every (resident layers, depth) pair; a fully resident point runs once, whatever the depth.
#[allow(clippy::too_many_arguments)]
pub fn bench_offload<B: Backend>(
    be: Arc<B>,
    gguf: &Gguf,
    layers: &[usize],
    depths: &[usize],
    p: usize,
    n: usize,
    runs: usize,
) -> Result<OffloadReport> {
    let link_bytes = 1 << 30;
    let link_gb_s = link_bandwidth(&*be, link_bytes, runs)?;
    let n_layers = crate::model::Config::from_gguf(gguf)?.n_layers;
    let mut points = Vec::new();
    for &gpu_layers in layers {
        let resident = gpu_layers.min(n_layers);
        let depths = if resident == n_layers { &depths[..1] } else { depths };
        for &prefetch in depths {
            let placement = Placement { resident: Some(resident), prefetch };
            let model = Arc::new(Llama::load_placed(&*be, gguf, &placement)?);
            let mut runner = Runner::new(be.clone(), model, CacheLayout::plain(1, p + n), p + n)?;
            let report = bench(&mut runner, p, n, runs)?;
            let bytes_per_pass = runner.model.weights.streamed_bytes(n_layers);
            points.push(OffloadPoint {
                gpu_layers: resident,
                prefetch,
                layers_streamed: n_layers - resident,
                decode_stream_gb_s: bytes_per_pass as f64 * report.decode_tok_s.median / 1e9,
                prefill_tok_s: report.prefill_tok_s,
                decode_tok_s: report.decode_tok_s,
                bytes_per_pass,
            });
        }
    }
    Ok(OffloadReport { prompt_tokens: p, gen_tokens: n, n_layers, link_gb_s, link_bytes, points })
}

/// Two panels, decode and prefill tok/s against resident layers, one line per depth.
pub fn svg(r: &OffloadReport, title: &str) -> String {
    let (w, h, m) = (360.0, 260.0, 48.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" \
         font-size=\"11\">\n<text x=\"10\" y=\"16\" font-size=\"13\">{}</text>\n",
        2.0 * w,
        h + 40.0,
        escape(title)
    );
    let mut depths: Vec<usize> = r.points.iter().filter(|p| p.layers_streamed > 0).map(|p| p.prefetch).collect();
    depths.sort_unstable();
    depths.dedup();
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];
    for (panel, (name, pick)) in [
        ("decode tok/s", (|p: &OffloadPoint| p.decode_tok_s.median) as fn(&OffloadPoint) -> f64),
        ("prefill tok/s", |p| p.prefill_tok_s.median),
    ]
    .into_iter()
    .enumerate()
    {
        let x0 = panel as f64 * w;
        let y_max = r.points.iter().map(pick).fold(1e-9, f64::max) * 1.1;
        let (px, py) = (
            |l: usize| x0 + m + (w - 1.5 * m) * l as f64 / r.n_layers.max(1) as f64,
            |v: f64| 30.0 + (h - m) * (1.0 - v / y_max),
        );
        out += &format!(
            "<text x=\"{}\" y=\"34\">{name}</text>\n<line x1=\"{a}\" y1=\"{}\" x2=\"{a}\" y2=\"30\" stroke=\"#000\"/>\n\
             <line x1=\"{a}\" y1=\"{b}\" x2=\"{}\" y2=\"{b}\" stroke=\"#000\"/>\n<text x=\"{}\" y=\"{}\">resident layers (N)</text>\n\
             <text x=\"{}\" y=\"38\">{:.0}</text>\n",
            x0 + m + 6.0,
            py(0.0),
            px(r.n_layers),
            x0 + w / 2.0 - 40.0,
            h + 24.0,
            x0 + 4.0,
            y_max,
            a = px(0),
            b = py(0.0),
        );
        for l in (0..=r.n_layers).step_by((r.n_layers / 4).max(1)) {
            out += &format!("<text x=\"{}\" y=\"{}\">{l}</text>\n", px(l) - 4.0, py(0.0) + 14.0);
        }
        for (k, &d) in depths.iter().enumerate() {
            let mut pts: Vec<&OffloadPoint> =
                r.points.iter().filter(|p| p.prefetch == d || p.layers_streamed == 0).collect();
            pts.sort_by_key(|p| p.gpu_layers);
            let line: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", px(p.gpu_layers), py(pick(p)))).collect();
            let c = colors[k % colors.len()];
            out +=
                &format!("<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n", line.join(" "));
            out += &format!(
                "<text x=\"{}\" y=\"{}\" fill=\"{c}\">prefetch {d}</text>\n",
                x0 + m + 8.0,
                50.0 + 14.0 * k as f64
            );
        }
    }
    out + "</svg>\n"
}

pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
