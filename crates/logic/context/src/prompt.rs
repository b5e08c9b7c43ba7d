//! The assembled prompt as plain values: messages made of numbered blocks, the image always last.

use serde::Serialize;
use std::fmt::Write as _;

/// The cadence a prompt is assembled for; each has its own invariant system block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cadence {
    Tactical,
    Deliberative,
}

impl Cadence {
    pub fn name(self) -> &'static str {
        match self {
            Cadence::Tactical => "tactical",
            Cadence::Deliberative => "deliberative",
        }
    }
}

/// The eight blocks of context-and-research.md, in their fixed order (FR-CTX-001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    /// [1] System prompt, tool schemas, safety framing — invariant for the session.
    System = 1,
    /// [2] Goal — invariant for the session.
    Goal = 2,
    /// [3] Note block — appended by the agent through the note skill.
    Notes = 3,
    /// [4] Research excerpts — appended, delimited, untrusted.
    Research = 4,
    /// [5] Current plan and subgoal — changes on replan.
    Plan = 5,
    /// [6] Recent action history, as text — changes per tick.
    History = 6,
    /// [7] Current observation, as text (and earlier ones, as text) — changes per tick.
    Observation = 7,
    /// [8] The annotated image — LAST, always.
    Image = 8,
}

impl Block {
    pub fn number(self) -> u8 {
        self as u8
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
}

/// An encoded image ready for a host (PNG/JPEG bytes as base64); the context never decodes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImagePart {
    pub mime: String,
    pub width: u32,
    pub height: u32,
    pub data_base64: String,
}

impl ImagePart {
    /// The `data:` URL form OpenAI-compatible hosts take in `image_url`.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.data_base64)
    }
}

/// One piece of a message: a block's text, or the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text { block: Block, text: String },
    Image { image: ImagePart },
}

impl Part {
    pub fn block(&self) -> Block {
        match self {
            Part::Text { block, .. } => *block,
            Part::Image { .. } => Block::Image,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    /// The message's text parts joined the way hosts receive them when no image is attached.
    pub fn joined_text(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let Part::Text { text, .. } = p {
                if !out.is_empty() {
                    out.push_str("\n\n");
                }
                out.push_str(text);
            }
        }
        out
    }

    pub fn image(&self) -> Option<&ImagePart> {
        self.parts.iter().find_map(|p| match p {
            Part::Image { image } => Some(image),
            Part::Text { .. } => None,
        })
    }
}

/// The assembled prompt: a system message (block 1) and a user message (blocks 2..8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prompt {
    pub cadence: Cadence,
    pub messages: Vec<Message>,
}

impl Prompt {
    /// Blocks in emission order, across messages.
    pub fn block_order(&self) -> Vec<Block> {
        self.messages
            .iter()
            .flat_map(|m| m.parts.iter().map(Part::block))
            .collect()
    }

    /// The text of one block, if present.
    pub fn block_text(&self, block: Block) -> Option<&str> {
        self.messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .find_map(|p| match p {
                Part::Text { block: b, text } if *b == block => Some(text.as_str()),
                _ => None,
            })
    }

    /// The part of the prompt that stays the same for the whole session: blocks 1 and 2 (the system
    /// block and the goal, FR-CTX-002). The later blocks change with the first note, plan or action, so
    /// a host that evaluates them ahead of a call evaluates them for nothing once they change.
    pub fn invariant(&self) -> Prompt {
        let messages = self
            .messages
            .iter()
            .map(|m| Message {
                role: m.role,
                parts: m
                    .parts
                    .iter()
                    .filter(|p| p.block() <= Block::Goal)
                    .cloned()
                    .collect(),
            })
            .filter(|m| !m.parts.is_empty())
            .collect();
        Prompt {
            cadence: self.cadence,
            messages,
        }
    }

    /// The image, if one is attached (always the final part).
    pub fn image(&self) -> Option<&ImagePart> {
        self.messages.iter().find_map(Message::image)
    }

    /// A canonical, human-readable rendering, in emission order: what snapshots and recordings show.
    /// The image appears as a one-line placeholder (size and encoded length), never as bytes.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for m in &self.messages {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
            };
            let _ = writeln!(out, "=== {role} ===");
            for p in &m.parts {
                match p {
                    Part::Text { block, text } => {
                        let _ = writeln!(out, "--- [{}] {:?} ---", block.number(), block);
                        out.push_str(text);
                        if !text.ends_with('\n') {
                            out.push('\n');
                        }
                    }
                    Part::Image { image } => {
                        let _ = writeln!(out, "--- [8] Image ---");
                        let _ = writeln!(
                            out,
                            "<image {} {}x{}, {} base64 bytes>",
                            image.mime,
                            image.width,
                            image.height,
                            image.data_base64.len()
                        );
                    }
                }
            }
        }
        out
    }

    /// A rough token estimate (bytes / `bytes_per_token`, plus the image's budgeted tokens); the host's
    /// own count, when reported, is better and replaces it.
    pub fn estimate_tokens(&self, bytes_per_token: f32, image_tokens: u32) -> u32 {
        let bytes: usize = self
            .messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .map(|p| match p {
                Part::Text { text, .. } => text.len(),
                Part::Image { .. } => 0,
            })
            .sum();
        let per = if bytes_per_token > 0.0 {
            bytes_per_token
        } else {
            4.0
        };
        let text = (bytes as f32 / per).ceil() as u32;
        text + if self.image().is_some() { image_tokens } else { 0 }
    }
}
