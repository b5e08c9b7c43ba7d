//! The context `gamepilot bench model` drives: the demo's goal and plan, and
//! consecutive tactical ticks kept as `run`'s session keeps them — each prompt extending the last one
//! sent, each reply entering the history, each observation ending its tick. No IO: the caller asks the host.

use gamepilot_context::{
    Context, ContextConfig, ContextError, HistoryEntry, ObservationText, PlanBlock, PlanStep, Prompt,
    StepStatus, ToolSet,
};
use gamepilot_core::MonoTime;

pub const DEMO_GOAL: &str = "Start the game from the menu (click Play), then walk around and collect a coin.";
pub const DEMO_SUBGOAL: &str = "Collect a coin";
const SYNTHETIC_GOAL: &str = "Reach the exit door at the right end of the level.";
const SYNTHETIC_SUBGOAL: &str = "Walk right along the corridor";

/// One benchmark session's context and tools.
pub struct BenchContext {
    context: Context,
    tools: ToolSet,
}

impl BenchContext {
    /// The demo's goal and plan with `run`'s tools by mark; `synthetic`: the three-mark corridor (the
    /// first tactical-latency figures' observation) with every tool.
    pub fn for_scene(synthetic: bool, context_tokens: u32) -> Result<Self, ContextError> {
        let (tools, goal, subgoal, next) = if synthetic {
            (
                ToolSet::all(),
                SYNTHETIC_GOAL,
                SYNTHETIC_SUBGOAL,
                "Open the exit door",
            )
        } else {
            (
                ToolSet::new(&crate::tools_for_path(
                    Some(gamepilot_grounding::GroundingPath::Mark),
                    false,
                ))?,
                DEMO_GOAL,
                DEMO_SUBGOAL,
                "Keep collecting coins",
            )
        };
        let config = ContextConfig {
            context_tokens,
            ..ContextConfig::default()
        };
        let mut context = Context::new(config, &tools, goal, MonoTime::ZERO)?;
        context.set_plan(PlanBlock {
            steps: vec![
                PlanStep::new(subgoal, StepStatus::Active),
                PlanStep::new(next, StepStatus::Pending),
            ],
            subgoal: Some(subgoal.into()),
        });
        Ok(BenchContext { context, tools })
    }

    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// The tick's tactical prompt, committed as sent; true when it began a new baseline.
    pub fn prompt(&mut self, observation: &ObservationText) -> (Prompt, bool) {
        let (prompt, tail) = self.context.assemble_tactical(observation, None);
        let baseline = tail.is_baseline();
        self.context.commit_tactical(tail);
        (prompt, baseline)
    }

    /// The reply enters the history at `at` (left inconclusive: nothing is executed) and the tick ends.
    pub fn answered(&mut self, at: MonoTime, reply: &str, observation: ObservationText) {
        self.context.record(HistoryEntry::new(at, reply, "inconclusive"));
        self.context.end_tick(observation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_bench_ticks_extend_one_another() {
        // FR-CTX-002: the benchmark measures the prompts `run` sends, baseline then tail
        let mut b = BenchContext::for_scene(false, 4096).unwrap();
        let obs = |ms, x| {
            ObservationText::new(
                MonoTime::from_millis(ms),
                format!("frame 1280x720 (motion)\n[3] button \"Shop\" at 1130,96\n[7] component yellow round at {x},400"),
            )
        };
        let (first, baseline) = b.prompt(&obs(500, 100));
        assert!(baseline);
        b.answered(
            MonoTime::from_millis(600),
            r#"{"action":"click_mark","mark":7}"#,
            obs(500, 100),
        );
        let (second, baseline) = b.prompt(&obs(1_000, 140));
        assert!(!baseline);
        let (a, s) = (first.messages[1].joined_text(), second.messages[1].joined_text());
        assert!(s.starts_with(&a));
        assert!(s.ends_with("- seen: [7] now at 140,400"), "{s}");
    }
}
