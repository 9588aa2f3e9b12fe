//! Slurm's host names and counts as the step's environment writes them: hostlist expressions
//! (`n[1-3,7]`), `SLURM_STEP_TASKS_PER_NODE` counts (`2(x3),1`) and host files (one host per
//! task, `host*N`), each read within a limit on what it may cost.

use thiserror::Error;

use crate::limits::{MAX_NODES, MAX_TASKS};

/// A Slurm value that cannot be read, or does not fit the step.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

fn bad(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// Splits at commas that are not inside brackets; brackets must pair up and not nest.
fn split_top(s: &str) -> Result<Vec<&str>, LayoutError> {
    let mut out = Vec::new();
    let (mut inside, mut start) = (false, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' if inside => return Err(bad(format!("hostlist '{s}': '[' inside brackets"))),
            ']' if !inside => return Err(bad(format!("hostlist '{s}': ']' without '['"))),
            '[' | ']' => inside = !inside,
            ',' if !inside => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if inside {
        return Err(bad(format!("hostlist '{s}': '[' without ']'")));
    }
    out.push(&s[start..]);
    Ok(out)
}

/// How many decimal digits `v` takes.
fn digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn too_many_hosts(expr: &str, limit: usize) -> LayoutError {
    bad(format!(
        "hostlist '{expr}' names more than {limit} hosts, the most lama reads"
    ))
}

/// One piece of a hostlist part: literal text, or a bracket's ranges `(first, last, width)`.
enum Piece<'a> {
    Text(&'a str),
    Ranges(Vec<(u64, u64, usize)>),
}

/// Splits one part (`a[1-2]b[3-4]`) into pieces, and counts the names it expands to.
fn pieces<'a>(expr: &str, part: &'a str) -> Result<(Vec<Piece<'a>>, usize), LayoutError> {
    let mut out = Vec::new();
    let mut count: usize = 1;
    let mut shortest: usize = 0;
    let mut rest = part;
    while !rest.is_empty() {
        let Some(open) = rest.find('[') else {
            out.push(Piece::Text(rest));
            break;
        };
        out.push(Piece::Text(&rest[..open]));
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| bad(format!("hostlist '{expr}': '[' without ']'")))?;
        let mut ranges = Vec::new();
        let mut names: usize = 0;
        for r in rest[open + 1..close].split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (a, b) = (a.trim(), b.trim());
            let number = |x: &str| {
                x.parse::<u64>()
                    .map_err(|_| bad(format!("hostlist '{expr}': bad range '{r}'")))
            };
            let (lo, hi) = (number(a)?, number(b)?);
            if hi < lo {
                return Err(bad(format!(
                    "hostlist '{expr}': bad range '{r}' (the first number must not exceed the second)"
                )));
            }
            names = names.saturating_add(
                usize::try_from(hi - lo)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            );
            ranges.push((lo, hi, a.len()));
        }
        count = count.saturating_mul(names);
        // The shortest number a bracket writes: its narrowest zero-padded first number.
        shortest += ranges
            .iter()
            .map(|&(lo, _, w)| w.max(digits(lo)))
            .min()
            .unwrap_or(0);
        out.push(Piece::Ranges(ranges));
        rest = &rest[close + 1..];
    }
    shortest += out
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.len(),
            Piece::Ranges(_) => 0,
        })
        .sum::<usize>();
    if shortest > MAX_HOST_NAME_BYTES {
        return Err(bad(format!(
            "hostlist '{}': its names are longer than {MAX_HOST_NAME_BYTES} bytes",
            crate::quote::cut(expr)
        )));
    }
    Ok((out, count))
}

/// Expands a hostlist expression such as `n[1-3,7]`, `c[001-128]`, `a[1-2]b[3-4],login`.
///
/// The names are counted before any is made: more than [`MAX_TASKS`] in all is refused.
pub fn expand_hostlist(expr: &str) -> Result<Vec<String>, LayoutError> {
    expand_hostlist_within(expr, MAX_TASKS)
}

