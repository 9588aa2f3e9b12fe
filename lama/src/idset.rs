//! Sets of non-negative integers written as ranges: hwloc cpulists (`0-3,8-11`) and RFC 22 idsets.

use thiserror::Error;

/// A malformed id list.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid id list '{}': {reason}", crate::quote::cut(.text))]
pub struct IdsetError {
    /// The text that was parsed.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

fn err(text: &str, reason: impl Into<String>) -> IdsetError {
    IdsetError {
        text: text.to_string(),
        reason: reason.into(),
    }
}

fn number(text: &str, part: &str) -> Result<u32, IdsetError> {
    let p = part.trim();
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(text, format!("'{part}' is not a non-negative integer")));
    }
    p.parse()
        .map_err(|_| err(text, format!("'{part}' is too large")))
}

/// Parses ranges such as `0-3,8,10-11` (optionally in brackets) into `(first, last)` pairs, in the
/// order written. Validation of order and overlap is left to the caller, who knows the rules.
pub fn parse_ranges(text: &str) -> Result<Vec<(u32, u32)>, IdsetError> {
    let t = text.trim();
    let t = t
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(t);
    if t.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for part in t.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (number(text, a)?, number(text, b)?),
            None => {
                let v = number(text, part)?;
                (v, v)
            }
        };
        if b < a {
            return Err(err(text, format!("range '{}' runs backwards", part.trim())));
        }
        out.push((a, b));
    }
    Ok(out)
}

/// Parses a cpulist into a sorted, deduplicated vector.
pub fn parse_list(text: &str) -> Result<Vec<u32>, IdsetError> {
    let mut v: Vec<u32> = Vec::new();
    for (a, b) in parse_ranges(text)? {
        // Counted over all ranges: repeating one range must not multiply the memory.
        if u64::from(b - a) + v.len() as u64 >= 1 << 24 {
            return Err(err(text, "range too large"));
        }
        v.extend(a..=b);
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Appends the inclusive range `lo..=hi` to ascending ranges, joining it to the last one when adjacent.
pub fn push_range(v: &mut Vec<(u64, u64)>, lo: u64, hi: u64) {
    match v.last_mut() {
        Some(last) if last.1 + 1 == lo => last.1 = hi,
        _ => v.push((lo, hi)),
    }
}

/// Formats inclusive ranges as `0-3,8`.
pub fn format_ranges(r: &[(u64, u64)]) -> String {
    r.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Formats ascending ids as compact ranges: `[0,1,2,5]` becomes `0-2,5`.
pub fn format_list(ids: &[u32]) -> String {
    let mut ranges = Vec::new();
    for &id in ids {
        push_range(&mut ranges, id as u64, id as u64);
    }
    format_ranges(&ranges)
}

/// A table of `ids` by number, `len` entries long (ids from `len` on are left out): whether a
/// number is in the set in one look-up, for checks that run in every step.
pub fn table(ids: &[u32], len: usize) -> Vec<bool> {
    let mut t = vec![false; len];
    for &i in ids {
        if let Some(slot) = t.get_mut(i as usize) {
            *slot = true;
        }
    }
    t
}

/// [`table`] just long enough for `ids`.
pub fn table_of(ids: &[u32]) -> Vec<bool> {
    table(ids, ids.iter().max().map_or(0, |&m| m as usize + 1))
}

/// Whether `table` (from [`table`]) has `id`.
pub fn in_table(table: &[bool], id: u32) -> bool {
    table.get(id as usize).copied().unwrap_or(false)
}

/// Items joined by commas, as cpulists, the node cache and device variables are written.
pub fn join_commas<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push_str(item.as_ref());
    }
    out
}

/// A CPU set as a hexadecimal mask the way Slurm writes them (`0x3` for CPUs 0 and 1, `0x0` for
/// none), most significant digit first.
pub fn hex_mask(cpus: &[u32]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0x0".into();
    };
    let mut nibbles = vec![0u8; max as usize / 4 + 1];
    for &c in cpus {
        nibbles[c as usize / 4] |= 1 << (c % 4);
    }
    let digits: String = nibbles
        .iter()
        .rev()
        .map(|&n| char::from_digit(u32::from(n), 16).map_or('0', |c| c.to_ascii_uppercase()))
        .collect();
    format!("0x{digits}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        assert_eq!(parse_list("0-3,8-9").unwrap(), vec![0, 1, 2, 3, 8, 9]);
        assert_eq!(parse_list("[5,1-2]").unwrap(), vec![1, 2, 5]);
        assert_eq!(format_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_list(&[]), "");
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("a").is_err());
        assert!(parse_list("1,,2").is_err());
    }
}
