//! `gamepilot classify A.png B.png [C.png ...]`: the class of each consecutive transition, one per line
//! (unchanged / local / motion / scene), computed from thumbnails without a model (FR-PERC-003).

use super::common::load_image;
use gamepilot_vision::{classify, ClassifierParams, Thumb};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Two or more frames in order.
    #[arg(required = true, num_args = 2..)]
    pub frames: Vec<PathBuf>,
    /// Also print the measurements (changed-tile fraction, shift, histogram distance).
    #[arg(long, short)]
    pub verbose: bool,
    /// Override the per-pixel luma change that counts (default from the classifier).
    #[arg(long)]
    pub pixel_delta: Option<u8>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.frames.len() < 2 {
        anyhow::bail!("classify needs at least two frames");
    }
    let mut p = ClassifierParams::default();
    if let Some(d) = args.pixel_delta {
        p.pixel_delta = d;
    }
    let mut prev: Option<(PathBuf, Thumb)> = None;
    for path in &args.frames {
        let f = load_image(path)?;
        let t = Thumb::from_view(&f.view(), gamepilot_vision::thumb::THUMB_WIDTH);
        if let Some((pp, pt)) = &prev {
            if pt.width != t.width || pt.height != t.height {
                // Different sizes: a resize or another window, which is a scene change by definition.
                println!("scene");
                if args.verbose {
                    eprintln!("{} -> {}: sizes differ", pp.display(), path.display());
                }
            } else {
                let c = classify(pt, &t, &p)?;
                println!("{}", c.class);
                if args.verbose {
                    eprintln!(
                        "{} -> {}: changed {:.2} shift {:?} hist {:.3}",
                        pp.display(),
                        path.display(),
                        c.changed_fraction,
                        c.shift,
                        c.hist_distance
                    );
                }
            }
        }
        prev = Some((path.clone(), t));
    }
    Ok(0)
}
