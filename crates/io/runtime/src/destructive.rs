//! Destructive-action detection (FR-SAFE-005): detect the confirmation dialogue, not the action. Text on
//! screen near the target matching buy/sell/trade/spend/delete/confirm purchase/are you sure/account/
//! password, or a currency amount beside a button, holds the action for the user's explicit confirmation.
//!
//! The hold ([`Hold`]) never blocks the loop thread: it shows the confirmation overlay (answered only by a
//! real device, `gamepilot_x11::confirm`) and, in attended runs, a terminal prompt read by a background
//! thread; whichever answers first wins and the other is withdrawn. No answer within the timeout rejects.

use gamepilot_x11::confirm::{Answer, ConfirmOverlay, ConfirmRequest};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use gamepilot_session::destructive::DestructiveMatch;

/// How a hold may be answered.
#[derive(Debug, Clone)]
pub struct HoldOptions {
    pub display: Option<String>,
    /// The target window (the overlay is placed outside its client rectangle).
    pub window: u32,
    /// Someone is at the terminal: ask there too.
    pub attended: bool,
    /// How long to wait for an answer; zero: do not wait (no overlay; unattended runs reject at once).
    pub timeout: Duration,
}

/// Who ended a hold, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    AllowedOnOverlay,
    AllowedAtTerminal,
    RejectedOnOverlay,
    RejectedAtTerminal,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody can answer: no terminal and no overlay (unattended, or no room outside the target).
    NobodyToAsk,
}

impl Decision {
    pub fn allowed(self) -> bool {
        matches!(self, Decision::AllowedOnOverlay | Decision::AllowedAtTerminal)
    }
}

/// The end of a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    /// From the hold's start to its answer (the loop releases the action in the same iteration).
    pub waited: Duration,
}

/// Lines typed at the terminal, read by one background thread for the whole process (a read can't be
/// withdrawn, so there is only ever one reader; lines typed while nothing is held are discarded).
fn terminal_lines() -> &'static Mutex<Receiver<String>> {
    static LINES: OnceLock<Mutex<Receiver<String>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        let _ = std::thread::Builder::new()
            .name("terminal-prompt".into())
            .spawn(move || {
                for line in std::io::stdin().lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        Mutex::new(rx)
    })
}

/// An action's JSON label in words for the overlay: `click at (520, 436)`, `key Return`.
fn describe(label: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(label) else {
        return label.to_string();
    };
    let what = v["action"].as_str().unwrap_or("act").replace('_', " ");
    match (v["x"].as_i64(), v["y"].as_i64()) {
        (Some(x), Some(y)) => format!("{what} at ({x}, {y})"),
        _ => match v["key"].as_str() {
            Some(k) => format!("{what} {k}"),
            None => label.to_string(),
        },
    }
}

/// One action held for the user's explicit confirmation (FR-SAFE-005).
pub struct Hold {
    pub found: DestructiveMatch,
    overlay: Option<ConfirmOverlay>,
    /// Why there is no overlay, when there is none.
    pub overlay_unavailable: Option<String>,
    terminal: bool,
    started: Instant,
    deadline: Instant,
    timeout: Duration,
    done: Option<Outcome>,
}

impl Hold {
    /// Start holding `label`: show the overlay (unless the timeout is zero) and, when attended, the
    /// terminal prompt. Returns at once.
    pub fn start(opts: &HoldOptions, label: &str, found: DestructiveMatch) -> Hold {
        let started = Instant::now();
        let mut overlay_unavailable = None;
        let overlay = if opts.timeout.is_zero() {
            overlay_unavailable = Some("no confirmation wait configured".to_string());
            None
        } else {
            let req = ConfirmRequest {
                action: describe(label),
                pattern: found.pattern.clone(),
                text: found.text.clone(),
                timeout: opts.timeout,
            };
            let shown = gamepilot_x11::X11::connect(opts.display.as_deref())
                .and_then(|x| x.client_rect(opts.window))
                .and_then(|target| ConfirmOverlay::show(opts.display.as_deref(), target, &[], &req));
            match shown {
                Ok(Some(o)) => Some(o),
                Ok(None) => {
                    overlay_unavailable = Some("no room on the screen outside the game window".into());
                    None
                }
                Err(e) => {
                    overlay_unavailable = Some(e.to_string());
                    None
                }
            }
        };
        let terminal = opts.attended;
        if terminal {
            if let Ok(rx) = terminal_lines().lock() {
                while rx.try_recv().is_ok() {}
            }
            eprintln!(
                "\nHELD (FR-SAFE-005): the agent wants to {label} next to \"{}\" ({}).",
                found.text, found.pattern
            );
            eprint!(
                "Allow? [y/N]{} ",
                if overlay.is_some() {
                    " (or click Allow / Reject on the overlay)"
                } else {
                    ""
                }
            );
        }
        Hold {
            found,
            overlay,
            overlay_unavailable,
            terminal,
            started,
            deadline: started + opts.timeout,
            timeout: opts.timeout,
            done: None,
        }
    }

