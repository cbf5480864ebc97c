//! Sizes and durations in words, as every message of the host writes them
//! (`64 MiB`, `30 s`).

use std::time::Duration;

/// `64 MiB`, `2 KiB`, `2000 bytes`: exact, in the largest whole unit.
pub fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = KIB * 1024;
    match bytes {
        b if b >= MIB && b.is_multiple_of(MIB) => format!("{} MiB", b / MIB),
        b if b >= KIB && b.is_multiple_of(KIB) => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// `30 s`, `250 ms` (to the nearest millisecond).
pub fn duration(d: Duration) -> String {
    let ms = (d.as_micros() + 500) / 1000;
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_well() {
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(100 << 20), "100 MiB");
        assert_eq!(size(1536), "1536 bytes");
        assert_eq!(size((1 << 20) + 1), "1048577 bytes");
        assert_eq!(size(3 << 19), "1536 KiB");
        assert_eq!(size(12), "12 bytes");
        assert_eq!(duration(Duration::from_secs(30)), "30 s");
        assert_eq!(duration(Duration::from_millis(250)), "250 ms");
    }
}
