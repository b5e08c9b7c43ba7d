//! Writing to the terminal without panicking: `println!` panics when the write fails, and a terminal that
//! closed (EIO, with SIGHUP on its way) or a reader that went away (EPIPE, `| tee` killed) must neither end
//! a session before its recording is finished nor change its exit code. A line that cannot be written is
//! dropped; the recording holds every fact the terminal shows.

use std::io::Write as _;

/// Writes `text` to standard output and flushes it; a failure is dropped.
pub fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|()| o.flush());
}

/// Writes `text` to standard error; a failure is dropped.
pub fn err(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `println!` that never panics (see [`out`]).
#[macro_export]
macro_rules! say {
    () => {
        $crate::console::out("\n")
    };
    ($($arg:tt)*) => {
        $crate::console::out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics (see [`err`]).
#[macro_export]
macro_rules! say_err {
    () => {
        $crate::console::err("\n")
    };
    ($($arg:tt)*) => {
        $crate::console::err(&format!("{}\n", format_args!($($arg)*)))
    };
}
