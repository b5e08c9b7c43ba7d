//! The game as a pure state machine: input events and the time come in, effects (pointer warps) go out.
//! No X11, no clock, no files: everything here is deterministic from the seed and the event sequence.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// World size in pixels (bigger than the window; the view follows the player).
pub const WORLD_W: f64 = 3200.0;
pub const WORLD_H: f64 = 2400.0;
/// Player speed while a movement key is held, world px per second.
pub const SPEED: f64 = 200.0;
pub const PLAYER_R: f64 = 18.0;
pub const COIN_R: f64 = 14.0;
pub const HAZARD_SIZE: f64 = 40.0;
pub const COINS_PER_ZONE: usize = 8;
pub const HAZARDS_PER_ZONE: usize = 10;
/// Health lost per second while touching a hazard.
pub const HAZARD_DPS: f64 = 10.0;
pub const START_GOLD: u64 = 250;
pub const SHOP_PRICE: u64 = 100;
/// Degrees of camera yaw per pixel of horizontal pointer motion.
pub const YAW_PER_PX: f64 = 0.25;
pub const PITCH_PER_PX: f64 = 0.25;
pub const PITCH_LIMIT: f64 = 60.0;
/// A single pointer jump longer than this is an absolute reposition, not camera motion.
pub const MAX_MOTION_STEP: f64 = 50.0;
/// Pointer closer than this to the window edge (on the play field) is warped back to the centre.
pub const EDGE_MARGIN: i32 = 60;
/// A button needs the pointer hovering over it this long before the press (FR-ACT-005).
pub const HOVER_MIN_MS: f64 = 80.0;
/// A press shorter than this is debounced away (FR-ACT-005).
pub const PRESS_MIN_MS: f64 = 30.0;
/// How long a pending self-warp waits for its motion event.
const WARP_EXPECT_MS: f64 = 250.0;
/// Simulation step limit so that fast movement never skips over a coin.
const MAX_STEP_MS: f64 = 1000.0 / 60.0;

/// Which screen is showing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Screen {
    Menu,
    Play,
    Pause,
    Confirm,
    Options,
}

impl Screen {
    pub fn name(self) -> &'static str {
        match self {
            Screen::Menu => "menu",
            Screen::Play => "play",
            Screen::Pause => "pause",
            Screen::Confirm => "confirm",
            Screen::Options => "options",
        }
    }

    pub fn parse(s: &str) -> Option<Screen> {
        match s {
            "menu" => Some(Screen::Menu),
            "play" => Some(Screen::Play),
            _ => None,
        }
    }
}

/// Every clickable button of every screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ButtonId {
    Play,
    Options,
    Shop,
    HudShop,
    Resume,
    MainMenu,
    Yes,
    No,
    Back,
    ToggleSound,
    ToggleGrid,
    ToggleInvert,
}

/// An integer rectangle in window coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: i32,
    pub h: i32,
}

impl Rect {
    pub fn new(x: i32, y: i32, w: i32, h: i32) -> Rect {
        Rect { x, y, w, h }
    }

    pub fn contains(&self, px: i32, py: i32) -> bool {
        px >= self.x && py >= self.y && px < self.x + self.w && py < self.y + self.h
    }

    pub fn center(&self) -> (i32, i32) {
        (self.x + self.w / 2, self.y + self.h / 2)
    }
}

/// A button as laid out on the current screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Button {
    pub id: ButtonId,
    pub label: String,
    pub rect: Rect,
}

/// Mouse buttons by X11 number.
pub fn mouse_button_name(b: u8) -> String {
    match b {
        1 => "left".into(),
        2 => "middle".into(),
        3 => "right".into(),
        4 => "wheel_up".into(),
        5 => "wheel_down".into(),
        n => format!("button{n}"),
    }
}

/// Input as the game sees it (already translated from X11; key names are keysym names).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Key {
        name: String,
        down: bool,
    },
    Button {
        button: u8,
        down: bool,
        x: i32,
        y: i32,
    },
    Motion {
        x: i32,
        y: i32,
    },
    Enter {
        x: i32,
        y: i32,
    },
    Leave,
    Focus(bool),
    /// The keys the server says are down right now (sent on focus-in): held keys not among them are
    /// dropped, since their release went elsewhere.
    KeysDown(Vec<String>),
}

