//! Shared pure types of gamepilot: monotonic time as a value, geometry, the transform chain, frames and ids.
//!
//! Nothing here touches X11, threads, sockets or the clock; every other crate may depend on it.

pub mod action;
pub mod coords;
pub mod frame;
pub mod geometry;
pub mod ids;
pub mod keys;
pub mod time;
pub mod transform;
pub mod vocabulary;

pub use action::{Action, InputEvent, Intention, MouseButton};
pub use coords::{CoordConvention, CoordSpace, ModelFamily};
pub use frame::{Frame, FrameView, LayerRegion, PixelFormat, WindowLayer};
pub use geometry::{Point, Rect, Size};
pub use ids::{ActionId, ElementId, SubgoalId};
pub use keys::{Chord, KeyError, Keysym};
pub use time::MonoTime;
pub use transform::{ScreenPoint, TransformChain, TransformError};
pub use vocabulary::{
    DegradeCommand, FrameChange, FrameHealth, FrameProblem, HaltCause, Interlock, Safeguard, Verdict, Worker,
};
