//! The values of command-line options and settings: sizes, fractions,
//! durations and on/off, with the errors that name what is accepted.

/// A size: plain bytes (`8388608`) or with a unit, binary (`8MiB`,
/// `8 MiB`, `512KiB`) or decimal (`4MB`, `4M` = 4,000,000), as IEC units
/// and the parse-size crate have them.
///
/// Errors: anything else, with an example of what is accepted.
pub fn parse_bytes(v: &str) -> Result<u64, String> {
    parse_size::parse_size(v.trim())
        .map_err(|e| format!("{v:?} is not a size ({e}); write e.g. 8388608, 8MiB or 512KiB"))
}

/// A fraction from 0 to 1 (`0.25`).
///
/// Errors: anything else.
pub fn parse_ratio(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{v:?} is not a number from 0 to 1")),
    }
}

/// `--cache-object-max`: a size of at most 1 MiB (one READ).
pub(crate) fn parse_cache_object_max(v: &str) -> Result<u64, String> {
    match parse_bytes(v)? {
        n if n <= 1 << 20 => Ok(n),
        n => Err(format!("{n} bytes is over 1MiB, the most one READ brings")),
    }
}

/// A duration as humantime reads it: `7d`, `12h`, `30m`, `2s`, `1h 30m`;
/// plain digits are seconds.
///
/// Errors: anything else, or zero.
pub fn parse_duration(v: &str) -> Result<std::time::Duration, String> {
    // Plain digits are seconds, as the settings read before units.
    if let Ok(secs) = v.trim().parse::<u64>() {
        return match secs {
            0 => Err(format!("{v:?}: the duration must be more than zero")),
            n => Ok(std::time::Duration::from_secs(n)),
        };
    }
    match humantime::parse_duration(v.trim()) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!("{v:?}: the duration must be more than zero")),
        Err(e) => Err(format!("{v:?} is not a duration ({e}); write e.g. 7d, 12h or 30m")),
    }
}

/// [`parse_bytes`] for a value that must fit in 32 bits.
///
/// Errors: as [`parse_bytes`], or a size of 4 GiB or more.
pub fn parse_bytes_u32(v: &str) -> Result<u32, String> {
    let n = parse_bytes(v)?;
    u32::try_from(n).map_err(|_| format!("{v:?} is too large (at most 4GiB - 1)"))
}

/// `on`/`off` (also `true`/`false`, `yes`/`no`, `1`/`0`).
///
/// Errors: any other value, with the accepted ones named.
pub fn parse_on_off(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        other => Err(format!("{other:?} is not on or off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_units() {
        assert_eq!(parse_bytes("8388608"), Ok(8 << 20));
        assert_eq!(parse_bytes("8MiB"), Ok(8 << 20));
        assert_eq!(parse_bytes("8 MiB"), Ok(8 << 20));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("8M"), Ok(8_000_000));
        assert_eq!(parse_bytes("4MB"), Ok(4_000_000));
        assert!(parse_bytes("eight").unwrap_err().contains("8MiB"));
        assert!(parse_bytes("-1").is_err());
        assert_eq!(parse_bytes_u32("8MiB"), Ok(8 << 20));
        assert!(parse_bytes_u32("4GiB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("7d"), Ok(std::time::Duration::from_secs(7 * 86400)));
        assert_eq!(parse_duration("1h 30m"), Ok(std::time::Duration::from_secs(5400)));
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("30"), Ok(std::time::Duration::from_secs(30)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("7d"));
    }
}
