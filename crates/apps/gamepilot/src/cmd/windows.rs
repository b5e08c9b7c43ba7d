//! `gamepilot windows`: list top-level windows (id, title, class, pid, geometry).

use gamepilot_x11::X11;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// X display (default: $DISPLAY).
    #[arg(long)]
    pub display: Option<String>,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Include unmapped windows.
    #[arg(long)]
    pub all: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let x = X11::connect(args.display.as_deref())?;
    let wins: Vec<_> = x
        .list_windows()?
        .into_iter()
        .filter(|w| args.all || w.mapped)
        .collect();
    if args.json {
        for w in &wins {
            println!("{}", serde_json::to_string(w)?);
        }
        return Ok(0);
    }
    println!(
        "{:<12} {:<8} {:<22} {:<20} TITLE",
        "ID", "PID", "GEOMETRY", "CLASS"
    );
    for w in &wins {
        let g = w.geometry;
        println!(
            "{:<12} {:<8} {:<22} {:<20} {}",
            format!("0x{:x}", w.id),
            w.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            format!("{}x{}+{}+{}", g.w, g.h, g.x, g.y),
            w.class,
            w.title
        );
    }
    Ok(0)
}
