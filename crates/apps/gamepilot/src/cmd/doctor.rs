//! `gamepilot doctor`: first-run checks, each with a fix: display, X extensions, a real capture of a
//! window of its own, the OCR backend (PP-OCR files and their hashes) and tesseract data, the model host.

use super::common::now;
use gamepilot_x11::{WindowCapturer, X11};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    ConnectionExt as _, CreateGCAux, CreateWindowAux, EventMask, Rectangle, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// X display (default: $DISPLAY).
    #[arg(long)]
    pub display: Option<String>,
    /// Model host to check (OpenAI-compatible base URL); default $GAMEPILOT_MODEL_ENDPOINT.
    #[arg(long)]
    pub model_endpoint: Option<String>,
}

struct Report {
    failures: usize,
}

impl Report {
    fn check(&mut self, name: &str, result: Result<String, String>, fix: &str) {
        match result {
            Ok(detail) => println!("  ok    {name}: {detail}"),
            Err(why) => {
                self.failures += 1;
                println!("  FAIL  {name}: {why}\n        fix: {fix}");
            }
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let mut r = Report { failures: 0 };
    println!("gamepilot doctor");
    let display = args.display.clone().or_else(|| std::env::var("DISPLAY").ok());
    r.check(
        "DISPLAY",
        display
            .clone()
            .filter(|d| !d.is_empty())
            .map(|d| format!("set to {d}"))
            .ok_or_else(|| "not set".to_string()),
        "run inside an X11 session, or set DISPLAY (tests start their own Xvfb)",
    );
    match X11::connect(args.display.as_deref()) {
        Err(e) => r.check(
            "X connection",
            Err(e.to_string()),
            "start the X server or fix DISPLAY / XAUTHORITY",
        ),
        Ok(x) => {
            r.check("X connection", Ok(format!("connected to {}", x.display)), "");
            let ext = x.extensions();
            let need = [
                (
                    "Composite",
                    ext.composite,
                    "enable the Composite extension (Xvfb: +extension Composite; Xorg: default)",
                ),
                (
                    "MIT-SHM",
                    ext.shm,
                    "enable MIT-SHM; without it capture falls back to slower GetImage",
                ),
                (
                    "XTEST",
                    ext.xtest,
                    "enable the XTEST extension; gamepilot cannot deliver input without it",
                ),
                (
                    "XInput2",
                    ext.xinput2,
                    "an X server with XInput 2.2 is needed to tell your input from the agent's",
                ),
                (
                    "RandR",
                    ext.randr,
                    "RandR lets gamepilot notice monitor and scale changes",
                ),
            ];
            for (name, ok, fix) in need {
                r.check(
                    name,
                    if ok {
                        Ok("present".into())
                    } else {
                        Err("missing".into())
                    },
                    fix,
                );
            }
            r.check(
                "capture",
                capture_own_window(&x),
                "check that Composite works and a compositor/driver does not hand back black pixmaps",
            );
        }
    }
    r.check(
        "OCR backend",
        gamepilot_ocr::describe_backend().map_err(|e| e.to_string()),
        "run scripts/setup-ocr.sh (fetches the pinned PP-OCR wheels from PyPI and verifies them)",
    );
    r.check(
        "tesseract data",
        tesseract_data(),
        "apt-get install tesseract-ocr tesseract-ocr-eng (scripts/install-deps.sh does it)",
    );
    // FR-PERC-010: optional, so it informs and never fails the doctor.
    // The first call may start at-spi-bus-launcher (D-Bus activation): allow it two seconds.
    let a11y = gamepilot_a11y::A11yConfig {
        session_bus: None,
        limits: gamepilot_a11y::ProbeLimits {
            timeout: Duration::from_secs(2),
            ..Default::default()
        },
    };
    match gamepilot_a11y::check_bus(&a11y) {
        Ok((addr, apps)) => println!(
            "  ok    accessibility bus: reachable at {addr} ({apps} application(s) registered)"
        ),
        Err(e) => println!(
            "  info  accessibility bus: not reachable ({}): {e}\n        (optional: games that expose an accessibility tree give exact element boxes)",
            e.reason()
        ),
    }
    let endpoint = args
        .model_endpoint
        .clone()
        .or_else(|| std::env::var("GAMEPILOT_MODEL_ENDPOINT").ok());
    r.check("model host", model_host(endpoint.as_deref()), "start a llama.cpp server and pass --model-endpoint URL, or run scripts/setup-llama.sh so gamepilot can start one");
    if r.failures == 0 {
        println!("all checks passed");
        Ok(0)
    } else {
        println!("{} check(s) failed", r.failures);
        Ok(1)
    }
}

/// Create a small window, paint it, capture it through the real path and check the pixels.
fn capture_own_window(x: &X11) -> Result<String, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let screen = &x.conn.setup().roots[x.screen_num];
    let win = x.conn.generate_id().map_err(|er| e(&er))?;
    x.conn
        .create_window(
            screen.root_depth,
            win,
            x.root,
            10,
            10,
            64,
            48,
            0,
            WindowClass::INPUT_OUTPUT,
            screen.root_visual,
            &CreateWindowAux::new()
                .background_pixel(0x00_20_80_e0)
                .event_mask(EventMask::EXPOSURE),
        )
        .map_err(|er| e(&er))?;
    x.conn
        .change_property8(
            x11rb::protocol::xproto::PropMode::REPLACE,
            win,
            x11rb::protocol::xproto::AtomEnum::WM_NAME,
            x11rb::protocol::xproto::AtomEnum::STRING,
            b"gamepilot doctor",
        )
        .map_err(|er| e(&er))?;
    x.conn.map_window(win).map_err(|er| e(&er))?;
    let gc = x.conn.generate_id().map_err(|er| e(&er))?;
    x.conn
        .create_gc(gc, win, &CreateGCAux::new().foreground(0x00_f0_c0_10))
        .map_err(|er| e(&er))?;
    x.flush().map_err(|er| e(&er))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let result = loop {
        if x.is_mapped(win).unwrap_or(false) {
            let _ = x.conn.poly_fill_rectangle(
                win,
                gc,
                &[Rectangle {
                    x: 8,
                    y: 8,
                    width: 16,
                    height: 16,
                }],
            );
            let _ = x.conn.flush();
            std::thread::sleep(Duration::from_millis(50));
            let mut cap = WindowCapturer::new(x, win).map_err(|er| e(&er))?;
            let f = cap.capture(x, now()).map_err(|er| e(&er))?;
            cap.close(x);
            let v = f.view();
            let bg = v.rgb(40, 30);
            let fg = v.rgb(12, 12);
            break if v.is_all_black() {
                Err("the captured frame is all black".to_string())
            } else if bg != [0x20, 0x80, 0xe0] || fg != [0xf0, 0xc0, 0x10] {
                Err(format!(
                    "captured colours differ from what was drawn: bg {bg:?} fg {fg:?}"
                ))
            } else {
                Ok(format!(
                    "{}x{} window captured with the drawn colours",
                    f.width, f.height
                ))
            };
        }
        if Instant::now() > deadline {
            break Err("a test window never became viewable".to_string());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = x.conn.destroy_window(win);
    let _ = x.conn.flush();
    result
}

fn tesseract_data() -> Result<String, String> {
    let roots = [
        "/usr/share/tesseract-ocr/5/tessdata",
        "/usr/share/tesseract-ocr/4.00/tessdata",
        "/usr/share/tessdata",
    ];
    let prefix = std::env::var("TESSDATA_PREFIX").ok();
    for dir in prefix.iter().map(String::as_str).chain(roots) {
        let p = std::path::Path::new(dir).join("eng.traineddata");
        if p.is_file() {
            return Ok(format!("{}", p.display()));
        }
    }
    Err("eng.traineddata not found".into())
}

fn model_host(endpoint: Option<&str>) -> Result<String, String> {
    let Some(base) = endpoint else {
        let server = gamepilot_llama_server_path();
        return match server {
            Some(p) => Ok(format!(
                "no endpoint configured; gamepilot can start {}",
                p.display()
            )),
            None => Err("no endpoint configured and no llama-server built".into()),
        };
    };
    // The same one probe `run` makes, so the user sees what `run` will assume.
    let base = base.trim_end_matches('/').trim_end_matches("/v1");
    let timeouts = gamepilot_model::HostTimeouts {
        connect: std::time::Duration::from_secs(2),
        call: std::time::Duration::from_secs(3),
    };
    let client = gamepilot_model::HostClient::new(base, timeouts).map_err(|e| e.to_string())?;
    let caps = client.probe().map_err(|e| format!("{base}: {e}"))?;
    Ok(format!(
        "{base}: {} host, model {}; sees images: {} ({}); context {} tokens",
        caps.kind,
        caps.model_id.as_deref().unwrap_or("(not listed)"),
        match caps.vision {
            Some(true) => "yes",
            Some(false) => "no",
            None => "not said (run assumes no; pass --image always if it does)",
        },
        caps.vision_source,
        caps.n_ctx
            .map(|n| n.to_string())
            .unwrap_or_else(|| "not said".into())
    ))
}

/// Where scripts/setup-llama.sh leaves llama-server.
pub fn gamepilot_llama_server_path() -> Option<std::path::PathBuf> {
    let cache = std::env::var("GAMEPILOT_CACHE")
        .map(std::path::PathBuf::from)
        .ok()
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|h| std::path::PathBuf::from(h).join(".cache/gamepilot"))
        })?;
    let p = cache.join("llama/bin/llama-server");
    p.is_file().then_some(p)
}
