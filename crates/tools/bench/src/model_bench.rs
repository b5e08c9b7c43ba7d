//! `gamepilot bench model`'s measuring loop (FR-CTX-002, NFR-MODEL-001): consecutive
//! tactical calls as `run` makes them — the demo's goal and plan, observations of consecutive real
//! frames in `run`'s order, each prompt extending the last one sent — timed against a real host.

use crate::BenchError;
use gamepilot_core::{ElementId, MonoTime, Size};
use gamepilot_model::{CancelToken, ChatRequest, HostClient};
use gamepilot_session::bench_context::{BenchContext, DEMO_GOAL, DEMO_SUBGOAL};
use gamepilot_session::relevance::Focus;
use gamepilot_session::{tactical_schema, ObservationText, SchemaLimits};
use std::time::{Duration, Instant};

/// What the calls observe: perceived frames, cycled in order, or the three-mark synthetic one
/// (the observation the first tactical-latency figures were measured on).
pub enum BenchScene {
    Frames(Vec<(gamepilot_vision::Observation, Size)>),
    Synthetic,
}

/// The figures of one run; times in milliseconds, per warm call (the first, cold call apart).
#[derive(Debug, Default)]
pub struct BenchFigures {
    pub first_ms: f64,
    pub retries: u32,
    pub wall_ms: Vec<f64>,
    pub prompt_ms: Vec<f64>,
    pub predicted_ms: Vec<f64>,
    pub evaluated: Vec<f64>,
    pub completion: Vec<f64>,
    pub cached_tokens: u64,
    pub prompt_tokens: u64,
    /// Warm calls whose prompt began a new baseline (nothing to extend).
    pub baselines: u32,
    pub last_reply: String,
}

impl BenchFigures {
    /// Prompt tokens the host served from its prefix cache, over warm calls.
    pub fn cache_ratio(&self) -> f64 {
        if self.prompt_tokens == 0 {
            f64::NAN
        } else {
            self.cached_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

/// The frame of call `i` over `n` frames walked there and back (0 1 2 1 0 1 …): consecutive calls see
/// neighbouring frames, as a walking avatar's ticks do, never a jump from the last to the first.
pub fn ping_pong(i: usize, n: usize) -> usize {
    if n < 2 {
        return 0;
    }
    let k = i % (2 * n - 2);
    if k < n {
        k
    } else {
        2 * n - 2 - k
    }
}

/// Makes `calls` tactical calls, 500 ms of session time apart.
pub fn measure(
    client: &HostClient,
    model_name: &str,
    scene: &BenchScene,
    calls: usize,
    max_tokens: u32,
    context_tokens: u32,
) -> Result<BenchFigures, BenchError> {
    let focus = Focus::new(DEMO_GOAL, DEMO_SUBGOAL);
    let mut ctx = BenchContext::for_scene(matches!(scene, BenchScene::Synthetic), context_tokens)?;
    let cancel = CancelToken::new();
    let mut f = BenchFigures::default();
    for i in 0..calls {
        let now = MonoTime::from_millis(500 * (i as u64 + 1));
        let (text, marks, capture) = match scene {
            BenchScene::Frames(frames) if !frames.is_empty() => {
                let (obs, size) = &frames[ping_pong(i, frames.len())];
                let text = crate::eval::text_for_model(obs, &focus, &Default::default());
                (text, obs.elements.iter().map(|e| e.id).collect(), *size)
            }
            _ => {
                let marks: Vec<ElementId> = [3u32, 7, 11 + (i as u32 % 3)]
                    .into_iter()
                    .map(ElementId)
                    .collect();
                let text = format!(
                    "window 1280x720\nmarks: [3] door (1180,300 60x140); [7] player ({},520 32x48); [{}] coin\nsensors: hp=100 coins={}",
                    200 + i * 10,
                    marks[2].0,
                    i / 2
                );
                (text, marks, Size::new(1280, 720))
            }
        };
        let obs = ObservationText::new(now, text);
        let schema = tactical_schema(ctx.tools(), &marks, capture, &SchemaLimits::default())?;
        let (prompt, baseline) = ctx.prompt(&obs);
        let req = ChatRequest::from_prompt(model_name, &prompt, max_tokens);
        let t = Instant::now();
        let r = client.chat_structured(&req, &schema, &cancel)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        f.retries += r.attempts - 1;
        let timings = &r.reply.timings;
        if i == 0 {
            f.first_ms = ms;
        } else {
            f.wall_ms.push(ms);
            f.cached_tokens += timings.cached_tokens.unwrap_or(0);
            f.prompt_tokens += timings.prompt_tokens.unwrap_or(0);
            f.baselines += baseline as u32;
        }
        f.prompt_ms.extend(timings.prompt_ms);
        f.predicted_ms.extend(timings.predicted_ms);
        f.evaluated.extend(timings.prompt_evaluated.map(|n| n as f64));
        f.completion.extend(timings.completion_tokens.map(|n| n as f64));
        f.last_reply = r.value.to_string();
        ctx.answered(now.plus(Duration::from_millis(100)), &r.value.to_string(), obs);
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ping_pong_walks_there_and_back() {
        let seen: Vec<usize> = (0..8).map(|i| super::ping_pong(i, 3)).collect();
        assert_eq!(seen, vec![0, 1, 2, 1, 0, 1, 2, 1]);
        assert_eq!(super::ping_pong(5, 1), 0);
    }
}
