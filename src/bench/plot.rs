//! An SVG a learner would rather look at than read: decode tok/s per loop against the
//! decode ceiling, and per-token latency over the run.

use std::fmt::Write;

use super::BenchResult;

const PANEL: f64 = 300.0;
/// The plotting area right of the labels, and the margin right of it (for the values).
const PLOT: f64 = 630.0;
const RIGHT: f64 = 40.0;
/// About the widest a character of 13 px sans-serif runs, so that a label never clips.
const CHAR_PX: f64 = 7.6;
const COLORS: &[&str] = &[
    "#d1495b", "#00798c", "#edae49", "#66a182", "#2e4057", "#8d6a9f",
];

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where the plots start and the picture ends: right of the longest row label.
#[derive(Clone, Copy)]
struct Frame {
    left: f64,
    width: f64,
}

pub fn svg(result: &BenchResult) -> String {
    let mut s = String::new();
    let height = 2.0 * PANEL + 120.0;
    let longest = result
        .loops
        .iter()
        .map(|l| l.label.chars().count())
        .max()
        .unwrap_or(0);
    let left = (28.0 + CHAR_PX * longest as f64).max(230.0);
    let frame = Frame {
        left,
        width: left + PLOT + RIGHT,
    };
    let width = frame.width;
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="20" y="28" font-size="17" font-weight="bold">{} — {} on {} ({} prompt tokens, {} decoded, {} rounds)</text>"#,
        esc(&result.lesson),
        esc(&result.model),
        esc(result.backend.name()),
        result.prompt_tokens,
        result.max_tokens,
        result.rounds
    );
    bars(&mut s, result, frame, 50.0);
    latency(&mut s, result, frame, 70.0 + PANEL);
    s.push_str("</svg>\n");
    s
}

/// Median decode tok/s with min–max whiskers; the ceiling as a line or, when far off, a note.
/// The axis holds every whisker and the ceiling line both: a loop faster than the ceiling
/// is drawn past it, and said so, rather than cut at the axis.
fn bars(s: &mut String, result: &BenchResult, frame: Frame, top: f64) {
    let left = frame.left;
    let ceiling = result.ceiling.tok_s();
    let fastest = result
        .loops
        .iter()
        .map(|l| l.summary().max_tok_s)
        .fold(0.0, f64::max);
    let axis_max = if ceiling < fastest * 1.6 {
        ceiling.max(fastest) * 1.1
    } else {
        fastest * 1.25
    }
    .max(1e-9);
    let plot_width = PLOT;
    let row = (PANEL - 40.0) / result.loops.len().max(1) as f64;
    let x = |v: f64| left + plot_width * (v / axis_max).min(1.0);
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" font-weight="bold">decode tok/s (median, min–max)</text>"#,
        top + 14.0
    );
    for (i, l) in result.loops.iter().enumerate() {
        let sum = l.summary();
        let y = top + 30.0 + i as f64 * row;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + row * 0.55,
            esc(&l.label)
        );
        let _ = writeln!(
            s,
            r#"<rect x="{left}" y="{}" width="{}" height="{}" fill="{color}"/>"#,
            y + row * 0.15,
            x(sum.median_tok_s) - left,
            row * 0.6
        );
        let _ = writeln!(
            s,
            r#"<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="black"/>"#,
            x(sum.min_tok_s),
            x(sum.max_tok_s),
            y + row * 0.45,
            y + row * 0.45
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{:.2}</text>"#,
            x(sum.max_tok_s) + 6.0,
            y + row * 0.55,
            sum.median_tok_s
        );
    }
    let bottom = top + 30.0 + row * result.loops.len() as f64;
    if fastest > ceiling && ceiling <= axis_max {
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{}" fill="grey">a loop above the ceiling: the bandwidth was measured low in this run (another process shared the memory?)</text>"#,
            bottom + 34.0
        );
    }
    if ceiling <= axis_max {
        let _ = writeln!(
            s,
            r#"<line x1="{0}" x2="{0}" y1="{1}" y2="{bottom}" stroke="black" stroke-dasharray="6 4"/><text x="{0}" y="{2}" text-anchor="middle">ceiling {3:.1} tok/s</text>"#,
            x(ceiling),
            top + 26.0,
            bottom + 16.0,
            ceiling
        );
    } else {
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{}">decode ceiling {:.1} tok/s ({:.0} MB/token at {:.1} GB/s) is {:.0}× the fastest loop: off this chart</text>"#,
            bottom + 16.0,
            ceiling,
            result.ceiling.bytes_per_token() as f64 / 1e6,
            result.ceiling.bandwidth_gb_s,
            ceiling / fastest.max(1e-9)
        );
    }
}

/// ms per token, token by token, for loops whose tokens arrive one at a time; loops that
/// only hand over tokens at the end are drawn at their mean.
fn latency(s: &mut String, result: &BenchResult, frame: Frame, top: f64) {
    let Frame { left, width } = frame;
    let series: Vec<(usize, Vec<f64>)> = result
        .loops
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let run = &l.runs[l.runs.len() / 2];
            let steps: Vec<f64> = run.token_ms.windows(2).map(|w| w[1] - w[0]).collect();
            (i, steps)
        })
        .collect();
    let mean_ms = |i: usize| 1e3 / result.loops[i].summary().median_tok_s.max(1e-9);
    let y_max = series
        .iter()
        .flat_map(|(i, st)| st.iter().copied().chain([mean_ms(*i)]))
        .fold(0.0, f64::max)
        * 1.15;
    let n = result.max_tokens.max(2) as f64;
    let plot_width = PLOT;
    let x = |k: f64| left + plot_width * k / (n - 1.0);
    let y = |v: f64| top + PANEL - 20.0 - (PANEL - 50.0) * v / y_max.max(1e-9);
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" font-weight="bold">ms per token over the run</text>"#,
        top + 14.0
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" fill="grey">colours as above; dashed: the mean, for loops whose tokens reach the host only at the end</text>"#,
        top + 32.0
    );
    let _ = writeln!(
        s,
        r#"<line x1="{left}" x2="{0}" y1="{1}" y2="{1}" stroke="silver"/><text x="{left}" y="{2}">token 1</text><text x="{0}" y="{2}" text-anchor="end">token {3}</text><text x="{4}" y="{5}" text-anchor="end">{6:.0} ms</text>"#,
        width - RIGHT,
        y(0.0),
        y(0.0) + 16.0,
        result.max_tokens,
        left - 8.0,
        y(y_max / 1.15),
        y_max / 1.15
    );
    for (i, steps) in series {
        let color = COLORS[i % COLORS.len()];
        if steps.len() >= 2 {
            let points: Vec<String> = steps
                .iter()
                .enumerate()
                .map(|(k, v)| format!("{:.1},{:.1}", x(k as f64 + 1.0), y(*v)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
        } else {
            let m = mean_ms(i);
            let _ = writeln!(
                s,
                r#"<line x1="{left}" x2="{}" y1="{1}" y2="{1}" stroke="{color}" stroke-width="2" stroke-dasharray="8 5"/>"#,
                width - RIGHT,
                y(m)
            );
        }
    }
}
