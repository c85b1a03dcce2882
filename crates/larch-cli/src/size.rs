//! Byte sizes on the command line, read as people write them (parsing is the `parse-size`
//! crate's):
//!
//! - no unit: bytes (`4096`);
//! - `KB`, `MB`, `GB`, `TB` (any case): decimal, `2GB` = 2,000,000,000 bytes;
//! - `KiB`, `MiB`, `GiB`, `TiB` (or `Ki`, `Mi`, …): binary, `2GiB` = 2,147,483,648 bytes;
//! - a bare `K`, `M`, `G`, `T`: binary, as GNU tools read them (`sort -S 512M`) and as larch
//!   always did: `512M` = 512 MiB.
//!
//! A space before the unit, a fraction (`1.5G`) and `_` between digits are accepted.

use parse_size::Config;

/// What `--help` says of a size argument.
const SIZE_HELP: &str = "sizes: 4096, 64K or 256M (binary, K = 1024), 256MiB or 2GiB (binary), 2GB (decimal)";

/// Parses a byte size such as `256M`, `1GiB` or `2GB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    // Only the unit system of a bare prefix letter is ours to choose; `B` and `iB` units say theirs.
    let bare_prefix = trimmed.ends_with(|c: char| "kKmMgGtTpPeE".contains(c));
    let config = if bare_prefix { Config::new().with_binary() } else { Config::new().with_decimal() };
    config.parse_size(trimmed).map_err(|err| format!("invalid size {trimmed:?}: {err} ({SIZE_HELP})"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("256m"), Ok(256 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("2Gi"), Ok(2 << 30));
        assert_eq!(parse_size("152MiB"), Ok(152 << 20));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("2gb"), Ok(2_000_000_000));
        assert_eq!(parse_size("16MB"), Ok(16_000_000));
        assert_eq!(parse_size("64KB"), Ok(64_000));
        assert_eq!(parse_size("100B"), Ok(100));
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_size("G").is_err());
    }
}
