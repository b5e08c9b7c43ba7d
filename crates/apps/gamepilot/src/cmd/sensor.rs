//! `gamepilot sensor`: check a sensor file (every error with a caret and a hint) or evaluate it on an image.
//!
//! `sensor eval` is one evaluation, not a reflex tick: it waits for digit recognition, so `region_integer`
//! is undefined only when the digits really cannot be read. `@name` values come from `--prev`.

use super::common::load_image;
use anyhow::Context as _;
use gamepilot_core::{Frame, Point, Size, TransformChain};
use gamepilot_runtime::sensor_worker::{OcrDigits, SensorWorker};
use gamepilot_sensor::{render_all, Atlas, EvalContext, Evaluator, Program, RecognitionCache, Template};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: SensorCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum SensorCommand {
    /// Check a sensor file: report every error (line, column, caret, hint); exit 1 when there are any.
    Check(CheckArgs),
    /// Evaluate a sensor file on one image and print each sensor's value (true, false, a number, undefined).
    Eval(EvalArgs),
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The sensor file (`name = expression` per line, `#` comments).
    pub file: PathBuf,
    /// Print the diagnostics as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// The frame to evaluate (PNG), in the capture space the regions were written for.
    #[arg(long)]
    pub image: PathBuf,
    /// The previous frame: `@name` reads its values (without it, `@name` is undefined).
    #[arg(long)]
    pub prev: Option<PathBuf>,
    /// The sensor file.
    #[arg(long)]
    pub sensors: PathBuf,
    /// Print one JSON object `{name: value}` (undefined is null).
    #[arg(long)]
    pub json: bool,
    /// A template for template_present: NAME=FILE.png@X,Y (the template's pixels and where it was seen).
    #[arg(long = "template", value_name = "NAME=FILE@X,Y")]
    pub templates: Vec<String>,
    /// Search radius in pixels around each template's position.
    #[arg(long, default_value_t = gamepilot_sensor::template::DEFAULT_RADIUS)]
    pub template_radius: u32,
    /// Longest wait for digit recognition, in seconds.
    #[arg(long, default_value_t = 30)]
    pub ocr_timeout: u64,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.command {
        SensorCommand::Check(a) => check(a),
        SensorCommand::Eval(a) => eval(a),
    }
}

fn read_source(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading sensor file {}", path.display()))
}

/// Compile, or print every diagnostic to stderr and return `None`.
fn compile_or_report(path: &Path, src: &str, json: bool) -> Option<Program> {
    match gamepilot_sensor::compile(src) {
        Ok(p) => Some(p),
        Err(e) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "file": path.display().to_string(), "errors": e.diagnostics() })
                );
            } else {
                eprint!(
                    "{}",
                    render_all(e.diagnostics(), &path.display().to_string(), src)
                );
            }
            None
        }
    }
}

fn check(a: CheckArgs) -> anyhow::Result<i32> {
    let src = read_source(&a.file)?;
    let Some(p) = compile_or_report(&a.file, &src, a.json) else {
        return Ok(1);
    };
    if a.json {
        let sensors: Vec<_> = p
            .sensors()
            .iter()
            .map(|s| serde_json::json!({ "name": s.name, "type": format!("{:?}", s.ty).to_lowercase(), "line": s.line }))
            .collect();
        println!(
            "{}",
            serde_json::json!({ "file": a.file.display().to_string(), "errors": [], "sensors": sensors })
        );
    } else {
        println!(
            "{}: ok, {} sensor{} ({} primitive{})",
            a.file.display(),
            p.len(),
            if p.len() == 1 { "" } else { "s" },
            p.primitives().len(),
            if p.primitives().len() == 1 { "" } else { "s" }
        );
    }
    Ok(0)
}

