//! The degrade ladder (FR-MODEL-004), pure: graphics-memory samples in, at most one command out per
//! sample. Rungs in order: smaller context, then smaller visual budget, then the deliberative model off
//! the GPU. Stepping down needs the low condition to persist for `confirm_samples` samples and a
//! `cooldown` since the last step (so one step's effect shows before the next); stepping back up needs
//! free memory above a higher threshold (hysteresis) for as long.

use crate::gpu::GpuMemory;
use gamepilot_core::MonoTime;
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DegradeLevel {
    Normal = 0,
    ReducedContext = 1,
    ReducedVisual = 2,
    DeliberativeOffGpu = 3,
}

impl DegradeLevel {
    fn down(self) -> Option<DegradeLevel> {
        match self {
            DegradeLevel::Normal => Some(DegradeLevel::ReducedContext),
            DegradeLevel::ReducedContext => Some(DegradeLevel::ReducedVisual),
            DegradeLevel::ReducedVisual => Some(DegradeLevel::DeliberativeOffGpu),
            DegradeLevel::DeliberativeOffGpu => None,
        }
    }

    fn up(self) -> Option<DegradeLevel> {
        match self {
            DegradeLevel::Normal => None,
            DegradeLevel::ReducedContext => Some(DegradeLevel::Normal),
            DegradeLevel::ReducedVisual => Some(DegradeLevel::ReducedContext),
            DegradeLevel::DeliberativeOffGpu => Some(DegradeLevel::ReducedVisual),
        }
    }
}

/// What the session must do; the caller applies it (restart a host, change the budget).
pub use gamepilot_core::DegradeCommand;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LadderConfig {
    /// Step down while free memory is below this many bytes...
    pub degrade_below_free_bytes: u64,
    /// ...and back up once it is above this (must be higher: hysteresis).
    pub recover_above_free_bytes: u64,
    pub confirm_samples: u32,
    pub cooldown: Duration,
    pub normal_context_tokens: u32,
    pub reduced_context_tokens: u32,
    pub reduced_visual_factor: f64,
}

impl Default for LadderConfig {
    fn default() -> Self {
        LadderConfig {
            degrade_below_free_bytes: 1 << 30,
            recover_above_free_bytes: 3 << 30,
            confirm_samples: 3,
            cooldown: Duration::from_secs(5),
            normal_context_tokens: 8192,
            reduced_context_tokens: 4096,
            reduced_visual_factor: 0.5,
        }
    }
}

impl LadderConfig {
    /// The ladder for a host whose context is `host_tokens`: the normal context is the host's own (a
    /// restore never sets a context larger than the host has), the reduced one half of it (at least 512).
    pub fn for_context(host_tokens: u32) -> LadderConfig {
        let normal = host_tokens.max(1024);
        LadderConfig {
            normal_context_tokens: normal,
            reduced_context_tokens: (normal / 2).max(512),
            ..LadderConfig::default()
        }
    }
}

/// Which cadence a host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostRole {
    Tactical,
    Deliberative,
}

impl HostRole {
    pub fn as_str(self) -> &'static str {
        match self {
            HostRole::Tactical => "tactical",
            HostRole::Deliberative => "deliberative",
        }
    }
}

/// What a degrade step asks of a host gamepilot started: the shape to restart it as, or `None` when this
/// host stays as it is. `started` is how the host was first started: a context is never set larger than
/// that, and restoring the deliberative model to the GPU returns its started GPU layers. Context steps
/// apply to every started host (the memory is the KV cache each one allocated for its context); GPU steps
/// to the deliberative host only.
pub fn host_change(
    cmd: &DegradeCommand,
    role: HostRole,
    started: crate::HostShape,
    now: crate::HostShape,
) -> Option<crate::HostShape> {
    let next = match (cmd, role) {
        (DegradeCommand::ReduceContext { to_tokens } | DegradeCommand::RestoreContext { to_tokens }, _) => {
            crate::HostShape {
                ctx_size: (*to_tokens).min(started.ctx_size),
                ..now
            }
        }
        (DegradeCommand::MoveDeliberativeOffGpu, HostRole::Deliberative) => crate::HostShape {
            gpu_layers: Some(0),
            ..now
        },
        (DegradeCommand::RestoreDeliberativeGpu, HostRole::Deliberative) => crate::HostShape {
            gpu_layers: started.gpu_layers,
            ..now
        },
        _ => now,
    };
    (next != now).then_some(next)
}

