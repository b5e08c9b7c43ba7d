//! IO edge for X11: window listing, capture, focus queries, the single XTest input sink, server key state.
//!
//! Thin by design: logic lives in the pure crates; this crate turns X11 into `Frame`s and
//! `TransformChain`s, and turns executor output into XTest events in exactly one place (`input.rs`,
//! FR-ACT-008).

pub mod capture;
pub mod confirm;
pub mod conn;
pub mod error;
pub mod family;
pub mod focus;
pub mod indicator;
pub mod input;
pub mod tracking;
pub mod userinput;
pub mod windows;

pub use capture::WindowCapturer;
pub use conn::{Extensions, X11};
pub use error::X11Error;
pub use family::FamilyMember;
pub use windows::{WindowInfo, WindowSelector};