/// [`expand_hostlist`] with a lower limit than [`MAX_TASKS`] on the number of names.
pub fn expand_hostlist_within(expr: &str, limit: usize) -> Result<Vec<String>, LayoutError> {
    let limit = limit.min(MAX_TASKS);
    let mut total: usize = 0;
    for part in split_top(expr.trim())? {
        let part = part.trim();
        if !part.is_empty() {
            total = total.saturating_add(pieces(expr, part)?.1);
            if total > limit {
                return Err(too_many_hosts(expr, limit));
            }
        }
    }
    let mut out = Vec::with_capacity(total);
    each_host(expr, |h| {
        out.push(h.to_string());
        true
    })?;
    Ok(out)
}

/// Calls `f` with each name of a hostlist expression in order, one at a time in one buffer, until
/// `f` returns false; returns whether every name was visited.
///
/// Nothing is made ahead of what `f` asks for, so `a[0-16777214]` costs one name when `f` stops
/// at the first; a name longer than [`MAX_HOST_NAME_BYTES`] is refused before any is made.
pub fn each_host(expr: &str, mut f: impl FnMut(&str) -> bool) -> Result<bool, LayoutError> {
    let mut buf = String::new();
    for part in split_top(expr.trim())? {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (p, _) = pieces(expr, part)?;
        if !walk(&p, &mut buf, &mut f) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Checks a hostlist expression's syntax and name lengths without making any name.
fn check_hostlist(expr: &str) -> Result<(), LayoutError> {
    for part in split_top(expr.trim())? {
        pieces(expr, part.trim())?;
    }
    Ok(())
}

/// The longest host name lama accepts (DNS's limit for a name; Linux's own is 64).
pub const MAX_HOST_NAME_BYTES: usize = 255;

/// Appends each name of `pieces` to `buf` in turn (the last bracket varying fastest), calls `f`
/// with it, and restores `buf`. Its depth is the number of pieces, which [`pieces`] bounds.
fn walk(pieces: &[Piece<'_>], buf: &mut String, f: &mut impl FnMut(&str) -> bool) -> bool {
    use std::fmt::Write;
    let Some((first, rest)) = pieces.split_first() else {
        return f(buf);
    };
    let len = buf.len();
    match first {
        Piece::Text(t) => {
            buf.push_str(t);
            let go = walk(rest, buf, f);
            buf.truncate(len);
            go
        }
        Piece::Ranges(ranges) => {
            for &(lo, hi, width) in ranges {
                for v in lo..=hi {
                    // Writing to a String cannot fail.
                    let _ = write!(buf, "{v:0width$}");
                    let go = walk(rest, buf, f);
                    buf.truncate(len);
                    if !go {
                        return false;
                    }
                }
            }
            true
        }
    }
}

/// Expands a counts string such as `2(x3),1` into `[2, 2, 2, 1]`.
pub fn expand_counts(s: &str) -> Result<Vec<u32>, LayoutError> {
    expand_counts_within(s, MAX_NODES)
}

/// [`expand_counts`], refusing a string of more than `max_nodes` nodes before they are made.
pub fn expand_counts_within(s: &str, max_nodes: usize) -> Result<Vec<u32>, LayoutError> {
    let max_nodes = max_nodes.min(MAX_NODES);
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        // The value and the part at fault, quoted cut (a forged string may be long) only when
        // there is something to say: this runs for every step.
        let quoted = || (crate::quote::cut(s), crate::quote::cut(part));
        let at = |what: &str| {
            let (value, part) = quoted();
            bad(format!("counts '{value}': '{part}' {what}"))
        };
        let (n, rep) = match part.split_once("(x") {
            Some((n, r)) => {
                let r = r.strip_suffix(')').ok_or_else(|| {
                    let (value, part) = quoted();
                    bad(format!("counts '{value}': expected N(xM) at '{part}'"))
                })?;
                (n, r)
            }
            None => (part, "1"),
        };
        let n: u32 = n.trim().parse().map_err(|_| at("is not a count"))?;
        let rep: usize = rep
            .trim()
            .parse()
            .ok()
            .filter(|&r| r > 0)
            .ok_or_else(|| at("has a bad repeat"))?;
        if n as usize > MAX_TASKS {
            return Err(bad(format!(
                "counts '{}': {n} is more than {MAX_TASKS} tasks, the most lama places",
                quoted().0
            )));
        }
        if rep > max_nodes - out.len() {
            return Err(bad(format!(
                "counts '{}' covers more than {max_nodes} nodes, the most lama places here",
                quoted().0
            )));
        }
        out.extend(std::iter::repeat_n(n, rep));
    }
    Ok(out)
}

/// Reads a Slurm host file: one host per task, hostlist expressions allowed, `host*N` for N tasks,
/// `#` comments and blank lines ignored.
pub fn read_hostfile(text: &str) -> Result<Vec<String>, LayoutError> {
    read_hostfile_within(text, MAX_TASKS)
}

/// [`read_hostfile`] with a lower limit than [`MAX_TASKS`] on the number of tasks.
pub fn read_hostfile_within(text: &str, limit: usize) -> Result<Vec<String>, LayoutError> {
    let limit = limit.min(MAX_TASKS);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let seen = out.len();
        hostfile_line(line, i + 1, limit, seen, |h, times| {
            out.extend(std::iter::repeat_n(h.to_string(), times));
            true
        })?;
    }
    Ok(out)
}

/// Reads line `line_no` of a host file, after `seen` tasks: calls `f(host, times)` for each of
/// its hosts, in order, until `f` returns false. Refuses a line that brings the file past `limit`
/// tasks. Hosts are made one at a time as `f` asks for them, and an entry for no task (`h*0`)
/// makes none, so a line costs what its tasks need, whatever its ranges say.
pub(super) fn hostfile_line(
    line: &str,
    line_no: usize,
    limit: usize,
    mut seen: usize,
    mut f: impl FnMut(&str, usize) -> bool,
) -> Result<usize, LayoutError> {
    let line = line.split('#').next().unwrap_or("").trim();
    for entry in line.split_whitespace() {
        let (expr, times) = match entry.rsplit_once('*') {
            Some((h, n)) => (
                h,
                n.parse::<usize>().map_err(|_| {
                    bad(format!(
                        "host file line {line_no}: bad count in '{}'",
                        crate::quote::cut(entry)
                    ))
                })?,
            ),
            None => (entry, 1),
        };
        let past = || {
            bad(format!(
                "host file line {line_no}: '{}' brings the file past {limit} tasks, the most lama reads",
                crate::quote::cut(entry)
            ))
        };
        // Checked before the hostlist is expanded too, so that `h*99999999999` costs nothing.
        if times > limit - seen {
            return Err(past());
        }
        if !expr.is_empty() && !expr.contains(['[', ']', ',']) {
            if expr.len() > MAX_HOST_NAME_BYTES {
                return Err(bad(format!(
                    "host file line {line_no}: the host name '{}' is longer than {MAX_HOST_NAME_BYTES} bytes",
                    crate::quote::cut(expr)
                )));
            }
            // `host*0` names a host for no task: nothing is laid out, as in Slurm.
            seen += times;
            if times > 0 && !f(expr, times) {
                return Ok(seen);
            }
            continue;
        }
        if times == 0 {
            // No task asks for any of its names: only its syntax is checked.
            check_hostlist(expr).map_err(|e| bad(format!("host file line {line_no}: {e}")))?;
            continue;
        }
        let (mut over, mut stopped) = (false, false);
        each_host(expr, |h| {
            if times > limit - seen {
                over = true;
                return false;
            }
            seen += times;
            stopped = !f(h, times);
            !stopped
        })
        .map_err(|e| bad(format!("host file line {line_no}: {e}")))?;
        if over {
            return Err(past());
        }
        if stopped {
            return Ok(seen);
        }
    }
    Ok(seen)
}

/// Reads a host file as the plugin and the CLI do: a regular file of at most
/// [`crate::limits::MAX_HOSTFILE_BYTES`] bytes, opened without blocking.
pub fn read_hostfile_text(path: &str) -> Result<String, String> {
    crate::limits::read_text(
        std::path::Path::new(path),
        crate::limits::MAX_HOSTFILE_BYTES,
    )
}
