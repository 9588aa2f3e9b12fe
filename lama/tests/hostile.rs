//! Hostile inputs on the paths slurmstepd runs for every step (the host file of `-m arbitrary`,
//! the node list, the tasks per node), measured with a counting allocator: each costs at most
//! a small amount of memory beyond what the step's own size needs, and ends in a map or a clear
//! error, never in an allocation failure (which aborts slurmstepd).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;

use lama::slurm::step_map::{arbitrary_map_within, counts_map_within, HostFile};
use lama::slurm::{expand_hostlist_within, read_hostfile_within, StepEnv};

#[path = "common/scratch.rs"]
mod scratch_folder;
use scratch_folder::{scratch, Scratch};

/// System's allocator, counting the bytes the measuring thread has in use and their peak (other
/// tests run on other threads meanwhile: their allocations must not count).
struct Counting;

static IN_USE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted (a const, so reading it never allocates).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: every call is passed on to System unchanged; only counters are updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && counted() {
            let size = layout.size() as isize;
            let now = IN_USE.fetch_add(size, Ordering::SeqCst) + size;
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        if counted() {
            IN_USE.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One measurement at a time: the counters are the process's.
static SERIAL: Mutex<()> = Mutex::new(());

/// The limit the issue set for a hostile input: 16 MB beyond the step's own needs.
const BOUND: usize = 16 << 20;

/// Runs `f` and returns its result with the peak bytes this thread allocated while it ran.
fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    IN_USE.store(0, Ordering::SeqCst);
    PEAK.store(0, Ordering::SeqCst);
    COUNTED.with(|c| c.set(true));
    let out = f();
    COUNTED.with(|c| c.set(false));
    (out, PEAK.load(Ordering::SeqCst).max(0) as usize)
}

/// A file of `text` in a scratch folder of its own (the folder and the file's path).
fn temp_file(name: &str, text: &str) -> (Scratch, std::path::PathBuf) {
    let dir = scratch(&format!("hostile-{name}"));
    let path = dir.join("file");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// The arbitrary map of a 1-task step on `hosts`, read from a host file of `text` as slurmstepd
/// reads it (from disk, the plugin's block limit).
fn one_task_step(name: &str, hosts: &[&str], text: &str) -> (Result<usize, String>, usize) {
    let (_dir, path) = temp_file(name, text);
    let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let mut counts = vec![0u32; hosts.len()];
    counts[0] = 1;
    let path = path.to_str().unwrap().to_string();
    peak(|| {
        let file = HostFile::Path(&path, lama::limits::MAX_HOSTFILE_BYTES);
        arbitrary_map_within(&counts, &hosts, file, lama::environ::MAX_TASK_MAP_BLOCKS)
            .map(|m| m.map_or(0, |m| m.total_tasks() as usize))
            .map_err(|e| e.to_string())
    })
}

#[test]
fn a_219_byte_host_file_costs_one_name() {
    // The report's file: 7.6 GB and 33 s before names were made one at a time.
    let text = format!("node1 {}[0-16777214]\n", "a".repeat(200));
    assert_eq!(text.len(), 219);
    let (map, bytes) = one_task_step("219", &["node1"], &text);
    assert_eq!(map, Ok(1));
    assert!(bytes < BOUND, "{bytes} bytes");
    // The same range first on the line: its first name is the step's one task.
    let first = format!("{}0", "a".repeat(200));
    let (map, bytes) = one_task_step(
        "219-first",
        &[&first],
        &format!("{}[0-16777214]\n", "a".repeat(200)),
    );
    assert_eq!(map, Ok(1));
    assert!(bytes < BOUND, "{bytes} bytes");
}

#[test]
fn a_zero_padded_range_and_a_name_for_no_task_cost_nothing() {
    let (map, bytes) = one_task_step("padded", &["n00000000"], "n[00000000-16777214]\nn1\n");
    assert_eq!(map, Ok(1));
    assert!(bytes < BOUND, "{bytes} bytes");
    // `*0` names hosts for no task: none of its 16 million names is made.
    let (map, bytes) = one_task_step("zero", &["n1"], "x[0-16777214]*0\nn1\n");
    assert_eq!(map, Ok(1));
    assert!(bytes < BOUND, "{bytes} bytes");
}

#[test]
fn a_long_literal_prefix_is_refused_before_any_name_is_made() {
    let text = format!("{}[0-16777214]\n", "a".repeat(100_000));
    let (map, bytes) = one_task_step("prefix", &["n1"], &text);
    let e = map.unwrap_err();
    assert!(e.contains("longer than 255 bytes"), "{e}");
    // The message quotes the expression cut short, not its 100,000 letters.
    assert!(e.len() < 600, "{} bytes of message", e.len());
    assert!(bytes < BOUND, "{bytes} bytes");
    let e = read_hostfile_within(&format!("{}\n", "b".repeat(300)), 10).unwrap_err();
    assert!(e.to_string().contains("longer than 255 bytes"), "{e}");
}

#[test]
fn a_host_file_read_no_further_than_the_step_needs() {
    // A megabyte of comment before the first host: more than a 1-task step reads.
    let text = format!("#{}\nn1\n", "c".repeat(2 << 20));
    let (map, bytes) = one_task_step("long", &["n1"], &text);
    let e = map.unwrap_err();
    assert!(
        e.contains("bytes before the step's 1 tasks were named"),
        "{e}"
    );
    assert!(bytes < BOUND, "{bytes} bytes");
}

#[test]
fn a_node_list_is_expanded_no_further_than_the_step_has_nodes() {
    let (r, bytes) = peak(|| expand_hostlist_within("n[0-16777214]", 3));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("names more than 3 hosts"), "{e}");
    assert!(bytes < 1 << 16, "{bytes} bytes");
    // As the plugin reads the step: three nodes in the counts, sixteen million in the list.
    let (_dir, path) = temp_file("nodes", "n1\n");
    let env = StepEnv {
        tasks_per_node: Some("1(x3)".into()),
        nodelist: Some("n[1-16777215]".into()),
        distribution: Some("arbitrary".into()),
        plane_size: None,
        hostfile: Some(path.to_str().unwrap().into()),
        node_order: None,
        step_id: None,
    };
    let (r, bytes) = peak(|| env.taskmap_from_files_within(1000));
    assert!(r.unwrap_err().to_string().contains("more than 3 hosts"));
    assert!(bytes < BOUND, "{bytes} bytes");
}

#[test]
fn tasks_per_node_for_more_nodes_than_slurm_says_cost_nothing() {
    // A million nodes claimed for a 3-node step: refused before any entry is made.
    let env = StepEnv {
        tasks_per_node: Some("1(x1048576)".into()),
        nodelist: Some("n[1-1048576]".into()),
        distribution: Some("block".into()),
        plane_size: None,
        hostfile: None,
        node_order: None,
        step_id: None,
    };
    let (r, bytes) = peak(|| env.taskmap_of_step(lama::environ::MAX_TASK_MAP_BLOCKS, Some(3)));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("covers more than 3 nodes"), "{e}");
    assert!(bytes < 1 << 16, "{bytes} bytes");
    let fewer = StepEnv {
        tasks_per_node: Some("2".into()),
        ..env
    };
    let e = fewer.taskmap_of_step(100, Some(3)).unwrap_err().to_string();
    assert!(e.contains("list 1 nodes, Slurm says the step has 3"), "{e}");
    // The right count still maps.
    let right = StepEnv {
        tasks_per_node: Some("2(x3)".into()),
        ..fewer
    };
    assert_eq!(
        right
            .taskmap_of_step(100, Some(3))
            .unwrap()
            .unwrap()
            .total_tasks(),
        6
    );
}