#[derive(Debug, Clone)]
pub struct DegradeLadder {
    cfg: LadderConfig,
    level: DegradeLevel,
    low: u32,
    high: u32,
    last_step: Option<MonoTime>,
}

impl DegradeLadder {
    pub fn new(cfg: LadderConfig) -> Result<Self, crate::ModelError> {
        if cfg.recover_above_free_bytes <= cfg.degrade_below_free_bytes {
            return Err(crate::ModelError::Config(
                "degrade ladder: recover threshold must be above the degrade threshold".into(),
            ));
        }
        if cfg.reduced_context_tokens >= cfg.normal_context_tokens
            || !(cfg.reduced_visual_factor > 0.0 && cfg.reduced_visual_factor < 1.0)
        {
            return Err(crate::ModelError::Config(
                "degrade ladder: reduced context must be smaller and the visual factor in (0, 1)".into(),
            ));
        }
        Ok(DegradeLadder {
            cfg,
            level: DegradeLevel::Normal,
            low: 0,
            high: 0,
            last_step: None,
        })
    }

    pub fn level(&self) -> DegradeLevel {
        self.level
    }

    /// Feeds one sample taken at `now`; returns the command for the rung change, if any.
    pub fn observe(&mut self, m: GpuMemory, now: MonoTime) -> Option<DegradeCommand> {
        if m.free_bytes < self.cfg.degrade_below_free_bytes {
            self.low += 1;
            self.high = 0;
        } else if m.free_bytes > self.cfg.recover_above_free_bytes {
            self.high += 1;
            self.low = 0;
        } else {
            self.low = 0;
            self.high = 0;
        }
        let cooled = match self.last_step {
            Some(t) => now.since(t) >= self.cfg.cooldown,
            None => true,
        };
        if !cooled {
            return None;
        }
        if self.low >= self.cfg.confirm_samples {
            let next = self.level.down()?;
            return Some(self.step_to(next, now));
        }
        if self.high >= self.cfg.confirm_samples {
            let next = self.level.up()?;
            return Some(self.step_to(next, now));
        }
        None
    }