    /// Whether the overlay is up.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn has_overlay(&self) -> bool {
        self.overlay.is_some()
    }

    /// The overlay, while it is up (tests click its buttons).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn overlay(&self) -> Option<&ConfirmOverlay> {
        self.overlay.as_ref()
    }

    fn terminal_answer(&mut self) -> Option<bool> {
        if !self.terminal {
            return None;
        }
        let rx = terminal_lines().lock().ok()?;
        match rx.try_recv() {
            Ok(line) => {
                let l = line.trim().to_ascii_lowercase();
                Some(l == "y" || l == "yes")
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                drop(rx);
                self.terminal = false;
                None
            }
        }
    }

    /// The outcome, once there is one (never blocks; call it every loop iteration). On the outcome the
    /// overlay is withdrawn and the terminal prompt is closed with a note of who answered.
    pub fn poll(&mut self) -> Option<Outcome> {
        if self.done.is_some() {
            return self.done;
        }
        let decision = if let Some(yes) = self.terminal_answer() {
            Some(if yes {
                Decision::AllowedAtTerminal
            } else {
                Decision::RejectedAtTerminal
            })
        } else {
            match self.overlay.as_mut().and_then(|o| o.poll()) {
                Some(Answer::Allowed) => Some(Decision::AllowedOnOverlay),
                Some(Answer::Rejected) => Some(Decision::RejectedOnOverlay),
                Some(Answer::TimedOut) => Some(Decision::TimedOut),
                Some(Answer::Closed) => {
                    self.overlay = None;
                    self.overlay_unavailable = Some("the overlay was closed".into());
                    None
                }
                None => None,
            }
        };
        let decision = decision.or_else(|| {
            if self.overlay.is_none() && !self.terminal {
                Some(Decision::NobodyToAsk)
            } else if Instant::now() >= self.deadline {
                Some(Decision::TimedOut)
            } else {
                None
            }
        })?;
        self.overlay = None;
        if self.terminal {
            match decision {
                Decision::AllowedOnOverlay => eprintln!("(allowed on the overlay)"),
                Decision::RejectedOnOverlay => eprintln!("(rejected on the overlay)"),
                Decision::TimedOut => eprintln!("(no answer in {} s: rejected)", self.timeout.as_secs()),
                _ => {}
            }
        }
        let out = Outcome {
            decision,
            waited: self.started.elapsed(),
        };
        self.done = Some(out);
        Some(out)
    }

    /// What the model is told about a rejected hold (and the recording's detail for any outcome).
    pub fn reason(&self, out: &Outcome) -> String {
        let why = format!(
            "looks like a confirmation dialogue ({}: \"{}\")",
            self.found.pattern, self.found.text
        );
        match out.decision {
            Decision::AllowedOnOverlay => format!("allowed by the user on the overlay: {why}"),
            Decision::AllowedAtTerminal => format!("allowed by the user at the terminal: {why}"),
            Decision::RejectedOnOverlay | Decision::RejectedAtTerminal => {
                format!("rejected by the user: {why}; the user does not want this, choose something else")
            }
            Decision::TimedOut => format!(
                "rejected: {why}; needs the user's explicit confirmation and nobody answered within {} s",
                self.timeout.as_secs()
            ),
            Decision::NobodyToAsk => format!(
                "rejected: {why}; needs the user's explicit confirmation and nobody can give it ({})",
                self.overlay_unavailable.as_deref().unwrap_or("unattended run")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{Point, Rect};
    use gamepilot_session::destructive::check;
    use gamepilot_vision::TextItem;

    /// Click at a capture-space point the way a person does (hover, then a held press) through the one
    /// input component and the transform chain.
    fn click(x: &gamepilot_x11::X11, win: u32, p: Point) {
        let input = gamepilot_x11::input::XTestInput::new(x).unwrap();
        let chain = x.transform_for(win).unwrap();
        input.motion_to(x, chain.capture_to_screen(p).unwrap()).unwrap();
        input.sync(x).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        input.button(x, 1, true).unwrap();
        input.sync(x).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(80));
        input.button(x, 1, false).unwrap();
        input.sync(x).unwrap();
    }

    fn observe_texts(x: &gamepilot_x11::X11, win: u32) -> (Vec<TextItem>, Rect) {
        use gamepilot_vision::Ocr as _;
        let mut cap = gamepilot_x11::WindowCapturer::new(x, win).unwrap();
        let frame = cap.capture(x, gamepilot_core::MonoTime::ZERO).unwrap();
        let view = frame.view();
        let mut ocr = gamepilot_ocr::default_engine().unwrap();
        let lines = ocr.recognize(&view, view.bounds()).unwrap();
        let mut p = gamepilot_vision::Perceiver::new();
        let obs = p.observe(
            &view,
            gamepilot_core::MonoTime::ZERO,
            gamepilot_vision::FrameChange::Scene,
            &lines,
        );
        (obs.texts, view.bounds())
    }

    #[test]
    fn the_practice_games_spend_dialogue_holds_a_click_on_yes() {
        // FR-SAFE-005 on real pixels: the practice game's "Spend 100 gold?" dialogue read by tesseract.
        let mut bed = gamepilot_testbed::TestBed::start().unwrap();
        let arena =
            gamepilot_testbed::Arena::launch(&mut bed, &gamepilot_testbed::ArenaOptions::default()).unwrap();
        let x = bed.x11().unwrap();
        let win = arena.window.id;
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (menu_texts, _) = observe_texts(&x, win);
        assert_eq!(
            check(&menu_texts, Some(Point::new(640, 330)), 220),
            None,
            "menu: {menu_texts:?}"
        );
        click(&x, win, Point::new(640, 550)); // the menu's Shop button
        arena
            .wait_for(std::time::Duration::from_secs(5), |s| s["screen"] == "confirm")
            .expect("shop dialogue opens");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (texts, _) = observe_texts(&x, win);
        let m = check(&texts, Some(Point::new(520, 436)), 220)
            .unwrap_or_else(|| panic!("dialogue not detected in {texts:?}"));
        assert!(m.pattern == "spend" || m.pattern == "currency amount", "{m:?}");
        assert_eq!(arena.state().unwrap()["gold"], 250, "nothing was spent");
    }

    #[test]
    fn the_overlay_names_the_action_in_words() {
        assert_eq!(
            describe(r#"{"action":"click","x":520,"y":436,"button":"left"}"#),
            "click at (520, 436)"
        );
        assert_eq!(
            describe(r#"{"action":"double_click","x":1,"y":2}"#),
            "double click at (1, 2)"
        );
        assert_eq!(describe("not json"), "not json");
    }

    #[test]
    fn unattended_without_an_overlay_rejects_at_once_and_tells_the_model_why() {
        // FR-SAFE-005: unattended, with no way to ask, the action is rejected with the reason fed back
        let opts = HoldOptions {
            display: None,
            window: 0,
            attended: false,
            timeout: Duration::ZERO,
        };
        let found = DestructiveMatch {
            pattern: "spend".into(),
            text: "Spend 100 gold?".into(),
        };
        let mut h = Hold::start(&opts, "click (520, 436)", found);
        assert!(!h.has_overlay());
        let out = h.poll().expect("answered at once");
        assert_eq!(out.decision, Decision::NobodyToAsk);
        assert!(!out.decision.allowed());
        let why = h.reason(&out);
        assert!(why.starts_with("rejected:"), "{why}");
        assert!(why.contains("spend: \"Spend 100 gold?\""), "{why}");
        assert!(why.contains("explicit confirmation"), "{why}");
        assert_eq!(h.poll(), Some(out), "the outcome stays");
    }

    /// The "user": XTest on the outer display over Xephyr's window reaches the nested server from
    /// Xephyr's own pointer, a device other than the nested server's XTEST pointer.
    fn user_click(bed: &gamepilot_testbed::TestBed, nested: gamepilot_core::Rect) -> Instant {
        let outer = gamepilot_x11::X11::connect(bed.outer_display.as_deref()).unwrap();
        let origin = outer.client_rect(bed.xephyr_window.unwrap()).unwrap();
        let input = gamepilot_x11::input::XTestInput::new(&outer).unwrap();
        let chain = outer.transform_for(outer.root).unwrap();
        let c = nested.center();
        let p = chain
            .capture_to_screen(Point::new(origin.x + c.x, origin.y + c.y))
            .unwrap();
        input.motion_to(&outer, p).unwrap();
        input.sync(&outer).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        input.button(&outer, 1, true).unwrap();
        input.sync(&outer).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        input.button(&outer, 1, false).unwrap();
        input.sync(&outer).unwrap();
        Instant::now()
    }

    /// Nested test bed, the practice game on its "Spend 100 gold?" dialogue, the agent's Yes click held.
    fn held_at_the_dialogue() -> (gamepilot_testbed::TestBed, gamepilot_testbed::Arena, Hold) {
        let mut bed = gamepilot_testbed::TestBed::start_nested().unwrap();
        let arena =
            gamepilot_testbed::Arena::launch(&mut bed, &gamepilot_testbed::ArenaOptions::default()).unwrap();
        let x = bed.x11().unwrap();
        // The menu's Shop button; a game still starting on a loaded machine may miss the first clicks
        // (the suite's parallel displays: three tries of 3 s missed once in CI).
        let opened = (0..5).any(|_| {
            std::thread::sleep(Duration::from_millis(300));
            click(&x, arena.window.id, Point::new(640, 550));
            arena
                .wait_for(Duration::from_secs(5), |s| s["screen"] == "confirm")
                .is_ok()
        });
        assert!(opened, "shop dialogue opens");
        std::thread::sleep(Duration::from_millis(200));
        let (texts, _) = observe_texts(&x, arena.window.id);
        let found = check(&texts, Some(Point::new(520, 436)), 220).expect("dialogue detected");
        let opts = HoldOptions {
            display: Some(bed.display.clone()),
            window: arena.window.id,
            attended: false,
            timeout: Duration::from_secs(30),
        };
        let hold = Hold::start(&opts, "click (520, 436)", found);
        assert!(hold.has_overlay(), "{:?}", hold.overlay_unavailable);
        let target = x.client_rect(arena.window.id).unwrap();
        let at = hold.overlay().unwrap().rect();
        assert!(
            at.intersection(&target).is_none(),
            "FR-SAFE-007: {at:?} {target:?}"
        );
        (bed, arena, hold)
    }

    fn wait(h: &mut Hold, within: Duration) -> Option<Outcome> {
        let t0 = Instant::now();
        while t0.elapsed() < within {
            if let Some(o) = h.poll() {
                return Some(o);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    #[test]
    fn the_user_allowing_on_the_overlay_releases_the_held_purchase() {
        // FR-SAFE-005: the held action waits for the user's explicit confirmation; FR-SAFE-007
        use gamepilot_x11::confirm::Choice;
        let (bed, arena, mut hold) = held_at_the_dialogue();
        let x = bed.x11().unwrap();
        // The agent's own input path cannot confirm: an XTest click on Allow leaves the hold in place.
        let allow = hold.overlay().unwrap().button_rect(Choice::Allow);
        let root_chain = x.transform_for(x.root).unwrap();
        let input = gamepilot_x11::input::XTestInput::new(&x).unwrap();
        input
            .motion_to(&x, root_chain.capture_to_screen(allow.center()).unwrap())
            .unwrap();
        input.button(&x, 1, true).unwrap();
        input.button(&x, 1, false).unwrap();
        input.sync(&x).unwrap();
        assert_eq!(
            wait(&mut hold, Duration::from_millis(500)),
            None,
            "XTest does not answer"
        );
        let sent = user_click(&bed, allow);
        let out = wait(&mut hold, Duration::from_secs(3)).expect("the user's click answers");
        let took = sent.elapsed();
        assert_eq!(out.decision, Decision::AllowedOnOverlay);
        assert!(hold.overlay().is_none(), "the overlay is withdrawn");
        eprintln!("user click release -> hold released: {took:?}");
        assert_eq!(arena.state().unwrap()["gold"], 250, "held: nothing spent yet");
        // Released: the agent's click on Yes goes through and the game spends.
        click(&x, arena.window.id, Point::new(520, 436));
        arena
            .wait_for(Duration::from_secs(5), |s| s["gold"] == 150)
            .expect("the purchase went through");
    }

    #[test]
    fn the_user_rejecting_on_the_overlay_leaves_the_game_unchanged_and_says_why() {
        // FR-SAFE-005
        use gamepilot_x11::confirm::Choice;
        let (bed, arena, mut hold) = held_at_the_dialogue();
        let before = arena.state().unwrap();
        let reject = hold.overlay().unwrap().button_rect(Choice::Reject);
        user_click(&bed, reject);
        let out = wait(&mut hold, Duration::from_secs(3)).expect("answered");
        assert_eq!(out.decision, Decision::RejectedOnOverlay);
        let why = hold.reason(&out);
        assert!(why.starts_with("rejected by the user"), "{why}");
        assert!(why.contains(&hold.found.text), "{why}");
        std::thread::sleep(Duration::from_millis(200));
        let after = arena.state().unwrap();
        assert_eq!(after["gold"], before["gold"]);
        assert_eq!(after["screen"], "confirm");
    }

    #[test]
    fn the_session_tells_the_model_why_a_hold_was_rejected() {
        // FR-SAFE-005: the hold's own reason (an unattended run, nobody to ask) is what the model reads
        let opts = HoldOptions {
            display: None,
            window: 0,
            attended: false,
            timeout: Duration::ZERO,
        };
        let found = DestructiveMatch {
            pattern: "spend".into(),
            text: "Spend 100 gold?".into(),
        };
        let label = r#"{"action":"click","x":520,"y":436,"button":"left"}"#;
        let mut hold = Hold::start(&opts, label, found);
        let out = hold.poll().unwrap();
        let why = hold.reason(&out);
        assert!(!out.decision.allowed());
        assert!(why.contains("Spend 100 gold?"), "{why}");
    }
}
