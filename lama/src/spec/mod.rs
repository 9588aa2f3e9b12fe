//! Placement requests: the expert strings (map, bind, MPPR, order) and the simple level
//! (map-by, bind-to, rank-by, `ppr:K:level`, `pe=K`), with errors that name the input,
//! the reason, the position and the offending token.

pub mod open_mpi;
mod simple;

pub use simple::{Simple, BIND_TO, MAP_BY, RANK_BY};

use std::fmt;

use thiserror::Error;

use crate::level::{Level, VALID_TOKENS};

/// The default map of the expert level.
pub const DEFAULT_MAP: &str = "cL1L2L3sNbnh";

/// Which option a value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// `map`
    Map,
    /// `bind`
    Bind,
    /// `mppr`
    Mppr,
    /// `order`
    Order,
    /// `map-by`
    MapBy,
    /// `bind-to`
    BindTo,
    /// `rank-by`
    RankBy,
    /// `np`
    Np,
}

impl Input {
    /// The option's name without dashes or prefix (`map`, `map-by`).
    pub fn name(self) -> &'static str {
        match self {
            Input::Map => "map",
            Input::Bind => "bind",
            Input::Mppr => "mppr",
            Input::Order => "order",
            Input::MapBy => "map-by",
            Input::BindTo => "bind-to",
            Input::RankBy => "rank-by",
            Input::Np => "np",
        }
    }

    /// What a valid value looks like.
    pub fn valid(self) -> String {
        match self {
            Input::Map => format!(
                "a string of the tokens {VALID_TOKENS}, each at most once, including n, h and the binding level (default {DEFAULT_MAP})"
            ),
            Input::Bind => format!(
                "<width><level>: a width of 1 to 999 then one of {VALID_TOKENS}, e.g. 1c or 2L2 (width 1 only for n)"
            ),
            Input::Mppr => format!(
                "a comma list of <count>:<level>, count 1 to 999, level one of {VALID_TOKENS}, e.g. 1:c,2:s"
            ),
            Input::Order => "n (natural) or s (sequential)".into(),
            Input::MapBy => format!(
                "one of {}, or ppr:<count>:<object>, each optionally followed by :pe=<K>, :span, :hwtcpus, :oversubscribe or :nooversubscribe (Open MPI 5's words)",
                MAP_BY.iter().map(|(n, _)| *n).filter(|n| !n.starts_with("ppr")).collect::<Vec<_>>().join(", ")
            ),
            Input::BindTo => format!(
                "one of {}, optionally followed by :overload-allowed",
                BIND_TO.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
            Input::RankBy => format!("one of {}", RANK_BY.join(", ")),
            Input::Np => format!("a whole number from 1 to {MAX_NP}"),
        }
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A request that cannot be parsed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub struct SpecError {
    /// The option the value came from.
    pub input: Input,
    /// The value as given.
    pub value: String,
    /// What is wrong, in the contract's wording.
    pub reason: String,
    /// 1-based position of the offending token or entry, when there is one.
    pub position: Option<usize>,
    /// The offending token, when there is one.
    pub token: Option<String>,
}

impl SpecError {
    pub(crate) fn new(input: Input, value: &str, reason: impl Into<String>) -> SpecError {
        SpecError {
            input,
            value: value.to_string(),
            reason: reason.into(),
            position: None,
            token: None,
        }
    }
    pub(crate) fn at(mut self, position: usize, token: &str) -> SpecError {
        self.position = Some(position);
        self.token = Some(token.to_string());
        self
    }

    /// The full message with the option spelled as the caller presents it (`--lama-map`).
    pub fn message(&self, option_prefix: &str) -> String {
        let mut m = format!(
            "invalid {option_prefix}{} '{}': {}",
            self.input,
            crate::quote::cut(&self.value),
            self.reason
        );
        if let (Some(p), Some(t)) = (self.position, &self.token) {
            if !self.reason.contains("position") {
                m.push_str(&format!(" at position {p}"));
            }
            m.push_str(&format!(" ('{}')", crate::quote::cut(t)));
        }
        m.push_str(&format!("; valid: {}", self.input.valid()));
        m
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message("--"))
    }
}

/// How wide each process is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Binding {
    /// Number of consecutive objects.
    pub width: u32,
    /// Their level.
    pub level: Level,
}

impl fmt::Display for Binding {
    /// `<width><level>`, as written in `--bind`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.width, self.level)
    }
}

/// One MPPR entry: at most `count` processes per object of `level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Limit {
    /// Maximum processes per object.
    pub count: u32,
    /// The level the limit applies to.
    pub level: Level,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.count, self.level)
    }
}

/// Rank ordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Order {
    /// Ranks follow placement order.
    Natural,
    /// Ranks follow hardware order, node by node.
    Sequential,
}