/// Parse NAME=FILE@X,Y and cut the template from that image.
fn load_template(spec: &str, capture: Size, radius: u32) -> anyhow::Result<(String, Template)> {
    let usage = || format!("--template {spec:?}: expected NAME=FILE.png@X,Y");
    let (name, rest) = spec.split_once('=').with_context(usage)?;
    let (file, at) = rest.rsplit_once('@').with_context(usage)?;
    let (x, y) = at.split_once(',').with_context(usage)?;
    let x: i32 = x.trim().parse().with_context(usage)?;
    let y: i32 = y.trim().parse().with_context(usage)?;
    let img = load_image(Path::new(file))?;
    let mut t = Template::from_frame(&img.view(), img.view().bounds(), radius)
        .with_context(|| format!("template {name:?} from {file}"))?;
    t.anchor = Point::new(x, y);
    t.capture_size = capture;
    Ok((name.to_string(), t))
}

fn eval(a: EvalArgs) -> anyhow::Result<i32> {
    let src = read_source(&a.sensors)?;
    let Some(program) = compile_or_report(&a.sensors, &src, false) else {
        return Ok(1);
    };
    let image = load_image(&a.image)?;
    let size = image.view().size();
    let prev = match &a.prev {
        Some(p) => {
            let f = load_image(p)?;
            if f.view().size() != size {
                anyhow::bail!(
                    "--prev {} is {}x{} but --image is {}x{}; both must be frames of the same capture",
                    p.display(),
                    f.width,
                    f.height,
                    size.w,
                    size.h
                );
            }
            Some(f)
        }
        None => None,
    };
    let mut atlas = Atlas::new();
    for spec in &a.templates {
        let (name, t) = load_template(spec, size, a.template_radius)?;
        atlas.insert(name, t);
    }
    for (k, p) in program.primitives().iter().enumerate() {
        if let Some(r) = p.region() {
            if !image.view().bounds().contains_rect(&r) {
                eprintln!(
                    "warning: primitive {k} reads [{}, {}, {}, {}], not wholly inside the {}x{} image",
                    r.x, r.y, r.w, r.h, size.w, size.h
                );
            }
        }
    }
    let needs_ocr = program
        .primitives()
        .iter()
        .any(|p| matches!(p, gamepilot_sensor::Primitive::Integer { .. }));
    let mut worker = if needs_ocr {
        Some(SensorWorker::spawn(OcrDigits::new)?)
    } else {
        None
    };
    let mut ev = Evaluator::new(program, size);
    let mut cache = RecognitionCache::default();
    let timeout = Duration::from_secs(a.ocr_timeout);
    let chain = TransformChain::new(Point::new(0, 0), size);
    let mut step = |frame: &Frame, ev: &mut Evaluator| -> anyhow::Result<()> {
        let mut ctx = EvalContext {
            frame: frame.view(),
            chain,
            atlas: &atlas,
            recognition: &mut cache,
        };
        ev.tick(&mut ctx);
        if let Some(w) = worker.as_mut() {
            if ctx.recognition.queued() > 0 {
                w.submit(ctx.recognition);
                if !w.wait(ctx.recognition, timeout) {
                    anyhow::bail!("digit recognition did not finish within {}s", timeout.as_secs());
                }
                ev.recompute(&mut ctx);
            }
        }
        Ok(())
    };
    if let Some(p) = &prev {
        step(p, &mut ev)?;
    }
    step(&image, &mut ev)?;
    print_values(&ev, a.json);
    Ok(0)
}

fn print_values(ev: &Evaluator, json: bool) {
    let names = ev.program().sensors().iter().map(|s| s.name.as_str());
    if json {
        // Declaration order, built by hand (serde_json's map would sort the keys).
        let body: Vec<String> = names
            .zip(ev.values())
            .map(|(n, v)| {
                let key = serde_json::Value::String(n.to_string());
                format!(
                    "{key}: {}",
                    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
                )
            })
            .collect();
        println!("{{{}}}", body.join(", "));
    } else {
        let width = ev
            .program()
            .sensors()
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0);
        for (n, v) in names.zip(ev.values()) {
            println!("{n:<width$} = {v}");
        }
    }
}