#[test]
fn a_25_kb_tasks_per_node_string_is_bounded() {
    // 5,200 nodes of 1 to 5,200 tasks each (13.5 million tasks), dealt cyclically: a map of
    // thousands of blocks whose every pass visits every node (24.6 s before the bound).
    let counts: Vec<u32> = (1..=5200).collect();
    let text = counts
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    assert!(text.len() > 24_000 && text.len() < 26_000, "{}", text.len());
    let env = StepEnv {
        tasks_per_node: Some(text),
        nodelist: None,
        distribution: Some("cyclic".into()),
        plane_size: None,
        hostfile: None,
        node_order: None,
        step_id: None,
    };
    let (r, bytes) = peak(|| env.taskmap_from_files_within(lama::environ::MAX_TASK_MAP_BLOCKS));
    // Too long to export, said as such (the plugin's warning), not computed to the end.
    assert_eq!(r, Ok(None));
    assert!(bytes < BOUND, "{bytes} bytes");
    // Descending, the nodes that finish drop off the end: a map of one block per round, within
    // the bounds.
    let desc: Vec<u32> = (1..=5200).rev().collect();
    let dist = lama::slurm::Distribution::Cyclic;
    let (r, bytes) = peak(|| counts_map_within(&desc, &dist, lama::environ::MAX_TASK_MAP_BLOCKS));
    let blocks = r.flatten().map(|m| m.blocks().len());
    assert_eq!(blocks, Some(5200));
    assert!(bytes < BOUND, "{bytes} bytes");
    // Slurm's own layouts (two different counts) still give their map.
    let even: Vec<u32> = (0..5200).map(|i| 2600 + (i % 2)).collect();
    let (r, _) = peak(|| counts_map_within(&even, &dist, lama::environ::MAX_TASK_MAP_BLOCKS));
    let map = r.flatten().expect("a map");
    assert_eq!(
        map.total_tasks(),
        even.iter().map(|&c| u64::from(c)).sum::<u64>()
    );
}
