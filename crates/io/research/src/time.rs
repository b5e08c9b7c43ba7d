//! RFC 3339 UTC timestamps for retrieval times, computed here in the IO layer from the system clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats `t` as an RFC 3339 UTC timestamp with second precision, e.g. `2026-09-12T14:02:05Z`.
/// Times before the Unix epoch clamp to the epoch.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The current time as RFC 3339 UTC.
pub(crate) fn now_rfc3339() -> String {
    rfc3339_utc(SystemTime::now())
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        // FR-SKILL-005: retrieval time is stated in RFC 3339 UTC.
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339_utc(t), "2000-02-29T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_789_221_725); // 2026-09-12T14:02:05Z
        assert_eq!(rfc3339_utc(t), "2026-09-12T14:02:05Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_799); // 2099-12-31T23:59:59Z
        assert_eq!(rfc3339_utc(t), "2099-12-31T23:59:59Z");
    }
}