impl Order {
    /// The `--order` token: `n` or `s`.
    pub fn token(self) -> &'static str {
        match self {
            Order::Natural => "n",
            Order::Sequential => "s",
        }
    }
}

/// How many processes to place when the user does not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum DefaultNp {
    /// One full sweep.
    Sweep,
    /// `count` per object of `level` (from `ppr:count:level`).
    PerObject(Limit),
}

/// A complete placement request.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Request {
    /// Loop order, leftmost token fastest.
    pub map: Vec<Level>,
    /// Binding width and level.
    pub bind: Binding,
    /// MPPR limits.
    pub mppr: Vec<Limit>,
    /// Rank ordering.
    pub order: Order,
    /// Whether sweeps may go on past the MPPR limits.
    pub oversubscribe: bool,
    /// Number of processes; `None` for the default.
    pub np: Option<usize>,
    /// What the default number of processes is.
    pub default_np: DefaultNp,
    /// The simple level, placed by Open MPI 5's rules ([`open_mpi`], placed by [`crate::mapper::open_mpi`]) instead of the
    /// odometer; the fields above then describe it only roughly (for headers).
    pub open_mpi: Option<open_mpi::OpenMpi>,
}

/// The level token at the start of a non-empty `s`: `L` with its digit, or one character.
/// `None` when an `L` has no digit after it.
fn leading_token(s: &str) -> Option<String> {
    let mut chars = s.chars();
    let first = chars.next()?;
    if first != 'L' {
        return Some(first.to_string());
    }
    match chars.next() {
        Some(d) if d.is_ascii_digit() => Some(format!("L{d}")),
        _ => None,
    }
}

/// Splits a map string into tokens with their 1-based positions; the first unknown or
/// incomplete token is an error.
fn map_tokens(input: Input, value: &str) -> Result<Vec<Level>, SpecError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < value.len() {
        let pos = out.len() + 1;
        let Some(tok) = leading_token(&value[i..]) else {
            return Err(SpecError::new(input, value, "cache level missing number").at(pos, "L"));
        };
        i += tok.len();
        match Level::from_token(&tok) {
            Some(l) => out.push(l),
            None => {
                return Err(SpecError::new(
                    input,
                    value,
                    format!("unknown mapping level at position {pos}"),
                )
                .at(pos, &tok))
            }
        }
    }
    Ok(out)
}

/// Parses a map string against an already parsed binding.
pub fn parse_map(value: &str, bind: &Binding) -> Result<Vec<Level>, SpecError> {
    let levels = map_tokens(Input::Map, value)?;
    for (j, l) in levels.iter().enumerate() {
        if let Some(i) = levels[..j].iter().position(|x| x == l) {
            return Err(SpecError::new(
                Input::Map,
                value,
                format!(
                    "duplicate mapping levels at position {} and {}",
                    i + 1,
                    j + 1
                ),
            )
            .at(j + 1, l.token()));
        }
    }
    if !levels.contains(&Level::Node) {
        return Err(SpecError::new(
            Input::Map,
            value,
            "missing required 'n' mapping token",
        ));
    }
    if !levels.contains(&Level::Hwthread) {
        return Err(SpecError::new(
            Input::Map,
            value,
            "missing required 'h' mapping token",
        ));
    }
    if !levels.contains(&bind.level) {
        return Err(SpecError::new(
            Input::Map,
            value,
            format!(
                "missing required mapping token for the current binding level ('{}')",
                bind.level
            ),
        ));
    }
    Ok(levels)
}

/// Parses a binding such as `1c`, `2L2`, `1n`.
pub fn parse_bind(value: &str) -> Result<Binding, SpecError> {
    let e = |reason: &str| SpecError::new(Input::Bind, value, reason);
    if value.is_empty() {
        return Err(e("binding specification is empty"));
    }
    let digits: String = value.chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = &value[digits.len()..];
    if digits.is_empty() {
        let tok: String = value.chars().take(1).collect();
        return Err(e("missing digit(s) before binding level token").at(1, &tok));
    }
    if digits.len() > 3 {
        return Err(e("too many digits").at(1, &digits));
    }
    if rest.is_empty() {
        return Err(e("binding specification is empty").at(2, ""));
    }
    let Some(tok) = leading_token(rest) else {
        return Err(e("cache level missing number").at(2, "L"));
    };
    let after = &rest[tok.len()..];
    if let Some(c) = after.chars().next() {
        let reason = if c.is_ascii_digit() {
            "missing digit(s) before binding level token"
        } else {
            "only one binding level may be specified"
        };
        return Err(e(reason).at(3, after));
    }
    let Some(level) = Level::from_token(&tok) else {
        return Err(e("unknown binding level").at(2, &tok));
    };
    let width: u32 = digits.parse().unwrap_or(0);
    if width == 0 {
        return Err(e("binding width must be at least 1").at(1, &digits));
    }
    if width > 1 && level == Level::Node {
        return Err(e("binding width above 1 is not allowed at level n").at(1, &digits));
    }
    Ok(Binding { width, level })
}

