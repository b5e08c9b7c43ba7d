//! Helpers shared by subcommands: target-window selection and connecting to the display.

use anyhow::Context as _;
use gamepilot_x11::{WindowInfo, WindowSelector, X11};

/// How a subcommand names its target window.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WindowArgs {
    /// Target window: id (0x… or decimal), a title substring, or class:NAME.
    #[arg(long, short = 'w')]
    pub window: Option<String>,
    /// Target window by process id.
    #[arg(long, conflicts_with = "window")]
    pub pid: Option<u32>,
    /// X display (default: $DISPLAY).
    #[arg(long)]
    pub display: Option<String>,
}

impl WindowArgs {
    pub fn selector(&self) -> anyhow::Result<WindowSelector> {
        match (&self.window, self.pid) {
            (Some(w), _) => Ok(WindowSelector::parse(w)),
            (None, Some(p)) => Ok(WindowSelector::Pid(p)),
            (None, None) => {
                anyhow::bail!("name the target window with --window ID|TITLE|class:NAME or --pid PID")
            }
        }
    }

    /// Connect and resolve the target window.
    pub fn resolve(&self) -> anyhow::Result<(X11, WindowInfo)> {
        let x = X11::connect(self.display.as_deref())?;
        let sel = self.selector()?;
        let w = x
            .find_window(&sel)
            .with_context(|| format!("finding the target window ({sel})"))?;
        Ok((x, w))
    }
}

pub use gamepilot_runtime::now;

/// Write a frame to a PNG file.
pub fn save_png(frame: &gamepilot_core::Frame, path: &std::path::Path) -> anyhow::Result<()> {
    let rgba = frame.view().to_rgba();
    let img = image::RgbaImage::from_raw(frame.width, frame.height, rgba)
        .context("frame buffer has the wrong size")?;
    img.save(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Read a PNG (or any supported image) into an RGBA frame.
pub fn load_image(path: &std::path::Path) -> anyhow::Result<gamepilot_core::Frame> {
    Ok(gamepilot_runtime::load_image(path)?)
}
