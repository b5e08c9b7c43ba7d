//! Benchmarks of the practice game's software renderer: one full 1280x720 frame per screen (the game must
//! redraw well inside a 60 Hz tick while the player moves).

use criterion::{criterion_group, criterion_main, Criterion};
use practice_arena::game::{Event, Game, Screen};
use practice_arena::render::{draw, view_key, Canvas, Fonts, FONT_DIR};
use std::path::Path;

fn bench(c: &mut Criterion) {
    let Ok(fonts) = Fonts::load(Path::new(FONT_DIR)) else {
        eprintln!("DejaVu fonts missing; skipping render benchmarks");
        return;
    };
    let mut canvas = Canvas::new(1280, 720);
    for screen in [Screen::Menu, Screen::Play, Screen::Pause] {
        let mut g = Game::new(7, 1280, 720, screen);
        g.handle(Event::Focus(true), 0.0);
        c.bench_function(&format!("draw_{}_1280x720", screen.name()), |b| {
            b.iter(|| draw(&mut canvas, &fonts, &g))
        });
    }
    let g = Game::new(7, 1280, 720, Screen::Play);
    c.bench_function("view_key_play", |b| b.iter(|| view_key(&g)));
}

criterion_group!(benches, bench);
criterion_main!(benches);
