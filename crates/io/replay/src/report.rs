//! The self-contained HTML report of a recording: timeline of marked frames (PNG embedded as base64),
//! actions and verdicts, the failure-attribution histogram (FR-GND-008), tick-timing and latency plots as
//! inline SVG. No external resources.

use crate::analysis::{percentile, Analysis};
use crate::driver::ReplayOutcome;
use crate::reader::Recording;
use crate::ReplayError;
use gamepilot_grounding::FailureCause;
use std::fmt::Write;
use std::path::Path;

/// Writes a report to `out` without ever writing through what is there: a recording is untrusted input, and
/// its `report.html` may be a symlink (or a hard link) to a file of the user's. A symlink is refused, named;
/// otherwise the bytes go to a freshly created file beside it (`O_EXCL|O_NOFOLLOW`), which then replaces the
/// old entry by rename, so a link planted meanwhile is replaced, never followed.
pub fn write_report(out: &Path, html: &str) -> Result<(), ReplayError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReplayError::Io { path, source }
    };
    if let Ok(meta) = std::fs::symlink_metadata(out) {
        if meta.file_type().is_symlink() {
            let to = std::fs::read_link(out)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            return Err(ReplayError::SymlinkOutput {
                path: out.to_path_buf(),
                to,
            });
        }
    }
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = out.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io(&tmp))?;
    let written = file
        .write_all(html.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io(&tmp))
        .and_then(|()| std::fs::rename(&tmp, out).map_err(io(out)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Frames embedded at most (the rest are listed by file name).
const MAX_EMBEDDED_FRAMES: usize = 120;

/// Standard base64 (RFC 4648, with padding).
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn secs(us: u64) -> String {
    format!("{:.3}", us as f64 / 1e6)
}

/// A horizontal bar chart.
fn bars(rows: &[(String, u64)]) -> String {
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    let h = 22 * rows.len() as u32 + 10;
    let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="520" height="{h}" role="img">"#);
    for (i, (label, n)) in rows.iter().enumerate() {
        let y = 5 + 22 * i as u32;
        let w = (*n as f64 / max as f64 * 300.0).round() as u32;
        let _ = write!(
            s,
            r##"<text x="0" y="{ty}" font-size="12">{l}</text><rect x="130" y="{y}" width="{w}" height="16" fill="#4a7fb5"/><text x="{tx}" y="{ty}" font-size="12">{n}</text>"##,
            ty = y + 12,
            l = esc(label),
            tx = 135 + w,
        );
    }
    s.push_str("</svg>");
    s
}

/// A scatter/line plot of (x seconds, y) points.
fn plot(points: &[(f64, f64)], y_label: &str, color: &str) -> String {
    let (w, h, pad) = (640.0, 180.0, 40.0);
    if points.is_empty() {
        return "<p><em>no data</em></p>".into();
    }
    let xmax = points.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let ymax = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9);
    let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">"#);
    let _ = write!(
        s,
        r##"<line x1="{pad}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><line x1="{pad}" y1="10" x2="{pad}" y2="{b}" stroke="#888"/><text x="2" y="14" font-size="11">{ym:.2}</text><text x="2" y="{b}" font-size="11">0</text><text x="{r2}" y="{b2}" font-size="11">{xm:.1} s</text><text x="{pad2}" y="14" font-size="11">{yl}</text>"##,
        b = h - 20.0,
        r = w - 10.0,
        ym = ymax,
        r2 = w - 60.0,
        b2 = h - 5.0,
        xm = xmax,
        pad2 = pad + 6.0,
        yl = esc(y_label),
    );
    let mut path = String::new();
    for (x, y) in points {
        let px = pad + x / xmax * (w - pad - 10.0);
        let py = (h - 20.0) - y / ymax * (h - 30.0);
        let _ = write!(path, "{px:.1},{py:.1} ");
    }
    let _ = write!(
        s,
        r#"<polyline fill="none" stroke="{color}" stroke-width="1" points="{path}"/></svg>"#
    );
    s
}

/// Render the report. `replay` adds the replay verdict when given.
pub fn render_html(rec: &Recording, replay: Option<&ReplayOutcome>) -> String {
    let a = Analysis::of(rec);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gamepilot session report</title><style>\
body{{font-family:sans-serif;margin:1.5em;max-width:1100px}}table{{border-collapse:collapse}}\
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px}}.confirmed{{color:#1a7f37}}.refuted{{color:#c62828}}\
.inconclusive{{color:#9a6700}}.tl{{display:flex;flex-wrap:wrap;gap:8px}}.tl figure{{margin:0;width:260px}}\
.tl img{{width:256px;border:1px solid #999}}figcaption{{font-size:12px}}</style></head><body>"
    );
    let _ = write!(
        h,
        "<h1>gamepilot session report</h1><p>Goal: <b>{}</b><br>",
        esc(&a.goal)
    );
    if let Some(hd) = rec.header() {
        let _ = write!(h, "Window: {} · tool: {} · ", esc(&hd.window), esc(&hd.tool));
    }
    let _ = write!(
        h,
        "Duration: {} s · actions: {} · frames: {} · stop: {}</p>",
        secs(a.duration_us),
        a.actions.len(),
        a.frames.len(),
        esc(&a
            .stop
            .as_ref()
            .map(|m| format!("{} at {} s", m.label, secs(m.t_us)))
            .unwrap_or_else(|| "—".into()))
    );
    if rec.truncated || rec.corrupt_lines > 0 {
        let _ = write!(
            h,
            "<p>Recording damage: {} corrupt line(s) skipped{}</p>",
            rec.corrupt_lines,
            if rec.truncated {
                "; the last line was cut short (the session did not end cleanly)"
            } else {
                ""
            }
        );
    }
    if let Some(r) = replay {
        let _ = write!(
            h,
            "<p>Replay: {} inputs, {} recorded decisions, <b>{}</b></p>",
            r.inputs,
            r.recorded_decisions,
            if r.matches() {
                "decisions reproduced".to_string()
            } else {
                format!("{} divergences", r.divergences.len())
            }
        );
    }

    h.push_str("<h2>Verdicts</h2>");
    let vrows: Vec<(String, u64)> = ["confirmed", "refuted", "inconclusive"]
        .iter()
        .map(|k| (k.to_string(), a.verdicts.get(k).copied().unwrap_or(0)))
        .collect();
    h.push_str(&bars(&vrows));
    h.push_str("<h2>Failure attribution (FR-GND-008)</h2>");
    let frows: Vec<(String, u64)> = FailureCause::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), a.histogram.count(*c)))
        .collect();
    h.push_str(&bars(&frows));

    h.push_str("<h2>Timeline</h2><div class=\"tl\">");
    let marked: Vec<_> = a.frames.iter().filter(|f| f.marked).collect();
    let shown: Vec<_> = if marked.is_empty() {
        a.frames.iter().collect()
    } else {
        marked
    };
    for (i, f) in shown.iter().enumerate() {
        let next_action = a.actions.iter().find(|r| r.t_us >= f.t_us);
        let caption = match next_action {
            Some(r) => format!(
                "#{} at {} s ({}) → {} {}",
                f.frame,
                secs(f.t_us),
                f.change,
                r.summary,
                r.verdict.map(|v| v.as_str()).unwrap_or("unverified")
            ),
            None => format!("#{} at {} s ({})", f.frame, secs(f.t_us), f.change),
        };
        if i < MAX_EMBEDDED_FRAMES {
            match rec.read_frame(&f.file) {
                Ok(png) => {
                    let _ = write!(
                        h,
                        "<figure><img alt=\"frame {}\" src=\"data:image/png;base64,{}\"><figcaption>{}</figcaption></figure>",
                        f.frame,
                        base64(&png),
                        esc(&caption)
                    );
                }
                Err(e) => {
                    let _ = write!(
                        h,
                        "<figure><figcaption>{} (missing: {})</figcaption></figure>",
                        esc(&caption),
                        esc(&e.to_string())
                    );
                }
            }
        } else {
            let _ = write!(
                h,
                "<figure><figcaption>{} — {}</figcaption></figure>",
                esc(&caption),
                esc(&f.file)
            );
        }
    }
    h.push_str("</div>");

    h.push_str("<h2>Actions and verdicts</h2><table><tr><th>t (s)</th><th>action</th><th>subgoal</th><th>what</th><th>verdict</th><th>cause</th></tr>");
    for r in &a.actions {
        let v = r.verdict.map(|v| v.as_str()).unwrap_or("pending");
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{v}\">{v}</td><td>{}</td></tr>",
            secs(r.t_us),
            r.action.0,
            r.subgoal,
            esc(&r.summary),
            r.cause.map(|c| c.as_str()).unwrap_or("")
        );
    }
    h.push_str("</table>");

    h.push_str("<h2>Deliberative passes</h2><table><tr><th>pass</th><th>trigger</th><th>start (s)</th><th>end (s)</th><th>reflex ticks during</th><th>max reflex gap (ms)</th></tr>");
    for w in &a.passes {
        let end = w.end_us.unwrap_or(a.duration_us);
        let ticks = a.reflex_ticks_between(w.start_us, end).len();
        let gap = a
            .max_reflex_gap_us(w.start_us, end)
            .map(|g| format!("{:.1}", g as f64 / 1000.0))
            .unwrap_or_default();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{ticks}</td><td>{gap}</td></tr>",
            w.pass,
            esc(&w.trigger),
            secs(w.start_us),
            w.end_us.map(secs).unwrap_or_else(|| "—".into())
        );
    }
    h.push_str("</table>");

    h.push_str("<h2>No progress, escalation, interlocks, compaction</h2><ul>");
    let mut events: Vec<(u64, String)> = Vec::new();
    events.extend(a.stuck.iter().map(|m| (m.t_us, format!("stuck: {}", m.label))));
    events.extend(
        a.escalations
            .iter()
            .map(|m| (m.t_us, format!("escalate: {}", m.label))),
    );
    events.extend(
        a.interlocks
            .iter()
            .map(|m| (m.t_us, format!("interlock: {}", m.label))),
    );
    events.extend(
        a.compactions
            .iter()
            .map(|m| (m.t_us, format!("compaction: {}", m.label))),
    );
    events.sort();
    for (t, l) in &events {
        let _ = write!(h, "<li>{} s — {}</li>", secs(*t), esc(l));
    }
    h.push_str("</ul>");

    h.push_str("<h2>Reflex tick timing</h2>");
    let late: Vec<f64> = a
        .reflex_lateness_us()
        .iter()
        .map(|u| *u as f64 / 1000.0)
        .collect();
    let work: Vec<f64> = a.reflex.iter().map(|t| t.duration_us as f64 / 1000.0).collect();
    let _ = write!(
        h,
        "<p>{} ticks · lateness p50 {} ms, p99 {} ms · work p99 {} ms</p>",
        a.reflex.len(),
        fmt_opt(percentile(&late, 50.0)),
        fmt_opt(percentile(&late, 99.0)),
        fmt_opt(percentile(&work, 99.0))
    );
    let pts: Vec<(f64, f64)> = a
        .reflex
        .iter()
        .zip(&late)
        .map(|(t, l)| (t.started_us as f64 / 1e6, *l))
        .collect();
    h.push_str(&plot(&pts, "start lateness (ms)", "#c62828"));
    let pts: Vec<(f64, f64)> = a
        .reflex
        .iter()
        .zip(&work)
        .map(|(t, d)| (t.started_us as f64 / 1e6, *d))
        .collect();
    h.push_str(&plot(&pts, "tick work (ms)", "#4a7fb5"));

    h.push_str("<h2>Model latency</h2>");
    let tl: Vec<f64> = a.tactical_latency.iter().map(|p| p.1).collect();
    let _ = write!(
        h,
        "<p>tactical calls: {} · p50 {} ms · p99 {} ms · deliberative calls: {}</p>",
        tl.len(),
        fmt_opt(percentile(&tl, 50.0)),
        fmt_opt(percentile(&tl, 99.0)),
        a.deliberative_latency.len()
    );
    let pts: Vec<(f64, f64)> = a
        .tactical_latency
        .iter()
        .map(|(t, l)| (*t as f64 / 1e6, *l))
        .collect();
    h.push_str(&plot(&pts, "tactical latency (ms)", "#1a7f37"));
    h.push_str("</body></html>\n");
    h
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(
            esc("<a href='x'>&</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"
        );
    }
}
