//! The current plan and subgoal (block 5), as the reasoning loop hands it over.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Done,
    Active,
    Pending,
    Abandoned,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    pub text: String,
    pub status: StepStatus,
}

impl PlanStep {
    pub fn new(text: impl Into<String>, status: StepStatus) -> Self {
        PlanStep {
            text: text.into(),
            status,
        }
    }
}

/// The plan: ordered steps and the subgoal being pursued now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanBlock {
    pub steps: Vec<PlanStep>,
    pub subgoal: Option<String>,
}

impl PlanBlock {
    pub fn render(&self) -> String {
        let mut out = String::from("Plan:\n");
        if self.steps.is_empty() {
            out.push_str("(no plan yet)\n");
        }
        for (i, s) in self.steps.iter().enumerate() {
            let mark = match s.status {
                StepStatus::Done => "[x]",
                StepStatus::Active => "[>]",
                StepStatus::Pending => "[ ]",
                StepStatus::Abandoned => "[-]",
            };
            out.push_str(&format!("{}. {} {}\n", i + 1, mark, s.text));
        }
        match &self.subgoal {
            Some(g) => out.push_str(&format!("Current subgoal: {g}")),
            None => out.push_str("Current subgoal: (none)"),
        }
        out
    }

    /// Compaction: completed (and abandoned) steps collapse into one leading line.
    pub fn collapsed(&self) -> PlanBlock {
        let finished: Vec<&str> = self
            .steps
            .iter()
            .filter(|s| matches!(s.status, StepStatus::Done | StepStatus::Abandoned))
            .map(|s| s.text.as_str())
            .collect();
        if finished.len() <= 1 {
            return self.clone();
        }
        let mut steps = vec![PlanStep::new(
            format!("Done earlier: {}", finished.join("; ")),
            StepStatus::Done,
        )];
        steps.extend(
            self.steps
                .iter()
                .filter(|s| !matches!(s.status, StepStatus::Done | StepStatus::Abandoned))
                .cloned(),
        );
        PlanBlock {
            steps,
            subgoal: self.subgoal.clone(),
        }
    }
}
