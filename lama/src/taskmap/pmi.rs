//! PMI-1 `PMI_process_mapping` (RFC 13): `(vector,(nodeid,nnodes,ppn),...)`.

use super::{bad, Block, TaskMap, TaskMapError};

/// Reads a PMI mapping; blanks anywhere and a trailing comma are tolerated. The result is the
/// canonical RFC 34 map (consecutive equal blocks become repeats).
pub fn decode(text: &str) -> Result<TaskMap, TaskMapError> {
    let s: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let body = s
        .strip_prefix("(vector,")
        .or_else(|| if s == "(vector)" { Some(")") } else { None })
        .and_then(|b| b.strip_suffix(')'))
        .ok_or_else(|| {
            bad(format!(
                "PMI mapping must look like (vector,(nodeid,nnodes,ppn),...), got '{text}'"
            ))
        })?;
    let mut blocks = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let inner = rest
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .ok_or_else(|| {
                bad(format!(
                    "PMI mapping: expected (nodeid,nnodes,ppn) at '{rest}'"
                ))
            })?;
        let (tuple, after) = inner;
        let f: Vec<&str> = tuple.split(',').collect();
        if f.len() != 3 {
            return Err(bad(format!(
                "PMI mapping: block ({tuple}) must have 3 values (nodeid,nnodes,ppn)"
            )));
        }
        let mut n = [0u64; 3];
        for (k, x) in f.iter().enumerate() {
            n[k] = x.parse().map_err(|_| {
                bad(format!(
                    "PMI mapping: block ({tuple}): '{x}' is not a non-negative integer"
                ))
            })?;
        }
        blocks.push(Block {
            nodeid: n[0],
            nnodes: n[1],
            ppn: n[2],
            repeat: 1,
        });
        rest = match after.strip_prefix(',') {
            Some(r) => r,
            None if after.is_empty() => after,
            None => return Err(bad(format!("PMI mapping: expected ',' before '{after}'"))),
        };
    }
    Ok(TaskMap::from_blocks(blocks)?.canonical())
}

/// Writes the PMI form; a block's repeat becomes repeated blocks.
pub fn encode(map: &TaskMap) -> String {
    let mut s = String::from("(vector");
    for b in map.blocks() {
        for _ in 0..b.repeat {
            s.push_str(&format!(",({},{},{})", b.nodeid, b.nnodes, b.ppn));
        }
    }
    s.push(')');
    s
}