/// Parses an MPPR list such as `1:c, 2:s`.
pub fn parse_mppr(value: &str) -> Result<Vec<Limit>, SpecError> {
    let mut out = Vec::new();
    for (k, raw) in value.split(',').enumerate() {
        let pos = k + 1;
        let e = |reason: String| SpecError::new(Input::Mppr, value, reason).at(pos, raw.trim());
        let entry = raw.trim();
        if entry.is_empty() {
            return Err(e(format!("empty entry at position {pos}")));
        }
        let digits: String = entry.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() {
            return Err(e("missing digit(s) before resource specification".into()));
        }
        if digits.len() > 3 {
            return Err(e("too many digits".into()));
        }
        let rest = entry[digits.len()..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else {
            return Err(e("expected ':' between count and resource type".into()));
        };
        let rest = rest.trim();
        if rest.is_empty() {
            return Err(e("resource type not specified".into()));
        }
        let Some(tok) = leading_token(rest) else {
            return Err(e("cache level missing number".into()));
        };
        let Some(level) = Level::from_token(&tok) else {
            return Err(e(format!("unknown resource type at position {pos}")));
        };
        if !rest[tok.len()..].is_empty() {
            return Err(e(
                "only one resource type may be listed per specification".into()
            ));
        }
        let count: u32 = digits.parse().unwrap_or(0);
        if count == 0 {
            return Err(e("count must be at least 1".into()));
        }
        out.push(Limit { count, level });
    }
    for (j, l) in out.iter().enumerate() {
        if let Some(i) = out[..j].iter().position(|x| x.level == l.level) {
            let entry = value.split(',').nth(j).unwrap_or("").trim().to_string();
            return Err(SpecError::new(
                Input::Mppr,
                value,
                format!(
                    "duplicate resource types at position {} and {}",
                    i + 1,
                    j + 1
                ),
            )
            .at(j + 1, &entry));
        }
    }
    Ok(out)
}

/// Parses an ordering: the first letter decides, `n` or `s`, either case.
pub fn parse_order(value: &str) -> Result<Order, SpecError> {
    match value.chars().next() {
        Some('n' | 'N') => Ok(Order::Natural),
        Some('s' | 'S') => Ok(Order::Sequential),
        _ => Err(SpecError::new(
            Input::Order,
            value,
            format!("unsupported ordering option '{value}'"),
        )),
    }
}

/// The expert options as given; `None` means not given.
#[derive(Clone, Debug, Default)]
pub struct Expert<'a> {
    /// `map`
    pub map: Option<&'a str>,
    /// `bind`
    pub bind: Option<&'a str>,
    /// `mppr`
    pub mppr: Option<&'a str>,
    /// `order`
    pub order: Option<&'a str>,
}

impl Request {
    /// Builds a request from the expert strings, checked in the contract's order: binding,
    /// map, MPPR, order.
    pub fn expert(
        opts: &Expert<'_>,
        np: Option<usize>,
        oversubscribe: bool,
    ) -> Result<Request, SpecError> {
        let bind = match opts.bind {
            Some(b) => parse_bind(b)?,
            None => Binding {
                width: 1,
                level: Level::Node,
            },
        };
        let map = parse_map(opts.map.unwrap_or(DEFAULT_MAP), &bind)?;
        let mppr = match opts.mppr {
            Some(m) => parse_mppr(m)?,
            None => Vec::new(),
        };
        let order = match opts.order {
            Some(o) => parse_order(o)?,
            None => Order::Natural,
        };
        check_np(np)?;
        Ok(Request {
            map,
            bind,
            mppr,
            order,
            oversubscribe,
            np,
            default_np: DefaultNp::Sweep,
            open_mpi: None,
        })
    }

    /// Whether the map or the binding names `level`.
    pub fn uses_level(&self, level: Level) -> bool {
        self.map.contains(&level) || self.bind.level == level
    }

    /// The map as a token string.
    pub fn map_string(&self) -> String {
        self.map.iter().map(|l| l.token()).collect()
    }

    /// The MPPR as a string (empty when there is none).
    pub fn mppr_string(&self) -> String {
        self.mppr
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Most processes one request may place ([`crate::limits::MAX_TASKS`]).
pub const MAX_NP: usize = crate::limits::MAX_TASKS;

fn check_np(np: Option<usize>) -> Result<(), SpecError> {
    match np {
        Some(0) => Err(SpecError::new(
            Input::Np,
            "0",
            "the number of processes must be at least 1",
        )),
        Some(n) if n > MAX_NP => Err(SpecError::new(
            Input::Np,
            &n.to_string(),
            format!("at most {MAX_NP} processes can be placed"),
        )),
        _ => Ok(()),
    }
}
