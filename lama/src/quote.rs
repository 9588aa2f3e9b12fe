//! Text bound for a log or a terminal: messages quote what users typed (option values, host
//! lists, variables), and a value with a newline could forge a line of slurmd's log while a
//! 100 KB value would flood it. Every front end passes its messages through [`for_log`] at the
//! edge; messages that quote a long input cut it at the source with [`cut`] as well, so that the
//! advice after the value survives.

use std::borrow::Cow;

/// The most bytes of one quoted input kept in a message.
pub const MAX_QUOTED_BYTES: usize = 200;

/// The most bytes of one message written to a log or a terminal.
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// `s` with control characters escaped and cut to [`MAX_QUOTED_BYTES`], saying how long it was.
pub fn cut(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_QUOTED_BYTES && !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let head = &s[..floor(s, MAX_QUOTED_BYTES)];
    let mut out = escape(head).into_owned();
    if head.len() < s.len() {
        out.push_str(&format!("... ({} bytes in all)", s.len()));
    }
    Cow::Owned(out)
}

/// One line for a log: control characters (newlines included) escaped as `\n`, `\t`, `\u{1b}`,
/// and a message over [`MAX_MESSAGE_BYTES`] shortened in its middle, which keeps what it is
/// about (its start) and what to do (its end).
pub fn for_log(msg: &str) -> Cow<'_, str> {
    let msg = escape(msg);
    if msg.len() <= MAX_MESSAGE_BYTES {
        return msg;
    }
    let head = floor(&msg, MAX_MESSAGE_BYTES * 2 / 3);
    let tail = ceil(&msg, msg.len() - MAX_MESSAGE_BYTES / 4);
    Cow::Owned(format!(
        "{} [... {} bytes left out ...] {}",
        &msg[..head],
        tail - head,
        &msg[tail..]
    ))
}

fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// The largest char boundary of `s` at or below `i`.
fn floor(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary of `s` at or above `i`.
fn ceil(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `words` folded at spaces to `width` columns after `start` (the first line's beginning, as
/// it is), each further line indented by `indent` spaces; ends with a newline. A word longer
/// than the room stands alone on its line.
pub fn fold(start: &str, words: &str, indent: usize, width: usize) -> String {
    let cols = |s: &str| s.chars().count();
    let mut out = String::new();
    let mut line = start.to_string();
    let mut empty = true;
    for word in words.split_whitespace() {
        if !empty && cols(&line) + 1 + cols(word) > width {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newline_cannot_start_a_line() {
        let forged = "xx\n[2025-01-01T00:00:00] error: forged line";
        let out = for_log(forged);
        assert!(!out.contains('\n'));
        assert!(out.starts_with("xx\\n[2025"));
        assert_eq!(cut(forged).lines().count(), 1);
    }

    #[test]
    fn long_text_is_cut_with_its_length() {
        let value = "a".repeat(100_000);
        let quoted = cut(&value);
        assert!(quoted.len() < MAX_QUOTED_BYTES + 40);
        assert!(quoted.ends_with("... (100000 bytes in all)"));
        let msg = format!("--lama-map: '{value}' is not a map (valid: letters n, b, s)");
        let line = for_log(&msg);
        assert!(line.len() <= MAX_MESSAGE_BYTES + 60);
        assert!(line.starts_with("--lama-map: 'aaa"));
        assert!(line.ends_with("(valid: letters n, b, s)"));
    }

    #[test]
    fn multibyte_text_is_cut_on_a_character() {
        let value = "é".repeat(5000);
        assert!(cut(&value).starts_with('é'));
        assert!(for_log(&value).is_char_boundary(0));
        assert_eq!(cut("short"), "short");
    }
}
