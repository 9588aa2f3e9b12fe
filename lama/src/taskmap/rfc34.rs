//! Flux RFC 34 JSON: `[[nodeid,nnodes,ppn,repeat],...]`, bare or as `{"version":1,"map":[...]}`.

use serde_json::Value;

use super::{bad, Block, TaskMap, TaskMapError};

/// Decodes a bare array or the wrapped object. `[]` is the unknown mapping.
pub fn decode(text: &str) -> Result<TaskMap, TaskMapError> {
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|e| bad(format!("task map is not valid JSON: {e}")))?;
    from_value(&v)
}

/// Decodes an already parsed JSON value.
pub fn from_value(v: &Value) -> Result<TaskMap, TaskMapError> {
    let map = match v {
        Value::Object(o) => {
            match o.get("version") {
                Some(ver) if ver.as_u64() == Some(1) => {}
                Some(ver) => {
                    return Err(bad(format!(
                        "unsupported task map version {ver} (only version 1 exists)"
                    )))
                }
                None => return Err(bad("task map object has no \"version\" key")),
            }
            o.get("map")
                .ok_or_else(|| bad("task map object has no \"map\" key"))?
        }
        other => other,
    };
    let Value::Array(blocks) = map else {
        return Err(bad(format!(
            "task map must be an array of blocks, got {map}"
        )));
    };
    let mut out = Vec::with_capacity(blocks.len());
    for (i, b) in blocks.iter().enumerate() {
        let Value::Array(f) = b else {
            return Err(bad(format!(
                "block {}: expected [nodeid,nnodes,ppn,repeat], got {b}",
                i + 1
            )));
        };
        if f.len() != 4 {
            return Err(bad(format!(
                "block {} {b}: a block has 4 values [nodeid,nnodes,ppn,repeat], this one has {}",
                i + 1,
                f.len()
            )));
        }
        let mut n = [0u64; 4];
        for (k, x) in f.iter().enumerate() {
            n[k] = x.as_u64().ok_or_else(|| {
                bad(format!(
                    "block {} {b}: {} must be a non-negative integer, got {x}",
                    i + 1,
                    ["nodeid", "nnodes", "ppn", "repeat"][k]
                ))
            })?;
        }
        out.push(Block {
            nodeid: n[0],
            nnodes: n[1],
            ppn: n[2],
            repeat: n[3],
        });
    }
    TaskMap::from_blocks(out)
}

/// The wrapped form `{"version":1,"map":[...]}` as compact JSON.
pub fn encode_wrapped(map: &TaskMap) -> String {
    format!("{{\"version\":1,\"map\":{map}}}")
}

/// The wrapped form as a JSON value.
pub fn to_value(map: &TaskMap) -> Value {
    let blocks: Vec<Value> = map
        .blocks()
        .iter()
        .map(|b| Value::from(vec![b.nodeid, b.nnodes, b.ppn, b.repeat]))
        .collect();
    serde_json::json!({"version": 1, "map": blocks})
}
