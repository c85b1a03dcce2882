//! Byte sizes on the command line: `4096`, `64K`, `256M`, `1G` (powers of 1024, `B`/`iB` optional).

/// Parses a byte size such as `256M` or `1GiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let upper = trimmed.to_ascii_uppercase();
    let without_b = upper.strip_suffix("IB").or_else(|| upper.strip_suffix('B')).unwrap_or(&upper);
    let (digits, shift) = match without_b.chars().last() {
        Some('K') => (&without_b[..without_b.len() - 1], 10),
        Some('M') => (&without_b[..without_b.len() - 1], 20),
        Some('G') => (&without_b[..without_b.len() - 1], 30),
        Some('T') => (&without_b[..without_b.len() - 1], 40),
        _ => (without_b, 0),
    };
    let number: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("invalid size {trimmed:?}: expected a number with an optional K, M, G or T"))?;
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("size {trimmed:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("256m"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2 GB"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
