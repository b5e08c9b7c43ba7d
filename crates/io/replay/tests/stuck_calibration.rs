//! The shipped no-progress thresholds against the committed corpus of recorded sessions (FR-LOOP-005):
//! the calibration of docs/stuck-thresholds.md is rerun over corpus/sessions and the defaults must still
//! satisfy its criterion, so a change to the thresholds or to the corpus that breaks the justification
//! fails here. `GAMEPILOT_CALIBRATION_PRINT=1` prints the figures.

// Test helpers outside #[test] functions may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_planner::SignalConfig;
use gamepilot_replay::stuck::{self, Calibration, LabelRule, Timeline};
use gamepilot_replay::{replay, Recording};
use std::path::PathBuf;

fn corpus() -> Vec<(Recording, Timeline)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../corpus/sessions");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("events.jsonl").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let rec = Recording::open(&d).unwrap();
            let tl = stuck::timeline(&rec).unwrap();
            (rec, tl)
        })
        .collect()
}

fn calibration() -> Calibration {
    let timelines: Vec<Timeline> = corpus().into_iter().map(|(_, t)| t).collect();
    let c = stuck::calibrate(&timelines, SignalConfig::default(), &LabelRule::default());
    if std::env::var_os("GAMEPILOT_CALIBRATION_PRINT").is_some() {
        println!("{}", serde_json::to_string_pretty(&c).unwrap());
    }
    c
}

#[test]
fn corpus_is_real_sessions_that_replay() {
    // FR-LOOP-005 (the corpus the thresholds are justified on), INV-CTX-002 (recordings replay)
    let corpus = corpus();
    assert!(corpus.len() >= 4, "the corpus holds {} sessions", corpus.len());
    let mut progress = 0;
    let mut stretches = 0;
    for (rec, tl) in &corpus {
        let out = replay(rec).unwrap();
        assert!(out.matches(), "{}: {:?}", tl.name, out.divergences.first());
        assert!(tl.inputs.len() > 100, "{}: too short", tl.name);
        progress += tl.progress.len();
        stretches += stuck::stretches(tl, &LabelRule::default()).len();
    }
    // the corpus must hold both kinds of moment, or the criterion is vacuous
    assert!(progress >= 10, "only {progress} progress events");
    assert!(stretches >= 4, "only {stretches} stuck stretches");
}

#[test]
fn shipped_thresholds_meet_the_criterion_on_the_corpus() {
    // FR-LOOP-005 (thresholds justified from recorded sessions, docs/stuck-thresholds.md)
    let c = calibration();
    for sig in &c.signals {
        let current = sig.scores.iter().find(|s| s.is_current()).unwrap();
        // the shipped threshold never fires while the agent is progressing, with the safety margin
        assert_eq!(
            current.false_positives, 0,
            "{:?}: the default fires {} times while progressing",
            sig.signal, current.false_positives
        );
        assert!(
            current.margin_ok(),
            "{:?}: the default {} is within {}x of {} seen while progressing",
            sig.signal,
            current.threshold,
            stuck::MARGIN,
            current.progressing_max
        );
        // and it is the candidate the criterion picks (none detects more stuck stretches, or as many sooner)
        let chosen = stuck::choose(&sig.scores).unwrap();
        assert!(
            chosen.is_current(),
            "{:?}: the criterion picks {} ({} of {} stretches, median delay {} ms), not the default ({}, {} ms)",
            sig.signal,
            chosen.name,
            chosen.detected,
            chosen.stretches,
            chosen.delay_ms.p50,
            current.detected,
            current.delay_ms.p50
        );
    }
    // every signal was measured in stuck moments of the corpus
    for s in stuck::SIGNALS {
        let sig = c.signals.iter().find(|x| x.signal == s).unwrap();
        assert!(sig.stuck.n > 0, "{s:?} never measured in a stuck moment");
    }
}
