//! Dotted numeric versions: NVIDIA driver versions (`580`, `550.54.14`), CUDA versions (`12.8`) and
//! the version in a library file name (`libmagma.so.2.8.0`). Conda package versions are not these:
//! they are compared by rattler's `Version` (`channel`).

use std::cmp::Ordering;

/// The components of `v` (`12.8` → `[12, 8]`); `None` unless every one is a non-empty run of ASCII
/// digits (no sign, no spaces, no suffix such as `a0`).
pub fn parse(v: &str) -> Option<Vec<u64>> {
    v.split('.')
        .map(|p| {
            if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
                p.parse().ok()
            } else {
                None
            }
        })
        .collect()
}

/// Numeric order of two dotted versions, a missing component counting as 0 (`580` > `550.54.14`,
/// `12.6` < `12.8`, `12` = `12.0`); `None` when either is not a dotted number.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    let (a, b) = (parse(a)?, parse(b)?);
    let n = a.len().max(b.len());
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    Some(
        (0..n)
            .map(|i| at(&a, i).cmp(&at(&b, i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_order_with_missing_components_as_zero() {
        assert_eq!(compare("580", "550.54.14"), Some(Ordering::Greater));
        assert_eq!(compare("550.54.14", "550.54.15"), Some(Ordering::Less));
        assert_eq!(compare("12.6", "12.8"), Some(Ordering::Less));
        assert_eq!(
            compare("12.10", "12.9"),
            Some(Ordering::Greater),
            "numeric, not text"
        );
        assert_eq!(compare("13.0", "12.8"), Some(Ordering::Greater));
        assert_eq!(compare("12", "12.0"), Some(Ordering::Equal));
        assert_eq!(compare("450.80.02", "450.80.2"), Some(Ordering::Equal));
    }

    #[test]
    fn only_dotted_numbers_parse() {
        assert_eq!(parse("2.8.0"), Some(vec![2, 8, 0]));
        for bad in ["", "12.", ".8", "12.8a0", "+12.8", " 12.8", "12..8", "x"] {
            assert_eq!(parse(bad), None, "{bad:?}");
            assert_eq!(compare(bad, "12.8"), None, "{bad:?}");
        }
    }
}