/// What the shell must do for the game.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    WarpPointer { x: i32, y: i32 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coin {
    pub x: f64,
    pub y: f64,
    pub taken: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hazard {
    /// Centre of the square.
    pub x: f64,
    pub y: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PressCount {
    pub press: u64,
    pub release: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toggles {
    pub sound: bool,
    pub grid: bool,
    pub invert_pitch: bool,
}

/// A pending mouse press over a button (decided on release).
#[derive(Debug, Clone, Copy, PartialEq)]
struct PendingPress {
    button: Option<ButtonId>,
    /// The hover rule held at press time.
    hovered_long_enough: bool,
    at_ms: f64,
}

/// The whole game.
#[derive(Debug, Clone)]
pub struct Game {
    pub seed: u64,
    pub width: i32,
    pub height: i32,
    pub screen: Screen,
    /// Where the confirm dialogue returns to.
    confirm_return: Screen,
    pub now_ms: f64,
    pub held_keys: BTreeSet<String>,
    pub key_events: BTreeMap<String, PressCount>,
    pub repeats: u64,
    pub buttons_held: BTreeSet<String>,
    pub button_events: BTreeMap<String, PressCount>,
    /// Activations of on-screen buttons, by label.
    pub clicks: BTreeMap<String, u64>,
    pub dropped_clicks: u64,
    pub player: (f64, f64),
    pub yaw_deg: f64,
    pub pitch_deg: f64,
    pub camera_motion_events: u64,
    pub ignored_jumps: u64,
    pub self_warps: u64,
    pub coins: u64,
    pub gold: u64,
    pub health: f64,
    pub deaths: u64,
    pub purchases: u64,
    pub zone: u32,
    pub scene_changes: u64,
    pub pointer: (i32, i32),
    pointer_known: bool,
    last_motion: Option<(i32, i32)>,
    expect_warp: Option<(i32, i32, f64)>,
    pub focused: bool,
    pub toggles: Toggles,
    pub zone_coins: Vec<Coin>,
    pub hazards: Vec<Hazard>,
    /// Button under the pointer and since when.
    hover: Option<(ButtonId, f64)>,
    pending_press: Option<PendingPress>,
}

impl Game {
    pub fn new(seed: u64, width: i32, height: i32, start: Screen) -> Game {
        let mut g = Game {
            seed,
            width,
            height,
            screen: start,
            confirm_return: Screen::Menu,
            now_ms: 0.0,
            held_keys: BTreeSet::new(),
            key_events: BTreeMap::new(),
            repeats: 0,
            buttons_held: BTreeSet::new(),
            button_events: BTreeMap::new(),
            clicks: BTreeMap::new(),
            dropped_clicks: 0,
            player: spawn_point(),
            yaw_deg: 0.0,
            pitch_deg: 0.0,
            camera_motion_events: 0,
            ignored_jumps: 0,
            self_warps: 0,
            coins: 0,
            gold: START_GOLD,
            health: 100.0,
            deaths: 0,
            purchases: 0,
            zone: 1,
            scene_changes: 0,
            pointer: (width / 2, height / 2),
            pointer_known: false,
            last_motion: None,
            expect_warp: None,
            focused: false,
            toggles: Toggles {
                sound: true,
                grid: true,
                invert_pitch: false,
            },
            zone_coins: Vec::new(),
            hazards: Vec::new(),
            hover: None,
            pending_press: None,
        };
        g.generate_zone();
        g
    }

    /// Heading of the player in degrees, 0 = north (up), 90 = east; follows the camera yaw.
    pub fn heading_deg(&self) -> f64 {
        self.yaw_deg
    }

    /// The screen the shop dialogue returns to (and draws behind itself).
    pub fn confirm_return(&self) -> Screen {
        self.confirm_return
    }

    /// A copy of the game showing another screen (used to draw the picture behind a dialogue).
    pub fn as_screen(&self, s: Screen) -> Game {
        let mut g = self.clone();
        g.screen = s;
        g.pointer_known = false;
        g
    }

    pub fn coins_left_in_zone(&self) -> usize {
        self.zone_coins.iter().filter(|c| !c.taken).count()
    }

    /// The button under the pointer right now (for highlighting).
    pub fn hovered(&self) -> Option<ButtonId> {
        if !self.pointer_known {
            return None;
        }
        self.button_at(self.pointer.0, self.pointer.1)
    }

    /// The buttons of the current screen, laid out for the window size.
    pub fn buttons(&self) -> Vec<Button> {
        layout(self.screen, self.width, self.height, &self.toggles)
    }

    fn button_at(&self, x: i32, y: i32) -> Option<ButtonId> {
        self.buttons()
            .into_iter()
            .find(|b| b.rect.contains(x, y))
            .map(|b| b.id)
    }

    fn generate_zone(&mut self) {
        let mut rng =
            ChaCha8Rng::seed_from_u64(self.seed ^ (u64::from(self.zone).wrapping_mul(0x9E37_79B9_7F4A_7C15)));
        let (sx, sy) = spawn_point();
        let mut coins: Vec<Coin> = Vec::with_capacity(COINS_PER_ZONE);
        while coins.len() < COINS_PER_ZONE {
            let x = sx + rng.gen_range(-900.0..900.0);
            let y = sy + rng.gen_range(-600.0..600.0);
            let far_from_spawn = dist(x, y, sx, sy) > 140.0;
            let apart = coins.iter().all(|c| dist(c.x, c.y, x, y) > 90.0);
            if far_from_spawn && apart {
                coins.push(Coin { x, y, taken: false });
            }
        }
        let mut hazards: Vec<Hazard> = Vec::with_capacity(HAZARDS_PER_ZONE);
        while hazards.len() < HAZARDS_PER_ZONE {
            let x = sx + rng.gen_range(-1200.0..1200.0);
            let y = sy + rng.gen_range(-900.0..900.0);
            let far_from_spawn = dist(x, y, sx, sy) > 220.0;
            let off_coins = coins.iter().all(|c| dist(c.x, c.y, x, y) > 90.0);
            let apart = hazards.iter().all(|h| dist(h.x, h.y, x, y) > 80.0);
            if far_from_spawn && off_coins && apart {
                hazards.push(Hazard { x, y });
            }
        }
        self.zone_coins = coins;
        self.hazards = hazards;
    }

    /// Advance the world to `now_ms` (movement, collection, hazards). Time never runs backwards.
    pub fn advance(&mut self, now_ms: f64) {
        if now_ms <= self.now_ms {
            return;
        }
        if self.screen == Screen::Play {
            let mut t = self.now_ms;
            while t < now_ms {
                let step = (now_ms - t).min(MAX_STEP_MS);
                self.step(step / 1000.0);
                t += step;
            }
        }
        self.now_ms = now_ms;
    }

    fn movement_dir(&self) -> (f64, f64) {
        let held = |a: &str, b: &str| self.held_keys.contains(a) || self.held_keys.contains(b);
        let fwd = f64::from(i8::from(held("w", "Up")) - i8::from(held("s", "Down")));
        let right = f64::from(i8::from(held("d", "Right")) - i8::from(held("a", "Left")));
        if fwd == 0.0 && right == 0.0 {
            return (0.0, 0.0);
        }
        let h = self.heading_deg().to_radians();
        let (fx, fy) = (h.sin(), -h.cos());
        let (rx, ry) = (h.cos(), h.sin());
        let (dx, dy) = (fwd * fx + right * rx, fwd * fy + right * ry);
        let len = (dx * dx + dy * dy).sqrt();
        (dx / len, dy / len)
    }

    fn step(&mut self, dt: f64) {
        let (dx, dy) = self.movement_dir();
        if dx != 0.0 || dy != 0.0 {
            self.player.0 = (self.player.0 + dx * SPEED * dt).clamp(PLAYER_R, WORLD_W - PLAYER_R);
            self.player.1 = (self.player.1 + dy * SPEED * dt).clamp(PLAYER_R, WORLD_H - PLAYER_R);
        }
        let (px, py) = self.player;
        for c in self.zone_coins.iter_mut() {
            if !c.taken && dist(c.x, c.y, px, py) < PLAYER_R + COIN_R {
                c.taken = true;
                self.coins += 1;
                self.gold += 10;
            }
        }
        let touching = self
            .hazards
            .iter()
            .any(|h| circle_touches_square(px, py, PLAYER_R, h.x, h.y, HAZARD_SIZE));
        if touching {
            self.health = (self.health - HAZARD_DPS * dt).max(0.0);
            if self.health <= 0.0 {
                self.deaths += 1;
                self.health = 100.0;
                self.player = spawn_point();
            }
        }
        if self.coins_left_in_zone() == 0 {
            self.zone += 1;
            self.scene_changes += 1;
            self.player = spawn_point();
            self.generate_zone();
        }
    }

    fn set_screen(&mut self, s: Screen) {
        if s != self.screen {
            self.screen = s;
            // Buttons change under a still pointer: hovering the new button starts now.
            let under = if self.pointer_known {
                self.button_at(self.pointer.0, self.pointer.1)
            } else {
                None
            };
            self.hover = under.map(|b| (b, self.now_ms));
            self.pending_press = None;
        }
    }

    /// Feed one input event that happened at `at_ms`. Returns what the shell must do.
    pub fn handle(&mut self, ev: Event, at_ms: f64) -> Vec<Effect> {
        self.advance(at_ms);
        let at = self.now_ms.max(at_ms);
        let mut out = Vec::new();
        match ev {
            Event::Focus(f) => {
                self.focused = f;
                if !f {
                    // Keys and buttons are no longer seen by this window: the game lets go of them.
                    self.held_keys.clear();
                    self.buttons_held.clear();
                    self.pending_press = None;
                }
            }
            Event::KeysDown(down) => self.held_keys.retain(|k| down.contains(k)),
            Event::Key { name, down } => {
                if self.focused {
                    self.key(name, down);
                }
            }
            Event::Button { button, down, x, y } => {
                self.set_pointer(x, y, at);
                if self.focused {
                    self.mouse_button(button, down, x, y, at);
                }
            }
            Event::Enter { x, y } => {
                self.set_pointer(x, y, at);
                self.last_motion = Some((x, y));
            }
            Event::Leave => {
                self.last_motion = None;
                self.hover = None;
                self.pointer_known = false;
            }
            Event::Motion { x, y } => self.motion(x, y, at, &mut out),
        }
        out
    }

    fn set_pointer(&mut self, x: i32, y: i32, at: f64) {
        self.pointer = (x, y);
        self.pointer_known = true;
        let over = self.button_at(x, y);
        match (over, self.hover) {
            (Some(b), Some((h, _))) if b == h => {}
            (Some(b), _) => self.hover = Some((b, at)),
            (None, _) => self.hover = None,
        }
    }

    fn motion(&mut self, x: i32, y: i32, at: f64, out: &mut Vec<Effect>) {
        if let Some((wx, wy, since)) = self.expect_warp {
            if at - since > WARP_EXPECT_MS {
                self.expect_warp = None;
            } else if (wx, wy) == (x, y) {
                // The motion caused by our own warp: not camera motion.
                self.expect_warp = None;
                self.last_motion = Some((x, y));
                self.set_pointer(x, y, at);
                return;
            }
        }
        let prev = self.last_motion;
        self.last_motion = Some((x, y));
        self.set_pointer(x, y, at);
        if let Some((lx, ly)) = prev {
            self.turn_camera(f64::from(x - lx), f64::from(y - ly));
        }
        let near_edge = x < EDGE_MARGIN
            || y < EDGE_MARGIN
            || x >= self.width - EDGE_MARGIN
            || y >= self.height - EDGE_MARGIN;
        if near_edge && self.screen == Screen::Play && self.focused {
            let (cx, cy) = (self.width / 2, self.height / 2);
            self.expect_warp = Some((cx, cy, at));
            self.self_warps += 1;
            out.push(Effect::WarpPointer { x: cx, y: cy });
        }
    }

    /// Relative pointer motion turns the camera; a jump is an absolute reposition and is ignored.
    fn turn_camera(&mut self, dx: f64, dy: f64) {
        if dx == 0.0 && dy == 0.0 {
            return;
        }
        if (dx * dx + dy * dy).sqrt() > MAX_MOTION_STEP {
            self.ignored_jumps += 1;
            return;
        }
        if self.screen != Screen::Play || !self.focused {
            return;
        }
        self.yaw_deg = (self.yaw_deg + dx * YAW_PER_PX).rem_euclid(360.0);
        let sign = if self.toggles.invert_pitch { 1.0 } else { -1.0 };
        self.pitch_deg = (self.pitch_deg + sign * dy * PITCH_PER_PX).clamp(-PITCH_LIMIT, PITCH_LIMIT);
        self.camera_motion_events += 1;
    }

    fn key(&mut self, name: String, down: bool) {
        if down {
            if self.held_keys.contains(&name) {
                self.repeats += 1;
                return;
            }
            self.key_events.entry(name.clone()).or_default().press += 1;
            self.held_keys.insert(name.clone());
            if name == "Escape" {
                match self.screen {
                    Screen::Play => self.set_screen(Screen::Pause),
                    Screen::Pause => self.set_screen(Screen::Play),
                    Screen::Confirm => self.set_screen(self.confirm_return),
                    Screen::Options => self.set_screen(Screen::Menu),
                    Screen::Menu => {}
                }
            }
        } else if self.held_keys.remove(&name) {
            self.key_events.entry(name).or_default().release += 1;
        }
    }

    fn mouse_button(&mut self, button: u8, down: bool, x: i32, y: i32, at: f64) {
        let name = mouse_button_name(button);
        if button == 4 || button == 5 {
            // Wheel: a press/release pair per notch, never held.
            if down {
                self.button_events.entry(name).or_default().press += 1;
            } else {
                self.button_events.entry(name).or_default().release += 1;
            }
            return;
        }
        if down {
            if !self.buttons_held.insert(name.clone()) {
                return;
            }
            self.button_events.entry(name).or_default().press += 1;
            if button == 1 {
                let over = self.button_at(x, y);
                let hovered_long_enough = match (over, self.hover) {
                    (Some(b), Some((h, since))) => b == h && at - since >= HOVER_MIN_MS,
                    _ => false,
                };
                self.pending_press = Some(PendingPress {
                    button: over,
                    hovered_long_enough,
                    at_ms: at,
                });
            }
        } else {
            if !self.buttons_held.remove(&name) {
                return;
            }
            self.button_events.entry(name).or_default().release += 1;
            if button == 1 {
                if let Some(p) = self.pending_press.take() {
                    if let Some(b) = p.button {
                        let same = self.button_at(x, y) == Some(b);
                        let long_enough = at - p.at_ms >= PRESS_MIN_MS;
                        if same && p.hovered_long_enough && long_enough {
                            self.activate(b);
                        } else {
                            self.dropped_clicks += 1;
                        }
                    }
                }
            }
        }
    }

    fn activate(&mut self, b: ButtonId) {
        let label = self
            .buttons()
            .into_iter()
            .find(|x| x.id == b)
            .map(|x| x.label)
            .unwrap_or_default();
        *self.clicks.entry(label).or_default() += 1;
        match b {
            ButtonId::Play | ButtonId::Resume => self.set_screen(Screen::Play),
            ButtonId::Options => self.set_screen(Screen::Options),
            ButtonId::Shop | ButtonId::HudShop => {
                self.confirm_return = self.screen;
                self.set_screen(Screen::Confirm);
            }
            ButtonId::MainMenu | ButtonId::Back => self.set_screen(Screen::Menu),
            ButtonId::Yes => {
                if self.gold >= SHOP_PRICE {
                    self.gold -= SHOP_PRICE;
                    self.purchases += 1;
                }
                self.set_screen(self.confirm_return);
            }
            ButtonId::No => self.set_screen(self.confirm_return),
            ButtonId::ToggleSound => self.toggles.sound = !self.toggles.sound,
            ButtonId::ToggleGrid => self.toggles.grid = !self.toggles.grid,
            ButtonId::ToggleInvert => self.toggles.invert_pitch = !self.toggles.invert_pitch,
        }
    }
}

fn spawn_point() -> (f64, f64) {
    (WORLD_W / 2.0, WORLD_H / 2.0)
}

fn dist(ax: f64, ay: f64, bx: f64, by: f64) -> f64 {
    ((ax - bx).powi(2) + (ay - by).powi(2)).sqrt()
}

fn circle_touches_square(cx: f64, cy: f64, r: f64, sx: f64, sy: f64, size: f64) -> bool {
    let half = size / 2.0;
    let nx = cx.clamp(sx - half, sx + half);
    let ny = cy.clamp(sy - half, sy + half);
    dist(cx, cy, nx, ny) < r
}

/// The rectangle of the menu button labelled `label` in a `w`x`h` window with the default toggles (for
/// tests that aim at a button, e.g. "Play").
pub fn menu_button(label: &str, w: i32, h: i32) -> Option<Rect> {
    let t = Toggles {
        sound: true,
        grid: false,
        invert_pitch: false,
    };
    layout(Screen::Menu, w, h, &t)
        .into_iter()
        .find(|b| b.label == label)
        .map(|b| b.rect)
}

/// Button layout of a screen for a window of `w`x`h`.
pub fn layout(screen: Screen, w: i32, h: i32, t: &Toggles) -> Vec<Button> {
    let b = |id, label: &str, rect| Button {
        id,
        label: label.to_string(),
        rect,
    };
    let on = |v: bool| if v { "On" } else { "Off" };
    match screen {
        Screen::Menu => {
            let (bw, bh, gap) = (360, 84, 26);
            let x = (w - bw) / 2;
            let y0 = h * 2 / 5;
            vec![
                b(ButtonId::Play, "Play", Rect::new(x, y0, bw, bh)),
                b(ButtonId::Options, "Options", Rect::new(x, y0 + bh + gap, bw, bh)),
                b(ButtonId::Shop, "Shop", Rect::new(x, y0 + 2 * (bh + gap), bw, bh)),
            ]
        }
        Screen::Play => vec![b(ButtonId::HudShop, "Shop", Rect::new(w - 230, 64, 160, 64))],
        Screen::Pause => {
            let (bw, bh) = (320, 76);
            let x = (w - bw) / 2;
            let y0 = h / 2 - 30;
            vec![
                b(ButtonId::Resume, "Resume", Rect::new(x, y0, bw, bh)),
                b(
                    ButtonId::MainMenu,
                    "Main Menu",
                    Rect::new(x, y0 + bh + 24, bw, bh),
                ),
            ]
        }
        Screen::Confirm => {
            let (bw, bh) = (180, 72);
            let y = h / 2 + 40;
            vec![
                b(ButtonId::Yes, "Yes", Rect::new(w / 2 - bw - 30, y, bw, bh)),
                b(ButtonId::No, "No", Rect::new(w / 2 + 30, y, bw, bh)),
            ]
        }
        Screen::Options => {
            let (bw, bh, gap) = (440, 72, 22);
            let x = (w - bw) / 2;
            let y0 = h / 3;
            vec![
                b(
                    ButtonId::ToggleSound,
                    &format!("Sound: {}", on(t.sound)),
                    Rect::new(x, y0, bw, bh),
                ),
                b(
                    ButtonId::ToggleGrid,
                    &format!("Grid: {}", on(t.grid)),
                    Rect::new(x, y0 + bh + gap, bw, bh),
                ),
                b(
                    ButtonId::ToggleInvert,
                    &format!("Invert pitch: {}", on(t.invert_pitch)),
                    Rect::new(x, y0 + 2 * (bh + gap), bw, bh),
                ),
                b(
                    ButtonId::Back,
                    "Back",
                    Rect::new(x, y0 + 3 * (bh + gap) + 20, bw, bh),
                ),
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(g: &mut Game, name: &str, down: bool, at: f64) {
        g.handle(
            Event::Key {
                name: name.into(),
                down,
            },
            at,
        );
    }

    fn playing() -> Game {
        let mut g = Game::new(7, 1280, 720, Screen::Play);
        g.handle(Event::Focus(true), 0.0);
        g
    }

    /// Hover the pointer over a button at `t`, press at `t+hover`, release at `t+hover+hold`.
    fn click(g: &mut Game, id: ButtonId, t: f64, hover: f64, hold: f64) {
        let r = g
            .buttons()
            .into_iter()
            .find(|b| b.id == id)
            .expect("button on screen")
            .rect;
        let (x, y) = r.center();
        g.handle(Event::Motion { x: x - 3, y }, t);
        g.handle(Event::Motion { x, y }, t + 1.0);
        g.handle(
            Event::Button {
                button: 1,
                down: true,
                x,
                y,
            },
            t + 1.0 + hover,
        );
        g.handle(
            Event::Button {
                button: 1,
                down: false,
                x,
                y,
            },
            t + 1.0 + hover + hold,
        );
    }

    #[test]
    fn same_seed_same_world_other_seed_other_world() {
        let a = Game::new(42, 1280, 720, Screen::Menu);
        let b = Game::new(42, 1280, 720, Screen::Menu);
        let c = Game::new(43, 1280, 720, Screen::Menu);
        assert_eq!(a.zone_coins, b.zone_coins);
        assert_eq!(a.hazards, b.hazards);
        assert_ne!(a.zone_coins, c.zone_coins);
        assert_eq!(a.zone_coins.len(), COINS_PER_ZONE);
    }

    /// A scripted session: the same seed and events give the same game, every counter included.
    fn scripted(seed: u64) -> Game {
        let mut g = Game::new(seed, 1280, 720, Screen::Menu);
        g.handle(Event::Focus(true), 0.0);
        click(&mut g, ButtonId::Play, 10.0, 100.0, 50.0);
        g.handle(Event::Enter { x: 640, y: 360 }, 200.0);
        for i in 0..30 {
            g.handle(
                Event::Motion {
                    x: 640 + 7 * (i % 5),
                    y: 360 - (i % 3),
                },
                210.0 + f64::from(i) * 10.0,
            );
        }
        key(&mut g, "w", true, 600.0);
        key(&mut g, "d", true, 1400.0);
        key(&mut g, "w", false, 3000.0);
        key(&mut g, "d", false, 5000.0);
        g.advance(6000.0);
        g
    }

    #[test]
    fn same_seed_and_events_give_the_same_game() {
        let (a, b) = (scripted(9), scripted(9));
        assert_eq!(a.player, b.player);
        assert_eq!(
            (a.coins, a.gold, a.health, a.zone),
            (b.coins, b.gold, b.health, b.zone)
        );
        assert_eq!(
            (a.yaw_deg, a.pitch_deg, a.camera_motion_events),
            (b.yaw_deg, b.pitch_deg, b.camera_motion_events)
        );
        assert_eq!(a.screen, Screen::Play);
        assert_ne!(a.player, Game::new(9, 1280, 720, Screen::Menu).player);
    }

    #[test]
    fn held_key_moves_player_and_release_stops_it() {
        // A key held for 1 s moves the player; it stops when released.
        let mut g = playing();
        let start = g.player;
        key(&mut g, "w", true, 1000.0);
        g.advance(2000.0);
        let moved = g.player;
        assert!(
            (start.1 - moved.1 - SPEED).abs() < 1e-6,
            "moved {:?} -> {:?}",
            start,
            moved
        );
        assert_eq!(start.0, moved.0);
        key(&mut g, "w", false, 2000.0);
        g.advance(5000.0);
        assert_eq!(g.player, moved);
        assert!(g.held_keys.is_empty());
        assert_eq!(g.key_events["w"], PressCount { press: 1, release: 1 });
    }

    #[test]
    fn autorepeat_press_is_not_a_press() {
        let mut g = playing();
        key(&mut g, "d", true, 0.0);
        key(&mut g, "d", true, 500.0);
        key(&mut g, "d", true, 530.0);
        key(&mut g, "d", false, 600.0);
        assert_eq!(g.key_events["d"], PressCount { press: 1, release: 1 });
        assert_eq!(g.repeats, 2);
    }

    #[test]
    fn strafe_and_heading_follow_yaw() {
        let mut g = playing();
        g.yaw_deg = 90.0; // facing east
        let start = g.player;
        key(&mut g, "w", true, 0.0);
        g.advance(500.0);
        key(&mut g, "w", false, 500.0);
        assert!((g.player.0 - start.0 - 100.0).abs() < 1e-6);
        assert!((g.player.1 - start.1).abs() < 1e-6);
        key(&mut g, "a", true, 600.0); // strafe left of east = north
        g.advance(1100.0);
        assert!((start.1 - g.player.1 - 100.0).abs() < 1e-6);
    }

    #[test]
    fn no_movement_without_focus_or_off_the_play_screen() {
        let mut g = Game::new(7, 1280, 720, Screen::Play);
        let start = g.player;
        key(&mut g, "w", true, 0.0);
        g.advance(1000.0);
        assert_eq!(g.player, start);
        assert!(g.held_keys.is_empty());
        let mut g = Game::new(7, 1280, 720, Screen::Menu);
        g.handle(Event::Focus(true), 0.0);
        key(&mut g, "w", true, 0.0);
        g.advance(1000.0);
        assert_eq!(g.player, start);
    }

    #[test]
    fn focus_loss_lets_go_of_keys() {
        let mut g = playing();
        key(&mut g, "w", true, 0.0);
        g.handle(Event::Focus(false), 100.0);
        let p = g.player;
        g.advance(1000.0);
        assert_eq!(g.player, p);
        assert!(g.held_keys.is_empty());
        assert!(!g.focused);
    }

    #[test]
    fn keymap_sync_drops_keys_released_elsewhere() {
        let mut g = playing();
        key(&mut g, "Alt_L", true, 0.0);
        key(&mut g, "w", true, 0.0);
        g.handle(Event::KeysDown(vec!["w".into()]), 10.0);
        assert_eq!(
            g.held_keys.iter().cloned().collect::<Vec<_>>(),
            vec!["w".to_string()]
        );
        assert_eq!(g.key_events["Alt_L"].release, 0, "not a real transition");
    }

    #[test]
    fn collecting_a_coin_counts_coin_and_gold() {
        let mut g = playing();
        let c = g.zone_coins[0];
        g.player = (c.x, c.y + 30.0);
        g.advance(16.0);
        assert_eq!(g.coins, 1);
        assert_eq!(g.gold, START_GOLD + 10);
        assert!(g.zone_coins[0].taken);
        g.advance(32.0);
        assert_eq!(g.coins, 1);
    }

    #[test]
    fn collecting_every_coin_changes_zone() {
        let mut g = playing();
        let before = g.zone_coins.clone();
        let mut t = 0.0;
        for c in before.clone() {
            g.player = (c.x, c.y);
            t += 16.0;
            g.advance(t);
        }
        assert_eq!(g.coins, COINS_PER_ZONE as u64);
        assert_eq!(g.zone, 2);
        assert_eq!(g.scene_changes, 1);
        assert_ne!(g.zone_coins, before);
        assert_eq!(g.coins_left_in_zone(), COINS_PER_ZONE);
    }

    #[test]
    fn hazard_costs_ten_health_per_second() {
        let mut g = playing();
        let h = g.hazards[0];
        g.player = (h.x, h.y);
        g.advance(1000.0);
        assert!((g.health - 90.0).abs() < 1e-6, "health {}", g.health);
    }

    #[test]
    fn button_needs_hover_before_press() {
        // FR-ACT-005: an instantaneous click without hover is dropped.
        let mut g = Game::new(1, 1280, 720, Screen::Menu);
        g.handle(Event::Focus(true), 0.0);
        click(&mut g, ButtonId::Play, 100.0, 10.0, 60.0);
        assert_eq!(g.screen, Screen::Menu);
        assert_eq!(g.dropped_clicks, 1);
        click(&mut g, ButtonId::Play, 1000.0, 120.0, 60.0);
        assert_eq!(g.screen, Screen::Play);
        assert_eq!(g.clicks.get("Play"), Some(&1));
    }

    #[test]
    fn zero_duration_press_is_debounced() {
        // FR-ACT-005: input code that debounces discards a zero-duration press.
        let mut g = Game::new(1, 1280, 720, Screen::Menu);
        g.handle(Event::Focus(true), 0.0);
        click(&mut g, ButtonId::Options, 100.0, 200.0, 0.0);
        assert_eq!(g.screen, Screen::Menu);
        assert_eq!(g.dropped_clicks, 1);
        click(&mut g, ButtonId::Options, 1000.0, 200.0, 40.0);
        assert_eq!(g.screen, Screen::Options);
    }

    #[test]
    fn shop_spends_gold_on_yes_only() {
        let mut g = playing();
        click(&mut g, ButtonId::HudShop, 0.0, 100.0, 50.0);
        assert_eq!(g.screen, Screen::Confirm);
        click(&mut g, ButtonId::No, 500.0, 100.0, 50.0);
        assert_eq!(g.screen, Screen::Play);
        assert_eq!(g.gold, START_GOLD);
        click(&mut g, ButtonId::HudShop, 1000.0, 100.0, 50.0);
        click(&mut g, ButtonId::Yes, 1500.0, 100.0, 50.0);
        assert_eq!(g.gold, START_GOLD - SHOP_PRICE);
        assert_eq!(g.screen, Screen::Play);
    }

    #[test]
    fn escape_pauses_and_resumes() {
        let mut g = playing();
        key(&mut g, "Escape", true, 0.0);
        assert_eq!(g.screen, Screen::Pause);
        key(&mut g, "Escape", false, 50.0);
        key(&mut g, "Escape", true, 100.0);
        assert_eq!(g.screen, Screen::Play);
    }

    #[test]
    fn relative_motion_turns_camera_and_jumps_are_ignored() {
        let mut g = playing();
        g.handle(Event::Enter { x: 640, y: 360 }, 0.0);
        g.handle(Event::Motion { x: 660, y: 360 }, 10.0);
        assert!((g.yaw_deg - 5.0).abs() < 1e-9);
        g.handle(Event::Motion { x: 660, y: 350 }, 20.0);
        assert!((g.pitch_deg - 2.5).abs() < 1e-9);
        // An absolute warp far away does not turn the camera.
        g.handle(Event::Motion { x: 300, y: 200 }, 30.0);
        assert!((g.yaw_deg - 5.0).abs() < 1e-9);
        assert_eq!(g.ignored_jumps, 1);
        assert_eq!(g.camera_motion_events, 2);
        // Motion continues relative to the new position.
        g.handle(Event::Motion { x: 296, y: 200 }, 40.0);
        assert!((g.yaw_deg - 4.0).abs() < 1e-9);
    }

    #[test]
    fn pointer_near_edge_is_warped_and_the_warp_is_not_motion() {
        let mut g = playing();
        g.handle(Event::Enter { x: 100, y: 360 }, 0.0);
        let fx = g.handle(Event::Motion { x: 70, y: 360 }, 10.0);
        assert!(fx.is_empty());
        let fx = g.handle(Event::Motion { x: 50, y: 360 }, 20.0);
        assert_eq!(fx, vec![Effect::WarpPointer { x: 640, y: 360 }]);
        let yaw = g.yaw_deg;
        g.handle(Event::Motion { x: 640, y: 360 }, 25.0);
        assert_eq!(g.yaw_deg, yaw);
        assert_eq!(g.ignored_jumps, 0);
        g.handle(Event::Motion { x: 650, y: 360 }, 30.0);
        assert!((g.yaw_deg - (yaw + 2.5)).abs() < 1e-9);
        // A jump to the edge is not camera motion, but the pointer is still brought back.
        let fx = g.handle(Event::Motion { x: 1260, y: 360 }, 40.0);
        assert_eq!(fx, vec![Effect::WarpPointer { x: 640, y: 360 }]);
        assert_eq!(g.ignored_jumps, 1);
        assert!((g.yaw_deg - (yaw + 2.5)).abs() < 1e-9);
    }

    #[test]
    fn pitch_is_clamped() {
        let mut g = playing();
        g.handle(Event::Enter { x: 640, y: 600 }, 0.0);
        let mut y = 600;
        for i in 0..20 {
            y -= 20;
            g.handle(Event::Motion { x: 640, y }, f64::from(i));
        }
        assert_eq!(g.pitch_deg, PITCH_LIMIT);
    }
}
