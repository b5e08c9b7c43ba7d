//! Mapping X server time stamps (ms, u32, wrapping) onto the game's own clock (ms since start), so that
//! input durations are measured by when events happened, not by when the game got round to reading them.

/// Learns the offset between server time and local time from the events themselves.
#[derive(Debug, Default, Clone)]
pub struct ServerClock {
    /// max(server - local) seen so far: the offset of the least-delayed event.
    offset: Option<i64>,
    last_raw: Option<u32>,
    epoch: i64,
}

impl ServerClock {
    /// The local time (ms since start) at which an event stamped `server` happened, given that it was read
    /// at `now_ms`. Never later than `now_ms`.
    pub fn local_ms(&mut self, server: u32, now_ms: f64) -> f64 {
        if let Some(last) = self.last_raw {
            if server < last && last - server > u32::MAX / 2 {
                self.epoch += 1i64 << 32;
            }
        }
        self.last_raw = Some(server);
        let unwrapped = self.epoch + i64::from(server);
        let now = now_ms.floor() as i64;
        let candidate = unwrapped - now;
        let offset = match self.offset {
            Some(o) if o >= candidate => o,
            _ => candidate,
        };
        self.offset = Some(offset);
        ((unwrapped - offset) as f64).min(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delayed_reads_keep_the_true_interval() {
        let mut c = ServerClock::default();
        // Press at server 5000 read promptly at local 100; release at server 6000 read 40 ms late.
        let press = c.local_ms(5000, 100.0);
        let release = c.local_ms(6000, 1140.0);
        assert_eq!(release - press, 1000.0);
    }

    #[test]
    fn wraparound_is_continuous() {
        let mut c = ServerClock::default();
        let a = c.local_ms(u32::MAX - 10, 50.0);
        let b = c.local_ms(9, 70.0);
        assert_eq!(b - a, 20.0);
    }

    #[test]
    fn never_in_the_future() {
        let mut c = ServerClock::default();
        c.local_ms(1000, 500.0);
        // A clock skew would put this event after now: it is clamped.
        assert!(c.local_ms(1200, 600.0) <= 600.0);
    }
}
