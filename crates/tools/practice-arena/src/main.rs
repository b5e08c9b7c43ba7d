//! The practice game: a deterministic X11 client drawn in software, the demo and CI target. This file wires
//! the window, the game state machine, the renderer, the state file and the signals together.

use clap::Parser;
use practice_arena::{clock, game, render, state, x, ArenaError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, Parser)]
#[command(
    name = "practice-arena",
    about = "The practice game: a deterministic X11 client for gamepilot's demo and tests"
)]
struct Args {
    /// World seed (coins, hazards); equal seeds give equal games.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[arg(long, default_value_t = 1280)]
    width: u16,
    #[arg(long, default_value_t = 720)]
    height: u16,
    /// Append one JSON object per line here whenever the state changes (at most 60 lines/s).
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// On SIGUSR1, write the game's own framebuffer here as PNG (and append a state line).
    #[arg(long)]
    frame_dump: Option<PathBuf>,
    /// The first screen: menu or play.
    #[arg(long, default_value = "menu")]
    start_screen: String,
    /// Directory holding DejaVuSans.ttf and DejaVuSans-Bold.ttf.
    #[arg(long, default_value = render::FONT_DIR)]
    font_dir: PathBuf,
}

static DUMP: AtomicBool = AtomicBool::new(false);
static QUIT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: set a flag.
    if sig == libc::SIGUSR1 {
        DUMP.store(true, Ordering::SeqCst);
    } else {
        QUIT.store(true, Ordering::SeqCst);
    }
}

fn install_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int);
    for sig in [libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores into atomics, which is async-signal-safe.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

fn write_png(path: &Path, c: &render::Canvas) -> Result<(), ArenaError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    image::save_buffer_with_format(
        &tmp,
        &c.to_rgb(),
        c.w as u32,
        c.h as u32,
        image::ColorType::Rgb8,
        image::ImageFormat::Png,
    )
    .map_err(|e| ArenaError::Other(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| ArenaError::Io {
        path: path.display().to_string(),
        source: e,
    })
}

/// Wait until the X connection is readable, a signal arrives, or `timeout_ms` passes.
fn wait_readable(fd: std::os::fd::RawFd, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; EINTR (a signal) just ends the wait early.
    unsafe {
        libc::poll(&mut p, 1, timeout_ms);
    }
}

fn run(args: Args) -> Result<(), ArenaError> {
    if args.width < 320 || args.height < 240 {
        return Err(ArenaError::Args(format!(
            "window {}x{} is smaller than 320x240",
            args.width, args.height
        )));
    }
    let start_screen = game::Screen::parse(&args.start_screen).ok_or_else(|| {
        ArenaError::Args(format!(
            "--start-screen {:?}: expected menu or play",
            args.start_screen
        ))
    })?;
    let fonts = render::Fonts::load(&args.font_dir)?;
    install_signals();
    let mut writer = match &args.state_file {
        Some(p) => Some(state::StateWriter::new(p)?),
        None => None,
    };
    let mut g = game::Game::new(
        args.seed,
        i32::from(args.width),
        i32::from(args.height),
        start_screen,
    );
    let mut win = x::GameWindow::open(args.width, args.height)?;
    if !win.detectable_autorepeat {
        eprintln!(
            "practice-arena: XKB detectable autorepeat unavailable; recognising repeats by time stamps"
        );
    }
    let started = Instant::now();
    let now_ms = || started.elapsed().as_secs_f64() * 1000.0;
    let mut clock = clock::ServerClock::default();
    let mut canvas = render::Canvas::new(i32::from(args.width), i32::from(args.height));
    let mut last_key: Option<render::ViewKey> = None;
    let mut frame: u64 = 0;
    let mut exposed = false;
    let mut announced = false;
    let tick_ms = 1000 / 60;
    loop {
        if QUIT.load(Ordering::SeqCst) {
            break;
        }
        let mut need_put = false;
        let mut close = false;
        for ev in win.poll_events()? {
            match ev {
                x::WinEvent::Input(e, server_time) => {
                    let now = now_ms();
                    let at = server_time.map(|t| clock.local_ms(t, now)).unwrap_or(now);
                    for fx in g.handle(e, at) {
                        match fx {
                            game::Effect::WarpPointer { x, y } => win.warp(x, y)?,
                        }
                    }
                }
                x::WinEvent::Expose => {
                    exposed = true;
                    need_put = true;
                }
                x::WinEvent::Close => close = true,
            }
        }
        if close {
            break;
        }
        let now = now_ms();
        g.advance(now);
        let key = render::view_key(&g);
        if last_key.as_ref() != Some(&key) {
            render::draw(&mut canvas, &fonts, &g);
            frame += 1;
            last_key = Some(key);
            need_put = true;
        }
        if need_put && exposed {
            win.put(&canvas)?;
        }
        win.flush()?;
        let t_ms = now as u64;
        if let Some(w) = writer.as_mut() {
            if exposed && !announced {
                // The first line: the window is mapped and drawn.
                w.offer(state::StateLine::of(&g, t_ms, frame), true)?;
                announced = true;
            } else if announced {
                w.offer(state::StateLine::of(&g, t_ms, frame), false)?;
            }
        }
        if DUMP.swap(false, Ordering::SeqCst) {
            if let Some(p) = &args.frame_dump {
                write_png(p, &canvas)?;
            }
            if let Some(w) = writer.as_mut() {
                w.offer(state::StateLine::of(&g, t_ms, frame), true)?;
            }
        }
        wait_readable(win.fd(), tick_ms);
    }
    if let Some(w) = writer.as_mut() {
        w.offer(state::StateLine::of(&g, now_ms() as u64, frame), false)?;
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("practice-arena: {e}");
        std::process::exit(1);
    }
}