    fn step_to(&mut self, next: DegradeLevel, now: MonoTime) -> DegradeCommand {
        let from = self.level;
        self.level = next;
        self.low = 0;
        self.high = 0;
        self.last_step = Some(now);
        match (from, next) {
            (DegradeLevel::Normal, _) => DegradeCommand::ReduceContext {
                to_tokens: self.cfg.reduced_context_tokens,
            },
            (DegradeLevel::ReducedContext, DegradeLevel::ReducedVisual) => {
                DegradeCommand::ReduceVisualBudget {
                    factor: self.cfg.reduced_visual_factor,
                }
            }
            (DegradeLevel::ReducedVisual, DegradeLevel::DeliberativeOffGpu) => {
                DegradeCommand::MoveDeliberativeOffGpu
            }
            (DegradeLevel::DeliberativeOffGpu, _) => DegradeCommand::RestoreDeliberativeGpu,
            (DegradeLevel::ReducedVisual, _) => DegradeCommand::RestoreVisualBudget,
            (DegradeLevel::ReducedContext, _) => DegradeCommand::RestoreContext {
                to_tokens: self.cfg.normal_context_tokens,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostShape;

    #[test]
    fn each_step_reshapes_the_hosts_it_concerns_and_never_past_what_they_started_with() {
        // FR-MODEL-004: context reduction shrinks the running hosts' context, the deliberative model moves
        // off the GPU, and restoring never sets a context larger than the host has
        let started = HostShape {
            ctx_size: 4096,
            gpu_layers: None,
        };
        let c = LadderConfig::for_context(4096);
        assert_eq!((c.normal_context_tokens, c.reduced_context_tokens), (4096, 2048));
        assert!(DegradeLadder::new(c).is_ok());
        let reduce = DegradeCommand::ReduceContext { to_tokens: 2048 };
        let small = HostShape {
            ctx_size: 2048,
            gpu_layers: None,
        };
        assert_eq!(
            host_change(&reduce, HostRole::Tactical, started, started),
            Some(small)
        );
        assert_eq!(
            host_change(&reduce, HostRole::Deliberative, started, started),
            Some(small)
        );
        assert_eq!(
            host_change(&reduce, HostRole::Tactical, started, small),
            None,
            "already there"
        );
        let visual = DegradeCommand::ReduceVisualBudget { factor: 0.5 };
        assert_eq!(host_change(&visual, HostRole::Tactical, started, small), None);
        let off = DegradeCommand::MoveDeliberativeOffGpu;
        assert_eq!(host_change(&off, HostRole::Tactical, started, small), None);
        let cpu = HostShape {
            ctx_size: 2048,
            gpu_layers: Some(0),
        };
        assert_eq!(
            host_change(&off, HostRole::Deliberative, started, small),
            Some(cpu)
        );
        let back = DegradeCommand::RestoreDeliberativeGpu;
        assert_eq!(
            host_change(&back, HostRole::Deliberative, started, cpu),
            Some(small)
        );
        // A restore to 8192 on a host started with 4096 restores 4096.
        let restore = DegradeCommand::RestoreContext { to_tokens: 8192 };
        assert_eq!(
            host_change(&restore, HostRole::Tactical, started, small),
            Some(started)
        );
    }

    const GIB: u64 = 1 << 30;

    fn mem(free: u64) -> GpuMemory {
        GpuMemory {
            total_bytes: 24 * GIB,
            used_bytes: 24 * GIB - free,
            free_bytes: free,
        }
    }

    fn cfg() -> LadderConfig {
        LadderConfig {
            confirm_samples: 2,
            cooldown: Duration::from_millis(1000),
            ..LadderConfig::default()
        }
    }

    #[test]
    fn steps_down_in_order_and_back_up() {
        // FR-MODEL-004: context, then visual budget, then deliberative off the GPU
        let mut l = DegradeLadder::new(cfg()).unwrap();
        let mut out = Vec::new();
        for i in 0..40u64 {
            let free = if i < 30 { GIB / 4 } else { 8 * GIB };
            if let Some(c) = l.observe(mem(free), MonoTime::from_millis(i * 250)) {
                out.push((i, c));
            }
        }
        let cmds: Vec<DegradeCommand> = out.iter().map(|(_, c)| *c).collect();
        assert_eq!(
            cmds[..3],
            [
                DegradeCommand::ReduceContext { to_tokens: 4096 },
                DegradeCommand::ReduceVisualBudget { factor: 0.5 },
                DegradeCommand::MoveDeliberativeOffGpu,
            ]
        );
        // cooldown respected: steps at least 1 s (4 samples) apart
        assert!(out.windows(2).all(|w| w[1].0 - w[0].0 >= 4), "{out:?}");
        assert_eq!(
            cmds[3..],
            [
                DegradeCommand::RestoreDeliberativeGpu,
                DegradeCommand::RestoreVisualBudget,
                DegradeCommand::RestoreContext { to_tokens: 8192 },
            ]
        );
        assert_eq!(l.level(), DegradeLevel::Normal);
    }

    #[test]
    fn a_single_dip_does_nothing_and_hysteresis_holds() {
        // FR-MODEL-004: thresholds with confirmation; between thresholds nothing changes
        let mut l = DegradeLadder::new(cfg()).unwrap();
        assert_eq!(l.observe(mem(GIB / 2), MonoTime::from_millis(0)), None);
        assert_eq!(l.observe(mem(2 * GIB), MonoTime::from_millis(100)), None);
        assert_eq!(l.observe(mem(GIB / 2), MonoTime::from_millis(200)), None);
        assert_eq!(l.level(), DegradeLevel::Normal);
        assert!(l.observe(mem(GIB / 2), MonoTime::from_millis(300)).is_some());
        for i in 0..10 {
            assert_eq!(
                l.observe(mem(2 * GIB), MonoTime::from_millis(2000 + i * 500)),
                None
            );
        }
        assert_eq!(l.level(), DegradeLevel::ReducedContext);
        assert!(DegradeLadder::new(LadderConfig {
            recover_above_free_bytes: GIB,
            ..cfg()
        })
        .is_err());
    }
}
